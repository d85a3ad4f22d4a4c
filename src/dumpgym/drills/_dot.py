"""A dot_general's dimension numbers, read at each layer: the equation's params, its StableHLO line, its compiled line.

Each layer spells the same four axis lists its own way:

    jaxpr      dimension_numbers=(([2], [1]), ([0], [0]))
    StableHLO  batching_dims = [0] x [0], contracting_dims = [2] x [1]
    HLO        lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}

A `DotView` is one dot as one layer prints it: its dims, its operands' and output's types in
that layer's notation, and its line(s) with the output type masked, ready to be shown.
"""
from __future__ import annotations

import functools
import re
import textwrap
from dataclasses import dataclass
from math import prod

from dumpgym.drills._avals import axis_list
from dumpgym.record.dtypes import long as long_dtype
from dumpgym.record.schema import Aval, EqnFact

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


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(t) for t in re.findall(r"\d+", text))


# The compiled text's own dtype names where they differ from the jaxpr's short ones.
_HLO_DTYPES = {"pred": "bool", "s4": "int4", "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64"}


def numpy_dtype(name: str) -> str:
    """The numpy name of a dtype as any layer prints it: `bf16`, `s8` (HLO's int8), `pred` -> `bfloat16`, `int8`, `bool`."""
    return _HLO_DTYPES.get(name) or long_dtype(name) or name


def _aval(shape: tuple[int, ...], dtype: str) -> Aval:
    return Aval(shape, numpy_dtype(dtype))


_JAXPR_OUT = re.compile(r"^(\s*\w+):(\S+)( = dot_general\[)")
_JAXPR_OPERANDS = re.compile(r"\]\s+(\w+)\s+(\w+)\s*$")


def jaxpr_view(eqn: EqnFact, jaxpr: str) -> DotView | None:
    """The equation as the jaxpr prints it, its output aval masked; None when its lines are not one dot_general's."""
    d = dot_dims(eqn)
    first, last = eqn.jaxpr_lines
    lines = jaxpr.splitlines()[first - 1:last]
    if d is None or len(eqn.outputs) != 1 or not lines:
        return None
    # The printer wraps long equations, so the operands may sit on lines of their own.
    head, ops = _JAXPR_OUT.match(lines[0]), _JAXPR_OPERANDS.search("\n".join(lines))
    out = str(eqn.outputs[0])
    # Inside shard_map the type carries its varying mesh axes: `f32[8,16]{V:x}`.
    if head is None or ops is None or head.group(2).split("{")[0] != out:
        return None
    masked = textwrap.dedent("\n".join((f"{head.group(1)}:{MASK}{head.group(3)}{lines[0][head.end():]}",
                                         *lines[1:]))).splitlines()
    operands = (f"{ops.group(1)}:{d.lhs}", f"{ops.group(2)}:{d.rhs}")
    return DotView("jaxpr", d, tuple(masked), operands, out, out.split("[")[0])


_TENSOR = r"tensor<[^>]*>"
_SHLO = re.compile(r"stablehlo\.dot_general (%[\w#.]+), (%[\w#.]+),(.*?) : \((" + _TENSOR + r"), (" + _TENSOR
                   + r")\) -> (" + _TENSOR + r")\s*$")


def _tensor(text: str) -> tuple[tuple[int, ...], str]:
    parts = text[len("tensor<"):-1].split("x")
    return tuple(int(p) for p in parts[:-1]), parts[-1]


def _pair(attrs: str, name: str, sep: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    found = re.search(name + r" = \[([\d, ]*)\]" + sep + r"\[([\d, ]*)\]", attrs)
    return (_ints(found.group(1)), _ints(found.group(2))) if found else ((), ())


def stablehlo_view(line: str) -> DotView | None:
    """A `stablehlo.dot_general` line read: dims from `batching_dims`/`contracting_dims`, types from its signature."""
    found = _SHLO.search(line)
    # Dynamic sizes (`?`) and encodings (`tensor<8x16xf32, #enc>`) have no aval to drill.
    if found is None or re.search(r"[?,]", found.group(4) + found.group(5) + found.group(6)):
        return None
    attrs = found.group(3)
    (lb, rb), (lc, rc) = _pair(attrs, "batching_dims", " x "), _pair(attrs, "contracting_dims", " x ")
    (ls, ldt), (rs, rdt), (_, odt) = (_tensor(found.group(i)) for i in (4, 5, 6))
    d = DotDims(lc, rc, lb, rb, _aval(ls, ldt), _aval(rs, rdt))
    masked = line[:found.start(6)].rstrip() + " " + MASK
    operands = (f"{found.group(1)}: {found.group(4)}", f"{found.group(2)}: {found.group(5)}")
    return DotView("stablehlo", d, (masked.strip(),), operands, found.group(6), odt)


_HLO = re.compile(r"^\s*(?:ROOT )?(%[\w.\-]+) = (\S+) dot\((%[\w.\-]+), (%[\w.\-]+)\)")
_HLO_DIMS = re.compile(r"(lhs|rhs)_(batch|contracting)_dims=\{([\d,]*)\}")
_HLO_TYPE = re.compile(r"^(\w+)\[([\d,]*)\](\{[^}]*\})?$")


def hlo_dims(line: str) -> dict[str, tuple[int, ...]]:
    """The four axis lists of a compiled `dot` line, e.g. `{"lhs_contracting": (1,), "lhs_batch": (), ...}`."""
    dims = {f"{s}_{r}": () for s in ("lhs", "rhs") for r in ("batch", "contracting")}
    for side, role, axes in _HLO_DIMS.findall(line):
        dims[f"{side}_{role}"] = _ints(axes)
    return dims


def _hlo_type(text: str) -> tuple[tuple[int, ...], str] | None:
    found = _HLO_TYPE.match(text)
    return (_ints(found.group(2)), found.group(1)) if found else None


_DEFINES = re.compile(r"^\s*(?:ROOT )?(%[\w.\-]+) = (\S+) ", re.M)


@functools.lru_cache(maxsize=4)
def _listing(text: str) -> tuple[list[str], dict[str, str]]:
    """A compiled text's lines, and each instruction's type by its name (the first line defining it), read once."""
    types: dict[str, str] = {}
    for m in _DEFINES.finditer(text):
        types.setdefault(m.group(1), m.group(2))
    return text.splitlines(), types


def hlo_view(text: str, line_no: int, operand_lines: tuple[int, ...] = (), layer: str = "hlo") -> DotView | None:
    """The compiled `dot` on line `line_no` of `text`, its operands' types read from their own lines: the
    ones `operand_lines` names where given (inside a fusion, `%parameter_0` is defined once per computation),
    else the first line defining each name."""
    lines, defined = _listing(text)
    line = lines[line_no - 1]
    found = _HLO.match(line)
    if found is None:
        return None
    if len(operand_lines) == 2:
        own = {m.group(1): m.group(2) for n in operand_lines if (m := _DEFINES.match(lines[n - 1]))}
        defined = {**defined, **own}
    types = {name: defined.get(name) for name in (found.group(3), found.group(4))}
    parsed = [_hlo_type(t) if t else None for t in (types[found.group(3)], types[found.group(4)], found.group(2))]
    if None in parsed:
        return None
    (ls, ldt), (rs, rdt), (_, odt) = parsed
    dims = hlo_dims(line)
    d = DotDims(dims["lhs_contracting"], dims["rhs_contracting"], dims["lhs_batch"], dims["rhs_batch"],
                _aval(ls, ldt), _aval(rs, rdt))
    # Cut after the last dims attribute: the metadata's op_name often spells the einsum (`bhqd,bhkd->bhqk`).
    spans = [m.end() for m in _HLO_DIMS.finditer(line)] or [found.end()]
    kept = line[:max(spans)]
    masked = kept[:found.start(2)] + MASK + kept[found.end(2):]
    if len(kept) < len(line.rstrip()):
        masked += ", …"
    operands = tuple(f"{name} = {types[name]}" for name in (found.group(3), found.group(4)))
    return DotView(layer, d, (masked.strip(),), operands, found.group(2), odt)
