"""What the drills share: dtype facts by numpy name, axis lists as the dump prints them, shuffled options.

Avals and equations are the record's own (`dumpgym.record.schema.Aval`, `EqnFact`); this module only
adds what a reader of them needs to say about dtypes and options.
"""
from __future__ import annotations

import hashlib
import random
from typing import Sequence

from dumpgym.record.dtypes import short as short_dtype

_BITS = {
    "bfloat16": 16, "float16": 16, "float32": 32, "float64": 64,
    "int8": 8, "int16": 16, "int32": 32, "int64": 64,
    "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64, "bool": 1,
}


def short(dtype: str) -> str:
    """The jaxpr's short name for a numpy dtype name (`bfloat16` -> `bf16`, `complex64` -> `c64`)."""
    return short_dtype(dtype)


def is_float(dtype: str) -> bool:
    """Whether a numpy dtype name is a floating-point type."""
    return dtype.startswith(("float", "bfloat"))


def is_int(dtype: str) -> bool:
    """Whether a numpy dtype name is a signed or unsigned integer type."""
    return dtype.startswith(("int", "uint"))


def bits(dtype: str) -> int:
    """Width in bits of a numpy dtype name (0 when unknown)."""
    return _BITS.get(dtype, 0)


def is_half(dtype: str) -> bool:
    """Whether a numpy dtype name is a 16-bit float (bfloat16, float16): the dtypes that a reader expects
    to compute in, accumulate in or promote to f32."""
    return is_float(dtype) and bits(dtype) == 16


def widened(dtype: str) -> str | None:
    """JAX's default dtype of the same kind, where `dtype` is narrower than it: float32 for a 16-bit float,
    int32 for an integer under 32 bits; None otherwise. It is what a reader writes who forgets that a
    narrow dtype is in play."""
    if is_half(dtype):
        return "float32"
    if is_int(dtype) and bits(dtype) < 32:
        return "int32"
    return None


def axis_list(axes: Sequence[int]) -> str:
    """An axis list as the dump prints it inside dimension_numbers: `[0, 1]`, `[]`."""
    return "[" + ", ".join(str(a) for a in axes) + "]"


def order(count: int, *seed: object) -> list[int]:
    """A fixed shuffle of `range(count)` for a seed, so option order is stable from run to run."""
    digest = hashlib.sha256(":".join(map(str, seed)).encode()).digest()
    positions = list(range(count))
    random.Random(digest).shuffle(positions)
    return positions


def choice_item(answer: str, wrong: Sequence[tuple[str, str, str]], *seed: object) -> dict:
    """`options`, `answer`, `reasons` and `rules` for an answer and (option, rule, reason) distractors, shuffled."""
    entries = [(answer, "", ""), *wrong]
    positions = order(len(entries), *seed)
    shuffled = [entries[i] for i in positions]
    return {
        "options": [e[0] for e in shuffled],
        "answer": positions.index(0),
        "reasons": [e[2] for e in shuffled],
        "rules": [e[1] for e in shuffled],
    }


def per_device_shape(shape: Sequence[int], spec: Sequence[tuple[str, ...] | None],
                     mesh: dict[str, int]) -> tuple[int, ...] | None:
    """The block one device holds of a global `shape` laid out by `spec` on `mesh`; None when it does not divide."""
    out = []
    for axis, size in enumerate(shape):
        names = spec[axis] if axis < len(spec) else None
        n = 1
        for name in names or ():
            if name not in mesh:
                return None
            n *= mesh[name]
        if size % n:
            return None
        out.append(size // n)
    return tuple(out)
