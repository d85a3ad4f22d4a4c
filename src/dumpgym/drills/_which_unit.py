"""The `unit` step of the units drill: which of the chip's units does the bulk of one instruction's work.

Read from the record only: the instruction's opcode, the opcodes of the computations a fusion calls, a GEMM
fusion's emitter (`backend_kind`) and its dot's operand types, and each instruction's FLOPs as `cost/` counts
them from the record (a dot's or convolution's multiply-adds against the elementwise, reduction and
transcendental work fused around it). Asked only where the answer is plain:

- TPU: the MXU, for a fusion (or a bare `convolution` or `dot`) whose matrix multiply is most of its FLOPs;
  the VPU, for a fusion of arrays that holds only elementwise work (no reduce, slice, transpose or
  multiply, whose data movement other units share); a DMA engine, for a `copy-start`, which starts a
  transfer between memories and computes nothing.
- GPU: the tensor cores, for a GEMM fusion XLA emitted with Triton (or a cuBLAS call) whose operands are
  floating point, its multiply most of its FLOPs; the CUDA cores, for any other fusion that computes (no dot
  in its body): XLA's loop, input and reduction kernels run on the SMs' ordinary cores.

The options are the units the layer's items answer, always in one order, and every unit shares its
layer's weight equally: a reader who favours one unit, or one place, is right as often as chance.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from dumpgym.cost.estimate import ELEMENTWISE_OPCODES, TRANSCENDENTAL_OPCODES, CostError, layer_cost
from dumpgym.drills._tpu import MATMUL_OPCODES, Listing, which_compile
from dumpgym.drills.answer import Choice
from dumpgym.drills.item import Item, Lines, Note
from dumpgym.record.schema import CompiledLayer, Instruction

# Opcodes that name, view or place values without arithmetic: they may sit in a vector fusion's body.
_PLUMBING = frozenset({"parameter", "constant", "broadcast", "bitcast", "tuple", "gettupleelement"})
_VECTOR = ELEMENTWISE_OPCODES | TRANSCENDENTAL_OPCODES | _PLUMBING
_FLOAT = frozenset({"bf16", "f16", "f32", "f8e4m3fn", "f8e5m2"})


@dataclass(frozen=True)
class Unit:
    """One unit a step's option names: its key, the option's words, and what a reader who picks it wrongly
    took the instruction for."""

    key: str
    option: str
    misread: str  # what a reader who picks this unit wrongly took the instruction for, `{name}` the instruction
    rule: str


UNITS = {
    "tpu": (Unit("mxu", "the MXU, the matrix unit", "took %{name} for a matrix multiply", "mxu-for-other"),
            Unit("vpu", "the VPU, the vector unit", "took %{name} for elementwise work on arrays", "vpu-for-other"),
            Unit("dma", "a DMA engine, which moves bytes", "took %{name} for a transfer between memories",
                 "dma-for-compute")),
    "gpu": (Unit("tensor", "the tensor cores", "took %{name} for a GEMM", "tensor-for-other"),
            Unit("cuda", "the CUDA cores", "took %{name} for an ordinary kernel", "cuda-for-gemm")),
}
_CHIP = {"tpu": "the TPU", "gpu": "the GPU"}


@dataclass(frozen=True)
class _Answer:
    unit: str
    why: str


def unit_items(target: str, hlo: CompiledLayer) -> list[Item]:
    """One `unit` item per instruction of a launching computation (the entry, a loop's body) whose unit is
    plain, where the layer's items answer at least two units; each unit's items share one weight."""
    units = UNITS.get(hlo.backend)
    if units is None or not hlo.has_facts:
        return []
    try:
        costs = {c.line: c for c in layer_cost(hlo, target).instructions if c.place in ("entry", "control")}
    except CostError:
        return []
    listing = Listing(hlo)
    found = []
    for ins in hlo.instructions:
        if ins.line in costs:
            answer = _answer(hlo, listing, ins, costs[ins.line].work)
            if answer is not None:
                found.append((ins, answer))
    asked = [u for u in units if any(a.unit == u.key for _, a in found)]
    if len(asked) < 2:
        return []
    counts = {u.key: sum(a.unit == u.key for _, a in found) for u in asked}
    return [_item(target, hlo, listing, ins, answer, asked, round(1 / counts[answer.unit], 3))
            for ins, answer in found]


def _answer(hlo: CompiledLayer, listing: Listing, ins: Instruction, work) -> _Answer | None:
    """The unit that does the bulk of an instruction's work, and why, or None where that is not plain."""
    name, printed = ins.name, hlo.printed(ins)
    other = work.elementwise + work.reduction + work.transcendentals
    body = listing.body(ins.line) if ins.opcode == "fusion" else []
    ops = listing.opcodes_in(body)
    matmul = sorted(ops & MATMUL_OPCODES)
    if hlo.backend == "tpu":
        if ins.opcode == "copystart":
            return _Answer("dma", f"%{name} is a `{printed}`: it starts a copy between memories that a DMA engine "
                                  "carries out while other instructions run, and computes nothing")
        if work.unknown or not (ins.opcode in MATMUL_OPCODES or ins.opcode == "fusion"):
            return None
        if work.matmul and work.matmul >= other:
            what = f"calls %{body[0]}{_and_on(body)}, where a `{matmul[0]}`" if body else f"is a `{printed}`, which"
            return _Answer("mxu", f"%{name} {what} multiplies matrices: {work.matmul:,} FLOPs, to {other:,} of "
                                  "other work, on the MXU")
        if not work.matmul and other and ops <= _VECTOR and _is_array(listing, ins):
            kinds = sorted({hlo.printed_opcodes.get(o, o) for o in ops - _PLUMBING})
            return _Answer("vpu", f"%{name} calls %{body[0]}{_and_on(body)}, which holds only elementwise work "
                                  f"({', '.join(f'`{k}`' for k in kinds)}): the VPU's")
        return None
    if ins.opcode != "fusion" or work.unknown or not (work.matmul or other):
        return None
    if matmul:
        dots = [i for i in hlo.instructions if i.computation in body and i.opcode in MATMUL_OPCODES]
        floating = all(_dtype(listing, line) in _FLOAT for d in dots for line in d.operands)
        if ins.backend_kind.startswith("__triton") and floating and work.matmul >= other:
            return _Answer("tensor", f"%{name} calls %{body[0]}{_and_on(body)}, a `{matmul[0]}` XLA emitted as a "
                                     f"Triton GEMM (backend_config kind `{ins.backend_kind}`), {work.matmul:,} of "
                                     f"its {work.matmul + other:,} FLOPs: a GEMM runs on the tensor cores")
        return None
    return _Answer("cuda", f"%{name} calls %{body[0]}{_and_on(body)}, which holds no `dot`: a kernel of "
                           f"{'elementwise work and reductions' if work.reduction else 'elementwise work'} "
                           "that runs on the SMs' CUDA cores")


def _and_on(body: list[str]) -> str:
    """` (and what it calls)` where a fusion's computation calls others (a reducer, a nested fusion)."""
    return " (and what it calls)" if len(body) > 1 else ""


def _dtype(listing: Listing, line: int) -> str | None:
    d = listing.definition(listing.at[line]) if line in listing.at else None
    return d.buffers[0].dtype if d is not None and d.buffers else None


def _is_array(listing: Listing, ins: Instruction) -> bool:
    """Whether an instruction makes arrays, not one scalar (scalar work has a unit of its own on a TPU)."""
    d = listing.definition(ins)
    return d is not None and bool(d.buffers) and all(math.prod(b.dims) > 1 for b in d.buffers)


def _item(target: str, hlo: CompiledLayer, listing: Listing, ins: Instruction, answer: _Answer,
          asked: list[Unit], weight: float) -> Item:
    right = next(k for k, u in enumerate(asked) if u.key == answer.unit)
    why = answer.why[0].upper() + answer.why[1:] + "."
    shown = listing.body(ins.line) if ins.opcode == "fusion" else []
    where = f"{hlo.backend.upper()} HLO line {ins.line}"
    return Item(
        question=(f"Which unit of {_CHIP[hlo.backend]} does the bulk of the work of the instruction on {where} "
                  "(shown with any computation it calls)?"),
        layer=target, step="unit", skill=answer.unit, card=(ins.name, "unit", target), weight=weight,
        answer=Choice(tuple(u.option for u in asked), right,
                      tuple("" if k == right else f"{u.misread.format(name=ins.name)}."
                            for k, u in enumerate(asked)),
                      tuple("" if k == right else u.rule for k, u in enumerate(asked))),
        feedback=why,
        context=(Note(which_compile(hlo)), Lines(target, ins.line, ins.line, cut=True, numbered=True),
                 *(Lines(target, *listing.computations[c], cut=True, numbered=True) for c in shown)),
        facts={"hlo_line": ins.line, "instruction": ins.name})
