"""RMSNorm: LayerNorm without the mean subtraction."""
import jax
import jax.numpy as jnp

from dumpgym.traced.program import Program, variant


def rmsnorm(x, g):
    mean_square = jnp.mean(x * x, axis=-1, keepdims=True)
    return x * jax.lax.rsqrt(mean_square + 1e-6) * g


PROGRAM = Program(
    slug="rmsnorm",
    title="RMSNorm",
    lesson="Set it beside LayerNorm: one reduction instead of two, and no nested jit for the variance.",
    function=rmsnorm,
    args=("bf16[64,128]", "bf16[128]"),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("bf16[24,80]", "bf16[80]")),
    variant(PROGRAM, 3, ("bf16[128,320]", "bf16[320]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 30
