"""Causal attention: a lower-triangular mask applied with where before softmax."""
import jax
import jax.numpy as jnp

from dumpgym.traced.program import Program, variant


def causal_attention(q, k, v):
    scores = q @ k.T
    n = scores.shape[-1]
    keep = jnp.tril(jnp.ones((n, n), dtype=bool))
    scores = jnp.where(keep, scores, -jnp.inf)
    return jax.nn.softmax(scores, axis=-1) @ v


PROGRAM = Program(
    slug="causal",
    title="causal attention",
    lesson="The mask is built from two iotas and a comparison; the where becomes select_n against -inf.",
    function=causal_attention,
    args=("bf16[128,64]", "bf16[128,64]", "bf16[128,64]"),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("bf16[96,40]", "bf16[96,40]", "bf16[96,56]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 70
