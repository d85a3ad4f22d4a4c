"""Sub-byte and other unusual dtypes (int4, uint4, fp8 variants, fp4) get their drills in every kind: no kind
fails on them, and a TPU layer's bytes are counted as XLA counts them (packed `E(4)` elements included),
checked against a fresh compile's own memory analysis."""
import jax
import jax.numpy as jnp
import pytest

import dumpgym
from dumpgym.drills import items_for

# JAX's own names; `int2` is left out: libtpu 0.0.42 crashes compiling it (a signal in its TPU emitter).
DTYPES = ["int4", "uint4", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"]


def _dequant_matmul(x, w):
    return x.astype(jnp.bfloat16) @ w


def _args(dtype, sharding=None):
    return (jax.ShapeDtypeStruct((64, 256), getattr(jnp, dtype), sharding=sharding),
            jax.ShapeDtypeStruct((256, 128), jnp.bfloat16, sharding=sharding))


@pytest.mark.needs_tpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_kind_takes_the_dtype_and_counts_its_bytes_as_xla_does(dtype, tmp_path):
    from jax.sharding import SingleDeviceSharding

    from dumpgym.traced.devices import topology_devices

    record = dumpgym.add(_dequant_matmul, *_args(dtype), slug="dt", corpus=tmp_path / "c", compiled="tpu")
    skipped = []
    items = items_for(record, skipped)
    # The TPU kinds that read the layer's facts ask about it (its buffers all sit in HBM, so the layouts kind's
    # memory-space step has no question: a fusion's intermediates hold no buffer).
    assert skipped == [] and {"buffers", "units"} <= {i.drill for i in items}, [s.line() for s in skipped]
    layer = record.compiled["tpu"]
    params = [layer.shapes[i.shape] for i in layer.instructions
              if i.opcode == "parameter" and i.computation == next(c.name for c in layer.computations if c.entry)]
    counted = sum(layer.buffers[b].padded_bytes() for s in params for b in s.buffers)
    chip = topology_devices(layer.topology)[0]
    with jax.default_device(chip):
        fresh = jax.jit(_dequant_matmul).lower(*_args(dtype, SingleDeviceSharding(chip))).compile()
    assert counted == fresh.memory_analysis().argument_size_in_bytes


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_cpu_kinds_take_the_dtype(dtype, tmp_path):
    record = dumpgym.add(_dequant_matmul, *_args(dtype), slug="dt", corpus=tmp_path / "c", compiled=True)
    skipped = []
    items = items_for(record, skipped)
    assert skipped == [] and {"shapes", "decoder"} <= {i.drill for i in items}
