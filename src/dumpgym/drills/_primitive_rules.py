"""Misreadings tied to one primitive's semantics: its axes, dimension numbers, permutation or dtype param."""
from __future__ import annotations

from dumpgym.drills._avals import axis_list, bits, is_float, short
from dumpgym.drills._dot import DotDims, dot_dims
from dumpgym.drills._misreadings import Found, Where, rule
from dumpgym.primitives import (COLLECTIVE_REDUCTIONS, COMPARISONS, INDEX_REDUCTIONS, REDUCTIONS,
                                TRANSCENDENTAL)
from dumpgym.record import Aval, EqnFact


def _first(eqn: EqnFact) -> Aval | None:
    return eqn.arrays[0] if eqn.arrays else None


# -- reductions ---------------------------------------------------------------------------

@rule(*REDUCTIONS)
def kept_reduced_axis(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """keepdims habit: the reduced axes stay as size 1."""
    x, axes = _first(eqn), eqn.ints("axes")
    if x is None or not axes:
        return None
    shape = [1 if i in axes else d for i, d in enumerate(x.shape)]
    sizes = ", ".join(f"{a} (size {x.shape[a]})" for a in axes if a < x.rank)
    return (answer.with_shape(shape),
            f"kept axis {sizes} as size 1, as keepdims=True would; {eqn.primitive} removes it")


@rule(*INDEX_REDUCTIONS)
def index_dtype(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Gave the values' dtype instead of the index dtype."""
    x = _first(eqn)
    if x is None or x.dtype == answer.dtype:
        return None
    return (answer.with_dtype(x.dtype),
            f"gave the values' dtype ({short(x.dtype)}); {eqn.primitive} returns positions, "
            f"in index_dtype={answer.dtype}")


@rule(*REDUCTIONS)
def reduced_every_axis(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Reduced over every axis, as `jnp.sum(x)` without an axis would."""
    x, axes = _first(eqn), eqn.ints("axes")
    if x is None or not axes or len(axes) >= x.rank:
        return None
    return (answer.with_shape(()),
            f"reduced all {x.rank} axes of {x}, as jnp.{eqn.primitive.removeprefix('reduce_')}(x) without axis= "
            f"would; axes={axis_list(axes)} reduces only those")


@rule(*REDUCTIONS)
def dropped_wrong_axis(eqn: EqnFact, answer: Aval, where: Where) -> Found:
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


@rule(*REDUCTIONS)
def reduced_one_axis_only(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """In a many-axis reduction, removed only the first of the listed axes."""
    x, axes = _first(eqn), eqn.ints("axes")
    if x is None or not axes or len(axes) < 2:
        return None
    shape = [d for i, d in enumerate(x.shape) if i != axes[0]]
    return (answer.with_shape(shape),
            f"removed axis {axes[0]} only; axes={axis_list(axes)} removes all {len(axes)} of them")


@rule("reduce_sum", "reduce_prod")
def accumulator_dtype(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Expected the reduction to hand back its f32 accumulator."""
    if not (is_float(answer.dtype) and bits(answer.dtype) == 16):
        return None
    return (answer.with_dtype("float32"),
            f"expected {eqn.primitive} to return an f32 accumulator; in a jaxpr it keeps "
            f"{short(answer.dtype)}, and any upcast is its own convert_element_type")


# -- dot_general --------------------------------------------------------------------------

@rule("dot_general")
def kept_contracted_axis(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Kept lhs's contracted axis in the output."""
    d = dot_dims(eqn)
    if d is None or not d.lhs_contracting:
        return None
    lhs, rhs, lb = d.lhs, d.rhs, d.lhs_batch
    kept = [i for i in range(lhs.rank) if i not in lb]
    shape = [lhs.shape[i] for i in lb] + [lhs.shape[i] for i in kept] + [rhs.shape[i] for i in d.free("rhs")]
    return (answer.with_shape(shape),
            f"kept lhs axis {', '.join(f'{a} (size {lhs.shape[a]})' for a in d.lhs_contracting)} in the result; "
            "contracting axes are summed away")


@rule("dot_general")
def batch_axes_last(eqn: EqnFact, answer: Aval, where: Where) -> Found:
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
def rhs_free_first(eqn: EqnFact, answer: Aval, where: Where) -> Found:
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
def preferred_element_type(eqn: EqnFact, answer: Aval, where: Where) -> Found:
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


def dot_shape(d: DotDims, lhs: tuple[int, ...], rhs: tuple[int, ...]) -> list[int]:
    """dot_general's output shape for these dimension numbers and operand shapes: batch, lhs free, rhs free."""
    return ([lhs[i] for i in d.lhs_batch] + [lhs[i] for i in d.free("lhs")] + [rhs[i] for i in d.free("rhs")])


@rule("dot_general")
def swapped_contracting_lists(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Read the contracting pair the other way round: lhs's list for rhs and rhs's for lhs."""
    d = dot_dims(eqn)
    if d is None or d.lhs_contracting == d.rhs_contracting:
        return None
    lc, rc = d.rhs_contracting, d.lhs_contracting
    if any(a >= d.lhs.rank for a in lc) or any(a >= d.rhs.rank for a in rc):
        return None
    if [d.lhs.shape[a] for a in lc] != [d.rhs.shape[a] for a in rc]:
        return None
    swapped = DotDims(lc, rc, d.lhs_batch, d.rhs_batch, d.lhs, d.rhs)
    return (answer.with_shape(dot_shape(swapped, d.lhs.shape, d.rhs.shape)),
            f"contracted lhs axis {axis_list(lc)} with rhs axis {axis_list(rc)}: read the pair "
            f"{axis_list(d.lhs_contracting)}, {axis_list(d.rhs_contracting)} as rhs's list first")


@rule("dot_general")
def batch_axes_repeated(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Counted the batch axes as free on both sides, so they appear twice."""
    d = dot_dims(eqn)
    if d is None or not d.lhs_batch:
        return None
    free = lambda side, x: [x.shape[i] for i in range(x.rank) if i not in d.axes(side, "contracting")]  # noqa: E731
    return (answer.with_shape(free("lhs", d.lhs) + free("rhs", d.rhs)),
            f"kept batch axes {axis_list(d.lhs_batch)} from both operands, as if they were free axes; "
            "batch axes pair up and appear once, at the front")


# -- element type, transposes -------------------------------------------------------

@rule("convert_element_type")
def forgot_convert(eqn: EqnFact, answer: Aval, where: Where) -> Found:
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
def bf16_as_f16(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Confused the two 16-bit floats."""
    other = {"bfloat16": "float16", "float16": "bfloat16"}.get(answer.dtype)
    if other is None:
        return None
    return (answer.with_dtype(other),
            f"confused bfloat16 with float16; new_dtype={answer.dtype} is {short(answer.dtype)}, and "
            "the two differ (bf16 keeps f32's exponent range, f16 keeps more mantissa)")


@rule("transpose")
def inverted_permutation(eqn: EqnFact, answer: Aval, where: Where) -> Found:
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
def reversed_axes(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Read any transpose as `.T`, a full reversal of the axes."""
    x, perm = _first(eqn), eqn.ints("permutation")
    if x is None or not perm:
        return None
    return (answer.with_shape(x.shape[::-1]),
            f"read it as .T, reversing every axis; permutation={axis_list(perm)} says otherwise")


# -- comparisons, select, concatenate, slice, pad, math -----------------------------------

@rule(*COMPARISONS)
def comparison_keeps_dtype(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Expected a comparison to keep its operands' dtype."""
    x = _first(eqn) or (eqn.input_avals[0] if eqn.inputs else None)
    if x is None or x.dtype == answer.dtype:
        return None
    return answer.with_dtype(x.dtype), f"kept the operands' {short(x.dtype)}; a comparison gives bool"


@rule("select_n")
def predicate_dtype(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Took the predicate's dtype for the result."""
    if not eqn.inputs or eqn.inputs[0].dtype == answer.dtype:
        return None
    pred = eqn.inputs[0].dtype
    return (answer.with_dtype(pred),
            f"took the predicate's {short(pred)}; select_n returns the dtype of the cases it picks from")


@rule("concatenate")
def stacked(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Read concatenate as stack: a new leading axis."""
    shapes = {x.shape for x in eqn.arrays}
    if len(eqn.arrays) < 2 or len(shapes) != 1:
        return None
    return (answer.with_shape([len(eqn.arrays), *eqn.arrays[0].shape]),
            "read it as jnp.stack, adding a new axis; concatenate joins along an existing one")


@rule("concatenate")
def joined_wrong_axis(eqn: EqnFact, answer: Aval, where: Where) -> Found:
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
def ignored_strides(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Forgot that strides skip elements."""
    start, limit, strides = eqn.ints("start_indices"), eqn.ints("limit_indices"), eqn.ints("strides")
    if not start or not limit or not strides or all(s == 1 for s in strides):
        return None
    axis = next(i for i, s in enumerate(strides) if s != 1)
    return (answer.with_shape([hi - lo for lo, hi in zip(start, limit)]),
            f"ignored the stride {strides[axis]} on axis {axis}, counting all {limit[axis] - start[axis]} elements "
            f"from {start[axis]} to {limit[axis]}; it keeps every {strides[axis]}th one")


@rule("slice")
def limit_as_size(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Read limit_indices as the sizes."""
    start, limit = eqn.ints("start_indices"), eqn.ints("limit_indices")
    if not start or not limit or not any(start):
        return None
    axis = next(i for i, a in enumerate(start) if a)
    return (answer.with_shape(limit),
            f"read limit_indices as the sizes, so axis {axis} is {limit[axis]} long; the slice starts at "
            f"{start[axis]}, so only limit - start = {limit[axis] - start[axis]} positions (before any stride) remain")


@rule("slice")
def stride_rounded_down(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Divided (limit - start) by the stride and rounded down, dropping the last element picked."""
    start, limit, strides = eqn.ints("start_indices"), eqn.ints("limit_indices"), eqn.ints("strides")
    if not start or not limit or not strides:
        return None
    shape = [(hi - lo) // s for lo, hi, s in zip(start, limit, strides)]
    axes = [i for i, (a, b) in enumerate(zip(shape, answer.shape)) if a != b]
    if not axes:
        return None
    return (answer.with_shape(shape),
            f"rounded (limit - start) / stride down on axis {axes[0]}; a strided slice keeps the element at "
            f"start, so it is ceil(({limit[axes[0]]} - {start[axes[0]]}) / {strides[axes[0]]}) = {answer.shape[axes[0]]}")


@rule("slice")
def limit_inclusive(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Counted limit_indices as included, one element too many on each axis the slice cuts."""
    x, start, limit = _first(eqn), eqn.ints("start_indices"), eqn.ints("limit_indices")
    strides = eqn.ints("strides") or tuple(1 for _ in (start or ()))
    if x is None or not start or not limit:
        return None
    cut = [i for i, (lo, hi, n) in enumerate(zip(start, limit, x.shape)) if (lo, hi) != (0, n) and hi < n]
    if not cut:
        return None
    shape = [(hi - lo) // s + 1 if i in cut else d
             for i, (lo, hi, s, d) in enumerate(zip(start, limit, strides, answer.shape))]
    return (answer.with_shape(shape),
            f"counted limit {limit[cut[0]]} on axis {cut[0]} as included, like a Python range's end "
            "read as inclusive; the limit is one past the last element")


def _padding(eqn: EqnFact) -> tuple[Aval, list[tuple[int, int, int]]] | None:
    x, config = _first(eqn), eqn.param("padding_config")
    try:
        rows = [(int(lo), int(hi), int(i)) for lo, hi, i in config]
    except (TypeError, ValueError):
        return None
    return (x, rows) if x is not None and len(rows) == x.rank else None


@rule("pad")
def ignored_interior_padding(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Counted only the low and high padding."""
    found = _padding(eqn)
    if found is None or not any(r[2] for r in found[1]):
        return None
    x, rows = found
    axis = next(a for a, r in enumerate(rows) if r[2])
    return (answer.with_shape([n + lo + hi for n, (lo, hi, _) in zip(x.shape, rows)]),
            f"counted only low and high padding on axis {axis}; interior padding {rows[axis][2]} also goes "
            f"into each of its {x.shape[axis] - 1} gap(s) between neighbours")


@rule("pad")
def interior_after_every_element(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Added interior padding after each of the n elements, not in the n - 1 gaps between them."""
    found = _padding(eqn)
    if found is None or not any(r[2] for r in found[1]):
        return None
    x, rows = found
    axis = next(a for a, r in enumerate(rows) if r[2])
    shape = [n + lo + hi + n * i for n, (lo, hi, i) in zip(x.shape, rows)]
    return (answer.with_shape(shape),
            f"put interior padding {rows[axis][2]} after every one of the {x.shape[axis]} elements of axis "
            f"{axis}; it goes only between neighbours, {x.shape[axis] - 1} gap(s) here")


@rule("pad")
def padding_triple_misordered(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Read each padding_config row as (low, interior, high) instead of (low, high, interior)."""
    found = _padding(eqn)
    if found is None:
        return None
    x, rows = found
    shape = [n + lo + i + max(n - 1, 0) * hi for n, (lo, hi, i) in zip(x.shape, rows)]
    axis = next((a for a, r in enumerate(rows) if r[1] != r[2]), None)
    if axis is None:
        return None
    return (answer.with_shape(shape),
            f"read axis {axis}'s row {rows[axis]} as (low, interior, high); padding_config rows are "
            "(low, high, interior)")


@rule("pad")
def padding_rows_reversed(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Applied padding_config's rows to the axes in reverse order."""
    found = _padding(eqn)
    if found is None or found[1] == found[1][::-1]:
        return None
    x, rows = found
    shape = [n + lo + hi + max(n - 1, 0) * i for n, (lo, hi, i) in zip(x.shape, rows[::-1])]
    return (answer.with_shape(shape),
            f"applied padding_config's rows last axis first, so axis 0 got {rows[-1]}; row i pads axis i")


@rule(*COLLECTIVE_REDUCTIONS)
def collective_as_total(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Read a cross-device sum as a sum over the array's own elements."""
    if not answer.rank:
        return None
    return (answer.with_shape(()),
            f"read {eqn.primitive} as adding up every element; it combines the same array across "
            "devices, element by element, and keeps its shape")


@rule(*TRANSCENDENTAL)
def math_in_f32(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Expected a math function to compute and return f32 for 16-bit input."""
    if not (is_float(answer.dtype) and bits(answer.dtype) == 16):
        return None
    return (answer.with_dtype("float32"),
            f"expected {eqn.primitive} to return f32; jaxpr math keeps {short(answer.dtype)}, and an "
            "upcast would show as convert_element_type")


