"""A `CompiledLayer`: XLA's compiled HLO for one target, its fusions, and which equations each holds.

XLA compiles the program once: the plain lowering (source locations off,
`jax_traceback_in_locations_limit=0`, on a copy of the jaxpr, so JAX's caches for the user's function
are untouched, and the text does not depend on where the package is installed), with each op's
equation tag carried in from the tagged lowering of the trace stage as a source file
(`ir/tags.py`). Where the tagged lowering is not read afterwards (a TPU's or GPU's, or this CPU's once
the x-ray is made), that very module is what XLA compiles, and where the x-ray reads it meanwhile, a copy
of it (`jax_internals.lowered_copy`, in an MLIR context of its own); its locations are made the plain
lowering's (`tags_in_place`), and the plain one is not lowered at all. XLA keeps it in each instruction's
metadata wherever it keeps the metadata, so attribution is exact there (`via` "tag"); the text shown is
XLA's with the source files left out, which is what it prints for the plain lowering, byte for byte. Where XLA dropped the metadata, the
equation is inferred from dataflow when that leaves no doubt (`via` "inferred"): the compiled graph
says which tagged equations an instruction reads and feeds, the jaxpr says which equations lie
between them. Instructions of reducer regions take their holder's equations ("region"); the rest is
XLA's own plumbing ("none"). This module compiles, `ir/hlo_graph.py` reads the graph, and
`compiled/attribution.py` decides each instruction's equations from it.

The compile runs on a thread of its own (`start_compiles`) from as soon as the plain lowering is
made (the trace stage calls it before it prints the texts); the caller's thread prints them and makes the
facts, the x-ray and the jaxpr's dataflow meanwhile, and, once XLA has compiled, reads the compile while the
thread asks XLA for its analyses (`memory_analysis()`, `cost_analysis()`). A compile
still running after `SAY_COMPILING_AFTER` seconds is said on stderr, and again every
`SAY_COMPILING_EVERY`; Ctrl-C stops the wait (`compiled_when_done`), the thread being a daemon.

The HLO Python bindings give computations, instruction names, opcodes, operands and
users, but not metadata, called computations or parameter numbers: those are read from
each instruction's own printed form (`HloInstruction.to_string()`), and which
instruction is a computation's ROOT from the compiled text. What the later stages need of the
module (result shapes and layouts, operands, computations, shardings, loop counters) is read here
too, once, by `ir/hlo_facts.py`, and kept in the record.
"""
from __future__ import annotations

import platform
from collections import defaultdict
import threading
from concurrent.futures import Future, wait
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import NamedTuple

from dumpgym.traced.facts import Facts
from dumpgym.compiled.attribution import attribute, dataflow, enclosing
from dumpgym.ir.hlo_facts import Row, with_facts, xla_analyses
from dumpgym.ir.hlo_graph import CompiledGraph, definition_lines
from dumpgym.ir.tags import Names, carry_tags, shown_text_and_metadata, tags_in_place
from dumpgym.record.schema import VIAS, Absorbed, CompiledLayer, Fusion, HloStats
from dumpgym.traced.devices import compiled_for, retarget, topology_devices
from dumpgym.record.targets import CPU, Target
from dumpgym.gcpause import with_collector_paused
from dumpgym.traced.trace import lower_copy, serializes_bodies


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields from /proc/cpuinfo (empty where there is none)."""
    fields: dict[str, str] = {}
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if not line.strip():
                break
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    return fields


def host() -> str:
    """What compiled it, in words for the page: the machine and the CPU model."""
    return f"{platform.machine()} {_cpuinfo().get('model name', '')}".strip()


def host_id() -> str:
    """A short digest of what XLA's CPU compiler targets (machine, CPU model and feature flags).

    XLA compiles for the host CPU, so two machines give the same compiled text only when this
    agrees; `corpus build --check` compares the compiled layer only then.
    """
    import hashlib

    info = _cpuinfo()
    flags = " ".join(sorted((info.get("flags") or info.get("Features") or platform.processor()).split()))
    what = "|".join((platform.machine(), info.get("model name", ""), flags))
    return hashlib.sha256(what.encode()).hexdigest()[:16]


def _instructions(module):
    """(computation name, HloInstruction) for every instruction of a compiled HloModule."""
    for computation in module.computations():
        for instruction in computation.instructions():
            yield computation.name, instruction


@with_collector_paused  # a lowering builds the module's objects by the ten thousand (as `trace` pauses it for its own)
def start_compiles(trace, target: Target = CPU, take_tagged: bool = False) -> Compiles:
    """XLA's compile of `trace` for `target`, set going on a thread of its own: the caller goes on (the
    facts, the x-ray) while XLA compiles, and hands it to `compile_layer`. `take_tagged`: the trace's
    tagged lowering is read no more (its x-ray is made), so this CPU's compile may take it over, its
    locations changed (`ir/tags.py`: `tags_in_place`); else it takes a copy of it. Either way the program
    is not lowered once more, except where the locations cannot be made the plain lowering's."""
    from dumpgym.jax_internals import require_hlo_bindings

    require_hlo_bindings()
    if target.platform in ("tpu", "gpu"):
        return _compile_for_topology(trace, target)
    return _compile_for_cpu(trace, take_tagged)


# The layer builds the compiled graph and the instructions by the ten thousand and keeps them: with the
# garbage collector on, its walks of the whole heap (JAX's too) cost the GPT's add more than the layer's own work.
@with_collector_paused
def compile_layer(trace, facts: Facts, target: Target = CPU, compiles: Compiles | None = None,
                  what: str = "the program") -> CompiledLayer:
    """The compiled HLO text, its instructions, fusions and per-equation lines, as the export carries them.

    `target` is this host's CPU (the default), a TPU topology (`Target("tpu", "v5e:2x2")`; needs libtpu)
    or a GPU (`Target("gpu", "h100")`; needs JAX's CUDA plugin). `compiles` is `start_compiles(trace,
    target)`'s, if the caller set it going; else it starts here. `what` names the program in the lines a
    long compile prints (`compiled_when_done`).
    """
    compiles = compiles if compiles is not None else start_compiles(trace, target)
    # Python's work of the layer that needs no compile, done while XLA compiles (and lets go of Python's lock).
    flow = dataflow(facts, trace.closed_jaxpr)
    compiled = compiled_when_done(compiles.compiled, f"{what} for {target.platform}")
    try:
        return _read_layer(compiled, compiles, trace, facts, flow)
    finally:  # an error reading it waits for XLA's analyses on the compile's thread, before it ends the process:
        wait([compiles.analyses])  # the interpreter's shutdown aborts the process with a thread in XLA's code


def _read_layer(compiled, compiles: Compiles, trace, facts: Facts, flow) -> CompiledLayer:
    """`compile_layer`'s layer, read from XLA's `compiled` (`compiles`' compile, done), the jaxpr's dataflow made."""
    import jaxlib

    module = compiled.runtime_executable().hlo_modules()[0]
    printed = compiled.as_text()  # XLA's analyses meanwhile go on on the compile's thread (`_compile_tagged`)
    text, metadata = shown_text_and_metadata(printed)
    listed = list(_instructions(module))
    lines, roots = definition_lines(text)
    graph = CompiledGraph(listed, roots, _entry_name(text), facts.eqn_of_tag, compiles.names, metadata)
    eqns, via, absorbed = attribute(graph, facts, trace.closed_jaxpr, flow)

    instructions, fusions = layer_rows(listed, lines, graph.opcode, eqns, via, absorbed)
    # A fusion holds only the work its body does: a copy XLA wrapped under a dot's tag holds nothing.
    unattributed = sum(graph.tag[i.name] is not None and not eqns[i.name] and i.opcode != "fusion" for i in instructions)
    instructions, compiled_facts = with_facts(instructions, module, text, graph.operands)

    by_eqn: dict[int, set[int]] = defaultdict(set)
    for ins in instructions:
        for e in ins.computed_eqns:  # a folded equation lights the instruction doing its work
            by_eqn[e].add(ins.line)
    for e in list(by_eqn):  # a container owns what its descendants became
        for ancestor in enclosing(facts, e):
            by_eqn[ancestor] |= by_eqn[e]
    entry = graph.entry
    arguments = {n for n, c in graph.computation.items()
                 if c == entry and graph.opcode[n] == "parameter" and graph.has_op_name[n]}
    count = {kind: sum(1 for i in instructions if i.via == kind) for kind in VIAS}
    return CompiledLayer(
        text=text,
        jaxlib_version=jaxlib.__version__,
        **compiles.about,
        instructions=tuple(instructions),
        fusions=tuple(fusions),
        lines_by_eqn={str(e): tuple(sorted(v)) for e, v in sorted(by_eqn.items())},
        stats=HloStats(
            instructions=len(instructions),
            with_op_name=sum(graph.has_op_name.values()),
            arguments=len(arguments),  # entry parameters, whose op_name is the argument's name
            attributed=sum(1 for i in instructions if i.eqns),
            # instructions whose source file carries an equation's tag but that we could not tie to an
            # equation (should be 0); an op_name naming an argument (`x`, also on copies XLA makes of
            # it) or a kernel of XLA's (`online-softmax`) names no equation
            unattributed_with_op_name=unattributed,
            compiler_own=count["none"],
            fusions=len(fusions),
            by_tag=count["tag"],
            inferred=count["inferred"],
            in_regions=count["region"],
        ),
        **compiled_facts,
        **compiles.analyses.result(),  # an error of theirs raised here, as it would be had they run here
    )


def layer_rows(listed, lines: dict[str, int], opcode: dict[str, str], eqns: dict[str, set] | None = None,
               via: dict[str, str] | None = None, absorbed: dict[str, dict[int, int]] | None = None
               ) -> tuple[list[Row], list[Fusion]]:
    """The rows of a compiled layer, in line order: each instruction the text prints (`lines`), of `listed`
    ((computation, instruction) pairs), with its equations and how they are known (none, XLA's own, where
    nothing was traced: a dump), the equations folded into it (`absorbed`: equation -> rule), and each
    fusion with its kind. The one loop for a compile here and a dump. Each row is made an `Instruction` by
    `with_facts`, with its facts: a compile's are made once, not once here and again there."""
    instructions, fusions = [], []
    for computation, instruction in listed:
        name = instruction.name
        if name not in lines:
            continue  # inside an async computation the text prints folded into its `-start` (GPU's reduce-scatter)
        line, own = lines[name], tuple(sorted(eqns[name])) if eqns is not None else ()
        if opcode[name] == "fusion":
            fusions.append(Fusion(line, name, _fusion_kind(instruction.to_string()), own))
        folded = (absorbed or {}).get(name, {})
        instructions.append(Row(line, name, opcode[name], computation, own, via[name] if via is not None else "none",
                                tuple(Absorbed(e, folded[e]) for e in sorted(folded))))
    instructions.sort(key=lambda i: i.line)
    fusions.sort(key=lambda f: f.line)
    return instructions, fusions


# A compile still running this many seconds after the wait for it began is said on stderr, and again
# every SAY_COMPILING_EVERY seconds: XLA can take minutes, or never finish (jax#10621).
SAY_COMPILING_AFTER = 5.0
SAY_COMPILING_EVERY = 5.0
# The name of the thread each compile runs on.
COMPILE_THREAD = "dumpgym-compile"
# The compiles (by their futures) whose thread is in XLA's code now: compiling, or asking XLA for its analyses.
_IN_XLA: set[Future] = set()


def xla_running() -> bool:
    """Whether a thread is in XLA's code now, compiling or analysing a compile: a process that ends meanwhile
    ends at once (`cli.py`), since a thread in XLA's code when the interpreter shuts down aborts the process."""
    return bool(_IN_XLA)


def compiled_when_done(compiled: Future, what: str):
    """The `jax.stages.Compiled` of a compile under way, waited for: a line on stderr once it has taken
    `SAY_COMPILING_AFTER` seconds, then every `SAY_COMPILING_EVERY`, saying what it waits for and how long
    so far. Ctrl-C stops the wait with one line (`errors.Stopped` raised on): nothing is written, since
    a record is written only once it is whole."""
    import sys
    import time

    start, say_at = time.monotonic(), SAY_COMPILING_AFTER
    try:
        while True:
            try:
                return compiled.result(timeout=max(0.0, start + say_at - time.monotonic()))
            except FutureTimeout:
                waited = time.monotonic() - start
                print(f"dumpgym: waiting for XLA to compile {what}: {waited:.0f} s so far (Ctrl-C stops it, "
                      "nothing written)", file=sys.stderr, flush=True)
                say_at = waited + SAY_COMPILING_EVERY
    except KeyboardInterrupt:
        from dumpgym.errors import Stopped

        print(f"dumpgym: stopped while XLA compiled {what}; nothing was written", file=sys.stderr, flush=True)
        raise Stopped from None


class Compiles(NamedTuple):
    """A target's compile under way (a `concurrent.futures.Future` of a `jax.stages.Compiled`), and
    what the record says compiled it."""

    compiled: Future
    about: dict
    names: Names  # the plain lowering's location names and their tags (`hlo_tags.carry_tags`)
    analyses: Future  # of XLA's own totals (`hlo_facts.xla_analyses`), made on the thread once it has compiled


def _compile_for_cpu(trace, take_tagged: bool = False) -> Compiles:
    """The compile for this host's CPU, under way, and what the record says compiled it."""
    import jax

    from dumpgym.jax_internals import lowered_copy, no_traceback_locations

    # Source locations off, so the text names no file of the machine that built it (the trace stage's
    # tagged lowering has them off too); lowering a copy keeps that setting out of JAX's lowering cache
    # for the user's own function.
    own = None
    if not serializes_bodies(trace.tagged_eqns):
        # The tagged lowering itself once nothing reads it more, else a copy of it: the x-ray reads it meanwhile.
        own = trace.lowered if take_tagged else lowered_copy(trace.lowered)
    compiled, names, analyses = _compile_tagged(own, trace.lowered, lambda: lower_copy(trace.jax_traced),
                                                no_traceback_locations, _primitives(trace))
    return Compiles(compiled, {"backend": jax.devices()[0].platform, "host": host(), "host_id": host_id()}, names,
                    analyses)


def _compile_tagged(own, tagged, lower_plain, quiet, primitive_of) -> tuple[Future, Names, Future]:
    """XLA's compile of the program with the tags of the `tagged` lowering carried in (`ir/tags.py`), set
    going on a thread of its own: XLA compiles on one core and lets go of Python's lock meanwhile, so the
    caller's thread is free for Python's work, with JAX's default compiler options. Once it has compiled,
    the thread goes on to XLA's analyses of it (`xla_analyses`: `memory_analysis()` takes a GPT's add a
    third of a second, Python's lock let go), while the caller reads the compile. What XLA compiles is
    `own` (the tagged lowering itself or a copy, the caller's to give away) with the tags moved into its locations
    (`tags_in_place`), else, where that cannot be, the plain lowering `lower_plain()` makes (under `quiet`,
    source locations off) with the tags carried over from `tagged` (`carry_tags`). Both give XLA the same module.
    `primitive_of(tag)`: the primitive of the equation behind a tag."""
    # `compiler_ir()` is the very module `compile()` hands XLA, so the tags set on it are compiled
    # (`tests/test_hlo_tags.py` finds them in what XLA prints).
    names = tags_in_place(own.compiler_ir("stablehlo"), primitive_of) if own is not None else None
    plain = own
    if names is None:
        with quiet():
            plain = lower_plain()
        names = carry_tags(tagged.compiler_ir("stablehlo"), plain.compiler_ir("stablehlo"))
    future: Future = Future()
    analyses: Future = Future()

    def run():
        future.set_running_or_notify_cancel()
        analyses.set_running_or_notify_cancel()
        _IN_XLA.add(future)  # left before either future is settled: whoever waits sees XLA done
        try:
            compiled = plain.compile()
        except BaseException as e:  # noqa: BLE001 (handed to whoever waits for it)
            _IN_XLA.discard(future)
            future.set_exception(e)
            analyses.set_exception(e)
            return
        future.set_result(compiled)
        try:
            made = xla_analyses(compiled)
        except BaseException as e:  # noqa: BLE001 (handed to whoever waits for them)
            _IN_XLA.discard(future)
            analyses.set_exception(e)
            return
        _IN_XLA.discard(future)
        analyses.set_result(made)

    # A daemon: a compile stopped with Ctrl-C (or one that never finishes) does not hold the process at exit.
    threading.Thread(target=run, name=COMPILE_THREAD, daemon=True).start()
    return future, names, analyses


def _compile_for_topology(trace, target: Target) -> Compiles:
    """The compile for a TPU topology (libtpu) or GPUs (the CUDA plugin), with none attached, under
    way, and what the record says compiled it.

    The traced jaxpr is lowered again (tagged as the trace stage tags it, its locations then made the plain
    lowering's; lowered plain too only where that cannot be) with every mesh
    and sharding moved onto the topology's devices, under its first chip as the default device, as
    `jax.jit(f).lower(*args).compile()` on that TPU or GPU would. The text depends on the topology and
    the compiler's (and jaxlib's) version only, so `host` is empty and `host_id` digests those.
    """
    import jax
    from jax.extend import core as jex

    from dumpgym.jax_internals import lower_with_jaxpr, no_traceback_locations, with_source_info
    from dumpgym.ir.tags import TAG
    from dumpgym.traced.trace import map_jaxpr_eqns

    topology = target.topology_for(devices_needed(trace))
    devices = topology_devices(topology)
    memo: dict = {}

    def move(value):
        return retarget(value, devices, memo)

    tag_of = {id(eqn): k for k, eqn in enumerate(trace.tagged_eqns)}

    def tagged_eqn(eqn, params):
        return with_source_info(eqn, {k: move(v) for k, v in params.items()}, name=f"{TAG}{tag_of[id(eqn)]}",
                                traceback=None)

    def plain_eqn(eqn, params):
        return eqn.replace(params={k: move(v) for k, v in params.items()})

    closed = trace.closed_jaxpr

    def lowered(rewrite):
        return lower_with_jaxpr(trace.jax_traced, jex.ClosedJaxpr(map_jaxpr_eqns(closed.jaxpr, rewrite), closed.consts),
                                move)

    with jax.default_device(devices[0]):
        with no_traceback_locations():
            tagged = lowered(tagged_eqn)
        own = None if serializes_bodies(trace.tagged_eqns) else tagged
        compiled, names, analyses = _compile_tagged(own, tagged, lambda: lowered(plain_eqn), no_traceback_locations,
                                                    _primitives(trace))
    return Compiles(compiled, compiled_for(topology, devices[0]), names, analyses)


def _primitives(trace):
    """The primitive's name of the equation behind each tag, by tag."""
    names = [eqn.primitive.name for eqn in trace.tagged_eqns]
    return names.__getitem__


def devices_needed(trace) -> int:
    """How many devices the program spans: its sharded arguments' and every mesh it states (its arguments',
    jit's `in_shardings`/`out_shardings`, its equations' and a `jax.set_mesh` one: `stated_meshes`)."""
    import jax

    from dumpgym.traced.trace import stated_meshes

    sizes = [len(a.sharding.device_set) for a in jax.tree.leaves(trace.args)
             if getattr(a, "sharding", None) is not None]
    sizes += [int(mesh.size) for mesh in stated_meshes(trace)]
    return max((s for s in sizes if s), default=1)


def _entry_name(text: str) -> str:
    """The entry computation's name, from its `ENTRY %name (...)` header line."""
    for line in text.splitlines():
        if line.startswith("ENTRY %"):
            return line[len("ENTRY %"):].split(" ", 1)[0]
    return ""


def _fusion_kind(printed: str) -> str:
    for kind in ("kLoop", "kInput", "kOutput", "kCustom"):
        if f"kind={kind}" in printed:
            return kind
    return ""
