"""The transformer feed-forward block: two matmuls around a tanh GELU."""
import jax

from dumpgym.traced.program import Program, change, variant


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


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("bf16[48,96]", "bf16[96,384]", "bf16[384]", "bf16[384,96]", "bf16[96]")),
    variant(PROGRAM, 3, ("bf16[200,64]", "bf16[64,160]", "bf16[160]", "bf16[160,64]", "bf16[64]")),
    # The same block compiled with one change, set beside this one's compile (`dumpgym diff mlp-f32`).
    change(PROGRAM, "f32", "f32 instead of bf16", args=tuple(a.replace("bf16", "f32") for a in PROGRAM.args)),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 10
