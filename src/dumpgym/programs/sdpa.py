"""Causal attention through jax.nn.dot_product_attention, as model code calls it."""
import jax

from dumpgym.traced.program import Program, variant


def sdpa(q, k, v):
    return jax.nn.dot_product_attention(q, k, v, is_causal=True)


PROGRAM = Program(
    slug="sdpa",
    title="jax.nn.dot_product_attention",
    lesson=("Four query heads over two key and value heads make dot_product_attention grouped-query attention: a "
            "reshape cuts q's heads into two groups of two, and each einsum is one dot_general batched over "
            "batch and group. is_causal builds its mask from iota and ge, the softmax runs in f32, and "
            "convert_element_type takes the probabilities back to bf16 before the second matmul; a pair of "
            "transposes and a reshape give back [2,16,4,8]."),
    function=sdpa,
    args=("bf16[2,16,4,8]", "bf16[2,16,2,8]", "bf16[2,16,2,8]"),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("bf16[1,24,6,16]", "bf16[1,24,3,16]", "bf16[1,24,3,16]")),
    variant(PROGRAM, 3, ("bf16[3,12,4,8]", "bf16[3,12,1,8]", "bf16[3,12,1,8]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 260
