"""Dtype names both ways: numpy's (`bfloat16`) and the jaxpr printer's short ones (`bf16`).

The short name follows the rule of JAX's printer (its `short_dtype_name` and `str_short_aval`):
float -> f, uint -> u, int -> i, complex -> c, so `float8_e4m3fn` prints as `f8_e4m3fn` and
`complex64` as `c64`; numpy's `void` (JAX's `float0`) prints as `float0`. An extended dtype
(a typed PRNG key, `key<fry>`) has no numpy name: the record keeps it as JAX prints it, and it
prints unchanged. Kept here, without importing JAX, so the drills and the page can use it.
"""
from __future__ import annotations

import functools

_LONG_PREFIXES = (("bf", "bfloat"), ("f", "float"), ("u", "uint"), ("i", "int"), ("c", "complex"))


def short(name: str) -> str:
    """The jaxpr's short name for a record's dtype name: `bfloat16` -> `bf16`, `key<fry>` -> `key<fry>`."""
    if is_extended(name):
        return name
    return (name.replace("float", "f").replace("uint", "u")
            .replace("int", "i").replace("complex", "c").replace("void", "float0"))


def long(short_name: str) -> str | None:
    """The numpy name a short name stands for (`i8` -> `int8`), or None when it is not of that form."""
    if short_name == "bool":
        return "bool"
    for prefix, word in _LONG_PREFIXES:
        rest = short_name[len(prefix):]
        if short_name.startswith(prefix) and rest[:1].isdigit():
            return word + rest
    return None


def numpy_name(name: str) -> str | None:
    """The numpy name that a short (`i32`, `bf16`) or numpy (`int32`, `bfloat16`) name stands for, else None.

    Only the families the jaxpr prints by the short rule (bool, ints, floats, complex) count, so
    numpy's `str` or `object` are not taken for array dtypes.
    """
    candidate = long(name) or name
    if is_numpy(candidate) and long(short(candidate)) == candidate:
        return candidate
    return None


@functools.lru_cache(maxsize=None)
def is_numpy(name: str) -> bool:
    """Whether `name` is a numpy dtype's own name (`int32`, `bfloat16`; not `int`, `f4` or `key<fry>`)."""
    import numpy as np

    try:
        import ml_dtypes  # noqa: F401  (registers bfloat16, float8_*, int4 with numpy)
    except ImportError:
        pass
    try:
        return np.dtype(name).name == name
    except TypeError:
        return False


def is_extended(name: str) -> bool:
    """Whether a record's dtype name is one of JAX's extended dtypes (`key<fry>`): a name numpy does not know."""
    return not is_numpy(name)
