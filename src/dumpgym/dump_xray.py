"""The x-ray of a dumped module: jaxpr <-> StableHLO <-> HLO, linked by what the dumped texts carry.

A StableHLO op's location holds its name stack (`jit(f)/tanh`) and the source file and line of its
innermost frame; XLA copies both into each HLO instruction's `op_name` and `stack_frame_id`. An
HLO instruction is linked to the StableHLO ops that carry its name stack and line. That link is
drawn only when one equation can have made those ops: where the folder has the module's jaxpr,
when the jaxpr has as many equations of the primitive as the StableHLO has distinct (name stack,
line) keys for it; without a jaxpr, when no two of the ops are the same operation (two `tanh`s
on one source line may be two equations). A jaxpr equation is linked to its primitive's key when
that pairing is one-to-one and in print order (a jaxpr without sub-jaxprs, whose StableHLO has
only `main`). Every link not drawn is counted with its reason. Nothing here imports JAX.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from dumpgym.dumpfolder import (DumpModule, _JAXPR_EQN, hlo_op_names, ir_context, location_key, parse_hlo,
                                parse_stablehlo)

# Ops that only hold a module together: no equation emits them.
_STRUCTURAL = frozenset({"builtin.module", "func.func", "func.return", "stablehlo.return", "sdy.return",
                         "sdy.mesh"})


@dataclass(frozen=True)
class HloLink:
    """One HLO instruction and the StableHLO lines it came from (empty: not linked, `why` says why)."""

    line: int
    name: str
    opcode: str
    op_name: str | None
    stablehlo_lines: tuple[int, ...]
    why: str = ""


@dataclass
class ModuleXray:
    """A dumped module's layers as shown (StableHLO without its location tables) and the links between them."""

    stablehlo: str | None
    jaxpr_links: dict[int, tuple[int, ...]] = field(default_factory=dict)  # jaxpr line -> StableHLO lines
    jaxpr_unlinked: Counter = field(default_factory=Counter)  # why -> equations
    hlo: dict[str, list[HloLink]] = field(default_factory=dict)  # layer -> one per instruction
    sources: dict[str, bool] = field(default_factory=dict)  # source file -> exists on this machine
    notes: list[str] = field(default_factory=list)

    def unlinked(self, layer: str) -> Counter:
        """Instructions of `layer` that carry an op_name but were not linked, by reason."""
        return Counter(link.why for link in self.hlo.get(layer, ()) if link.op_name and not link.stablehlo_lines)

    def coverage(self, layer: str) -> tuple[int, int]:
        """(linked, carrying an op_name that names a name stack) instructions of `layer`."""
        named = [link for link in self.hlo.get(layer, ()) if link.op_name and _is_stack(link.op_name)]
        return sum(1 for link in named if link.stablehlo_lines), len(named)


def _is_stack(op_name: str) -> bool:
    return "/" in op_name or "(" in op_name


def _primitive(name_stack: str) -> str:
    return name_stack.rsplit("/", 1)[-1]


@dataclass
class _Op:
    name: str
    line: int
    function: str
    stack: str | None
    frame: tuple[str, int] | None


def _stablehlo_ops(module: DumpModule) -> tuple[str, list[_Op]]:
    """The StableHLO as shown (printed without locations) and its ops, each with its line there and its key."""
    from jaxlib.mlir import ir

    context = ir_context()
    path = module.files["stablehlo"]
    dumped = parse_stablehlo(module.text("stablehlo"), path, context)
    shown = dumped.operation.get_asm(enable_debug_info=False)
    # Parsed again, the shown text gives each op its line in it; the ops come in the same order.
    lined = parse_stablehlo(shown, path, context)
    keyed, lines = [], []

    def visit_keys(op):
        keyed.append((op.name, *location_key(op.location)))
        return ir.WalkResult.ADVANCE

    def visit_lines(op):
        lines.append((op.name, ir.FileLineColLoc(op.location).start_line, _function_of(op)))
        return ir.WalkResult.ADVANCE

    dumped.operation.walk(visit_keys, ir.WalkOrder.PRE_ORDER)
    lined.operation.walk(visit_lines, ir.WalkOrder.PRE_ORDER)
    if [k[0] for k in keyed] != [n for n, _l, _f in lines]:
        raise RuntimeError(f"{path}: printing without locations changed the ops")
    ops = [_Op(name, line, function, stack, frame)
           for (name, stack, frame), (_n, line, function) in zip(keyed, lines) if name not in _STRUCTURAL]
    return shown, ops


def _function_of(op) -> str:
    parent = op.parent
    while parent is not None:
        if parent.name == "func.func":
            return parent.attributes["sym_name"].value
        parent = parent.parent
    return ""


def _jaxpr_eqns(text: str) -> list[tuple[int, str]]:
    """(line, primitive) of each printed equation of a jaxpr."""
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in _JAXPR_EQN.finditer(text)]


def _definition_lines(text: str) -> dict[str, int]:
    """The 1-based line on which each HLO instruction `%name = ...` is printed."""
    out = {}
    for n, line in enumerate(text.splitlines(), start=1):
        head = line.strip().removeprefix("ROOT ")
        if head.startswith("%") and " = " in head:
            out.setdefault(head[1:].split(" = ", 1)[0], n)
    return out


def xray_module(module: DumpModule) -> ModuleXray:
    """Link a dumped module's layers; a module without StableHLO has nothing to link through."""
    if "stablehlo" not in module.files:
        return ModuleXray(None, notes=["the folder has no StableHLO for this module, so its layers cannot be linked"])
    shown, ops = _stablehlo_ops(module)
    out = ModuleXray(shown)
    keys: dict[tuple, list[_Op]] = defaultdict(list)
    for op in ops:
        if op.stack is not None and _is_stack(op.stack):
            keys[(op.stack, op.frame)].append(op)
    by_primitive: dict[str, list[tuple]] = defaultdict(list)  # primitive -> its keys, in print order
    for key in keys:
        by_primitive[_primitive(key[0])].append(key)
    eqns = _jaxpr_eqns(module.text("jaxpr")) if "jaxpr" in module.files else None
    decided = _decided_keys(keys, by_primitive, eqns)
    if eqns is not None:
        _link_jaxpr(out, module.text("jaxpr"), eqns, keys, by_primitive, decided, ops)
    else:
        out.notes.append("no jaxpr in the folder for this module: a name stack shared by two ops of one kind "
                         "is not linked, and the jaxpr layer is not shown")
    for layer in ("hlo_before", "hlo_after"):
        if layer in module.files:
            out.hlo[layer] = _link_hlo(module, layer, keys, decided)
    frames = {op.frame[0] for op in ops if op.frame}
    from pathlib import Path

    out.sources = {name: Path(name).is_file() for name in sorted(frames)}
    if ops and all(op.frame is None for op in ops if op.stack):
        out.notes.append("the StableHLO carries no source lines (JAX older than 0.4.36?): links use name stacks alone")
    return out


def _decided_keys(keys, by_primitive, eqns) -> dict[tuple, str]:
    """Each key -> "" where one equation made all its ops, else why that cannot be told from the text."""
    counts = Counter(p for _line, p in eqns) if eqns is not None else None
    out = {}
    for key, key_ops in keys.items():
        primitive = _primitive(key[0])
        if counts is not None and re.fullmatch(r"[a-z_]\w*", primitive):
            n, k = counts.get(primitive, 0), len(by_primitive[primitive])
            out[key] = "" if n == k else (
                f"{n} {primitive} equations in the jaxpr, {k} (name stack, line) pairs in the StableHLO")
        else:
            repeated = [name for name, c in Counter(op.name for op in key_ops).items() if c > 1]
            out[key] = "" if not repeated else (
                f"{len(key_ops)} ops share {key[0]} and one source line, {repeated[0]} more than once: "
                "maybe several equations")
    return out


def _link_jaxpr(out: ModuleXray, text: str, eqns, keys, by_primitive, decided, ops) -> None:
    nested = text.count("{ lambda") > 1 or bool(re.search(r"^\s*let\s*$|^let ", text, re.M))
    functions = {op.function for op in ops}
    by_primitive_eqns: dict[str, list[int]] = defaultdict(list)
    for line, primitive in eqns:
        by_primitive_eqns[primitive].append(line)
    for primitive, lines in by_primitive_eqns.items():
        primitive_keys = by_primitive.get(primitive, [])
        if not primitive_keys:
            out.jaxpr_unlinked["no StableHLO op names it (lowered to nothing, or inside a call)"] += len(lines)
            continue
        if len(lines) != len(primitive_keys) or any(decided[k] for k in primitive_keys):
            out.jaxpr_unlinked[f"{primitive}: equations and StableHLO locations do not pair one to one"] += len(lines)
            continue
        if len(lines) > 1 and (nested or functions != {"main"}):
            out.jaxpr_unlinked["nested jaxprs: print order is not emission order"] += len(lines)
            continue
        for line, key in zip(lines, primitive_keys):
            out.jaxpr_links[line] = tuple(sorted({op.line for op in keys[key]}))


def _link_hlo(module: DumpModule, layer: str, keys, decided) -> list[HloLink]:
    text = module.text(layer)
    hlo = parse_hlo(text, module.files[layer])
    lines = _definition_lines(text)
    named = {name: (op_name, frame) for _c, name, op_name, frame in hlo_op_names(hlo)}
    stack_only = defaultdict(list)  # an HLO without stack frames links by name stack alone
    for key in keys:
        stack_only[key[0]].append(key)
    links = []
    for computation in hlo.computations():
        for instruction in computation.instructions():
            name = instruction.name
            if name not in lines:
                continue
            opcode = str(instruction.opcode).removeprefix("HloOpcode.k").lower()
            op_name, frame = named.get(name, (None, None))
            found, why = (), ""
            if op_name is None:
                why = "no op_name: made by XLA"
            elif not _is_stack(op_name):
                why = "its op_name names an argument or a reducer's parameter, not an op"
            else:
                candidates = [(op_name, frame)] if frame is not None else stack_only.get(op_name, [])
                candidates = [k for k in candidates if k in keys]
                if not candidates:
                    why = "no StableHLO op carries its name stack and source line"
                elif len(candidates) > 1:
                    why = "no stack frame, and its name stack stands on several source lines"
                elif decided[candidates[0]]:
                    why = decided[candidates[0]]
                else:
                    found = tuple(sorted({op.line for op in keys[candidates[0]]}))
            links.append(HloLink(lines[name], name, opcode, op_name, found, why))
    links.sort(key=lambda link: link.line)
    return links
