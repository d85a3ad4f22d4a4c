"""Dtype names both ways: numpy's (`bfloat16`) and the jaxpr printer's short ones (`bf16`).

The short name follows the rule of JAX's printer (its `short_dtype_name`): float -> f,
uint -> u, int -> i, complex -> c, so `float8_e4m3fn` prints as `f8_e4m3fn` and `complex64`
as `c64`. Kept here, without importing JAX, so the drills and the page can use it.
"""
from __future__ import annotations

_LONG_PREFIXES = (("bf", "bfloat"), ("f", "float"), ("u", "uint"), ("i", "int"), ("c", "complex"))


def short(numpy_name: str) -> str:
    """The jaxpr's short name for a numpy dtype name: `bfloat16` -> `bf16`, `float8_e5m2` -> `f8_e5m2`."""
    return (numpy_name.replace("float", "f").replace("uint", "u")
            .replace("int", "i").replace("complex", "c"))


def long(short_name: str) -> str | None:
    """The numpy name a short name stands for (`i8` -> `int8`), or None when it is not of that form."""
    if short_name == "bool":
        return "bool"
    for prefix, word in _LONG_PREFIXES:
        rest = short_name[len(prefix):]
        if short_name.startswith(prefix) and rest[:1].isdigit():
            return word + rest
    return None
