"""The shape oracle of a dump without a jaxpr: what comes out of one StableHLO op, or one compiled instruction?

Such a record has no equations, so the oracle asks of the ops whose output needs inference from what their own line
prints: a transpose (its permutation), a one-operand reduce (the axes it combines away), a concatenate (the axis it
joins along) and a slice (its bounds), at StableHLO and in each compiled layer (inside fusions too). Everything it
knows of an op is a fact of the record, read when the dump was added: a StableHLO op's operands, results, attribute
and combiner (`StablehloOp`, read by MLIR's bindings), a compiled instruction's `dimensions` or `slice`, operands
and result shapes (`Instruction`, `ResultShape.arrays`). The page shows the op's line with its result type masked (a
StableHLO line's signature holds the operand types; a compiled line, cut before its metadata, is followed by
`%name = TYPE` per operand, a reduce's init value left out). An op is asked only where its result type prints nowhere else
in what is shown and its dtype is an array's (a float or a signed integer, which the aval spelling names). Each
misreading is computed from the op's own attribute and operands, never invented; every item has one line of
`feedback`.
"""
from __future__ import annotations

from dataclasses import dataclass

from dumpgym.drills._dot import MASK, numpy_dtype
from dumpgym.drills._layers import text_lines
from dumpgym.record.schema import Aval, CompiledLayer, Instruction, ProgramRecord, StablehloOp, StablehloValue

_DTYPES = frozenset({"f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64"})
_HLO_DTYPES = frozenset({"f16", "bf16", "f32", "f64", "s8", "s16", "s32", "s64"})
# Each op, its skill, and how its layer spells the attribute that decides it.
OPS = {"stablehlo.transpose": ("transpose", "dims"), "stablehlo.reduce": ("reduction", "across dimensions"),
       "stablehlo.concatenate": ("concat", "dim"), "stablehlo.slice": ("slice-pad", "[start:limit:stride]")}
HLO_OPS = {"transpose": "transpose", "reduce": "reduction", "concatenate": "concat", "slice": "slice-pad"}


@dataclass(frozen=True)
class OpShape:
    """One op's shape question: its layer and line, the blocks shown (the masked line first), the operands, the
    attribute that decides it (a permutation, the reduced axes, the joined axis), the answer, the misreadings and
    why."""

    layer: str  # stablehlo, or a compile target id
    line: int
    op: str
    skill: str
    shown: tuple[str, ...]
    operands: tuple[Aval, ...]
    attribute: tuple[int, ...]
    answer: Aval
    misread: dict[str, tuple[str, str]]  # aval text -> (rule, reason)
    feedback: str


def _value_aval(value: StablehloValue) -> Aval | None:
    """A StableHLO value as an aval, or None for a dtype the aval spelling does not name (`i1`, `ui32`)."""
    return Aval(tuple(value.shape), numpy_dtype(value.dtype)) if value.dtype in _DTYPES else None


def _made(layer: str, line: int, op: str, skill: str, shown: tuple[str, ...], operands, answer: Aval, made
          ) -> OpShape | None:
    """The question, where the op's reading (`made`: misreadings, feedback, attribute) gives a misreading other
    than the answer."""
    if made is None:
        return None
    wrong, why, attribute = made
    misread = {}
    for aval, rule, reason in wrong:
        if not aval.same(answer) and str(aval) not in misread and all(d > 0 for d in aval.shape):
            misread[str(aval)] = (rule, reason)
    return OpShape(layer, line, op, skill, shown, tuple(operands), attribute, answer, misread, why) if misread else None


def op_shapes(program: ProgramRecord) -> list[OpShape]:
    """The shape questions of a record's StableHLO ops, then of each compiled layer's instructions, in line order."""
    lines = text_lines(program.stablehlo) if program.stablehlo else []
    out = [_lowered(op, lines[op.line - 1]) for op in program.stablehlo_ops
           if op.name in OPS and op.results and 0 < op.line <= len(lines)]
    for target, hlo in program.compiled.items():
        asked = [ins for ins in hlo.instructions if ins.opcode in HLO_OPS and (ins.dimensions or ins.slice)]
        if asked:  # read once per layer: a big model's module has thousands of reduces
            at, texts = {i.line: i for i in hlo.instructions}, text_lines(hlo.text)
            roots = {c.name: at.get(c.root) for c in hlo.computations}
            out += [_compiled(target, hlo, ins, at, texts, roots) for ins in asked]
    return [s for s in out if s is not None]


def _lowered(op: StablehloOp, text: str) -> OpShape | None:
    """The shape question of one StableHLO transpose, reduce or concatenate, from its recorded values and
    attribute; its line is shown with the result type that ends it masked."""
    skill, spelled = OPS[op.name]
    if len(op.results) != 1:
        return None
    operands = [_value_aval(v) for v in op.operands]
    answer = _value_aval(op.results[0])
    text, printed = text.rstrip(), op.results[0].type
    if answer is None or None in operands or not operands or not text.endswith(printed):
        return None
    masked = text[:-len(printed)].rstrip() + " " + MASK
    if printed in masked or any(answer.same(a) for a in operands):
        return None  # the answer is printed beside it
    if op.name == "stablehlo.transpose":
        made = transposed(operands, op.dimensions, answer, spelled)
    elif op.name == "stablehlo.reduce":
        made = reduced(operands, op.dimensions, op.combiner.removeprefix("stablehlo."), answer, spelled)
    elif op.name == "stablehlo.slice":
        made = sliced(operands, op.slice, answer, spelled)
    else:
        made = joined(operands, op.dimensions[0], answer, spelled) if len(op.dimensions) == 1 else None
    return _made("stablehlo", op.line, op.name, skill, (masked.strip(),), operands, answer, made)


def _array(hlo: CompiledLayer, ins: Instruction) -> tuple[str, Aval] | None:
    """An instruction's result type as printed and as an aval, where it is one array of a named dtype."""
    if ins.shape is None:
        return None
    shape = hlo.shapes[ins.shape]
    if len(shape.arrays) != 1:
        return None
    dtype, dims, _laid_out = shape.arrays[0]
    return (shape.text, Aval(tuple(dims), numpy_dtype(dtype))) if dtype in _HLO_DTYPES else None


def _compiled(target: str, hlo: CompiledLayer, ins: Instruction, at: dict[int, Instruction], texts: list[str],
              roots: dict[str, Instruction | None]) -> OpShape | None:
    """The shape question of one compiled transpose, reduce or concatenate (see the module's doc); `at`: the
    layer's instructions by line, `texts` its lines, `roots` each computation's ROOT."""
    result = _array(hlo, ins)
    found = [at.get(n) for n in ins.operands]
    read = [_array(hlo, i) for i in found if i is not None]
    if result is None or not read or len(read) != len(ins.operands) or None in read:
        return None
    (printed, answer), operands = result, [a for _t, a in read]
    # A reduce's init value is a scalar of the result's dtype; its type is not shown, so that a reduce to a
    # scalar (the commonest) is still asked: the operand reduced says the dtype.
    told = 1 if ins.opcode == "reduce" else len(read)
    short = ins.short(texts[ins.line - 1])  # without metadata and the other trailing attributes
    head = f"%{ins.name} = "
    if head not in short or any(answer.same(a) for a in operands[:told]):
        return None
    start = short.index(head) + len(head)
    if not short[start:].startswith(printed):
        return None
    shown = (short[:start] + MASK + short[start + len(printed):],
             *(f"%{i.name} = {t}" for i, (t, _a) in zip(found[:told], read[:told])))
    if any(printed in block for block in shown):
        return None  # the answer is printed beside it
    axes = ins.dimensions
    if ins.opcode == "transpose":
        made = transposed(operands, axes, answer, "dimensions")
    elif ins.opcode == "reduce":
        root = roots.get(ins.to_apply[0]) if ins.to_apply else None  # what the reduce combines with: `add`
        made = reduced(operands, axes, hlo.printed(root) or root.opcode, answer, "dimensions") if root else None
    elif ins.opcode == "slice":
        made = sliced(operands, ins.slice, answer, "slice")
    else:
        made = joined(operands, axes[0], answer, "dimensions") if len(axes) == 1 else None
    return _made(target, ins.line, ins.opcode, HLO_OPS[ins.opcode], shown, operands, answer, made)


def transposed(operands: list[Aval], perm: tuple[int, ...], answer: Aval, spelled: str):
    """A transpose's misreadings, feedback and permutation (`spelled`: how the layer names its permutation), or None
    where the permutation does not give `answer`."""
    if len(operands) != 1:
        return None
    (x,) = operands
    if sorted(perm) != list(range(x.rank)) or answer.shape != tuple(x.shape[p] for p in perm):
        return None
    inverse = tuple(perm.index(k) for k in range(x.rank))
    wrong = [(x, "ignored-permutation",
              f"kept the operand's shape; transpose moves operand axis {spelled}[i] to place i"),
             (x.with_shape(tuple(x.shape[p] for p in inverse)), "inverse-permutation",
              f"read {spelled} as where each operand axis goes; {spelled}[i] is the operand axis that becomes axis i"),
             (x.with_shape(tuple(reversed(x.shape))), "reversed-all",
              f"reversed every axis, as `.T` does; {spelled} names the order")]
    return wrong, f"{spelled} = {list(perm)}: result axis i is operand axis {spelled}[i], so {x} becomes {answer}", perm


def reduced(operands: list[Aval], axes: tuple[int, ...], combiner: str, answer: Aval, spelled: str):
    """A one-operand reduce's misreadings, feedback and axes (`combiner`: what it combines with), or None where the axes
    do not give `answer`."""
    if len(operands) != 2 or operands[1].rank != 0 or not combiner:
        return None
    x = operands[0]
    kept = tuple(d for k, d in enumerate(x.shape) if k not in axes)
    if answer.shape != kept or not axes or any(a >= x.rank for a in axes):
        return None
    wrong = [(x.with_shape(tuple(1 if k in axes else d for k, d in enumerate(x.shape))), "kept-dims",
              "kept the reduced axes as size 1, as keepdims=True would; a reduce drops them"),
             (x.with_shape(tuple(d for k, d in enumerate(x.shape) if k in axes)), "reduced-the-kept-axes",
              f"took {spelled} = {list(axes)} for the axes kept; they are the axes combined away"),
             (x.with_shape(()), "reduced-everything", "reduced every axis to a scalar; only the listed ones go"),
             (x, "kept-shape", f"kept the operand's shape; the {combiner} combines each listed axis away")]
    return wrong, (f"{spelled} = {list(axes)}: those axes of {x} are combined away by {combiner}, "
                   f"the rest kept in order: {answer}"), axes


def sliced(operands: list[Aval], bounds: tuple[tuple[int, int, int], ...], answer: Aval, spelled: str):
    """A slice's misreadings, feedback and bounds (flattened: start, limit, stride per axis), or None where the
    bounds do not give `answer` or keep the whole operand."""
    if len(operands) != 1 or len(bounds) != operands[0].rank or any(t < 1 for _s, _l, t in bounds):
        return None
    x = operands[0]
    sizes = tuple(-(-(limit - start) // stride) for start, limit, stride in bounds)
    if answer.shape != sizes or sizes == x.shape:
        return None
    wrong = [(x.with_shape(tuple(limit for _s, limit, _t in bounds)), "limit-as-size",
              f"took each limit in {spelled} for the axis's size; an axis keeps the elements from start to limit"),
             (x.with_shape(tuple(limit - start for start, limit, _t in bounds)), "ignored-stride",
              "kept every element from start to limit; a stride keeps one element in each stride"),
             (x.with_shape(tuple(-(-(limit - start + 1) // stride) for start, limit, stride in bounds)),
              "inclusive-limit", "counted the limit in; it is exclusive, as in a Python slice"),
             (x, "kept-shape", f"kept the operand's shape; {spelled} cuts each axis to its bounds")]
    why = f"{spelled}: each axis keeps (limit - start) / stride elements, rounded up, so {x} becomes {answer}"
    return wrong, why, tuple(v for axis in bounds for v in axis)


def joined(operands: list[Aval], dim: int, answer: Aval, spelled: str):
    """A concatenate's misreadings, feedback and axis, or None where `dim` does not give `answer`."""
    if len(operands) < 2:
        return None
    first = operands[0]
    if dim >= first.rank or any(a.rank != first.rank for a in operands):
        return None
    total = tuple(sum(a.shape[k] for a in operands) if k == dim else d for k, d in enumerate(first.shape))
    if answer.shape != total:
        return None
    wrong = [(first.with_shape((len(operands), *first.shape)), "stacked",
              "stacked the operands on a new leading axis, as jnp.stack does; concatenate joins along an existing one")]
    for other in range(first.rank):
        if other != dim and all(a.shape[k] == first.shape[k]
                                for a in operands for k in range(first.rank) if k != other):
            wrong.append((first.with_shape(tuple(sum(a.shape[k] for a in operands) if k == other else d
                                                 for k, d in enumerate(first.shape))), "wrong-axis",
                          f"joined along axis {other}; {spelled} = {dim} names the axis"))
    wrong.append((first, "first-operand",
                  f"took the first operand's shape; the operands' sizes along {spelled} add up"))
    why = f"{spelled} = {dim}: the operands' sizes along axis {dim} add up, the other axes stay: {answer}"
    return wrong, why, (dim,)
