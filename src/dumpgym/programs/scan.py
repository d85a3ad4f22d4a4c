"""A cumulative sum by associative scan."""
import jax
import jax.numpy as jnp

from dumpgym.traced.program import Program, variant


def cumsum_scan(x):
    return jax.lax.associative_scan(jnp.add, x, axis=-1)


PROGRAM = Program(
    slug="scan",
    title="associative cumulative sum",
    lesson=("lax.associative_scan is Python recursion at trace time, so no scan primitive is ever made. "
            "Going up, seven levels (log2 128) of stride-2 slices and adds; coming down, concatenates and pads "
            "with interior padding 1 interleave the partial sums, and more adds finish them."),
    function=cumsum_scan,
    args=("f32[8,128]",),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("f32[5,100]",)),
    variant(PROGRAM, 3, ("f32[16,48]",)),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 110
