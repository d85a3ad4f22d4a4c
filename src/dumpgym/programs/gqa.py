"""Grouped-query attention scores: eight query heads share two key heads."""
import jax.numpy as jnp

from dumpgym.program import Program


def gqa_scores(q, k):
    grouped = q.reshape(2, 4, *q.shape[1:])
    return jnp.einsum("ghqd,gkd->ghqk", grouped, k)


PROGRAM = Program(
    slug="gqa",
    title="grouped-query scores",
    lesson="A reshape exposes the group axis; the einsum batches over it and broadcasts over heads.",
    function=gqa_scores,
    args=("bf16[8,64,32]", "bf16[2,64,32]"),
)
