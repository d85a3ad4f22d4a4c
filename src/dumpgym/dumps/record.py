"""`dumpgym add --dump`: a dumped module as a program record of the user's corpus, without a re-trace.

The record holds what the folder holds, in the shape of a traced program's: the jaxpr as dumped with
its equations read from the text (`ir/jaxpr_text.py`), the StableHLO (printed without its location
tables, as the gym shows every StableHLO) with the x-ray linking those equations to its op lines by
structure (`dumps/structure.py`), and the optimised HLO as the compiled layer of the dump's backend,
with the compiled facts read from it by XLA's parser (`ir/hlo_facts.py`), the same reading a compile
here gets, and each instruction's equations where its link to the StableHLO (`dumps/xray.py`) reaches
one equation's ops (`via` "inferred": nothing carried a tag). What the texts do not hold is left out.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial

from dumpgym.dumps.facts import chip_of, dump_facts, shown_text
from dumpgym.dumps.passes import pass_history
from dumpgym.dumps.stablehlo import stablehlo_ops
from dumpgym.dumps.xray import xray_module
from dumpgym.ir import parse
from dumpgym.ir.parse import DumpError, ir_context, parse_hlo, parse_stablehlo, tensor_aval
from dumpgym.dumps.folder import LAYER_NAMES, DumpFolder, DumpModule
from dumpgym.record.dtypes import short as short_dtype
from dumpgym.dumps.structure import link_equations
from dumpgym.ir.jaxpr_text import read_jaxpr
from dumpgym.ir.passes import dump_options
from dumpgym.record.schema import CompiledLayer, HloStats, ProgramRecord, RecordError, StablehloOp, XrayStats


def _isolated(name: str) -> str:
    """A name from the dump inside plain text, isolated (U+2068 ... U+2069): a bidi override in it turns only
    itself around, not the sentence it stands in."""
    return f"\u2068{name}\u2069"


def module_record(module: DumpModule, slug: str, folders: tuple[str, ...], compiled: bool = True) -> ProgramRecord:
    """The record of one dumped module: its StableHLO and jaxpr where the folder has them, its optimised HLO as
    the compiled layer (with `compiled`, as `add --dump` asks, it must have one; without, as `open` asks, a
    module without one is shown with a note saying so)."""
    from dumpgym.ir.stablehlo import read_lowered

    where = ", ".join(folders)
    target = chip_of(module.target) or None
    if module.problem:
        raise DumpError(f"{module.slug}: {module.problem}")
    notes: list[str] = []
    if "hlo_after" not in module.files:
        why = module.unread.get("hlo_after", "").rstrip(": ")  # XLA's parser may end its first line with a colon
        missing = f"the optimised HLO is left out ({why})" if why else \
            "the folder has no optimised HLO for it (XLA's `*after_optimizations.txt`)"
        if compiled:
            raise DumpError(f"{module.slug}: {missing}; add --dump needs it")
        notes.append(f"{missing}: no compiled layer")
    notes.extend(f"the {LAYER_NAMES[layer]} is left out: {why}" for layer, why in module.unread.items()
                 if layer != "hlo_after")
    jaxpr, read = "", None
    if "jaxpr" in module.files:
        try:
            jaxpr = module.text("jaxpr")
            read = read_jaxpr(jaxpr)
        except DumpError as e:  # the other layers are kept
            jaxpr, read = "", None
            notes.append(f"the jaxpr is left out: {e}")
    eqns = read.eqns if read is not None else ()
    owner: dict[int, int] = {}  # StableHLO op line -> the equation that emitted it
    groups, hlo_links, held = (), {}, {}
    shown, ops, lowered, xray = "", [], None, None
    if "stablehlo" in module.files:
        try:
            xray = xray_module(module)
            shown, ops = stablehlo_ops(module)
            lowered = read_lowered(parse_stablehlo(shown, module.files["stablehlo"], ir_context()))
        except DumpError as e:  # a truncated StableHLO: XLA's layers are shown, linked by their source lines
            notes.append(f"the StableHLO is left out: {e}")
            shown, ops, lowered, xray, eqns, jaxpr, read = "", [], None, None, (), "", None
    if xray is not None:
        args = tuple(tensor_aval(v.type) for v in lowered.main.args) if lowered.main else ()
        if eqns:
            links = link_equations(eqns, ops, read.held_in)
            groups, owner, held = links.groups, links.owner, links.held
            # A top-level equation's name stack, as its ops carry it (`transpose(jvp())` in a backward pass); a
            # body's equations are read through their container's (`ProgramRecord.in_backward`).
            eqns = tuple(dataclasses.replace(e, name_stack=links.name_stacks[e.id]) if e.id in links.name_stacks
                         else e for e in eqns)
        hlo_links = {link.name: link for link in xray.hlo.get("hlo_after", ())}
    else:  # XLA alone: the arguments as XLA's entry computation takes them
        args = _hlo_args(module)
    op_lines = {op.line for op in ops}
    # `add --dump` refuses a per-pass file that cannot be read; `open` shows the module without its passes, said.
    layers = {module.backend: _compiled_layer(module, _instruction_eqns(hlo_links, owner, held, eqns), eqns,
                                              None if compiled else notes)} if "hlo_after" in module.files else {}
    linked = {line for g in groups for line in g.stablehlo_lines}
    return ProgramRecord(
        slug=slug,
        title=f"{_isolated(shown_text(module.name)[:150])}{_arguments(args) if module.namesakes else ''} "
              f"(dump, {target or 'not compiled'})",
        lesson=f"Your dump's module {_isolated(shown_text(module.name))}, from {_isolated(where)}: compiled for {target or 'no target the folder names'}, "
               "not traced here.",
        entry=shown_text(str(next(module.files[k] for k in ("stablehlo", "hlo_after", "hlo_before", "jaxpr")
                                  if k in module.files))),
        args=args,
        # The one `sdy.mesh` the StableHLO declares is the mesh the run's shardings name (the partitioner's
        # drills ask of it); several, or none, name no one mesh of the program.
        mesh=dict(lowered.meshes[0].axes) if lowered is not None and len(lowered.meshes) == 1 else None,
        in_specs=None,
        source="",
        jaxpr=jaxpr,
        stablehlo=shown,
        eqns=eqns,
        xray=groups,
        stablehlo_ops=tuple(StablehloOp(op.name, op.line, op.function, **op.facts) for op in ops),
        lowered_to_nothing=(),
        xray_stats=XrayStats(equations=len(eqns), mapped_equations=len(groups), jaxpr_lines=len(jaxpr.splitlines()),
                             mapped_jaxpr_lines=len({line for g in groups for line in g.jaxpr_lines}),
                             stablehlo_lines=len(shown.splitlines()), stablehlo_op_lines=len(op_lines),
                             mapped_stablehlo_op_lines=len(linked & op_lines)),
        compiled=layers,
        lowered=lowered,
        arg_binders=read.arguments if read is not None else (),
        dump=dump_facts(module, folders, xray, tuple(notes), exact=not eqns),
    )


def _instruction_eqns(hlo_links: dict, owner: dict[int, int], held: dict[int, set[int]] | None = None,
                      eqns=()) -> dict[str, set[int]]:
    """Each optimised instruction's equation, where its StableHLO ops (`dumps/xray.py`) are all one equation's
    (a group link too, when every op it may have come from is that one equation's); else the innermost
    container whose body made them all (what XLA inlined from a `jit` under the call's name), which
    computes it, where the text knows one."""
    in_container = {line: c for c, lines in (held or {}).items() for line in lines}

    def around(line: int) -> list[int]:
        """The equations that made the line or hold what made it, innermost first."""
        e = owner.get(line, in_container.get(line))
        out = []
        while e is not None:
            out.append(e)
            e = eqns[e].parent if e < len(eqns) else None
        return out

    out = {}
    for name, link in hlo_links.items():
        if not link.stablehlo_lines:
            continue
        found = {owner.get(line) for line in link.stablehlo_lines}
        if len(found) == 1 and None not in found:
            out[name] = found
            continue
        chains = [around(line) for line in link.stablehlo_lines]
        common = set(chains[0]).intersection(*map(set, chains[1:])) if all(chains) else set()
        if common:
            out[name] = {next(e for e in chains[0] if e in common)}
    return out


# XLA's kinds of number (numpy's names, as `types_of_hlo` gives them) in the jaxpr's aval notation.


def _arguments(args: tuple[str, ...], most: int = 4) -> str:
    """A module's arguments in its title (`(f32[7])`), which tell apart the compiles of one function at other shapes."""
    return f"({', '.join(args[:most])}{', …' if len(args) > most else ''})"


def _hlo_args(module: DumpModule) -> tuple[str, ...]:
    """The entry computation's parameters of a module without StableHLO, as avals (`f32[8,16]`)."""
    from dumpgym.ir.parse import shapes_of_hlo, types_of_hlo

    try:  # before optimisations: global shapes (a partitioned module's optimised entry takes one device's)
        hlo = parse_hlo(module.text("hlo_before"), module.files["hlo_before"])
    except (DumpError, KeyError):  # none, or it cannot be read (said in the record's `dump` notes)
        if "hlo_after" not in module.files:
            return ()
        hlo = parse_hlo(module.text("hlo_after"), module.files["hlo_after"])
    dims, _results = shapes_of_hlo(hlo)
    kinds = types_of_hlo(hlo)[:len(dims)]
    out = []
    for shape, kind in zip(dims, kinds):
        out.append(f"{short_dtype(kind)}[{','.join(str(d) for d in shape)}]")
    return tuple(out)


def _compiled_layer(module: DumpModule, linked: dict[str, set[int]], eqns=(), notes: list[str] | None = None
                    ) -> CompiledLayer:
    """The dump's optimised HLO as a compiled layer: each instruction with the equations `linked` gives it
    (`via` "inferred"; a fusion also those of the instructions it fuses), and each equation's lines (a
    container's include its body's). A per-pass file that cannot be read is said in `notes`
    and its passes left out; without `notes`, it raises."""
    import jaxlib

    from dumpgym.compiled.layer import layer_rows
    from dumpgym.ir.hlo_facts import with_facts
    from dumpgym.ir.hlo_graph import definition_lines, opcode_of

    text = module.text("hlo_after")
    hlo = parse_hlo(text, module.files["hlo_after"])
    lines = definition_lines(text)[0]
    listed = [(c.name, i) for c in hlo.computations() for i in c.instructions()]
    opcode = {i.name: opcode_of(i) for _c, i in listed}
    own = {i.name: set(linked.get(i.name, ())) for _c, i in listed}
    via = {name: "inferred" if found else "none" for name, found in own.items()}
    instructions, fusions = layer_rows(listed, lines, opcode, own, via)
    with_op_name = sum("op_name=" in i.to_string() for _c, i in listed if i.name in lines)
    instructions, facts = with_facts(instructions, hlo, text, dumped=True)
    instructions, fusions = _with_fused(instructions, fusions)
    by_eqn: dict[int, set[int]] = {}
    for ins in instructions:
        for e in ins.eqns:
            while e is not None:  # a container owns what its body became
                by_eqn.setdefault(e, set()).add(ins.line)
                e = eqns[e].parent if e < len(eqns) else None
    inferred = sum(1 for i in instructions if i.eqns)
    passes = None
    if module.pass_files:  # the texts around each instruction cost at most what the optimised text does
        options = dump_options(module.debug_options)
        try:
            passes = pass_history(module.pass_files, lines, options.get("xla_dump_hlo_pass_re", ""), len(text),
                                  every_pipeline=not options.get("xla_dump_hlo_pipeline_re"))
        except DumpError as e:
            if notes is None:
                raise
            notes.append(f"the per-pass dumps are left out: {e}")
    return CompiledLayer(
        text=text, backend=module.backend, jaxlib_version=jaxlib.__version__, host="", host_id="",
        instructions=tuple(instructions), fusions=tuple(fusions),
        lines_by_eqn={str(e): tuple(sorted(v)) for e, v in sorted(by_eqn.items())},
        stats=HloStats(instructions=len(instructions), with_op_name=with_op_name, arguments=0, attributed=inferred,
                       unattributed_with_op_name=0, compiler_own=len(instructions) - inferred, fusions=len(fusions),
                       by_tag=0, inferred=inferred, in_regions=0),
        device_kind=chip_of(module.target),
        passes=passes,
        **facts,
    )


def _with_fused(instructions, fusions) -> tuple[list, list]:
    """A fusion's equations are those of what it fuses (through nested fusions) as well as its own."""

    held: dict[str, list] = {}
    for ins in instructions:
        held.setdefault(ins.computation, []).append(ins)
    fused: dict[str, set[int]] = {}

    def gather(ins, depth: int = 0) -> set[int]:
        if ins.opcode != "fusion" or depth > 32:
            return set(ins.eqns)
        if ins.name not in fused:
            found = set(ins.eqns)
            for computation in ins.calls:
                for member in held.get(computation, ()):
                    found |= gather(member, depth + 1)
            fused[ins.name] = found
        return fused[ins.name]

    out = []
    for ins in instructions:
        found = gather(ins)
        if found != set(ins.eqns):
            ins = dataclasses.replace(ins, eqns=tuple(sorted(found)), via="inferred")
        out.append(ins)
    return out, [dataclasses.replace(f, eqns=tuple(sorted(fused.get(f.name, f.eqns)))) for f in fusions]


def add_dump(folder: DumpFolder, modules: list[str] = (), corpus_dir=None, wait: float | None = None,
             replace: bool = False, stored=None) -> list[ProgramRecord]:
    """Add the modules of a dump folder (the user's, without JAX's own helper modules; or those named) to the
    user's corpus; all or none are written. With `replace`, a module added before under its slug (a dump of the
    same job run again) is swapped for the new one. `stored(records, ahead)`: as `corpus.add.add_function`'s."""
    from dumpgym.corpus.user import store_records
    from dumpgym.record.typedjson import TextAhead

    chosen = list({m.slug: m for m in map(folder.module, modules)}.values()) if modules else \
        [m for m in folder.modules if not m.helper]
    if not chosen:
        raise DumpError(f"the dump holds only helper modules JAX compiled itself ({len(folder.modules)}: "
                        f"{' '.join(m.slug for m in folder.modules[:5])}{' ...' if len(folder.modules) > 5 else ''}); "
                        "name one with --module to add it")
    bad = [m for m in chosen if m.problem or m.unread]  # `open` shows one with a file left out, said; add keeps none
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        why = bad[0].problem or "its {} cannot be read: {}".format(*next((LAYER_NAMES[k], v) for k, v in bad[0].unread.items()))
        raise DumpError(f"{bad[0].slug}: {why}{more}; nothing was added (pick modules with --module)")
    for path in [*folder.paths, *(p for m in chosen for p in m.files.values())]:
        if not _utf8(str(path)):
            raise DumpError(f"{path}: the name is not UTF-8 (bytes of another encoding), which no "
                            "record can hold; rename it; nothing was added")
    folders = tuple(str(p) for p in folder.paths)
    records = [module_record(m, _slug(m), folders) for m in chosen]
    if len({r.slug for r in records}) != len(records):  # `_finish` gives every module its own slug
        raise RuntimeError("two modules of the dump have one slug")
    for record in records:  # what the corpus reads back must be a valid record
        ProgramRecord.from_json(record.to_json())
    ahead = TextAhead()
    store_records(records, corpus_dir, wait, replace=replace, ahead=ahead)
    if stored is not None:
        stored(records, ahead)
    return records


# `open` makes a module's program only up to this many optimised lines (a 12-layer GPT train step's 39,000
# take about 20 s to link here, benchmarks/gpt_dump.py; `add --dump` makes the record of a bigger one all the same).
SHOWN_MAX_LINES = 50_000
# What `open` makes before it serves: the first modules, in the index's order, up to this many optimised lines
# and this many modules (about a second here); the rest are made while it serves, and swapped in when made.
FIRST_LINES = 2_000
FIRST_MODULES = 40


def shown_records(folder: DumpFolder) -> tuple[list[ProgramRecord], list[str]]:
    """`dumpgym open`'s programs: the record of each module the user wrote (as `add --dump` makes it, marked
    added), biggest first (JAX's helper modules only when there is nothing else), and one line for each that
    cannot be made (its note)."""
    first, notes, _ = shown_in_two(folder, first_lines=None)
    return first, notes


def shown_in_two(folder: DumpFolder, first_lines: int | None = FIRST_LINES, first_modules: int = FIRST_MODULES
                 ) -> tuple[list[ProgramRecord], list[str], Callable[[], tuple[list[ProgramRecord], list[str]]] | None]:
    """`shown_records` in two parts: the records (and notes) of the first modules, in the index's order, while
    their optimised HLO adds up to at most `first_lines` lines and `first_modules` modules (None: all), and a
    function that makes the rest's (None when none is left), for `open` to call while it serves."""
    folders = tuple(shown_text(str(p)) for p in folder.paths)  # `open` shows a name that is not UTF-8 too
    notes: list[str] = []
    todo: list[tuple[DumpModule, int]] = []
    usable = [m for m in folder.shown() if not m.problem]  # the user's first, biggest first; a problem is said already
    # JAX's helper modules (an eager `jnp.zeros`, `jax.random.normal`'s) are shown only when nothing else is.
    chosen = [m for m in usable if not m.helper] or usable
    for module in chosen:
        if module.unread:
            notes.append(f"{module.slug}: " + "; ".join(f"its {LAYER_NAMES[layer]} is left out: {why}"
                                                        for layer, why in module.unread.items()))
        if "hlo_after" not in module.files:  # shown without a compiled layer, its note says why
            todo.append((module, 0))
            continue
        if module.big:  # not read whole to count its lines
            notes.append(f"{module.slug}: {too_big(module)}: its optimised HLO is shown streamed, at "
                         f"big/{module.slug}.html (add --dump makes its program)")
            continue
        try:
            lines = module.text("hlo_after").count("\n")
        except DumpError as e:
            notes.append(f"{module.slug}: {e}; it is not shown")
            continue
        if lines > SHOWN_MAX_LINES and _streamable(module):
            notes.append(f"{module.slug}: {too_big(module)}: its optimised HLO is shown streamed, at "
                         f"big/{module.slug}.html (add --dump makes its program)")
            continue
        if lines > SHOWN_MAX_LINES:  # a proto: no lines to stream
            notes.append(f"{module.slug}: its optimised HLO is longer than {SHOWN_MAX_LINES:,} lines, too long to show "
                         "here; add it with add --dump to see it as a program")
            continue
        todo.append((module, lines))
    # The first (the biggest of the user's) is always made before serving: `open` lands on it.
    cut, total = min(1, len(todo)), todo[0][1] if todo else 0
    while cut < len(todo) and (first_lines is None or (cut < first_modules and total + todo[cut][1] <= first_lines)):
        total += todo[cut][1]
        cut += 1

    def made(modules: list[tuple[DumpModule, int]]) -> tuple[list[ProgramRecord], list[str]]:
        records, said = [], []
        for module, _ in modules:
            try:
                record = module_record(module, _slug(module), folders, compiled=False)
                record.check(record.slug)
            except (DumpError, RecordError) as e:
                said.append(f"{module.slug}: {e}; it is not shown")
                continue
            records.append(dataclasses.replace(record, added=True))
        return records, said

    first, said = made(todo[:cut])
    return first, notes + said, (partial(made, todo[cut:]) if cut < len(todo) else None)


def streamed_modules(folder: DumpFolder) -> list[DumpModule]:
    """The modules `open` shows streamed, in the index's order: those `shown_in_two` makes no program of
    because a file of theirs is `BIG_FILE` or more or their optimised HLO is longer than `SHOWN_MAX_LINES`."""
    usable = [m for m in folder.shown() if not m.problem and "hlo_after" in m.files]
    chosen = [m for m in usable if not m.helper] or usable
    return [m for m in chosen if m.big or (_streamable(m) and _line_count(m.files["hlo_after"]) > SHOWN_MAX_LINES)]


def _streamable(module: DumpModule) -> bool:
    """Whether its optimised HLO is text (a proto's has no lines to show by windows)."""
    return not module.files["hlo_after"].name.endswith(".pb")


def too_big(module: DumpModule) -> str:
    """Why a module streamed is not a program of `open`'s gym, in one clause."""
    if module.big:
        return f"a file of it is {_megabytes(module)} MB, over the {parse.BIG_FILE / 2 ** 20:.3g} MiB open makes programs of"
    return f"its optimised HLO is longer than {SHOWN_MAX_LINES:,} lines, the most open makes a program of"


def _line_count(path) -> int:
    """The newlines of a file, counted in chunks (0 where it cannot be read: its module's note says why)."""
    try:
        with open(path, "rb") as f:
            return sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return 0


def _megabytes(module: DumpModule) -> int:
    """Its biggest file's size in megabytes, rounded."""
    return round(module.size_of_biggest() / 1e6)


def _slug(module: DumpModule) -> str:
    return f"dump-{module.slug}"  # a module's slug is at most SLUG_MAX, so this fits a slug's 64


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
