"""Single-head attention with the softmax written by hand."""
import jax.numpy as jnp

from dumpgym.traced.program import Program, change, variant


def attention(q, k, v):
    scores = q @ k.T
    shifted = jnp.exp(scores - jnp.max(scores, axis=-1, keepdims=True))
    probs = shifted / jnp.sum(shifted, axis=-1, keepdims=True)
    return probs @ v


PROGRAM = Program(
    slug="attention",
    title="naive attention",
    lesson="Two dot_generals around a softmax; k.T becomes an explicit transpose.",
    function=attention,
    args=("bf16[128,64]", "bf16[128,64]", "bf16[128,64]"),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("bf16[80,48]", "bf16[112,48]", "bf16[112,40]")),
    # The same code compiled with one change, set beside this one's compile (`dumpgym diff attention-f32`).
    change(PROGRAM, "f32", "f32 instead of bf16", args=tuple(a.replace("bf16", "f32") for a in PROGRAM.args)),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 60
