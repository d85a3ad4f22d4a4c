"""`dumpgym add --dump`: a dumped module as a program record of the user's corpus, without a re-trace.

The record holds what the folder holds: the jaxpr as dumped, the StableHLO (printed without its
location tables, as the gym shows every StableHLO), and the optimised HLO as the compiled layer of
the dump's backend, with the compiled facts read from it by XLA's parser (`hlo_facts.py`), the same
reading a compile here gets. It has no equations (nothing was traced here), so the drill kinds
that ask about equations draw nothing from it; those that read the compiled layer's facts
(buffers and donation, layouts, HLO spelling) draw from it as from any program.
"""
from __future__ import annotations

import re

from dumpgym.dumps.stablehlo import stablehlo_ops
from dumpgym.dumps.xray import xray_module
from dumpgym.ir.parse import DumpError, ir_context, parse_hlo, parse_stablehlo
from dumpgym.dumps.folder import DumpFolder, DumpModule
from dumpgym.record.schema import CompiledLayer, Fusion, HloStats, Instruction, ProgramRecord, StablehloOp, XrayStats

_ELEMENT = {"i1": "bool", "ui8": "u8", "ui16": "u16", "ui32": "u32", "ui64": "u64"}


def _aval(type_text: str) -> str:
    """`tensor<8x16xf32>` in the jaxpr's aval notation, `f32[8,16]`."""
    m = re.fullmatch(r"tensor<(?:([\dx]*)x)?(\w+)>", type_text)
    if m is None:
        return type_text
    dims = m.group(1).split("x") if m.group(1) else []
    return f"{_ELEMENT.get(m.group(2), m.group(2))}[{','.join(dims)}]"


def module_record(module: DumpModule, slug: str, where: str) -> ProgramRecord:
    """The record of one dumped module (which must have StableHLO and optimised HLO)."""
    from dumpgym.ir.stablehlo import read_lowered

    if module.problem:
        raise DumpError(f"{module.slug}: {module.problem}")
    if "stablehlo" not in module.files or "hlo_after" not in module.files:
        raise DumpError(f"{module.slug}: the folder has no {'StableHLO' if 'stablehlo' not in module.files else 'optimised HLO'}"
                        " for it; add --dump needs both")
    xray = xray_module(module)
    shown, ops = stablehlo_ops(module)
    lowered = read_lowered(parse_stablehlo(shown, module.files["stablehlo"], ir_context()))
    args = tuple(_aval(v.type) for v in lowered.main.args) if lowered.main else ()
    jaxpr = module.text("jaxpr") if "jaxpr" in module.files else ""
    linked = {line for link in xray.hlo.get("hlo_after", ()) for line in link.stablehlo_lines}
    op_lines = {op.line for op in ops}
    return ProgramRecord(
        slug=slug,
        title=f"{module.name} (dump, {module.target})"[:200],
        lesson=f"Your dump's module {module.name}, from {where}: compiled for {module.target}, not traced here.",
        entry=str(module.files["stablehlo"]),
        args=args,
        mesh=None,
        in_specs=None,
        source="",
        jaxpr=jaxpr,
        stablehlo=shown,
        eqns=(),
        xray=(),
        stablehlo_ops=tuple(StablehloOp(op.name, op.line, op.function, **op.facts) for op in ops),
        lowered_to_nothing=(),
        xray_stats=XrayStats(equations=0, mapped_equations=0, jaxpr_lines=len(jaxpr.splitlines()), mapped_jaxpr_lines=0,
                             stablehlo_lines=len(shown.splitlines()), stablehlo_op_lines=len(op_lines),
                             mapped_stablehlo_op_lines=len(linked & op_lines)),
        compiled={module.backend: _compiled_layer(module)},
        lowered=lowered,
    )


def _compiled_layer(module: DumpModule) -> CompiledLayer:
    """The dump's optimised HLO as a compiled layer: instructions and fusions with no equations (none was traced)."""
    import jaxlib

    from dumpgym.dumps.xray import _definition_lines
    from dumpgym.compiled.layer import _fusion_kind
    from dumpgym.ir.hlo_facts import with_facts
    from dumpgym.ir.hlo_graph import opcode_of

    text = module.text("hlo_after")
    hlo = parse_hlo(text, module.files["hlo_after"])
    lines = _definition_lines(text)
    instructions, fusions, with_op_name = [], [], 0
    for computation in hlo.computations():
        for instruction in computation.instructions():
            if instruction.name not in lines:
                continue
            printed = instruction.to_string()
            with_op_name += "op_name=" in printed
            line = lines[instruction.name]
            instructions.append(Instruction(line, instruction.name, opcode_of(instruction), computation.name, (), "none"))
            if opcode_of(instruction) == "fusion":
                fusions.append(Fusion(line, instruction.name, _fusion_kind(printed), ()))
    instructions.sort(key=lambda i: i.line)
    fusions.sort(key=lambda f: f.line)
    instructions, facts = with_facts(instructions, hlo, text)
    return CompiledLayer(
        text=text, backend=module.backend, jaxlib_version=jaxlib.__version__, host="", host_id="",
        instructions=tuple(instructions), fusions=tuple(fusions), lines_by_eqn={},
        stats=HloStats(instructions=len(instructions), with_op_name=with_op_name, arguments=0, attributed=0,
                       unattributed_with_op_name=0, compiler_own=len(instructions), fusions=len(fusions), by_tag=0,
                       inferred=0, in_regions=0),
        device_kind=module.target,
        **facts,
    )


def add_dump(folder: DumpFolder, modules: list[str] = (), corpus_dir=None, wait: float | None = None) -> list[ProgramRecord]:
    """Add the modules of a dump folder (all, or those named) to the user's corpus; all or none are written."""
    from dumpgym.corpus.user import store_records

    chosen = [folder.module(name) for name in modules] if modules else list(folder.modules)
    bad = [m for m in chosen if m.problem]
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise DumpError(f"{bad[0].slug}: {bad[0].problem}{more}; nothing was added (pick modules with --module)")
    where = ", ".join(str(p) for p in folder.paths)
    records = [module_record(m, _slug(m), where) for m in chosen]
    for record in records:  # what the corpus reads back must be a valid record
        ProgramRecord.from_json(record.to_json())
    store_records(records, corpus_dir, wait)
    return records


def _slug(module: DumpModule) -> str:
    return f"dump-{module.slug}"[:64].rstrip("-")
