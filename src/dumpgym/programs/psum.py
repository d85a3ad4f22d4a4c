"""A matmul whose contracted axis is split over devices, finished by psum."""
from functools import partial

import jax
from jax.sharding import PartitionSpec as P

from dumpgym.traced.program import Program, cpu_mesh, on_mesh, variant

MESH = cpu_mesh(x=8)


def contracted_matmul_psum(x, w, mesh=MESH):
    @partial(jax.shard_map, mesh=mesh, in_specs=(P(None, "x"), P("x", None)), out_specs=P(None, None))
    def partial_sums(x, w):
        return jax.lax.psum(x @ w, "x")

    return partial_sums(x, w)


PROGRAM = Program(
    slug="psum",
    title="contracted matmul + psum",
    lesson="Each device holds a partial sum over its slice of the contraction; psum is what makes it whole.",
    function=contracted_matmul_psum,
    args=("f32[16,64]", "f32[64,16]"),
    mesh={"x": 8},
    in_specs=((None, "x"), ("x", None)),
)

# The same code at other shapes, on four devices and on eight, so that per-device sizes are read, not remembered.
FOUR = cpu_mesh(x=4)
VARIANTS = (
    variant(PROGRAM, 2, ("f32[12,40]", "f32[40,20]"), function=on_mesh(contracted_matmul_psum, FOUR), mesh=FOUR),
    variant(PROGRAM, 3, ("f32[24,96]", "f32[96,8]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 170
