"""Stage four, the jaxpr's side of cost.py: what each equation costs from its avals alone.

No layout, no fusion, no padding: a `dot_general` is 2 FLOPs per multiply-add, elementwise and
transcendental primitives one per result element (apart), a reduction its combines, and every
equation its inputs' and outputs' bytes; a container costs its body's equations. docs/cost.md says
where this differs from `jax.experimental.roofline`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from dumpgym.cost import Work
from dumpgym.record import EqnFact, ProgramRecord

_TRANSCENDENTAL_PRIMITIVES = frozenset({"exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos",
                                        "tan", "sqrt", "rsqrt", "cbrt", "erf", "erfc", "erf_inv", "atan2", "pow",
                                        "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "lgamma",
                                        "digamma"})
_ELEMENTWISE_PRIMITIVES = frozenset({
    "add", "add_any", "sub", "mul", "div", "rem", "max", "min", "neg", "abs", "sign", "floor", "ceil", "round",
    "and", "or", "xor", "not", "eq", "ne", "lt", "le", "gt", "ge", "select_n", "clamp", "convert_element_type",
    "shift_left", "shift_right_logical", "shift_right_arithmetic", "is_finite", "integer_pow", "square",
    "nextafter", "reduce_precision", "population_count", "clz", "real", "imag", "conj", "complex",
})
_REDUCTION_PRIMITIVES = frozenset({"reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_and",
                                   "reduce_or", "reduce_xor", "argmax", "argmin"})


@dataclass(frozen=True)
class EqnCost:
    """One equation's cost from its avals alone (no layouts, no fusion): a container's is its body's, a scan's
    body counted `length` times. `rule` says which rule counted it ("none": data movement, or a primitive with
    no rule, which costs only its bytes)."""

    eqn: int
    primitive: str
    rule: str
    work: Work


def _aval_bytes(avals) -> int:
    import numpy as np

    total = 0
    for a in avals:
        if hasattr(a, "shape"):
            try:
                total += math.prod(a.shape) * np.dtype(a.dtype).itemsize
            except TypeError:  # an extended dtype (a typed PRNG key) has no numpy itemsize
                total += math.prod(a.shape) * 8
    return total


def _eqn_own(eqn: EqnFact) -> tuple[str, Work]:
    out = math.prod(eqn.outputs[0].shape) if eqn.outputs else 0
    moved = Work(read={0: _aval_bytes(eqn.inputs)}, written={0: _aval_bytes(eqn.outputs)})
    p = eqn.primitive
    if p == "dot_general":
        (lhs_contract, _), _batch = eqn.params["dimension_numbers"]
        k = math.prod(eqn.inputs[0].shape[d] for d in lhs_contract)
        return "dot_general", moved + Work(matmul=2 * out * k)
    if p in _TRANSCENDENTAL_PRIMITIVES:
        return "transcendental", moved + Work(transcendentals=out)
    if p in _ELEMENTWISE_PRIMITIVES:
        return "elementwise", moved + Work(elementwise=out)
    if p in _REDUCTION_PRIMITIVES:
        return "reduction", moved + Work(reduction=math.prod(eqn.inputs[0].shape) - out)
    return "none", moved


def eqn_costs(record: ProgramRecord) -> tuple[EqnCost, ...]:
    """Every equation's cost, containers summing their bodies (a scan's times its length)."""
    children: dict[int, list[EqnFact]] = {}
    for eqn in record.eqns:
        if eqn.parent is not None:
            children.setdefault(eqn.parent, []).append(eqn)
    memo: dict[int, EqnCost] = {}

    def cost(eqn: EqnFact) -> EqnCost:
        if eqn.id in memo:
            return memo[eqn.id]
        if eqn.id in children:
            body = sum((cost(c).work for c in children[eqn.id]), Work())
            found = EqnCost(eqn.id, eqn.primitive, "body", body.times(int(eqn.params.get("length", 1)))
                            if eqn.primitive == "scan" else body)
        else:
            rule, work = _eqn_own(eqn)
            found = EqnCost(eqn.id, eqn.primitive, rule, work)
        memo[eqn.id] = found
        return found

    return tuple(cost(e) for e in record.eqns)


def jaxpr_total(record: ProgramRecord) -> Work:
    """The program's sum over its top-level equations."""
    return sum((c.work for c, e in zip(eqn_costs(record), record.eqns) if e.parent is None), Work())
