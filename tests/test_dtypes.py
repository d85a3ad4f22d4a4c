"""Dtype short names follow JAX's printer, for every dtype a program may use."""
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import core

from dumpgym.dtypes import long, short
from dumpgym.program import parse_arg

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
