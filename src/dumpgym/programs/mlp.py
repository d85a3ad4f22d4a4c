"""The transformer feed-forward block: two matmuls around a tanh GELU."""
import jax

from dumpgym.program import Program


def mlp_block(x, w1, b1, w2, b2):
    hidden = jax.nn.gelu(x @ w1 + b1)
    return hidden @ w2 + b2


PROGRAM = Program(
    slug="mlp",
    title="MLP block",
    lesson="Two matmuls bracket a GELU; each bias add hides a broadcast that the dump spells out.",
    function=mlp_block,
    args=("bf16[64,128]", "bf16[128,512]", "bf16[512]", "bf16[512,128]", "bf16[128]"),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 10
