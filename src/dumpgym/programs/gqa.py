"""Grouped-query attention scores: eight query heads share two key heads."""
import jax.numpy as jnp

from dumpgym.traced.program import Program, variant


def gqa_scores(q, k):
    grouped = q.reshape(k.shape[0], -1, *q.shape[1:])  # each key head serves a group of query heads
    return jnp.einsum("ghqd,gkd->ghqk", grouped, k)


PROGRAM = Program(
    slug="gqa",
    title="grouped-query scores",
    lesson=("A reshape turns the eight query heads into two groups of four; the einsum is one dot_general that "
            "batches over the group axis, contracts d, and carries the head axis as a free lhs axis. "
            "k is never broadcast or copied to eight heads."),
    function=gqa_scores,
    args=("bf16[8,64,32]", "bf16[2,64,32]"),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("bf16[12,48,16]", "bf16[3,56,16]")),
    variant(PROGRAM, 3, ("bf16[6,40,24]", "bf16[2,40,24]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 90
