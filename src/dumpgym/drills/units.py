"""The unit drill: which instructions of the TPU compile run on the MXU, and which leave it idle?

A TPU core multiplies matrices on its MXU (a systolic array) and does elementwise and reduction
work on its vector units (the VPU). In compiled HLO the MXU's work is a `convolution` (how XLA's
TPU backend writes every dot_general) or a `dot`, bare or inside a fusion's computation. Each
option is an instruction of the TPU layer; the answer is read from the record (each TPU layer): the
opcodes of the instructions in the computations a fusion calls, transitively. Three questions
(`step`): `mxu` (which runs on the MXU?), `vpu` (which leaves it idle?), and, in a program
without a matrix multiply, `none` (none of them does).
"""
from __future__ import annotations

from dataclasses import dataclass

from dumpgym.drills import drill
from dumpgym.drills._avals import choice_item
from dumpgym.drills._tpu import MATMUL_OPCODES, Listing, short, which_compile
from dumpgym.drills.item import Item, Lines, Note, choice
from dumpgym.record import CompiledLayer, Instruction, ProgramRecord

# Instructions that only name or regroup buffers: never options, they do no work worth asking about.
_PLUMBING = frozenset({"parameter", "constant", "bitcast", "tuple", "gettupleelement"})
_DMA = frozenset({"copystart", "copydone"})
_NONE = "none of them: nothing here multiplies matrices"


@dataclass(frozen=True)
class _Unit:
    """An instruction as the drill sees it: where it runs and why, in this compile's terms."""

    ins: Instruction
    mxu: bool
    why: str

    @property
    def label(self) -> str:
        return f"%{self.ins.name} (line {self.ins.line})"


def _printed(listing: Listing, ins: Instruction) -> str:
    """The opcode as the line prints it (`copy-start`), as the compile stage recorded it."""
    return listing.hlo.printed(ins)


def _unit(listing: Listing, ins: Instruction) -> _Unit | None:
    """Where an instruction runs, or None for plumbing, custom kernels and the compiler's bookkeeping."""
    op = ins.opcode
    if op in MATMUL_OPCODES:
        return _Unit(ins, True, f"%{ins.name} is a `{_printed(listing, ins)}`: a matrix multiply, the MXU's work")
    if op in _DMA:
        return _Unit(ins, False, f"%{ins.name} is a `{_printed(listing, ins)}`, half of an asynchronous copy: "
                                 "the DMA engines move the data, no compute unit")
    if op == "copy":
        return _Unit(ins, False, f"%{ins.name} is a `copy`: it rewrites the buffer in another layout or memory "
                                 "space, data movement with no matrix multiply")
    if op == "fusion":
        body = listing.body(ins.line)
        ops = listing.opcodes_in(body)
        where = f"%{ins.name} calls %{body[0]}" if body else f"%{ins.name}"
        if ops & MATMUL_OPCODES:
            found = sorted(ops & MATMUL_OPCODES)
            return _Unit(ins, True, f"{where}, which holds a `{found[0]}`: a matrix multiply, the MXU's work")
        work = sorted(ops - _PLUMBING)
        if not work:
            return _Unit(ins, False, f"{where}, which only bitcasts: it reinterprets a buffer, no arithmetic at all")
        return _Unit(ins, False, f"{where}, which holds {', '.join('`' + o + '`' for o in work[:4])}: no convolution "
                                 "or dot, so nothing for the MXU; the vector units (VPU) do this work")
    if op in ("reduce", "allreduce", "customcall") or op in _PLUMBING:
        return None  # a custom call's kernel is opaque here; reductions stay in fusions' questions
    return _Unit(ins, False, f"%{ins.name} is a `{_printed(listing, ins)}` outside any fusion: elementwise work for "
                             "the vector units (VPU)")


def _nearest(units: list[_Unit], line: int, k: int = 3) -> list[_Unit]:
    return sorted(units, key=lambda u: (abs(u.ins.line - line), u.ins.line))[:k]


def _context(listing: Listing, hlo, units: list[_Unit], target: str) -> tuple:
    """Which compile, then each option's line and the computations it calls, in line order (references
    into the layer of compile target `target`)."""
    blocks = [Note(which_compile(hlo))]
    for u in sorted(units, key=lambda u: u.ins.line):
        blocks.append(Lines(target, u.ins.line, u.ins.line, cut=True))
        blocks += [Lines(target, *listing.computations[n]) for n in listing.body(u.ins.line)]
    return tuple(blocks)


@drill("units", number="11", title="which unit runs it",
       aim="Tell the TPU instructions that run on the MXU (matrix multiplies) from those that leave it idle.",
       per_program=4, cap_by=("layer",))
def unit_items(program: ProgramRecord) -> list[Item]:
    """One `mxu` item per matrix-multiplying instruction, one `vpu` item per fusion without one, and a
    `none` item for a program that has no matrix multiply at all; in each TPU layer. Its card is the
    step and the instruction it asks about (for `none`, the program has one), and the layer's target."""
    return [item for target, hlo in program.layers("tpu").items() for item in _layer_items(program, target, hlo)]


def _layer_items(program: ProgramRecord, target: str, hlo: CompiledLayer) -> list[Item]:
    if not hlo.has_facts:
        return []
    listing = Listing(hlo)
    # Options are what the chip runs as one step: fusions (nested ones too) and instructions outside
    # any fused computation; an `add` inside a fusion runs as part of that fusion.
    fused_bodies = {c for i in hlo.instructions if i.opcode == "fusion" for c in listing.body(i.line)}
    units = [u for u in (_unit(listing, i) for i in hlo.instructions
                         if i.opcode == "fusion" or i.computation not in fused_bodies) if u is not None]
    mxu = [u for u in units if u.mxu]
    idle = [u for u in units if not u.mxu]
    asked = mxu
    items = []
    for u in asked:
        wrong = _nearest(idle, u.ins.line)
        if len(wrong) >= 2:
            items.append(_item(program, target, hlo, listing, "mxu", u, wrong,
                               "Which of these instructions runs on the MXU, the TPU's matrix unit?"))
    # A vector-only fusion nested in a matrix-multiplying one runs as part of it: not asked on its own.
    inside_mxu = {c for u in mxu if u.ins.opcode == "fusion" for c in listing.body(u.ins.line)}
    for u in idle:
        if u.ins.opcode != "fusion" or "only bitcasts" in u.why or u.ins.computation in inside_mxu:
            continue
        wrong = _nearest(asked, u.ins.line)
        if 1 <= len(wrong) < 2:  # at least one option must do MXU work, or the question asks nothing
            wrong += _nearest([d for d in idle if d.ins.opcode in _DMA], u.ins.line, 3 - len(wrong))
        if len(wrong) >= 2:
            items.append(_item(program, target, hlo, listing, "vpu", u, wrong,
                               "Which of these instructions leaves the MXU idle: no matrix multiply, all vector work?"))
    if not mxu and len(idle) >= 3:
        options = _nearest([u for u in idle if u.ins.opcode == "fusion"] or idle, 0)
        wrong = [(o.label, "busy-mxu", o.why) for o in options]
        items.append(Item(
            question="Which of these instructions runs on the MXU, the TPU's matrix unit?", layer=target, step="none",
            card=("none", target), answer=choice(choice_item(_NONE, wrong, program.slug, "units-none")),
            context=_context(listing, hlo, options, target), facts={"hlo_line": options[0].ins.line}))
    return items


def _item(program: ProgramRecord, target: str, hlo: CompiledLayer, listing: Listing, step: str, answer: _Unit,
          wrong: list[_Unit], question: str) -> Item:
    rule = "idle-as-mxu" if step == "mxu" else "mxu-as-idle"
    return Item(
        question=question, layer=target, step=step, card=(answer.ins.name, step, target),
        answer=choice(choice_item(answer.label, [(w.label, rule, w.why) for w in wrong], program.slug, step,
                                  answer.ins.name)),
        context=_context(listing, hlo, [answer, *wrong], target),
        facts={"hlo_line": answer.ins.line, "instruction": answer.ins.name})
