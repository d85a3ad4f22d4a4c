"""Softmax over the last axis, as the library writes it."""
import jax

from dumpgym.traced.program import Program, variant


def softmax_rows(x):
    return jax.nn.softmax(x, axis=-1)


PROGRAM = Program(
    slug="softmax",
    title="softmax over rows",
    lesson="Max, subtract, exp, sum, divide; the sum alone is lifted to f32.",
    function=softmax_rows,
    args=("bf16[64,128]",),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("bf16[100,48]",)),
    variant(PROGRAM, 3, ("bf16[16,1000]",)),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 40
