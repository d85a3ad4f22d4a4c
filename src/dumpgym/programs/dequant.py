"""An int8 weight cast up and scaled before the matmul."""
import jax.numpy as jnp

from dumpgym.traced.program import Program, variant


def int8_dequant_matmul(x, wq, scale):
    return x @ (wq.astype(jnp.bfloat16) * scale)


PROGRAM = Program(
    slug="dequant",
    title="int8 dequantize matmul",
    lesson="convert, then a broadcast multiply by the per-column scale, then the dot: quantized serving in small.",
    function=int8_dequant_matmul,
    args=("bf16[64,128]", "i8[128,256]", "bf16[256]"),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("bf16[48,96]", "i8[96,200]", "bf16[200]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 150
