"""The backward pass of a dump without a jaxpr: which operand of a forward dot a backward dot of the HLO before
optimisations makes the gradient of (`wrt`), from the dots the record keeps (`DumpFacts.dots`).

JAX's name stack, which XLA keeps as each dot's `op_name`, puts a gradient's dots in `transpose(...)`; a remat's
recomputed forward dots (`rematted_computation`) are neither side. JAX's transpose rule makes a backward dot read the
cotangent and the forward dot's other operand (the residual) as the very instruction the forward dot reads: a
backward dot that reads exactly one operand of exactly one forward dot makes the gradient of that forward dot's other
operand. Each program's items are weighed so that lhs and rhs are each right in half its weight, and the right
option's place takes turns, so neither a side nor a place pays; a program whose gradients are all of one side asks
none.
"""
from __future__ import annotations

from dumpgym.drills.answer import Choice
from dumpgym.drills.item import Item, Note
from dumpgym.drills._layers import text_lines
from dumpgym.record.schema import DumpDot, ProgramRecord

SIDES = ("lhs", "rhs")


def _backward(dot: DumpDot) -> bool:
    return "transpose(" in dot.op_name and "rematted_computation" not in dot.op_name


def _forward(dot: DumpDot) -> bool:
    return bool(dot.op_name) and "transpose(" not in dot.op_name


def dump_pairs(program: ProgramRecord) -> list[tuple[DumpDot, DumpDot, str]]:
    """Each (backward dot, its forward dot, the side of the forward dot it makes the gradient of), in line order."""
    dots = program.dump.dots if program.dump is not None else ()
    forward = [d for d in dots if _forward(d) and d.lhs.name != d.rhs.name]
    out = []
    for b in (d for d in dots if _backward(d)):
        read = {b.lhs.name, b.rhs.name}
        shared = [(f, [s for s in SIDES if getattr(f, s).name in read]) for f in forward]
        shared = [(f, sides) for f, sides in shared if sides]
        if len(shared) == 1 and len(shared[0][1]) == 1:
            f, (residual,) = shared[0]
            out.append((b, f, "rhs" if residual == "lhs" else "lhs"))
    return out


def _cut(lines: list[str], dot: DumpDot) -> str:
    """The dot's line as printed, cut past its dims (its metadata names the pass it is in)."""
    line = lines[dot.line - 1]
    return line[:dot.dims.printed_end].strip() + (", …" if dot.dims.printed_end < len(line.rstrip()) else "")


def dump_wrt_items(program: ProgramRecord) -> list[Item]:
    """A `wrt` choice per paired backward dot of the HLO before optimisations, where the program's gradients are of
    both sides."""
    paired = dump_pairs(program)
    count = {s: sum(1 for *_, side in paired if side == s) for s in SIDES}
    if not all(count.values()):
        return []
    lines = text_lines(program.dump.hlo_before)
    out, turn = [], {s: 0 for s in SIDES}
    for b, f, side in paired:
        other = "rhs" if side == "lhs" else "lhs"
        residual = getattr(f, other).name
        options = [f"its {s}" for s in SIDES]  # the sides alone, as a jaxpr's `wrt` choice offers them
        right = SIDES.index(side)
        if turn[side] % 2:  # the right option's place takes turns within each side
            options.reverse()
            right = 1 - right
        turn[side] += 1
        reason = (f"took the residual for the target: %{b.name} reads %{residual}, the forward dot's {other}, itself; "
                  f"what comes out is the gradient of the operand it multiplied, the {side}")
        out.append(Item(
            question=(f"The backward dot %{b.name} (line {b.line}) differentiates the forward dot %{f.name} "
                      f"(line {f.line}). The gradient of which of the forward dot's operands does it make?"),
            answer=Choice(tuple(options), right, tuple("" if k == right else reason for k in range(2)),
                          tuple("" if k == right else "residual-as-target" for k in range(2))),
            context=(Note(_cut(lines, f)), Note(_cut(lines, b))), card=(f"hlo-before-{b.line}", "wrt"),
            layer="hlo-before", step="wrt", weight=round(len(paired) / (2 * count[side]), 3),
            feedback=(f"%{b.name} reads %{residual}, which %{f.name} reads as its {other}: JAX's transpose rule "
                      f"makes the gradient of its {side}, %{getattr(f, side).name}."),
            facts={"backward": b.line, "forward": f.line, "wrt": side, "residual": residual}))
    return out
