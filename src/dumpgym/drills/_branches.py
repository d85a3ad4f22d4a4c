"""The loops drill's `branch` step at a compiled layer: tap the computation a compiled `conditional` runs.

Asked of a dump without a jaxpr, where the jaxpr's conds cannot be, of each conditional with a branch index
(`conditional(%i, ...), branch_computations={%a, %b}`: index k runs the k-th listed, counted from 0; JAX converts
lax.cond's bool to that index, False to 0). A conditional on a predicate (`true_computation=`) is not asked: JAX's
lowerings do not make one. Everything is a fact of the record: the conditional's `control` (its branches in
printed order, read when the dump was added), its index operand's result type, and each computation's lines.
The rows shown run from the first branch's signature to the last one's closing brace; every row of the branch
that runs is right.
"""
from __future__ import annotations

from dumpgym.drills._tpu import Listing, which_compile
from dumpgym.drills.answer import LinePick
from dumpgym.drills.item import Item, Lines, Note, refer
from dumpgym.record.schema import CompiledLayer, Instruction, ProgramRecord

MAX_ROWS = 60  # branches spread over more rows than this are not asked: the listing is for reading, not scrolling
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")


def _ordinal(k: int) -> str:
    return _ORDINALS[k] if k < len(_ORDINALS) else f"{k + 1}th"


def compiled_branch_items(program: ProgramRecord) -> list[Item]:
    """One item per value in range of each compiled conditional's branch index, in a dump's record without a
    jaxpr."""
    if program.dump is None or program.eqns:
        return []
    items = []
    for target, hlo in program.compiled.items():
        if not hlo.has_facts:
            continue
        listing = Listing(hlo)
        for ins in hlo.instructions:
            if ins.opcode == "conditional":
                items += _items(program, target, hlo, listing, ins)
    return items


def _index_dtype(hlo: CompiledLayer, listing: Listing, ins: Instruction) -> str | None:
    """The element type of a conditional's first operand (`s32` for a branch index), or None where it is no
    scalar."""
    index = listing.at.get(ins.operands[0]) if ins.operands else None
    if index is None or index.shape is None:
        return None
    arrays = hlo.shapes[index.shape].arrays
    return arrays[0][0] if len(arrays) == 1 and not arrays[0][1] else None


def _items(program: ProgramRecord, target: str, hlo: CompiledLayer, listing: Listing, ins: Instruction) -> list[Item]:
    """The items of one conditional: which rows are each branch's, and the question for each value asked."""
    spans = {c.name: c.lines for c in hlo.computations}
    dtype = _index_dtype(hlo, listing, ins)
    if len(set(ins.control)) != len(ins.control) or len(ins.control) < 2 or any(c not in spans for c in ins.control) \
            or dtype != "s32":  # two indices running one computation: tapping it answers both
        return []
    first = min(spans[c][0] for c in ins.control)
    last = max(spans[c][1] for c in ins.control)
    if last - first + 1 > MAX_ROWS:
        return []
    rows = {c: tuple(range(spans[c][0] - first + 1, spans[c][1] - first + 2)) for c in ins.control}
    index = listing.at[ins.operands[0]]
    out = []
    for k, runs in enumerate(ins.control):
        said = str(k)
        explain = {}
        for j, other in enumerate(ins.control):
            if j != k:
                explain.update({str(r): _misread(k, j, ins.control) for r in rows[other]})
        out.append(Item(
            question=f"At run time the branch index %{index.name} is {k}: tap the computation %{ins.name} runs.",
            answer=LinePick(rows[runs][0], rows[runs], explain),
            context=(Lines(target, first, last, cut=True), Note(which_compile(hlo)),
                     *refer(program, target, [listing.short(ins.line), listing.short(index.line)])),
            card=("branch", ins.name, said, target), layer=target, step="branch", skill="compiled-conditional",
            feedback=_feedback(k, ins.control),
            facts={"hlo_line": ins.line, "instruction": ins.name, "value": said, "runs": runs}))
    return out


def _misread(k: int, j: int, control: tuple[str, ...]) -> str:
    """Why tapping branch `j` is wrong where `k` runs, in this conditional's terms."""
    if j == k - 1:
        return (f"counted branch_computations from 1; index {k} counts from 0, so the {_ordinal(k)} listed, "
                f"%{control[k]}, runs")
    return f"index {k} picks branch_computations[{k}], %{control[k]}; %{control[j]} is [{j}]"


def _feedback(k: int, control: tuple[str, ...]) -> str:
    listed = ", ".join(f"%{c}" for c in control)
    return f"branch_computations={{{listed}}} counts from 0: index {k} runs the {_ordinal(k)} listed, %{control[k]}"
