"""Misreadings tied to one primitive's semantics: its axes, dimension numbers, permutation or dtype param."""
from __future__ import annotations

from dumpgym.drills._avals import Aval, Eqn, axis_list, bits, is_float, short
from dumpgym.drills._misreadings import Found, rule


def _first(eqn: Eqn) -> Aval | None:
    return eqn.arrays[0].aval if eqn.arrays else None


# -- reductions ---------------------------------------------------------------------------

REDUCTIONS = ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or",
              "reduce_xor", "argmax", "argmin")


@rule(*REDUCTIONS)
def kept_reduced_axis(eqn: Eqn, answer: Aval) -> Found:
    """keepdims habit: the reduced axes stay as size 1."""
    x, axes = _first(eqn), eqn.ints("axes")
    if x is None or not axes:
        return None
    shape = [1 if i in axes else d for i, d in enumerate(x.shape)]
    return (answer.with_shape(shape),
            f"kept axis {axis_list(axes)} as size 1, as keepdims=True would; {eqn.primitive} removes it")


@rule(*REDUCTIONS)
def dropped_wrong_axis(eqn: Eqn, answer: Aval) -> Found:
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
def accumulator_dtype(eqn: Eqn, answer: Aval) -> Found:
    """Expected the reduction to hand back its f32 accumulator."""
    if not (is_float(answer.dtype) and bits(answer.dtype) == 16):
        return None
    return (answer.with_dtype("float32"),
            f"expected {eqn.primitive} to return an f32 accumulator; in a jaxpr it keeps "
            f"{short(answer.dtype)}, and any upcast is its own convert_element_type")


@rule("argmax", "argmin")
def index_dtype(eqn: Eqn, answer: Aval) -> Found:
    """Gave the values' dtype instead of the index dtype."""
    x = _first(eqn)
    if x is None or x.dtype == answer.dtype:
        return None
    return (answer.with_dtype(x.dtype),
            f"gave the values' dtype ({short(x.dtype)}); {eqn.primitive} returns positions, "
            f"in index_dtype={answer.dtype}")


@rule("argmax", "argmin", "iota")
def numpy_int64(eqn: Eqn, answer: Aval) -> Found:
    """NumPy habit: indices and aranges are int64."""
    if answer.dtype != "int32":
        return None
    return (answer.with_dtype("int64"),
            "NumPy habit: indices and aranges come out as int64; JAX uses int32 while x64 is off")


# -- dot_general --------------------------------------------------------------------------

def _dims(eqn: Eqn):
    try:
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        lhs, rhs = eqn.arrays[0].aval, eqn.arrays[1].aval
    except (KeyError, ValueError, TypeError, IndexError):
        return None
    lfree = [i for i in range(lhs.rank) if i not in lc and i not in lb]
    rfree = [i for i in range(rhs.rank) if i not in rc and i not in rb]
    return lhs, rhs, list(lc), list(rc), list(lb), list(rb), lfree, rfree


@rule("dot_general")
def kept_contracted_axis(eqn: Eqn, answer: Aval) -> Found:
    """Kept lhs's contracted axis in the output."""
    d = _dims(eqn)
    if d is None or not d[2]:
        return None
    lhs, rhs, lc, rc, lb, rb, lfree, rfree = d
    kept = [i for i in range(lhs.rank) if i not in lb]
    shape = [lhs.shape[i] for i in lb] + [lhs.shape[i] for i in kept] + [rhs.shape[i] for i in rfree]
    return (answer.with_shape(shape),
            f"kept lhs axis {axis_list(lc)} in the result; contracted axes are summed away")


@rule("dot_general")
def batch_axes_last(eqn: Eqn, answer: Aval) -> Found:
    """Put the batch axes after the free axes."""
    d = _dims(eqn)
    if d is None or not d[4]:
        return None
    lhs, rhs, lc, rc, lb, rb, lfree, rfree = d
    shape = [lhs.shape[i] for i in lfree] + [rhs.shape[i] for i in rfree] + [lhs.shape[i] for i in lb]
    return (answer.with_shape(shape),
            "put the batch axes last; dot_general writes batch axes first, then lhs's free axes, then rhs's")


@rule("dot_general")
def rhs_free_first(eqn: Eqn, answer: Aval) -> Found:
    """Put rhs's free axes before lhs's."""
    d = _dims(eqn)
    if d is None:
        return None
    lhs, rhs, lc, rc, lb, rb, lfree, rfree = d
    shape = [lhs.shape[i] for i in lb] + [rhs.shape[i] for i in rfree] + [lhs.shape[i] for i in lfree]
    return (answer.with_shape(shape),
            "put rhs's free axes before lhs's; the output lists lhs's free axes first")


@rule("dot_general")
def preferred_element_type(eqn: Eqn, answer: Aval) -> Found:
    """Misread preferred_element_type: the accumulator dtype or the operands' dtype."""
    d = _dims(eqn)
    if d is None:
        return None
    lhs = d[0]
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
def forgot_convert(eqn: Eqn, answer: Aval) -> Found:
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
def bf16_as_f16(eqn: Eqn, answer: Aval) -> Found:
    """Confused the two 16-bit floats."""
    other = {"bfloat16": "float16", "float16": "bfloat16"}.get(answer.dtype)
    if other is None:
        return None
    return (answer.with_dtype(other),
            f"confused bfloat16 with float16; new_dtype={answer.dtype} is {short(answer.dtype)}, and "
            "the two differ (bf16 keeps f32's exponent range, f16 keeps more mantissa)")


@rule("broadcast_in_dim")
def misread_broadcast_dimensions(eqn: Eqn, answer: Aval) -> Found:
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
def expand_dims_only(eqn: Eqn, answer: Aval) -> Found:
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
def inverted_permutation(eqn: Eqn, answer: Aval) -> Found:
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
def reversed_axes(eqn: Eqn, answer: Aval) -> Found:
    """Read any transpose as `.T`, a full reversal of the axes."""
    x, perm = _first(eqn), eqn.ints("permutation")
    if x is None or not perm:
        return None
    return (answer.with_shape(x.shape[::-1]),
            f"read it as .T, reversing every axis; permutation={axis_list(perm)} says otherwise")


@rule("iota")
def iota_as_arange(eqn: Eqn, answer: Aval) -> Found:
    """Read a many-axis iota as a 1-D arange."""
    dim = eqn.params.get("dimension")
    if answer.rank < 2 or not isinstance(dim, int) or not 0 <= dim < answer.rank:
        return None
    return (answer.with_shape([answer.shape[dim]]),
            f"read iota as a 1-D arange; it fills the whole shape and counts along dimension={dim}")


# -- comparisons, select, concatenate, slice, pad, math -----------------------------------

@rule("eq", "ne", "lt", "le", "gt", "ge")
def comparison_keeps_dtype(eqn: Eqn, answer: Aval) -> Found:
    """Expected a comparison to keep its operands' dtype."""
    x = _first(eqn) or (eqn.inputs[0].aval if eqn.inputs else None)
    if x is None or x.dtype == answer.dtype:
        return None
    return answer.with_dtype(x.dtype), f"kept the operands' {short(x.dtype)}; a comparison gives bool"


@rule("select_n")
def predicate_dtype(eqn: Eqn, answer: Aval) -> Found:
    """Took the predicate's dtype for the result."""
    if not eqn.inputs or eqn.inputs[0].aval.dtype == answer.dtype:
        return None
    pred = eqn.inputs[0].aval.dtype
    return (answer.with_dtype(pred),
            f"took the predicate's {short(pred)}; select_n returns the dtype of the cases it picks from")


@rule("concatenate")
def stacked(eqn: Eqn, answer: Aval) -> Found:
    """Read concatenate as stack: a new leading axis."""
    shapes = {x.aval.shape for x in eqn.arrays}
    if len(eqn.arrays) < 2 or len(shapes) != 1:
        return None
    return (answer.with_shape([len(eqn.arrays), *eqn.arrays[0].aval.shape]),
            "read it as jnp.stack, adding a new axis; concatenate joins along an existing one")


@rule("concatenate")
def joined_wrong_axis(eqn: Eqn, answer: Aval) -> Found:
    """Joined the operands along another axis."""
    dim, xs = eqn.params.get("dimension"), [x.aval for x in eqn.arrays]
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
def ignored_strides(eqn: Eqn, answer: Aval) -> Found:
    """Forgot that strides skip elements."""
    start, limit, strides = eqn.ints("start_indices"), eqn.ints("limit_indices"), eqn.ints("strides")
    if not start or not limit or not strides or all(s == 1 for s in strides):
        return None
    return (answer.with_shape([hi - lo for lo, hi in zip(start, limit)]),
            f"ignored strides={axis_list(strides)}; a stride of s keeps every s-th element")


@rule("slice")
def limit_as_size(eqn: Eqn, answer: Aval) -> Found:
    """Read limit_indices as the sizes."""
    start, limit = eqn.ints("start_indices"), eqn.ints("limit_indices")
    if not start or not limit or not any(start):
        return None
    return (answer.with_shape(limit),
            "read limit_indices as the sizes; the size is (limit - start) / stride")


@rule("pad")
def ignored_interior_padding(eqn: Eqn, answer: Aval) -> Found:
    """Counted only the low and high padding."""
    x, config = _first(eqn), eqn.params.get("padding_config")
    try:
        if x is None or not any(c[2] for c in config):
            return None
        shape = [n + lo + hi for n, (lo, hi, _) in zip(x.shape, config)]
    except (TypeError, ValueError, IndexError):
        return None
    return (answer.with_shape(shape),
            "counted only low and high padding; interior padding adds that many elements between neighbours")


COLLECTIVE_SUMS = ("psum", "psum2", "psum_invariant", "pmax", "pmin", "pmean")


@rule(*COLLECTIVE_SUMS)
def collective_as_total(eqn: Eqn, answer: Aval) -> Found:
    """Read a cross-device sum as a sum over the array's own elements."""
    if not answer.rank:
        return None
    return (answer.with_shape(()),
            f"read {eqn.primitive} as adding up every element; it combines the same array across "
            "devices, element by element, and keeps its shape")


TRANSCENDENTAL = ("exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos", "tan",
                  "sqrt", "rsqrt", "cbrt", "erf", "erfc", "erf_inv", "atan2", "pow")


@rule(*TRANSCENDENTAL)
def math_in_f32(eqn: Eqn, answer: Aval) -> Found:
    """Expected a math function to compute and return f32 for 16-bit input."""
    if not (is_float(answer.dtype) and bits(answer.dtype) == 16):
        return None
    return (answer.with_dtype("float32"),
            f"expected {eqn.primitive} to return f32; jaxpr math keeps {short(answer.dtype)}, and an "
            "upcast would show as convert_element_type")

