"""The backward drill's pairing: each backward dot_general with the forward one it differentiates.

A backward `dot_general` multiplies a cotangent, which flows from the backward pass, by a residual, a
forward value (read directly, through a container body's binder, or computed again inside a remat
body). The forward dot that has the residual as an operand is the one being differentiated. Every fact
comes from the record's dataflow (`_dataflow`); `trail` gives the jaxpr lines a reader follows.
"""
from __future__ import annotations

from dataclasses import dataclass

from dumpgym.drills._dataflow import Dataflow, Value
from dumpgym.drills.item import Lines
from dumpgym.record.schema import EqnFact, ProgramRecord

# Backward equations that pass a forward value on unchanged in content: followed to find the residual.
_PASS_THROUGH = frozenset({"transpose", "convert_element_type", "copy", "reduce_precision"})
SIDES = ("lhs", "rhs")


@dataclass(frozen=True)
class Pair:
    """A backward dot `back` whose input `residual` is operand `matched` of the forward dot `fwd`."""

    back: EqnFact
    residual: int  # which input of `back` is the forward value
    fwd: EqnFact
    matched: int  # which operand of `fwd` that value is
    lines: frozenset[int]  # the jaxpr lines a reader follows from one to the other
    via: str  # how `back` reads the residual, for the reasons: "" when by its own name

    @property
    def target(self) -> int:
        """The operand of `fwd` whose gradient `back` computes."""
        return 1 - self.matched

    @property
    def cotangent(self) -> int:
        """Which input of `back` is the cotangent."""
        return 1 - self.residual


def line(eqn: EqnFact) -> int:
    """The equation's first jaxpr line, where a reader finds it."""
    return eqn.jaxpr_lines[0]


def operand_label(dot: EqnFact, k: int) -> str:
    """An operand of a dot as the options name it: `the lhs of the dot_general on line 26 (f32[16,32])`."""
    return f"the {SIDES[k]} of the dot_general on line {line(dot)} ({dot.inputs[k]})"


def result_label(dot: EqnFact) -> str:
    """A dot's result as the options name it."""
    return f"the result of the dot_general on line {line(dot)} ({dot.outputs[0]})"


# ---------------------------------------------------------------------------------------------
# Finding the pairs.


def span(eqn: EqnFact) -> set[int]:
    return set(range(eqn.jaxpr_lines[0], eqn.jaxpr_lines[1] + 1))


def _header(program: ProgramRecord, container: EqnFact) -> set[int]:
    """The lines that declare a container body's binders: from its `{ lambda` to its first equation."""
    first = min((e.jaxpr_lines[0] for e in program.eqns if e.parent == container.id), default=None)
    if first is None:
        return set()
    text = program.jaxpr.splitlines()
    start = first - 1
    while start > 1 and "{ lambda" not in text[start - 1]:
        start -= 1
    return set(range(start, first))


def trail(program: ProgramRecord, flow: Dataflow, eqn: EqnFact, k: int) -> set[int]:
    """The lines a reader follows to see which value input `k` of `eqn` is: binders to operands, recomputations."""
    src = eqn.sources[k] if eqn.sources else None
    if src is None:
        return set()
    if src.eqn is None:
        if eqn.parent is None:
            return set()
        holder = program.eqns[eqn.parent]
        operand = _binder_operand(holder, src.index)
        lines = _header(program, holder) | set(holder.jaxpr_lines)
        return lines | (trail(program, flow, holder, operand) if operand is not None else set())
    source = program.eqns[src.eqn]
    value = flow.output(src.eqn, src.index)
    if value[:2] != ("out", src.eqn):  # computed again: show both computations and what they read
        lines = span(source) | span(program.eqns[value[1]])
        return lines.union(*(trail(program, flow, source, j) for j in range(len(source.inputs))))
    if src.eqn in flow.backward and source.primitive in _PASS_THROUGH:
        return span(source) | trail(program, flow, source, 0)
    return set()


def via(program: ProgramRecord, flow: Dataflow, eqn: EqnFact, k: int) -> str:
    """How input `k` of `eqn` reaches its forward value, in a phrase: recomputed, through a binder, transposed."""
    src = eqn.sources[k]
    if src.eqn is None:
        holder = program.eqns[eqn.parent] if eqn.parent is not None else None
        return f" (a binder of the {holder.primitive} on line {line(holder)})" if holder is not None else ""
    source, value = program.eqns[src.eqn], flow.output(src.eqn, src.index)
    if value[:2] != ("out", src.eqn):
        return f" (computed again on line {line(source)})"
    if src.eqn in flow.backward and source.primitive in _PASS_THROUGH:
        return f" (through the {source.primitive} on line {line(source)})"
    return ""


def _binder_operand(holder: EqnFact, i: int) -> int | None:
    """Which operand of a container a body binder stands for (cond's branches skip the index)."""
    k = i + 1 if holder.primitive == "cond" else i
    return k if k < len(holder.inputs) and holder.primitive != "while" else None


def residual_value(program: ProgramRecord, flow: Dataflow, back: EqnFact, k: int) -> Value | None:
    """The forward value input `k` of a backward equation reads, through pass-through equations; None if not one."""
    value = flow.input(back, k)
    while value is not None and value[0] == "out" and value[1] in flow.backward:
        source = program.eqns[value[1]]
        if source.primitive not in _PASS_THROUGH:
            return None
        value = flow.input(source, 0)
    return value if flow.forward(value) else None


def pairs(program: ProgramRecord, flow: Dataflow) -> list[Pair]:
    """Every backward dot_general whose residual is an operand of exactly one forward dot_general."""
    dots = [e for e in program.eqns if e.primitive == "dot_general" and len(e.inputs) == 2]
    forward = [e for e in dots if e.id not in flow.backward]
    out = []
    for back in (e for e in dots if e.id in flow.backward):
        found = []
        for k in (0, 1):
            if flow.forward(flow.input(back, 1 - k)) is not False:
                continue  # the other input must come from the backward pass: the cotangent
            value = residual_value(program, flow, back, k)
            found += [(k, f, j) for f in forward for j in (0, 1) if value is not None and flow.input(f, j) == value]
        if len(found) != 1:
            continue  # no forward dot reads the residual, or several: not asked
        k, fwd, j = found[0]
        if back.inputs[1 - k].shape != fwd.outputs[0].shape or \
                sorted(back.outputs[0].shape) != sorted(fwd.inputs[1 - j].shape):
            continue
        lines = span(back) | span(fwd) | trail(program, flow, back, k) | trail(program, flow, fwd, j)
        out.append(Pair(back, k, fwd, j, frozenset(lines), via(program, flow, back, k)))
    return out


def shown(program: ProgramRecord, lines) -> list[Lines]:
    """The listed jaxpr lines with their numbers, one block (a reference) per run of consecutive lines."""
    runs: list[list[int]] = []
    for n in sorted(lines):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return [Lines("jaxpr", first, last, numbered=True) for first, last in runs]
