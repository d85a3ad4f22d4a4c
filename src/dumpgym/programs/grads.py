"""Gradients of attention with respect to q, k and v."""
import jax
import jax.numpy as jnp

from dumpgym.traced.program import Program, variant
from dumpgym.programs.attention import attention


def attention_grads(q, k, v):
    def loss(q, k, v):
        return jnp.sum(attention(q, k, v))

    return jax.grad(loss, argnums=(0, 1, 2))(q, k, v)


PROGRAM = Program(
    slug="grads",
    title="attention gradients",
    lesson=("jax.grad differentiates through jnp.max with no stop_gradient: the forward marks where each row's "
            "maximum sits with eq and counts the ties; the backward gives the maximum its share of the gradient (div by the tie "
            "count, mul by the mask, add_any), zero in exact arithmetic since softmax ignores a shift. The "
            "softmax backward's rowsum is of dP·exp·l⁻² (integer_pow y=-2), not of dO·O."),
    function=attention_grads,
    args=("f32[32,16]", "f32[32,16]", "f32[32,16]"),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("f32[24,8]", "f32[40,8]", "f32[40,12]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 140
