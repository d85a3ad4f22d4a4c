"""An embedding lookup and cross-entropy on integer labels, with the gradient for the embedding table."""
import jax
import jax.numpy as jnp

from dumpgym.traced.program import Program, variant


def embed_xent(table, tokens, labels):
    def loss(table):
        logits = table[tokens] @ table.T
        picked = jnp.take_along_axis(logits, labels[:, None], axis=-1)[:, 0]
        return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - picked)

    return jax.value_and_grad(loss)(table)


PROGRAM = Program(
    slug="embed-xent",
    title="embedding and cross-entropy, with gradient",
    lesson=("The lookup table[tokens] is a gather of whole rows; take_along_axis picks each label's logit with a "
            "second gather inside a jit. Their gradients run the other way: each becomes a scatter-add, and the "
            "table's contributions from the lookup and from the output projection (which reuses the table) meet "
            "in add_any. logsumexp brings a stop_gradient on the row max and an is_finite guard."),
    function=embed_xent,
    args=("f32[64,32]", "i32[16]", "i32[16]"),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("f32[100,24]", "i32[12]", "i32[12]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 240
