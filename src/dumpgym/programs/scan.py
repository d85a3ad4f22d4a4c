"""A cumulative sum by associative scan."""
import jax
import jax.numpy as jnp

from dumpgym.program import Program


def cumsum_scan(x):
    return jax.lax.associative_scan(jnp.add, x, axis=-1)


PROGRAM = Program(
    slug="scan",
    title="associative cumulative sum",
    lesson="No scan primitive survives: the scan unrolls into strided slices, adds, pads and concatenates.",
    function=cumsum_scan,
    args=("f32[8,128]",),
)
