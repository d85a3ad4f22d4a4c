"""An MLP whose first half is wrapped in jax.checkpoint."""
import jax

from dumpgym.program import Program


def remat_mlp(x, w1, w2):
    up = jax.checkpoint(lambda y: jax.nn.gelu(y @ w1))
    return up(x) @ w2


PROGRAM = Program(
    slug="remat",
    title="checkpointed MLP",
    lesson="jax.checkpoint leaves a remat container around the part to recompute in the backward pass.",
    function=remat_mlp,
    args=("bf16[64,128]", "bf16[128,512]", "bf16[512,128]"),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 120
