"""LayerNorm: a mean, a variance and an rsqrt, each broadcast back over the row."""
import jax
import jax.numpy as jnp

from dumpgym.traced.program import Program, variant


def layernorm(x, g, b):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.var(x, axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-6) * g + b


PROGRAM = Program(
    slug="layernorm",
    title="LayerNorm",
    lesson="The reductions run in f32 even though the data is bf16; jnp.var arrives as a nested jit.",
    function=layernorm,
    args=("bf16[64,128]", "bf16[128]", "bf16[128]"),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("bf16[40,96]", "bf16[96]", "bf16[96]")),
    variant(PROGRAM, 3, ("bf16[256,200]", "bf16[200]", "bf16[200]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 20
