"""Misreadings of what a primitive computes: the axes it sums away and the dtype it returns.

Reductions, dot_general, element-type conversion, comparisons, select_n, cross-device sums and
math functions; `_layout_rules.py` holds the primitives that move or cut data.
"""
from __future__ import annotations

from typing import Callable

from dumpgym.drills._avals import axis_list, bits, is_float, is_half, short
from dumpgym.drills._dot import DotDims, dot_dims
from dumpgym.drills._distractor_rules import Found, ReadingRule, Rule, Where, rule, rule_on
from dumpgym.record.primitives import (COLLECTIVE_REDUCTIONS, COMPARISONS, INDEX_REDUCTIONS, REDUCTIONS,
                                TRANSCENDENTAL)
from dumpgym.record.schema import Aval, EqnFact


def _first(eqn: EqnFact) -> Aval | None:
    return eqn.arrays[0] if eqn.arrays else None


# -- reductions ---------------------------------------------------------------------------

# A reduction's operand and the axes it removes.
Reduction = tuple[Aval, tuple[int, ...]]


def _reduction(eqn: EqnFact) -> Reduction | None:
    """A reduction's operand and the axes it removes; None where either is missing."""
    x, axes = _first(eqn), eqn.ints("axes")
    return (x, axes) if x is not None and axes else None


def _partial_reduction(eqn: EqnFact) -> Reduction | None:
    """`_reduction`'s operand and axes, where the reduction keeps at least one axis: a slip about which
    axes go needs an axis left over."""
    found = _reduction(eqn)
    return found if found is not None and len(found[1]) < found[0].rank else None


@rule_on(_reduction, *REDUCTIONS)
def kept_reduced_axis(eqn: EqnFact, answer: Aval, found: Reduction) -> Found:
    """keepdims habit: the reduced axes stay as size 1."""
    x, axes = found
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


@rule_on(_partial_reduction, *REDUCTIONS)
def reduced_every_axis(eqn: EqnFact, answer: Aval, found: Reduction) -> Found:
    """Reduced over every axis, as `jnp.sum(x)` without an axis would."""
    x, axes = found
    return (answer.with_shape(()),
            f"reduced all {x.rank} axes of {x}, as jnp.{eqn.primitive.removeprefix('reduce_')}(x) without axis= "
            f"would; axes={axis_list(axes)} reduces only those")


@rule_on(_partial_reduction, *REDUCTIONS)
def dropped_wrong_axis(eqn: EqnFact, answer: Aval, found: Reduction) -> Found:
    """Counted the axes from the wrong end (or one off) and removed another axis."""
    x, axes = found
    r = x.rank
    for wrong, how in (({r - 1 - a for a in axes}, "counted axes from the other end"),
                       ({(a + 1) % r for a in axes}, "was one axis off"),
                       ({(a - 1) % r for a in axes}, "was one axis off")):
        if wrong != set(axes) and len(wrong) == len(axes):
            shape = [d for i, d in enumerate(x.shape) if i not in wrong]
            return (answer.with_shape(shape),
                    f"removed axis {axis_list(sorted(wrong))} instead of axes={axis_list(axes)}: {how}")
    return None


@rule_on(_reduction, *REDUCTIONS)
def reduced_one_axis_only(eqn: EqnFact, answer: Aval, found: Reduction) -> Found:
    """In a many-axis reduction, removed only the first of the listed axes."""
    x, axes = found
    if len(axes) < 2:
        return None
    shape = [d for i, d in enumerate(x.shape) if i != axes[0]]
    return (answer.with_shape(shape),
            f"removed axis {axes[0]} only; axes={axis_list(axes)} removes all {len(axes)} of them")


@rule("reduce_sum", "reduce_prod")
def accumulator_dtype(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Expected the reduction to hand back its f32 accumulator."""
    if not is_half(answer.dtype):
        return None
    return (answer.with_dtype("float32"),
            f"expected {eqn.primitive} to return an f32 accumulator; in a jaxpr it keeps "
            f"{short(answer.dtype)}, and any upcast is its own convert_element_type")


# -- dot_general --------------------------------------------------------------------------

def _dot_rule(*needs: str) -> Callable[[ReadingRule], Rule]:
    """Register a dot_general rule on the dot's `DotDims`, for dots whose axis lists named in `needs`
    (`lhs_batch`, `lhs_contracting`) are not empty: the slip it names needs such an axis."""
    def read(eqn: EqnFact) -> DotDims | None:
        d = dot_dims(eqn)
        return d if d is not None and all(getattr(d, axes) for axes in needs) else None
    return rule_on(read, "dot_general")


@_dot_rule("lhs_contracting")
def kept_contracted_axis(eqn: EqnFact, answer: Aval, d: DotDims) -> Found:
    """Kept lhs's contracted axis in the output."""
    lhs, rhs, lb = d.lhs, d.rhs, d.lhs_batch
    kept = [i for i in range(lhs.rank) if i not in lb]
    shape = [lhs.shape[i] for i in lb] + [lhs.shape[i] for i in kept] + [rhs.shape[i] for i in d.free("rhs")]
    return (answer.with_shape(shape),
            f"kept lhs axis {', '.join(f'{a} (size {lhs.shape[a]})' for a in d.lhs_contracting)} in the result; "
            "contracting axes are summed away")


@_dot_rule("lhs_batch")
def batch_axes_last(eqn: EqnFact, answer: Aval, d: DotDims) -> Found:
    """Put the batch axes after the free axes."""
    lhs, rhs = d.lhs, d.rhs
    shape = ([lhs.shape[i] for i in d.free("lhs")] + [rhs.shape[i] for i in d.free("rhs")]
             + [lhs.shape[i] for i in d.lhs_batch])
    return (answer.with_shape(shape),
            "put the batch axes last; dot_general writes batch axes first, then lhs's free axes, then rhs's")


@_dot_rule()
def rhs_free_first(eqn: EqnFact, answer: Aval, d: DotDims) -> Found:
    """Put rhs's free axes before lhs's."""
    lhs, rhs = d.lhs, d.rhs
    shape = ([lhs.shape[i] for i in d.lhs_batch] + [rhs.shape[i] for i in d.free("rhs")]
             + [lhs.shape[i] for i in d.free("lhs")])
    return (answer.with_shape(shape),
            "put rhs's free axes before lhs's; the output lists lhs's free axes first")


@_dot_rule()
def preferred_element_type(eqn: EqnFact, answer: Aval, d: DotDims) -> Found:
    """Misread preferred_element_type: the accumulator dtype or the operands' dtype."""
    if d.lhs.dtype != answer.dtype:
        return (answer.with_dtype(d.lhs.dtype),
                f"gave the operands' dtype; preferred_element_type={answer.dtype} sets the result's")
    if is_half(answer.dtype):
        return (answer.with_dtype("float32"),
                f"took the f32 accumulator for the result; preferred_element_type={answer.dtype} stores it "
                f"as {short(answer.dtype)}")
    return None


def dot_shape(d: DotDims, lhs: tuple[int, ...], rhs: tuple[int, ...]) -> list[int]:
    """dot_general's output shape for these dimension numbers and operand shapes: batch, lhs free, rhs free."""
    return ([lhs[i] for i in d.lhs_batch] + [lhs[i] for i in d.free("lhs")] + [rhs[i] for i in d.free("rhs")])


@_dot_rule()
def swapped_contracting_lists(eqn: EqnFact, answer: Aval, d: DotDims) -> Found:
    """Read the contracting pair the other way round: lhs's list for rhs and rhs's for lhs."""
    if d.lhs_contracting == d.rhs_contracting:
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


@_dot_rule("lhs_batch")
def batch_axes_repeated(eqn: EqnFact, answer: Aval, d: DotDims) -> Found:
    """Counted the batch axes as free on both sides, so they appear twice."""
    free = lambda side, x: [x.shape[i] for i in range(x.rank) if i not in d.axes(side, "contracting")]  # noqa: E731
    return (answer.with_shape(free("lhs", d.lhs) + free("rhs", d.rhs)),
            f"kept batch axes {axis_list(d.lhs_batch)} from both operands, as if they were free axes; "
            "batch axes pair up and appear once, at the front")


# -- element type, comparisons, select, math --------------------------------------------

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
    if not is_half(answer.dtype):
        return None
    return (answer.with_dtype("float32"),
            f"expected {eqn.primitive} to return f32; jaxpr math keeps {short(answer.dtype)}, and an "
            "upcast would show as convert_element_type")
