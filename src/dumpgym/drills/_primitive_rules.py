"""Misreadings tied to one primitive's semantics: its axes, dimension numbers, permutation or dtype param."""
from __future__ import annotations

from dumpgym.drills._avals import axis_list, bits, is_float, short
from dumpgym.drills._dot import dot_dims
from dumpgym.drills._misreadings import Found, rule
from dumpgym.primitives import (COLLECTIVE_REDUCTIONS, COMPARISONS, INDEX_REDUCTIONS, REDUCTIONS,
                                TRANSCENDENTAL)
from dumpgym.record import Aval, EqnFact


def _first(eqn: EqnFact) -> Aval | None:
    return eqn.arrays[0] if eqn.arrays else None


# -- reductions ---------------------------------------------------------------------------

@rule(*REDUCTIONS)
def kept_reduced_axis(eqn: EqnFact, answer: Aval) -> Found:
    """keepdims habit: the reduced axes stay as size 1."""
    x, axes = _first(eqn), eqn.ints("axes")
    if x is None or not axes:
        return None
    shape = [1 if i in axes else d for i, d in enumerate(x.shape)]
    return (answer.with_shape(shape),
            f"kept axis {axis_list(axes)} as size 1, as keepdims=True would; {eqn.primitive} removes it")


@rule(*REDUCTIONS)
def dropped_wrong_axis(eqn: EqnFact, answer: Aval) -> Found:
    """Counted the axes from the wrong end (or one off) and removed another axis."""
    x, axes = _first(eqn), eqn.ints("axes")
    if x is None or not axes or len(axes) >= x.rank:
        return None
    r = x.rank
    for wrong, how in (({r - 1 - a for a in axes}, "counted axes from the other end"),
                       ({(a + 1) % r for a in axes}, "was one axis off"),
                       ({(a - 1) % r for a in axes}, "was one axis off")):
        if wrong != set(axes) and len(wrong) == len(axes):
            shape = [d for i, d in enumerate(x.shape) if i not in wrong]
            return (answer.with_shape(shape),
                    f"removed axis {axis_list(sorted(wrong))} instead of axes={axis_list(axes)}: {how}")
    return None


@rule("reduce_sum", "reduce_prod")
def accumulator_dtype(eqn: EqnFact, answer: Aval) -> Found:
    """Expected the reduction to hand back its f32 accumulator."""
    if not (is_float(answer.dtype) and bits(answer.dtype) == 16):
        return None
    return (answer.with_dtype("float32"),
            f"expected {eqn.primitive} to return an f32 accumulator; in a jaxpr it keeps "
            f"{short(answer.dtype)}, and any upcast is its own convert_element_type")


@rule(*INDEX_REDUCTIONS)
def index_dtype(eqn: EqnFact, answer: Aval) -> Found:
    """Gave the values' dtype instead of the index dtype."""
    x = _first(eqn)
    if x is None or x.dtype == answer.dtype:
        return None
    return (answer.with_dtype(x.dtype),
            f"gave the values' dtype ({short(x.dtype)}); {eqn.primitive} returns positions, "
            f"in index_dtype={answer.dtype}")


@rule(*INDEX_REDUCTIONS, "iota")
def numpy_int64(eqn: EqnFact, answer: Aval) -> Found:
    """NumPy habit: indices and aranges are int64."""
    if answer.dtype != "int32":
        return None
    return (answer.with_dtype("int64"),
            "NumPy habit: indices and aranges come out as int64; JAX uses int32 while x64 is off")


# -- dot_general --------------------------------------------------------------------------

@rule("dot_general")
def kept_contracted_axis(eqn: EqnFact, answer: Aval) -> Found:
    """Kept lhs's contracted axis in the output."""
    d = dot_dims(eqn)
    if d is None or not d.lhs_contracting:
        return None
    lhs, rhs, lb = d.lhs, d.rhs, d.lhs_batch
    kept = [i for i in range(lhs.rank) if i not in lb]
    shape = [lhs.shape[i] for i in lb] + [lhs.shape[i] for i in kept] + [rhs.shape[i] for i in d.free("rhs")]
    return (answer.with_shape(shape),
            f"kept lhs axis {axis_list(d.lhs_contracting)} in the result; contracted axes are summed away")


@rule("dot_general")
def batch_axes_last(eqn: EqnFact, answer: Aval) -> Found:
    """Put the batch axes after the free axes."""
    d = dot_dims(eqn)
    if d is None or not d.lhs_batch:
        return None
    lhs, rhs = d.lhs, d.rhs
    shape = ([lhs.shape[i] for i in d.free("lhs")] + [rhs.shape[i] for i in d.free("rhs")]
             + [lhs.shape[i] for i in d.lhs_batch])
    return (answer.with_shape(shape),
            "put the batch axes last; dot_general writes batch axes first, then lhs's free axes, then rhs's")


@rule("dot_general")
def rhs_free_first(eqn: EqnFact, answer: Aval) -> Found:
    """Put rhs's free axes before lhs's."""
    d = dot_dims(eqn)
    if d is None:
        return None
    lhs, rhs = d.lhs, d.rhs
    shape = ([lhs.shape[i] for i in d.lhs_batch] + [rhs.shape[i] for i in d.free("rhs")]
             + [lhs.shape[i] for i in d.free("lhs")])
    return (answer.with_shape(shape),
            "put rhs's free axes before lhs's; the output lists lhs's free axes first")


@rule("dot_general")
def preferred_element_type(eqn: EqnFact, answer: Aval) -> Found:
    """Misread preferred_element_type: the accumulator dtype or the operands' dtype."""
    d = dot_dims(eqn)
    if d is None:
        return None
    lhs = d.lhs
    if lhs.dtype != answer.dtype:
        return (answer.with_dtype(lhs.dtype),
                f"gave the operands' dtype; preferred_element_type={answer.dtype} sets the result's")
    if is_float(answer.dtype) and bits(answer.dtype) == 16:
        return (answer.with_dtype("float32"),
                f"took the f32 accumulator for the result; preferred_element_type={answer.dtype} stores it "
                f"as {short(answer.dtype)}")
    return None


# -- element type, broadcasts, transposes, iota -------------------------------------------

@rule("convert_element_type")
def forgot_convert(eqn: EqnFact, answer: Aval) -> Found:
    """Forgot the upcast or downcast."""
    x = _first(eqn)
    if x is None or x.dtype == answer.dtype:
        return None
    if is_float(x.dtype) and is_float(answer.dtype):
        what = "upcast" if bits(answer.dtype) > bits(x.dtype) else "downcast"
    else:
        what = "cast"
    return (x, f"forgot the {what}: convert_element_type turns {short(x.dtype)} into {short(answer.dtype)}")


@rule("convert_element_type")
def bf16_as_f16(eqn: EqnFact, answer: Aval) -> Found:
    """Confused the two 16-bit floats."""
    other = {"bfloat16": "float16", "float16": "bfloat16"}.get(answer.dtype)
    if other is None:
        return None
    return (answer.with_dtype(other),
            f"confused bfloat16 with float16; new_dtype={answer.dtype} is {short(answer.dtype)}, and "
            "the two differ (bf16 keeps f32's exponent range, f16 keeps more mantissa)")


@rule("broadcast_in_dim")
def misread_broadcast_dimensions(eqn: EqnFact, answer: Aval) -> Found:
    """Placed the operand's axes at other output positions than broadcast_dimensions says."""
    x, dims = _first(eqn), eqn.ints("broadcast_dimensions")
    if x is None or not dims or len(dims) != x.rank or len(dims) >= answer.rank:
        return None
    k, r = len(dims), answer.rank
    wrong = tuple(range(k)) if tuple(dims) != tuple(range(k)) else tuple(range(r - k, r))
    new_sizes = iter(d for i, d in enumerate(answer.shape) if i not in dims)
    placed = dict(zip(wrong, x.shape))
    shape = [placed[i] if i in placed else next(new_sizes) for i in range(r)]
    return (answer.with_shape(shape),
            f"put the operand's axes at positions {axis_list(wrong)}; broadcast_dimensions="
            f"{axis_list(dims)} says operand axis i lands at output axis broadcast_dimensions[i]")


@rule("broadcast_in_dim")
def expand_dims_only(eqn: EqnFact, answer: Aval) -> Found:
    """Read broadcast_in_dim as expand_dims: new axes of size 1 only."""
    x, dims = _first(eqn), eqn.ints("broadcast_dimensions")
    if x is None or dims is None or len(dims) != x.rank:
        return None
    placed = dict(zip(dims, x.shape))
    shape = [placed.get(i, 1) for i in range(answer.rank)]
    return (answer.with_shape(shape),
            "read it as expand_dims, adding size-1 axes only; the new axes are filled out to "
            f"the full shape {list(answer.shape)}")


@rule("transpose")
def inverted_permutation(eqn: EqnFact, answer: Aval) -> Found:
    """Applied the inverse permutation."""
    x, perm = _first(eqn), eqn.ints("permutation")
    if x is None or not perm or sorted(perm) != list(range(x.rank)):
        return None
    shape = [0] * x.rank
    for i, p in enumerate(perm):
        shape[p] = x.shape[i]
    return (answer.with_shape(shape),
            f"inverted permutation={axis_list(perm)}: output axis i is input axis permutation[i], "
            "not the other way round")


@rule("transpose")
def reversed_axes(eqn: EqnFact, answer: Aval) -> Found:
    """Read any transpose as `.T`, a full reversal of the axes."""
    x, perm = _first(eqn), eqn.ints("permutation")
    if x is None or not perm:
        return None
    return (answer.with_shape(x.shape[::-1]),
            f"read it as .T, reversing every axis; permutation={axis_list(perm)} says otherwise")


@rule("iota")
def iota_as_arange(eqn: EqnFact, answer: Aval) -> Found:
    """Read a many-axis iota as a 1-D arange."""
    dim = eqn.param("dimension")
    if answer.rank < 2 or not isinstance(dim, int) or not 0 <= dim < answer.rank:
        return None
    return (answer.with_shape([answer.shape[dim]]),
            f"read iota as a 1-D arange; it fills the whole shape and counts along dimension={dim}")


# -- comparisons, select, concatenate, slice, pad, math -----------------------------------

@rule(*COMPARISONS)
def comparison_keeps_dtype(eqn: EqnFact, answer: Aval) -> Found:
    """Expected a comparison to keep its operands' dtype."""
    x = _first(eqn) or (eqn.input_avals[0] if eqn.inputs else None)
    if x is None or x.dtype == answer.dtype:
        return None
    return answer.with_dtype(x.dtype), f"kept the operands' {short(x.dtype)}; a comparison gives bool"


@rule("select_n")
def predicate_dtype(eqn: EqnFact, answer: Aval) -> Found:
    """Took the predicate's dtype for the result."""
    if not eqn.inputs or eqn.inputs[0].dtype == answer.dtype:
        return None
    pred = eqn.inputs[0].dtype
    return (answer.with_dtype(pred),
            f"took the predicate's {short(pred)}; select_n returns the dtype of the cases it picks from")


@rule("concatenate")
def stacked(eqn: EqnFact, answer: Aval) -> Found:
    """Read concatenate as stack: a new leading axis."""
    shapes = {x.shape for x in eqn.arrays}
    if len(eqn.arrays) < 2 or len(shapes) != 1:
        return None
    return (answer.with_shape([len(eqn.arrays), *eqn.arrays[0].shape]),
            "read it as jnp.stack, adding a new axis; concatenate joins along an existing one")


@rule("concatenate")
def joined_wrong_axis(eqn: EqnFact, answer: Aval) -> Found:
    """Joined the operands along another axis."""
    dim, xs = eqn.param("dimension"), list(eqn.arrays)
    if not isinstance(dim, int) or len(xs) < 2:
        return None
    for other in (a for a in range(answer.rank) if a != dim):
        if all(x.shape[i] == xs[0].shape[i] for x in xs for i in range(answer.rank) if i != other):
            shape = list(xs[0].shape)
            shape[other] = sum(x.shape[other] for x in xs)
            return (answer.with_shape(shape),
                    f"joined along axis {other}; dimension={dim} names the axis that grows")
    return None


@rule("slice")
def ignored_strides(eqn: EqnFact, answer: Aval) -> Found:
    """Forgot that strides skip elements."""
    start, limit, strides = eqn.ints("start_indices"), eqn.ints("limit_indices"), eqn.ints("strides")
    if not start or not limit or not strides or all(s == 1 for s in strides):
        return None
    return (answer.with_shape([hi - lo for lo, hi in zip(start, limit)]),
            f"ignored strides={axis_list(strides)}; a stride of s keeps every s-th element")


@rule("slice")
def limit_as_size(eqn: EqnFact, answer: Aval) -> Found:
    """Read limit_indices as the sizes."""
    start, limit = eqn.ints("start_indices"), eqn.ints("limit_indices")
    if not start or not limit or not any(start):
        return None
    return (answer.with_shape(limit),
            "read limit_indices as the sizes; the size is (limit - start) / stride")


@rule("pad")
def ignored_interior_padding(eqn: EqnFact, answer: Aval) -> Found:
    """Counted only the low and high padding."""
    x, config = _first(eqn), eqn.param("padding_config")
    try:
        if x is None or not any(c[2] for c in config):
            return None
        shape = [n + lo + hi for n, (lo, hi, _) in zip(x.shape, config)]
    except (TypeError, ValueError, IndexError):
        return None
    return (answer.with_shape(shape),
            "counted only low and high padding; interior padding adds that many elements between neighbours")


@rule(*COLLECTIVE_REDUCTIONS)
def collective_as_total(eqn: EqnFact, answer: Aval) -> Found:
    """Read a cross-device sum as a sum over the array's own elements."""
    if not answer.rank:
        return None
    return (answer.with_shape(()),
            f"read {eqn.primitive} as adding up every element; it combines the same array across "
            "devices, element by element, and keeps its shape")


@rule(*TRANSCENDENTAL)
def math_in_f32(eqn: EqnFact, answer: Aval) -> Found:
    """Expected a math function to compute and return f32 for 16-bit input."""
    if not (is_float(answer.dtype) and bits(answer.dtype) == 16):
        return None
    return (answer.with_dtype("float32"),
            f"expected {eqn.primitive} to return f32; jaxpr math keeps {short(answer.dtype)}, and an "
            "upcast would show as convert_element_type")

