"""A matmul whose contracted axis is split over devices, finished by psum."""
from functools import partial

import jax
from jax.sharding import PartitionSpec as P

from dumpgym.program import Program, cpu_mesh

MESH = cpu_mesh(x=8)


@partial(jax.shard_map, mesh=MESH, in_specs=(P(None, "x"), P("x", None)), out_specs=P(None, None))
def contracted_matmul_psum(x, w):
    return jax.lax.psum(x @ w, "x")


PROGRAM = Program(
    slug="psum",
    title="contracted matmul + psum",
    lesson="Each device holds a partial sum over its slice of the contraction; psum is what makes it whole.",
    function=contracted_matmul_psum,
    args=("f32[16,64]", "f32[64,16]"),
    mesh={"x": 8},
    in_specs=((None, "x"), ("x", None)),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 170
