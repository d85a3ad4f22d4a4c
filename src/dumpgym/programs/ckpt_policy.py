"""Gradients through layers wrapped in jax.checkpoint with a policy that saves only matmul results."""
from functools import partial

import jax
import jax.numpy as jnp

from dumpgym.traced.program import Program, change, variant


def checkpointed_grads(x, w1, w2, policy=jax.checkpoint_policies.checkpoint_dots):
    @partial(jax.checkpoint, policy=policy)
    def block(x, w1, w2):
        return jnp.tanh(jnp.sin(x @ w1) @ w2)

    return jax.grad(lambda w1, w2: jnp.sum(block(x, w1, w2)), argnums=(0, 1))(w1, w2)


PROGRAM = Program(
    slug="ckpt-policy",
    title="jax.checkpoint with a policy, under grad",
    lesson=("checkpoint_dots has jax.checkpoint save only matmul results: the forward's dot_generals stay "
            "outside remat2, each followed by a reduce_precision to f32's own format that marks a saved residual, "
            "while the sin between them and the tanh after them are computed again inside the remat2 body, the "
            "sin next to its cos. StableHLO puts "
            "an optimization_barrier over the saved values before that recomputation."),
    function=checkpointed_grads,
    args=("f32[16,32]", "f32[32,64]", "f32[64,32]"),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("f32[12,40]", "f32[40,56]", "f32[56,40]")),
    # The same code compiled with one change, set beside this one's compile (`dumpgym diff ckpt-policy-nothing`).
    change(PROGRAM, "nothing", "policy=nothing_saveable instead of checkpoint_dots",
           keywords={"policy": jax.checkpoint_policies.nothing_saveable},
           lesson=("no matmul result is saved, so the remat2 body computes both forward matmuls again and no "
                   "reduce_precision marks a saved residual; the forward outside remat2 feeds only a sum that is "
                   "not returned, so XLA drops it")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 220
