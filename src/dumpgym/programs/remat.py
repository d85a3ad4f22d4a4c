"""An MLP whose first half is wrapped in jax.checkpoint."""
import jax

from dumpgym.traced.program import Program, variant


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


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("bf16[48,96]", "bf16[96,256]", "bf16[256,96]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 120
