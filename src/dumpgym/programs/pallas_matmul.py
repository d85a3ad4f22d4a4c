"""A Pallas TPU kernel between ordinary jnp code: a blocked matmul with ReLU, opaque to XLA."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from dumpgym.traced.program import Program, variant


def _matmul_relu_kernel(x_ref, w_ref, o_ref):
    acc = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)
    o_ref[...] = jnp.maximum(acc, 0.0).astype(o_ref.dtype)


@functools.partial(jax.named_call, name="matmul_relu")
def matmul_relu(x, w):
    m, k = x.shape
    n = w.shape[1]
    return pl.pallas_call(
        _matmul_relu_kernel,
        grid=(m // 128, n // 128),
        in_specs=[pl.BlockSpec((128, k), lambda i, j: (i, 0)), pl.BlockSpec((k, 128), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((128, 128), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
    )(x, w)


def kernel_layer(x, w, scale, bias):
    h = matmul_relu((x * scale).astype(jnp.bfloat16), w)
    return h.astype(jnp.float32) + bias


PROGRAM = Program(
    slug="pallas-matmul",
    title="a Pallas kernel inside a layer",
    lesson=("The matmul and its ReLU are a Pallas kernel, on a 2x2 grid of 128x128 output blocks. In the "
            "jaxpr, pallas_call holds the kernel's own jaxpr, which reads and writes Refs (blocks of VMEM) "
            "rather than arrays, and its grid_mapping records the blocks. XLA never sees that body: StableHLO "
            "has one custom_call to tpu_custom_call, the kernel compiled by Mosaic and carried as an opaque "
            "string, and the compiled HLO keeps that custom-call as it is, fusing only the jnp code around it. "
            "A Mosaic kernel lowers for TPU only, so this program is traced for a TPU chip (without one) and "
            "has no CPU compile."),
    function=kernel_layer,
    args=("f32[256,512]", "bf16[512,256]", "f32[]", "f32[256]"),
    platform="tpu",
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("f32[384,256]", "bf16[256,384]", "f32[]", "f32[384]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 290
