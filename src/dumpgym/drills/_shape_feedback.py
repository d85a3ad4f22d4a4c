"""Why an equation's output is what it is, in one line: the shape oracle's feedback, computed from the equation.

A table keyed by primitive, like the distractor rules: each entry reads the equation's operands and params
and says which of them decide the output. A primitive without an entry gets the elementwise line (each
axis the operands' common size, a size-1 axis stretching) or, for a container, what its body returns.
"""
from __future__ import annotations

import math
from typing import Callable

from dumpgym.drills._avals import short
from dumpgym.drills._dot import dot_dims
from dumpgym.record.primitives import COMPARISONS, INDEX_REDUCTIONS, REDUCTIONS
from dumpgym.record.schema import Aval, EqnFact

Explain = Callable[[EqnFact, Aval], "str | None"]
explainers: dict[str, Explain] = {}


def explains(*primitives: str) -> Callable[[Explain], Explain]:
    """Register a one-line explanation for the named primitives."""
    def register(fn: Explain) -> Explain:
        for p in primitives:
            explainers[p] = fn
        return fn
    return register


def _dims(shape) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


def broadcasts(x: Aval, answer: Aval) -> bool:
    """Whether `x` reaches `answer`'s shape by stretching size-1 axes only (an elementwise operand)."""
    return x.rank == answer.rank and all(d in (a, 1) for d, a in zip(x.shape, answer.shape))


@explains("dot_general")
def _dot(eqn: EqnFact, answer: Aval) -> str | None:
    d = dot_dims(eqn)
    if d is None:
        return None
    parts = [f"batch {_dims(d.sizes('lhs', d.lhs_batch))}", f"lhs's free {_dims(d.sizes('lhs', d.free('lhs')))}",
             f"rhs's free {_dims(d.sizes('rhs', d.free('rhs')))}"]
    summed = d.sizes("lhs", d.lhs_contracting)
    return (f"dot_general writes {', then '.join(parts)} and sums away the contracted "
            f"{' x '.join(map(str, summed)) or 'nothing'}, in {short(answer.dtype)}: {answer}")


def _operand_and(eqn: EqnFact, name: str) -> tuple[Aval, tuple[int, ...]] | None:
    """The first array operand and an int-tuple param (axes, permutation, dimensions), or None."""
    ints = eqn.ints(name)
    return (eqn.arrays[0], tuple(ints)) if eqn.arrays and ints is not None else None


@explains(*REDUCTIONS, *INDEX_REDUCTIONS)
def _reduction(eqn: EqnFact, answer: Aval) -> str | None:
    found = _operand_and(eqn, "axes")
    if found is None:
        return None
    x, axes = found
    dtype = (f"; it returns positions in {short(answer.dtype)}" if eqn.primitive in INDEX_REDUCTIONS
             else "")
    return f"{eqn.primitive} removes axes {axes} of {x}{dtype}: {answer}"


@explains("transpose")
def _transpose(eqn: EqnFact, answer: Aval) -> str | None:
    found = _operand_and(eqn, "permutation")
    return None if found is None else (f"output axis i is input axis permutation[i]: {found[1]} of "
                                       f"{_dims(found[0].shape)} gives {answer}")


@explains("concatenate")
def _concatenate(eqn: EqnFact, answer: Aval) -> str | None:
    dim = eqn.param("dimension")
    if not isinstance(dim, int) or not eqn.arrays:
        return None
    sizes = [x.shape[dim] for x in eqn.arrays]
    return (f"the sizes along dimension={dim} add up, {' + '.join(map(str, sizes))} = {sum(sizes)}, "
            f"the other axes stay: {answer}")


@explains("slice")
def _slice(eqn: EqnFact, answer: Aval) -> str | None:
    start, limit = eqn.ints("start_indices"), eqn.ints("limit_indices")
    if not start or not limit:
        return None
    strides = eqn.ints("strides") or (1,) * len(start)
    each = ", ".join(f"ceil(({hi} - {lo}) / {s}) = {math.ceil((hi - lo) / s)}" if s != 1 else f"{hi} - {lo} = {hi - lo}"
                     for lo, hi, s in zip(start, limit, strides))
    return f"each axis keeps limit - start elements (every stride-th): {each}: {answer}"


@explains("pad")
def _pad(eqn: EqnFact, answer: Aval) -> str | None:
    config, x = eqn.param("padding_config"), eqn.arrays[0] if eqn.arrays else None
    try:
        rows = [(int(lo), int(hi), int(i)) for lo, hi, i in config]
    except (TypeError, ValueError):
        return None
    if x is None or len(rows) != x.rank:
        return None
    each = ", ".join(f"{n} + {lo} + {hi} + {i} x {max(n - 1, 0)} = {n + lo + hi + i * max(n - 1, 0)}"
                     for n, (lo, hi, i) in zip(x.shape, rows))
    return f"each axis grows by low + high + interior x (n - 1): {each}: {answer}"


@explains("convert_element_type")
def _convert(eqn: EqnFact, answer: Aval) -> str | None:
    return f"convert_element_type changes only the dtype, to new_dtype={answer.dtype}: {answer}"


@explains(*COMPARISONS)
def _comparison(eqn: EqnFact, answer: Aval) -> str | None:
    return f"a comparison gives bool, at the operands' common shape {_dims(answer.shape)}: {answer}"


@explains("squeeze")
def _squeeze(eqn: EqnFact, answer: Aval) -> str | None:
    found = _operand_and(eqn, "dimensions")
    return None if found is None else f"squeeze removes the size-1 axes dimensions={found[1]} of {found[0]}: {answer}"


@explains("expand_dims")
def _expand(eqn: EqnFact, answer: Aval) -> str | None:
    return f"expand_dims inserts size-1 axes at dimensions={eqn.param('dimensions')}: {answer}"


@explains("gather")
def _gather(eqn: EqnFact, answer: Aval) -> str | None:
    sizes = eqn.ints("slice_sizes")
    if sizes is None or len(eqn.arrays) < 2:
        return None
    return (f"gather keeps the indices' batch axes ({eqn.arrays[1]} without its last axis) and each window of "
            f"slice_sizes={tuple(sizes)} without its collapsed axes, placed by offset_dims: {answer}")


@explains("scatter", "scatter-add", "scatter_add", "scatter-mul", "scatter-min", "scatter-max",
          "dynamic_update_slice")
def _scatter(eqn: EqnFact, answer: Aval) -> str | None:
    if not eqn.arrays:
        return None
    return f"{eqn.primitive} writes into its first operand and returns an array of the same aval: {answer}"


@explains("shard_map")
def _shard_map(eqn: EqnFact, answer: Aval) -> str | None:
    return (f"shard_map hands back the global array: out_specs={eqn.param('out_specs')} lays the body's "
            f"per-device blocks side by side (or keeps one copy where it replicates): {answer}")


@explains("select_n")
def _select(eqn: EqnFact, answer: Aval) -> str | None:
    return f"select_n returns the cases' dtype at their common shape, whatever the predicate's dtype: {answer}"


def shape_feedback(eqn: EqnFact, answer: Aval) -> str:
    """One line saying what decides this equation's output, ending with the output itself."""
    fn = explainers.get(eqn.primitive)
    said = fn(eqn, answer) if fn is not None else None
    if said is not None:
        return said
    if eqn.has_subjaxpr:
        return f"a {eqn.primitive} returns what its body returns, so work through the body: {answer}"
    if eqn.arrays and all(broadcasts(x, answer) for x in eqn.arrays):
        return (f"elementwise: each axis is the operands' common size (a size-1 axis stretches), in "
                f"{short(answer.dtype)}: {answer}")
    return f"{eqn.primitive} of {', '.join(map(str, eqn.input_avals))} gives {answer}"
