"""Dtype names follow JAX's printer, for every dtype a program may use, typed PRNG keys included."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import core

from dumpgym.record.dtypes import is_extended, long, numpy_name, short
from dumpgym.traced.program import parse_arg

from random_programs import typed_key

DTYPES = [jnp.bfloat16, np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
          np.uint8, np.uint16, np.uint32, np.uint64, np.bool_, np.complex64, np.complex128,
          ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.int4, ml_dtypes.uint4]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_short_names_are_what_the_jaxpr_prints(dtype):
    name = np.dtype(dtype).name
    printed = core.ShapedArray((2, 3), np.dtype(dtype)).str_short(short_dtypes=True)
    assert printed == f"{short(name)}[2,3]"
    assert long(short(name)) == name
    assert parse_arg(printed).dtype == name and str(parse_arg(printed)) == printed


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_numpy_names_are_read_as_well(dtype):
    name = np.dtype(dtype).name
    printed = core.ShapedArray((2, 3), np.dtype(dtype)).str_short(short_dtypes=True)
    assert numpy_name(name) == numpy_name(short(name)) == name
    assert str(parse_arg(f"{name}[2,3]")) == printed and not is_extended(name)


@pytest.mark.parametrize("impl", ["threefry2x32", "rbg", "unsafe_rbg"])
def test_key_dtypes_print_and_parse_as_jax_prints_them(impl):
    dtype = typed_key(impl)
    assert jax.dtypes.issubdtype(dtype, jax.dtypes.extended)
    printed = core.ShapedArray((4,), dtype).str_short(short_dtypes=True)  # e.g. key<fry>[4]
    assert is_extended(str(dtype)) and f"{short(str(dtype))}[4]" == printed
    assert numpy_name(str(dtype)) is None
    for written in (printed, f"key<{impl}>[4]"):
        spec = parse_arg(written)
        assert str(spec) == printed and spec.to_struct() == jax.ShapeDtypeStruct((4,), dtype)


def test_float0_prints_as_the_jaxpr_prints_it():
    name = np.dtype(jax.dtypes.float0).name
    assert f"{short(name)}[3]" == core.ShapedArray((3,), jax.dtypes.float0).str_short(short_dtypes=True) == "float0[3]"


@pytest.mark.parametrize("name", ["str", "object", "int", "f4", "void", "key<nope>"])
def test_names_that_are_no_array_dtype_are_not_read(name):
    assert numpy_name(name) is None
