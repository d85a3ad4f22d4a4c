"""The unit drill: which instructions of the TPU compile run on the MXU, and what the MXU makes inside a fusion.

A TPU core multiplies matrices on its MXU (a systolic array) and does elementwise and reduction
work on its vector units (the VPU). In compiled HLO the MXU's work is a `convolution` or a `dot`
(the TPU backend writes most dot_generals as a `convolution`, though not every one: moe's three
dot_generals compile to one), bare or inside a fusion's computation, or a
custom call whose kernel (a `pallas_call`, or a kernel XLA wrote for the program's equations)
computes a dot_general. The answer is read from the record of each TPU layer: the opcodes of the
instructions in the computations a fusion calls, transitively, and a custom call's equations.

Two steps. `mxu`: runs of lines of a computation the chip runs step by step, each holding two rows
alike in opcode that differ in the answer (skill `fusion-bodies`: a fusion whose body holds a
convolution and one whose body does not; `kernels`: custom calls with and without a dot_general), so
the opcode alone does not say which rows to tap: each fusion's computations follow the lines, to be
opened. Lines of a fused computation itself are not asked: there the opcode is the answer.
`mxu-shape`: type what the one matrix multiply inside a fusion makes, read in its fused computation.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from dumpgym.drills import drill
from dumpgym.drills._which_unit import unit_items as _unit_items
from dumpgym.drills._tpu import MATMUL_OPCODES, Buffer, Definition, Listing, placed_evenly, which_compile
from dumpgym.drills.answer import read_aval
from dumpgym.drills.item import Item, Lines, LineSet, Misreading, Note, Typed
from dumpgym.record.schema import CompiledLayer, Instruction, ProgramRecord

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
    for e in ins.computed_eqns:
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
            kind = next((f.kind for f in listing.hlo.fusions if f.line == ins.line), "")
            named = f" (its kind, {kind}, is what XLA calls a fusion built around such an op's output)" \
                if kind == "kOutput" else ""
            return _Row(ins, True, f"{where}, which holds a `{sorted(ops & MATMUL_OPCODES)[0]}`: the MXU's "
                                   f"work{named}")
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
       aim="Say which unit does an instruction's work (a TPU's MXU, VPU or DMA engines, a GPU's tensor or CUDA "
           "cores), and what the MXU's multiply makes inside a fusion.",
       per_program=4, cap_by=("layer", "step"))
def unit_items(program: ProgramRecord) -> list[Item]:
    """Per TPU layer: `mxu`, every run of `ROWS` lines holding an MXU instruction and two rows of one opcode
    on both sides of the answer, every MXU instruction among them in the answer (its card: the run's first
    and last instructions); and `mxu-shape`, one per fusion holding one matrix multiply (its card: the
    fusion). The step and the layer's target end each card."""
    return [*(item for target, hlo in program.layers("tpu").items()
              for item in (*_layer_items(program, target, hlo), *_shape_items(target, hlo))),
            *(item for target, hlo in {**program.layers("tpu"), **program.layers("gpu")}.items()
              for item in _unit_items(target, hlo))]


def _layer_items(program: ProgramRecord, target: str, hlo: CompiledLayer) -> list[Item]:
    if not hlo.has_facts:
        return []
    listing = Listing(hlo)
    rows: dict[int, _Row | None] = {}

    def row(n: int) -> _Row | None:
        if n not in rows:
            rows[n] = _row(program, listing, listing.at[n]) if n in listing.at else _Row(None, False, "")
        return rows[n]

    # Every run of `ROWS` lines that holds an MXU instruction and two rows that print alike (one opcode, and
    # for fusions one `kind=`) but differ in the answer (two kOutput fusions, one with a convolution in its
    # body; a kernel with a dot_general, one without): what the row prints cannot say which to tap, the fused
    # bodies must be read. On the built-in TPU compiles every kOutput fusion holds the multiply and no other
    # fusion does, so none is asked there (docs/drills.md). Runs start on every line, so every MXU row is
    # asked at every place of the shown lines.
    kinds = {f.line: f.kind for f in hlo.fusions}
    items = []
    for first in range(1, len(listing.lines) - ROWS + 2):
        run = list(range(first, first + ROWS))
        if any(row(n) is None for n in run):
            continue
        shown = [rows[n] for n in run]
        answers_by_look: dict[tuple[str, str], set[bool]] = {}
        for r in shown:
            if r.ins is not None:
                answers_by_look.setdefault((r.ins.opcode, kinds.get(r.ins.line, "")), set()).add(r.mxu)
        if not any(len(a) == 2 for a in answers_by_look.values()):
            continue
        right = [k for k, r in enumerate(shown, start=1) if r.mxu]
        items.append(_item(target, hlo, listing, run, shown, right,
                           sorted({op for (op, _), a in answers_by_look.items() if len(a) == 2})))
    return placed_evenly(items, [_edge(i) for i in items], ROWS)


def _edge(item: Item) -> str | None:
    """`first` or `last` where the answer is that one instruction row of the shown lines alone, else None."""
    named = [k for k, name in enumerate(item.facts["instructions"], start=1) if name is not None]
    lines = list(item.answer.lines)
    return "first" if lines == named[:1] else "last" if lines == named[-1:] else None


def _item(target: str, hlo: CompiledLayer, listing: Listing, run: list[int], rows: list[_Row], right: list[int],
          alike: list[str]) -> Item:
    first, last = run[0], run[-1]
    asked = rows[right[0] - 1].ins
    named = [r.ins.name for r in rows if r.ins is not None]
    # the run's first and last instructions, and how many other lines (signatures, braces) lie outside them
    before = next(k for k, r in enumerate(rows) if r.ins is not None)
    after = next(k for k, r in enumerate(reversed(rows)) if r.ins is not None)
    opened = [c for r in rows if r.ins is not None and r.ins.opcode == "fusion" for c in listing.body(r.ins.line)]
    context = (Lines(target, first, last, cut=True), Note(which_compile(hlo)),
               *(Lines(target, *listing.computations[c], numbered=True) for c in dict.fromkeys(opened)))
    names = ", ".join(f"%{rows[k - 1].ins.name}" for k in right)
    explain = {str(k): r.why if r.ins is not None else "not an instruction: nothing runs on this line"
               for k, r in enumerate(rows, start=1)}
    return Item(
        question=(f"In these {len(rows)} lines of the TPU compile, tap every instruction that runs on the MXU, the "
                  "TPU's matrix unit." + (" The computations their fusions call follow them." if opened else "")),
        layer=target, step="mxu", skill="fusion-bodies" if "fusion" in alike else "kernels",
        card=(f"{'^' * before}{named[0]}..{named[-1]}{'$' * after}", "mxu", target),
        answer=LineSet(tuple(right), explain),
        feedback=f"{names} multipl{'y' if len(right) > 1 else 'ies'} matrices: " + "; ".join(
            rows[k - 1].why for k in right[:2]),
        context=context, facts={"hlo_line": asked.line, "hlo_lines": [first, last], "instruction": asked.name,
                                "alike": alike,
                                "instructions": [r.ins.name if r.ins is not None else None for r in rows]})


# --- mxu-shape ------------------------------------------------------------------------------------

def _aval(b: Buffer) -> str | None:
    """A buffer's type as the typed answer spells it (`bf16[64,512]`), or None where it does not read as one."""
    return read_aval(b.plain)


def _shape_items(target: str, hlo: CompiledLayer) -> list[Item]:
    """Per fusion whose body holds exactly one matrix multiply, a `mxu-shape` item: type the type of what
    that multiply makes, read in the fused computation (shown after the fusion's line), not on the fusion's
    own line, which prints what the fusion returns after the work XLA fused onto the multiply's output.
    A program's items with the same answer share one item's weight (a habit is not asked most)."""
    if not hlo.has_facts:
        return []
    listing = Listing(hlo)
    items = []
    for ins in hlo.instructions:
        if ins.opcode != "fusion":
            continue
        body = listing.body(ins.line)
        if listing.opcodes_in(body) & (_CONTROL | {"customcall"}):
            continue
        matmuls = [i for i in hlo.instructions if i.computation in body and i.opcode in MATMUL_OPCODES]
        made, out = (listing.definition(i) for i in (*matmuls[:1], ins)) if len(matmuls) == 1 else (None, None)
        if made is None or out is None or len(made.buffers) != 1 or _aval(made.buffers[0]) is None:
            continue
        items.append(_shape_item(target, hlo, listing, ins, matmuls[0], made, out, body))
    counts = Counter(i.answer.value for i in items)
    return [replace(i, weight=round(1 / counts[i.answer.value], 3)) for i in items]


def _shape_item(target: str, hlo: CompiledLayer, listing: Listing, fusion: Instruction, matmul: Instruction,
                made: Definition, out: Definition, body: list[str]) -> Item:
    answer = _aval(made.buffers[0])
    wrong = [(_aval(b), "fusion-result",
              f"gave what %{fusion.name} returns, read on its own line: the work fused after the multiply "
              f"makes that; %{matmul.name} in %{matmul.computation} makes {answer}") for b in out.buffers]
    for k, line in enumerate(matmul.operands):
        d = listing.definition(listing.at[line]) if line in listing.at else None
        for b in d.buffers if d is not None else ():
            wrong.append((_aval(b), "operand",
                          f"gave operand {k} of %{matmul.name}, %{d.name}, which the MXU reads; the question "
                          f"asks what it makes, {answer}"))
    misread = {}
    for value, rule, reason in wrong:
        if value is not None and value != answer and value not in misread:
            misread[value] = Misreading(reason, rule)
    differs = {_aval(b) for b in out.buffers} != {answer}
    returned = out.buffers[0].plain if len(out.buffers) == 1 else f"({', '.join(b.plain for b in out.buffers)})"
    feedback = (f"%{matmul.name}, the `{made.opcode}` in %{matmul.computation}, makes {answer}: the MXU's "
                f"result" + (f"; %{fusion.name} returns {returned} after the work fused onto it" if differs
                             else f", which %{fusion.name} returns as it is"))
    return Item(
        question=(f"%{fusion.name} (TPU compiled HLO line {fusion.line}) runs a matrix multiply on the MXU: type "
                  "the type (dtype and shape) of what the multiply makes, as its fused computation prints it."),
        layer=target, step="mxu-shape", skill="epilogue" if differs else "as-returned",
        card=(fusion.name, "mxu-shape", target),
        answer=Typed("aval", answer, misread=misread), feedback=feedback,
        context=(Note(which_compile(hlo)), Lines(target, fusion.line, fusion.line, cut=True, numbered=True),
                 *(Lines(target, *listing.computations[c], numbered=True) for c in body)),
        facts={"hlo_line": fusion.line, "instruction": fusion.name, "matmul": matmul.name})
