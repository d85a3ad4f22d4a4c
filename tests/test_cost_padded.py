"""The padded bytes the gym charges a TPU buffer (`Buffer.padded_bytes()`, what every cost row's bytes add up) held to
XLA itself: fresh TPU v5e compiles (no device needed) of arrays of shapes and element types whose tiles pad them
in different ways, whose `memory_analysis()` gives the argument and output bytes XLA allocates."""
from __future__ import annotations

import math

import pytest

pytestmark = [pytest.mark.compiled_hlo, pytest.mark.needs_tpu]

# (dims, element type): short minor dims, long ones not a multiple of 128, odd majors, rank 1 and 3, narrow types
LAYOUTS = [((3, 5), "float32"), ((17, 130), "bfloat16"), ((33, 257), "int8"), ((1000,), "float32"),
           ((2, 9, 3), "float32"), ((7, 129), "int32"), ((5, 3, 200), "bfloat16"), ((64, 64), "float16"),
           ((9, 40), "bool")]


@pytest.mark.parametrize("dims, dtype", LAYOUTS, ids=[f"{t}{list(d)}" for d, t in LAYOUTS])
def test_a_tpu_buffers_padded_bytes_are_what_xla_allocates(dims, dtype):
    import jax
    import jax.numpy as jnp
    from jax.sharding import SingleDeviceSharding

    from dumpgym.record.targets import DEFAULT_TOPOLOGY
    from dumpgym.traced.devices import topology_devices
    from test_cost_view import _compile_for_tpu

    def f(x, y):
        return jnp.logical_xor(x, y) if dtype == "bool" else x + y

    chip = SingleDeviceSharding(topology_devices(DEFAULT_TOPOLOGY)[0])
    arg = jax.ShapeDtypeStruct(dims, jnp.dtype(dtype), sharding=chip)
    layer, compiled = _compile_for_tpu(f, (arg, arg))
    memory = compiled.memory_analysis()
    entry = next(c.name for c in layer.computations if c.entry)
    root = next(c.root for c in layer.computations if c.entry)

    def padded(ins) -> int:
        return sum(layer.buffers[b].padded_bytes() for b in layer.shapes[ins.shape].buffers)

    params = [i for i in layer.instructions if i.computation == entry and i.opcode == "parameter"]
    (result,) = [i for i in layer.instructions if i.line == root]
    assert len(params) == 2 and sum(map(padded, params)) == memory.argument_size_in_bytes
    assert padded(result) == memory.output_size_in_bytes
    dense = math.prod(dims) * jnp.dtype(dtype).itemsize
    assert padded(result) > dense  # each of these shapes is padded by its tiles: the check is not of dense bytes
