"""A dot_general's dimension numbers at each layer, read from the record: the equation's params, its StableHLO
op's (`StablehloOp.dot`, read by MLIR), its compiled instruction's (`Instruction.dot`).

Each layer spells the same four axis lists its own way:

    jaxpr      dimension_numbers=(([2], [1]), ([0], [0]))
    StableHLO  batching_dims = [0] x [0], contracting_dims = [2] x [1]
    HLO        lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}

A `DotView` is one dot as one layer prints it: its dims, its operands' and output's types in
that layer's notation, and its line(s) with the output type masked, ready to be shown. Nothing here
parses a listing: every fact is the record's, and a line is only cut where the record places its parts
(a binder's column, the column past a compiled dot's dims, the printed result type that ends a StableHLO
line or follows an instruction's `%name = `).
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass
from math import prod

from dumpgym.drills._avals import axis_list
from dumpgym.drills._layers import text_lines
from dumpgym.record.dtypes import long as long_dtype
from dumpgym.record.schema import Aval, CompiledLayer, DumpDot, EqnFact, Instruction, StablehloOp

# What the page shows where the output type was: the drills ask for it, or read it off for the size-matching shortcut.
MASK = "?"


@dataclass(frozen=True)
class DotDims:
    """A dot_general's dimension numbers and its two operands' avals."""

    lhs_contracting: tuple[int, ...]
    rhs_contracting: tuple[int, ...]
    lhs_batch: tuple[int, ...]
    rhs_batch: tuple[int, ...]
    lhs: Aval
    rhs: Aval

    def text(self) -> str:
        """`dimension_numbers` exactly as the jaxpr prints it: `(([1], [0]), ([], []))`."""
        lc, rc, lb, rb = (axis_list(a) for a in (self.lhs_contracting, self.rhs_contracting,
                                                self.lhs_batch, self.rhs_batch))
        return f"(({lc}, {rc}), ({lb}, {rb}))"

    def operand(self, side: str) -> Aval:
        """The aval of one operand, `lhs` or `rhs`."""
        return self.lhs if side == "lhs" else self.rhs

    def rank(self, side: str) -> int:
        """The rank of one operand, `lhs` or `rhs`."""
        return self.operand(side).rank

    def axes(self, side: str, role: str) -> tuple[int, ...]:
        """The axis list for `side` (lhs or rhs) and `role` (contracting or batch)."""
        return getattr(self, f"{side}_{role}")

    def free(self, side: str) -> tuple[int, ...]:
        """Axes of one operand that are neither contracted nor batch: they survive into the output."""
        used = set(self.axes(side, "contracting")) | set(self.axes(side, "batch"))
        return tuple(i for i in range(self.rank(side)) if i not in used)

    def sizes(self, side: str, axes) -> tuple[int, ...]:
        """The sizes of some axes of one operand."""
        return tuple(self.operand(side).shape[a] for a in axes)

    def out_shape(self) -> tuple[int, ...]:
        """The output shape: batch axes (in lhs's order), then lhs's free axes, then rhs's."""
        return (self.sizes("lhs", self.lhs_batch) + self.sizes("lhs", self.free("lhs"))
                + self.sizes("rhs", self.free("rhs")))

    def output_axis(self, side: str, axis: int) -> int | None:
        """Which output axis `side`'s `axis` becomes, or None when it is contracted away."""
        batch = self.axes(side, "batch")
        if axis in batch:
            return batch.index(axis)
        n_batch, lhs_free = len(self.lhs_batch), self.free("lhs")
        if axis in self.free(side):
            offset = n_batch if side == "lhs" else n_batch + len(lhs_free)
            return offset + self.free(side).index(axis)
        return None

    def contracted_size(self) -> int:
        """How many products each output element sums: the product of the contracted sizes."""
        return prod(self.sizes("lhs", self.lhs_contracting))

    def skeleton(self) -> tuple:
        """What makes two dots read alike: the four axis lists and the operand ranks."""
        return (self.lhs_contracting, self.rhs_contracting, self.lhs_batch, self.rhs_batch,
                self.lhs.rank, self.rhs.rank)

    def is_plain_matmul(self) -> bool:
        """Whether this is `x @ w` on matrices: lhs contracts axis 1, rhs axis 0, no batch."""
        return self.skeleton() == ((1,), (0,), (), (), 2, 2)

    def weight(self) -> float:
        """How often the page should ask about this dot: one, plus one per thing that makes it harder to read,
        batch axes counting twice (they alone make an axis's role one of three, not two)."""
        off_habit = bool(self.lhs_contracting) and (
            self.lhs_contracting != (self.lhs.rank - 1,) or self.rhs_contracting != (0,))
        return 1.0 + 2 * bool(self.lhs_batch) + (len(self.lhs_contracting) > 1) + off_habit


def dot_dims(eqn: EqnFact) -> DotDims | None:
    """The dimension numbers of a dot_general equation, or None when its params do not hold them."""
    try:
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        lhs, rhs = eqn.arrays[0], eqn.arrays[1]
        return DotDims(tuple(lc), tuple(rc), tuple(lb), tuple(rb), lhs, rhs)
    except (KeyError, ValueError, TypeError, IndexError):
        return None


# ---------------------------------------------------------------------------------------------
# One dot as one layer prints it.


@dataclass(frozen=True)
class DotView:
    """A dot at one layer: its dims, its line(s) with the output masked, and the types in that layer's notation."""

    layer: str
    dims: DotDims
    lines: tuple[str, ...]
    operands: tuple[str, str]
    out: str
    out_dtype: str
    where: str = ""  # a note on where the line sits (the H100's: which Triton GEMM fusion holds the dot)

    def shown(self) -> list[str]:
        """The blocks the page shows: the dot's line(s), output masked, then the lhs and rhs operands (and
        where the line sits, if that is said)."""
        return ["\n".join(self.lines), *self.operands, *((self.where,) if self.where else ())]

    def type_text(self, shape) -> str:
        """A type of this dot's output dtype with another shape, written in this layer's notation."""
        return type_text(self.layer, tuple(shape), self.out_dtype)


def type_text(layer: str, shape: tuple[int, ...], dtype: str) -> str:
    """A type as `layer` prints it: `bf16[64,512]`, `tensor<64x512xbf16>`, `bf16[64,512]{1,0}`."""
    if layer == "stablehlo":
        return "tensor<" + "".join(f"{d}x" for d in shape) + dtype + ">"
    dims = f"{dtype}[{','.join(str(d) for d in shape)}]"
    if layer.startswith("hlo") and shape:
        return dims + "{" + ",".join(str(i) for i in reversed(range(len(shape)))) + "}"
    return dims


# The compiled text's own dtype names where they differ from the jaxpr's short ones.
_HLO_DTYPES = {"pred": "bool", "s4": "int4", "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64"}


def numpy_dtype(name: str) -> str:
    """The numpy name of a dtype as any layer prints it: `bf16`, `s8` (HLO's int8), `pred` -> `bfloat16`, `int8`, `bool`."""
    return _HLO_DTYPES.get(name) or long_dtype(name) or name


def _aval(shape: tuple[int, ...], dtype: str) -> Aval:
    return Aval(shape, numpy_dtype(dtype))


def jaxpr_view(eqn: EqnFact, jaxpr: str) -> DotView | None:
    """The equation as the jaxpr prints it, its output aval masked (where the record says its binder's type
    stands); None when the record does not hold one binder and two operands for it."""
    d = dot_dims(eqn)
    first, last = eqn.jaxpr_lines
    lines = text_lines(jaxpr)[first - 1:last]
    if d is None or len(eqn.outputs) != 1 or not lines or len(eqn.binders) != 1 or len(eqn.operand_names) != 2:
        return None
    binder, out = eqn.binders[0], str(eqn.outputs[0])
    # Inside shard_map the type carries its varying mesh axes: `f32[8,16]{V:x}`.
    if binder.type.split("{")[0] != out:
        return None
    start, end = binder.type_span
    masked = textwrap.dedent("\n".join((lines[0][:start] + MASK + lines[0][end:], *lines[1:]))).splitlines()
    lhs, rhs = eqn.operand_names
    return DotView("jaxpr", d, tuple(masked), (f"{lhs}:{d.lhs}", f"{rhs}:{d.rhs}"), out, out.split("[")[0])


def stablehlo_view(op: StablehloOp, line: str) -> DotView | None:
    """A `stablehlo.dot_general` op as its `line` prints it, its result type (which ends the line) masked; its
    dims and types as MLIR read them (`StablehloOp.dot`: None where a type is dynamic or has an encoding)."""
    dot, line = op.dot, line.rstrip()
    if dot is None or not line.endswith(dot.result.type):
        return None
    d = DotDims(dot.lhs_contracting, dot.rhs_contracting, dot.lhs_batch, dot.rhs_batch,
                _aval(dot.lhs.shape, dot.lhs.dtype), _aval(dot.rhs.shape, dot.rhs.dtype))
    masked = line[:-len(dot.result.type)].rstrip() + " " + MASK
    operands = (f"{dot.lhs.name}: {dot.lhs.type}", f"{dot.rhs.name}: {dot.rhs.type}")
    return DotView("stablehlo", d, (masked.strip(),), operands, dot.result.type, dot.result.dtype)


def before_view(dot: DumpDot, line: str) -> DotView | None:
    """A `dot` of a dump's HLO before optimisations as its `line` prints it, output type masked and cut past its dims,
    as a compiled dot's (`hlo_view`); its dims, result and operands as the record read them (`DumpFacts.dots`)."""
    head = f"%{dot.name} = "
    start = line.find(head) + len(head)
    kept = line[:dot.dims.printed_end]
    if start < len(head) or not dot.dims.printed_end or kept[start:start + len(dot.result.type)] != dot.result.type:
        return None
    d = DotDims(dot.dims.lhs_contracting, dot.dims.rhs_contracting, dot.dims.lhs_batch, dot.dims.rhs_batch,
                _aval(dot.lhs.dims, dot.lhs.dtype), _aval(dot.rhs.dims, dot.rhs.dtype))
    masked = kept[:start] + MASK + kept[start + len(dot.result.type):]
    if len(kept) < len(line.rstrip()):
        masked += ", …"
    operands = (f"%{dot.lhs.name} = {dot.lhs.type}", f"%{dot.rhs.name} = {dot.rhs.type}")
    return DotView("hlo-before", d, (masked.strip(),), operands, dot.result.type, dot.result.dtype)


def _array(hlo: CompiledLayer, ins: Instruction) -> tuple[str, tuple[int, ...], str] | None:
    """An instruction's result as printed, its dims and its dtype, where it is one array with a layout."""
    if ins.shape is None:
        return None
    shape = hlo.shapes[ins.shape]
    if len(shape.buffers) != 1 or hlo.buffers[shape.buffers[0]].text != shape.text:
        return None
    buffer = hlo.buffers[shape.buffers[0]]
    return shape.text, buffer.dims, buffer.dtype


def hlo_view(hlo: CompiledLayer, dot: Instruction, layer: str = "hlo") -> DotView | None:
    """The compiled `dot` instruction as its line prints it, output type masked and cut past its dims (the
    metadata's op_name often spells the einsum, `bhqd,bhkd->bhqk`); its dims, its result's and its two
    operands' types from the record (`Instruction.dot`, `shape`, `operands`)."""
    if dot.dot is None or not dot.dot.printed_end or len(dot.operands) != 2:
        return None
    at = {i.line: i for i in hlo.instructions if i.line in dot.operands}
    lhs, rhs = at[dot.operands[0]], at[dot.operands[1]]
    parsed = [_array(hlo, i) for i in (lhs, rhs, dot)]
    if None in parsed:
        return None
    (lt, ls, ldt), (rt, rs, rdt), (out, _, odt) = parsed
    d = DotDims(dot.dot.lhs_contracting, dot.dot.rhs_contracting, dot.dot.lhs_batch, dot.dot.rhs_batch,
                _aval(ls, ldt), _aval(rs, rdt))
    line = text_lines(hlo.text)[dot.line - 1]
    head = f"%{dot.name} = "  # a line prints `[ROOT ]%name = type opcode(...)`
    start = line.index(head) + len(head)
    kept = line[:dot.dot.printed_end]
    masked = kept[:start] + MASK + kept[start + len(out):]
    if len(kept) < len(line.rstrip()):
        masked += ", …"
    operands = (f"%{lhs.name} = {lt}", f"%{rhs.name} = {rt}")
    return DotView(layer, d, (masked.strip(),), operands, out, odt)

