"""A collective matmul under shard_map on a 4x2 mesh: a ppermute ring over x, then psum_scatter over y."""
from functools import partial

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from dumpgym.traced.program import Program, cpu_mesh, on_mesh, variant

MESH = cpu_mesh(x=4, y=2)


def collective_matmul(x, w, mesh=MESH):
    ring = mesh.shape["x"]
    perm = [(i, (i + 1) % ring) for i in range(ring)]

    @partial(jax.shard_map, mesh=mesh, in_specs=(P("x", "y"), P("y", "x")), out_specs=P(None, ("x", "y")))
    def ring_matmul(x, w):
        rows = x.shape[0]
        me = jax.lax.axis_index("x")
        out = jnp.zeros((rows * ring, w.shape[1]), x.dtype)
        for step in range(ring):
            # The block of rows held now started on the device `step` places back along the ring.
            block = jax.lax.rem(me + ring - step, ring)
            out = jax.lax.dynamic_update_slice_in_dim(out, x @ w, block * rows, axis=0)
            if step < ring - 1:
                x = jax.lax.ppermute(x, "x", perm)
        return jax.lax.psum_scatter(out, "y", scatter_dimension=1, tiled=True)

    return ring_matmul(x, w)


PROGRAM = Program(
    slug="collective-matmul",
    title="collective matmul: a ppermute ring and psum_scatter",
    lesson=("x arrives with its rows cut over x and its contraction over y; w with its contraction over y and its "
            "columns over x. Instead of all-gathering x, each device multiplies the row block it holds, writes "
            "the product at that block's rows and passes the block to its neighbour on the ring with ppermute: "
            "four matmuls, three ppermutes, unrolled in the jaxpr. Each product is a partial sum over y, so "
            "psum_scatter over y adds them and leaves each device its share of the columns."),
    function=collective_matmul,
    args=("f32[32,64]", "f32[64,64]"),
    mesh={"x": 4, "y": 2},
    in_specs=(("x", "y"), ("y", "x")),
)

# The same code at other shapes, on a 2x4 mesh and on the 4x2, so that ring lengths and blocks are read.
TWO_BY_FOUR = cpu_mesh(x=2, y=4)
VARIANTS = (
    variant(PROGRAM, 2, ("f32[16,32]", "f32[32,64]"), function=on_mesh(collective_matmul, TWO_BY_FOUR),
            mesh=TWO_BY_FOUR),
    variant(PROGRAM, 3, ("f32[48,32]", "f32[32,32]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 320
