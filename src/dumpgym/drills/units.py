"""The unit drill: tap every instruction of a few lines of the TPU compile that runs on the MXU.

A TPU core multiplies matrices on its MXU (a systolic array) and does elementwise and reduction
work on its vector units (the VPU). In compiled HLO the MXU's work is a `convolution` or a `dot`
(the TPU backend writes most dot_generals as a `convolution`, though not every one: moe's three
dot_generals compile to one), bare or inside a fusion's computation, or a
custom call whose kernel (a `pallas_call`, or a kernel XLA wrote for the program's equations)
computes a dot_general. The answer is read from the record of each TPU layer: the opcodes of the
instructions in the computations a fusion calls, transitively, and a custom call's equations.

One step, `mxu`, two skills: `schedule` (lines of a computation the chip runs step by step, whose
fusions must be opened to be read: each fusion's computations follow the lines) and `fused-body`
(lines of a fused computation itself).
"""
from __future__ import annotations

from dataclasses import dataclass

from dumpgym.drills import drill
from dumpgym.drills._avals import order
from dumpgym.drills._tpu import MATMUL_OPCODES, Listing, which_compile
from dumpgym.drills.item import Item, Lines, LineSet, Note
from dumpgym.record import CompiledLayer, Instruction, ProgramRecord

ROWS = 8  # instruction lines shown at most in one question
# Instructions whose work sits in computations the record does not link (a loop's body, a branch): a run
# holding one is not asked, since the line alone does not say whether it keeps the MXU busy.
_CONTROL = frozenset({"while", "conditional", "call", "asyncstart", "asyncdone"})


@dataclass(frozen=True)
class _Row:
    """An instruction line as the drill sees it: whether it runs on the MXU, and why, in this compile's terms."""

    ins: Instruction
    mxu: bool
    why: str


def _dot_equations(program: ProgramRecord, ins: Instruction) -> list[int]:
    """The dot_general equations an instruction's equations are, or hold (a pallas_call's kernel)."""
    found = []
    for e in ins.eqns:
        for eqn in (program.eqns[e], *(x for x in program.eqns if program.eqns[e] in program.ancestors(x))):
            if eqn.primitive == "dot_general" and eqn.id not in found:
                found.append(eqn.id)
    return found


def _row(program: ProgramRecord, listing: Listing, ins: Instruction) -> _Row | None:
    """Where an instruction's work runs, or None where its line cannot say."""
    op, printed = ins.opcode, listing.hlo.printed(ins)
    if op in _CONTROL:
        return None
    if op in MATMUL_OPCODES:
        return _Row(ins, True, f"%{ins.name} is a `{printed}`: a matrix multiply, the MXU's work")
    if op == "fusion":
        body = listing.body(ins.line)
        ops = listing.opcodes_in(body)
        where = f"%{ins.name} calls %{body[0]}" if body else f"%{ins.name}"
        if ops & _CONTROL:
            return None
        if ops & MATMUL_OPCODES:
            return _Row(ins, True, f"{where}, which holds a `{sorted(ops & MATMUL_OPCODES)[0]}`: the MXU's work")
        if "customcall" in ops:
            return None
        return _Row(ins, False, f"{where}, which holds no convolution or dot: vector work, or none")
    if op == "customcall":
        dots = _dot_equations(program, ins)
        if dots:
            line = program.eqns[dots[0]].jaxpr_lines[0]
            return _Row(ins, True, f"%{ins.name} is a kernel whose equations hold the dot_general on jaxpr line "
                                   f"{line}: it multiplies matrices on the MXU")
        return _Row(ins, False, f"%{ins.name} is a custom call whose equations hold no dot_general")
    return _Row(ins, False, f"%{ins.name} is a `{printed}`: no matrix multiply")


@drill("units", number="11", title="which unit runs it",
       aim="Tell the TPU instructions that run on the MXU (matrix multiplies) from those that leave it idle.",
       per_program=4, cap_by=("layer",))
def unit_items(program: ProgramRecord) -> list[Item]:
    """Per TPU layer, one item per instruction that runs on the MXU: `ROWS` lines of the listing around it,
    it at a fixed draw of their places (so no place is the usual answer), every MXU instruction among them
    in the answer. Its card is that instruction, the step and the layer's target."""
    return [item for target, hlo in program.layers("tpu").items() for item in _layer_items(program, target, hlo)]


def _layer_items(program: ProgramRecord, target: str, hlo: CompiledLayer) -> list[Item]:
    if not hlo.has_facts:
        return []
    listing = Listing(hlo)
    fused = {c for i in hlo.instructions if i.opcode == "fusion" for c in listing.body(i.line)}
    rows: dict[int, _Row | None] = {}

    def row(n: int) -> _Row | None:
        if n not in rows:
            rows[n] = _row(program, listing, listing.at[n]) if n in listing.at else _Row(None, False, "")
        return rows[n]

    items = []
    # Where in the shown lines each asked instruction sits, from 0: in turn from a fixed draw, so every place
    # is about as often the answer (the ROOT fusion, last of its computation, would otherwise be last).
    base = order(ROWS, program.slug, target)[0]
    asked_rows = [i for i in hlo.instructions if row(i.line) is not None and rows[i.line].mxu]
    for k, ins in enumerate(asked_rows):
        place = (base + k) % ROWS
        first = max(1, ins.line - place)
        run = list(range(first, min(len(listing.lines), first + ROWS - 1) + 1))
        if any(row(n) is None for n in run):
            continue
        right = [k for k, n in enumerate(run, start=1) if rows[n].mxu]
        if len(right) < len(run):
            items.append(_item(target, hlo, listing, ins, run, [rows[n] for n in run], right,
                               ins.computation in fused))
    return items


def _item(target: str, hlo: CompiledLayer, listing: Listing, asked: Instruction, run: list[int], rows: list[_Row],
          right: list[int], fused: bool) -> Item:
    first, last = run[0], run[-1]
    opened = [c for r in rows if r.ins is not None and r.ins.opcode == "fusion" for c in listing.body(r.ins.line)]
    context = (Lines(target, first, last, cut=True), Note(which_compile(hlo)),
               *(Lines(target, *listing.computations[c]) for c in dict.fromkeys(opened)))
    names = ", ".join(f"%{rows[k - 1].ins.name}" for k in right)
    explain = {str(k): r.why if r.ins is not None else "not an instruction: nothing runs on this line"
               for k, r in enumerate(rows, start=1)}
    return Item(
        question=(f"In these {len(rows)} lines of the TPU compile, tap every instruction that runs on the MXU, the "
                  "TPU's matrix unit." + (" The computations their fusions call follow them." if opened else "")),
        layer=target, step="mxu", skill="fused-body" if fused else "schedule",
        card=(asked.name, "mxu", target),
        answer=LineSet(tuple(right), explain),
        feedback=f"{names} multipl{'y' if len(right) > 1 else 'ies'} matrices: " + "; ".join(
            rows[k - 1].why for k in right[:2]),
        context=context, facts={"hlo_line": asked.line, "hlo_lines": [first, last], "instruction": asked.name,
                                "instructions": [r.ins.name if r.ins is not None else None for r in rows]})
