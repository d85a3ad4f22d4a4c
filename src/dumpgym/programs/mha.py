"""Batched multi-head attention written with einsum."""
import jax
import jax.numpy as jnp

from dumpgym.traced.program import Program, variant


def batched_mha(q, k, v):
    # q, k, v: [batch, heads, seq, head_dim]
    scale = jnp.sqrt(q.shape[-1]).astype(q.dtype)
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / scale
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v)


PROGRAM = Program(
    slug="mha",
    title="batched multi-head attention",
    lesson="Each einsum is one dot_general whose batch dimensions are batch and heads.",
    function=batched_mha,
    args=("bf16[2,4,64,32]", "bf16[2,4,64,32]", "bf16[2,4,64,32]"),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("bf16[1,6,48,24]", "bf16[1,6,48,24]", "bf16[1,6,48,24]")),
    variant(PROGRAM, 3, ("bf16[4,2,40,16]", "bf16[4,2,40,16]", "bf16[4,2,40,16]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 80
