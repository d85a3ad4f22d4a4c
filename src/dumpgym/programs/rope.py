"""Rotary position embedding on split halves of the feature axis."""
import jax.numpy as jnp

from dumpgym.traced.program import Program, variant


def rope(x, cos, sin):
    first, second = jnp.split(x, 2, axis=-1)
    rotated = [first * cos - second * sin, second * cos + first * sin]
    return jnp.concatenate(rotated, axis=-1)


PROGRAM = Program(
    slug="rope",
    title="rotary embedding",
    lesson="split, four multiplies and a concatenate; in StableHLO the split is two slices.",
    function=rope,
    args=("bf16[64,128]", "bf16[64,64]", "bf16[64,64]"),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("bf16[48,80]", "bf16[48,40]", "bf16[48,40]")),
    variant(PROGRAM, 3, ("bf16[40,96]", "bf16[40,48]", "bf16[40,48]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 100
