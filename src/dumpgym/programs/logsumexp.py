"""Log-sum-exp over rows, written out by hand in its stable form."""
import jax.numpy as jnp

from dumpgym.traced.program import Program, variant


def logsumexp_rows(x):
    row_max = jnp.max(x, axis=-1, keepdims=True)
    total = jnp.sum(jnp.exp(x - row_max), axis=-1, keepdims=True)
    return row_max + jnp.log(total)


PROGRAM = Program(
    slug="logsumexp",
    title="log-sum-exp",
    lesson="The softmax skeleton again, ending in a single log instead of a divide.",
    function=logsumexp_rows,
    args=("bf16[64,128]",),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("bf16[32,200]",)),
    variant(PROGRAM, 3, ("bf16[96,56]",)),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 50
