"""Log-sum-exp over rows, written out by hand in its stable form."""
import jax.numpy as jnp

from dumpgym.program import Program


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

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 50
