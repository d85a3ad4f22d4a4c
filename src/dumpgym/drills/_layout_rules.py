"""Misreadings of how a primitive moves or cuts data: its permutation, dimension, slice bounds or padding.

Transpose, concatenate, slice and pad; `_arithmetic_rules.py` holds the primitives that compute.
"""
from __future__ import annotations

from dumpgym.drills._avals import axis_list
from dumpgym.drills._distractor_rules import Found, Where, rule, rule_on
from dumpgym.record.schema import Aval, EqnFact


def _first(eqn: EqnFact) -> Aval | None:
    return eqn.arrays[0] if eqn.arrays else None


# -- transpose, concatenate, slice, pad ------------------------------------------------

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


# A pad's operand and its padding_config rows, (low, high, interior) for each axis; with interior
# padding, also the first axis that has some.
Padding = tuple[Aval, list[tuple[int, int, int]]]
InteriorPadding = tuple[Aval, list[tuple[int, int, int]], int]


def _padding(eqn: EqnFact) -> Padding | None:
    """The pad's operand and rows; None where the config does not read as one row of ints an axis."""
    x, config = _first(eqn), eqn.param("padding_config")
    try:
        rows = [(int(lo), int(hi), int(i)) for lo, hi, i in config]
    except (TypeError, ValueError):
        return None
    return (x, rows) if x is not None and len(rows) == x.rank else None


def _interior_padding(eqn: EqnFact) -> InteriorPadding | None:
    """`_padding`'s operand and rows, and the first axis with interior padding; None where no axis has any."""
    found = _padding(eqn)
    if found is None or not any(r[2] for r in found[1]):
        return None
    x, rows = found
    return x, rows, next(a for a, r in enumerate(rows) if r[2])


@rule_on(_interior_padding, "pad")
def ignored_interior_padding(eqn: EqnFact, answer: Aval, found: InteriorPadding) -> Found:
    """Counted only the low and high padding."""
    x, rows, axis = found
    return (answer.with_shape([n + lo + hi for n, (lo, hi, _) in zip(x.shape, rows)]),
            f"counted only low and high padding on axis {axis}; interior padding {rows[axis][2]} also goes "
            f"into each of its {x.shape[axis] - 1} gap(s) between neighbours")


@rule_on(_interior_padding, "pad")
def interior_after_every_element(eqn: EqnFact, answer: Aval, found: InteriorPadding) -> Found:
    """Added interior padding after each of the n elements, not in the n - 1 gaps between them."""
    x, rows, axis = found
    shape = [n + lo + hi + n * i for n, (lo, hi, i) in zip(x.shape, rows)]
    return (answer.with_shape(shape),
            f"put interior padding {rows[axis][2]} after every one of the {x.shape[axis]} elements of axis "
            f"{axis}; it goes only between neighbours, {x.shape[axis] - 1} gap(s) here")


@rule_on(_padding, "pad")
def padding_triple_misordered(eqn: EqnFact, answer: Aval, found: Padding) -> Found:
    """Read each padding_config row as (low, interior, high) instead of (low, high, interior)."""
    x, rows = found
    shape = [n + lo + i + max(n - 1, 0) * hi for n, (lo, hi, i) in zip(x.shape, rows)]
    axis = next((a for a, r in enumerate(rows) if r[1] != r[2]), None)
    if axis is None:
        return None
    return (answer.with_shape(shape),
            f"read axis {axis}'s row {rows[axis]} as (low, interior, high); padding_config rows are "
            "(low, high, interior)")


@rule_on(_padding, "pad")
def padding_rows_reversed(eqn: EqnFact, answer: Aval, found: Padding) -> Found:
    """Applied padding_config's rows to the axes in reverse order."""
    x, rows = found
    if rows == rows[::-1]:
        return None
    shape = [n + lo + hi + max(n - 1, 0) * i for n, (lo, hi, i) in zip(x.shape, rows[::-1])]
    return (answer.with_shape(shape),
            f"applied padding_config's rows last axis first, so axis 0 got {rows[-1]}; row i pads axis i")
