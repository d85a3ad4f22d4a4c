"""Misreadings that fit any equation, tried after a primitive's own rules run out.

Each still reads the equation at hand: its operands, its literals, its output's axes.
"""
from __future__ import annotations

from dumpgym.drills._avals import bits, is_float, is_int, short
from dumpgym.drills._misreadings import GENERIC, Found, rule
from dumpgym.record import Aval, EqnFact, Literal


@rule(GENERIC)
def operand_unchanged(eqn: EqnFact, answer: Aval) -> Found:
    """Assumed the result is the first operand's aval."""
    if not eqn.arrays:
        return None
    x = eqn.arrays[0]
    if eqn.has_subjaxpr:
        why = f"took the first argument's aval; {eqn.primitive}'s result is whatever its inner jaxpr returns"
    else:
        why = f"assumed {eqn.primitive} leaves its operand's shape and dtype as they were"
    return (x, why)


@rule(GENERIC)
def other_operand(eqn: EqnFact, answer: Aval) -> Found:
    """Took another operand's aval for the result."""
    for x in eqn.arrays[1:]:
        if not x.same(eqn.arrays[0]):
            return x, f"took the other operand's aval ({x}) for the result"
    return None


@rule(GENERIC)
def weak_literal_promotion(eqn: EqnFact, answer: Aval) -> Found:
    """Let a Python scalar promote the result, as NumPy would."""
    scalars = [x for x in eqn.inputs if isinstance(x, Literal) or x.weak_type]
    if not scalars:
        return None
    s = scalars[0]
    name = f"the Python scalar {s.literal}" if isinstance(s, Literal) else f"the weakly typed scalar {s}"
    if s.dtype == "bool" and answer.dtype == "bool":
        return (answer.with_dtype("int32"),
                f"read {name} as an int (Python's bool subclasses int); a bool literal stays bool")
    if is_float(answer.dtype) and bits(answer.dtype) == 16:
        return (answer.with_dtype("float32"),
                f"let {name} promote the result to f32; weakly typed scalars take the array's {short(answer.dtype)}")
    if answer.dtype == "float32":
        return (answer.with_dtype("float64"),
                f"NumPy habit: {name} would make float64; in JAX it is weakly typed and, with x64 off, stays f32")
    if is_int(answer.dtype) and bits(answer.dtype) < 32:
        return (answer.with_dtype("int32"),
                f"let {name} promote the result to i32; weakly typed scalars take the array's {short(answer.dtype)}")
    if answer.dtype == "int32":
        return (answer.with_dtype("int64"),
                f"NumPy habit: {name} would make int64; in JAX it is weakly typed and, with x64 off, stays i32")
    return None


@rule(GENERIC)
def transposed_last_two(eqn: EqnFact, answer: Aval) -> Found:
    """Swapped the last two axes, as if reading a transposed layout."""
    if answer.rank < 2 or answer.shape[-1] == answer.shape[-2]:
        return None
    shape = (*answer.shape[:-2], answer.shape[-1], answer.shape[-2])
    return (answer.with_shape(shape),
            "swapped the last two axes, reading rows as columns")


@rule(GENERIC)
def squeezed(eqn: EqnFact, answer: Aval) -> Found:
    """Dropped size-1 axes, as if squeezed."""
    if 1 not in answer.shape:
        return None
    return (answer.with_shape([d for d in answer.shape if d != 1]),
            "dropped the size-1 axis, as if it had been squeezed away")


@rule(GENERIC)
def default_dtype(eqn: EqnFact, answer: Aval) -> Found:
    """Assumed the default f32 (or i32) instead of the narrower dtype in play."""
    if is_float(answer.dtype) and bits(answer.dtype) == 16:
        return (answer.with_dtype("float32"),
                f"assumed JAX's default float32; the values here are {short(answer.dtype)}")
    if is_int(answer.dtype) and bits(answer.dtype) < 32:
        return (answer.with_dtype("int32"),
                f"assumed JAX's default int32; the values here are {short(answer.dtype)}")
    return None


@rule(GENERIC)
def scalar_as_vector(eqn: EqnFact, answer: Aval) -> Found:
    """Read a scalar `f32[]` as a one-element vector."""
    if answer.rank:
        return None
    return (answer.with_shape([1]),
            f"read the scalar {answer} as a one-element vector; [] means no axes at all")


@rule(GENERIC)
def dropped_leading_axis(eqn: EqnFact, answer: Aval) -> Found:
    """Miscounted the rank and lost the leading axis."""
    if not answer.rank:
        return None
    return (answer.with_shape(answer.shape[1:]),
            "miscounted the rank and lost the leading axis")


@rule(GENERIC)
def vector_as_column(eqn: EqnFact, answer: Aval) -> Found:
    """Read a vector `[n]` as a column `[n,1]`."""
    if answer.rank != 1:
        return None
    return (answer.with_shape([answer.shape[0], 1]),
            f"wrote the vector {answer} as a column with a trailing size-1 axis")


@rule(GENERIC)
def flattened(eqn: EqnFact, answer: Aval) -> Found:
    """Counted elements instead of listing axes."""
    if answer.rank < 2:
        return None
    size = 1
    for d in answer.shape:
        size *= d
    return (answer.with_shape([size]),
            f"counted elements instead of axes: {'x'.join(map(str, answer.shape))} flattened into one axis")
