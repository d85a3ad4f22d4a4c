"""Gradients of attention with respect to q, k and v."""
import jax
import jax.numpy as jnp

from dumpgym.program import Program
from dumpgym.programs.attention import attention


def attention_grads(q, k, v):
    def loss(q, k, v):
        return jnp.sum(attention(q, k, v))

    return jax.grad(loss, argnums=(0, 1, 2))(q, k, v)


PROGRAM = Program(
    slug="grads",
    title="attention gradients",
    lesson="The backward pass reuses the forward's transposes; look for rowsum(dO * O) among them.",
    function=attention_grads,
    args=("f32[32,16]", "f32[32,16]", "f32[32,16]"),
)
