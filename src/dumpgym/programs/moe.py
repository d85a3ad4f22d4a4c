"""Mixture-of-experts dispatch, computed densely through a one-hot matrix."""
import jax
import jax.numpy as jnp

from dumpgym.traced.program import Program, variant


def moe_dispatch(tokens, routing, expert_w):
    # each token goes to the expert with the highest routing score (one column per expert)
    choice = jax.nn.one_hot(jnp.argmax(routing, axis=-1), routing.shape[-1], dtype=tokens.dtype)
    per_expert = jnp.einsum("te,td->etd", choice, tokens)
    expert_out = jnp.einsum("etd,edf->etf", per_expert, expert_w)
    return jnp.einsum("te,etf->tf", choice, expert_out)


PROGRAM = Program(
    slug="moe",
    title="dense MoE dispatch",
    lesson="argmax picks the expert, one_hot turns the pick into a matrix, three dot_generals do the routing.",
    function=moe_dispatch,
    args=("bf16[64,32]", "f32[64,4]", "bf16[4,32,32]"),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("bf16[48,24]", "f32[48,6]", "bf16[6,24,40]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 130
