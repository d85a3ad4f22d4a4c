"""A data-parallel matmul under shard_map: rows split over eight devices."""
from functools import partial

import jax
from jax.sharding import PartitionSpec as P

from dumpgym.program import Program, cpu_mesh

MESH = cpu_mesh(x=8)


@partial(jax.shard_map, mesh=MESH, in_specs=(P("x", None), P(None, None)), out_specs=P("x", None))
def sharded_matmul(x, w):
    return x @ w


PROGRAM = Program(
    slug="sharded",
    title="sharded matmul (data parallel)",
    lesson="Each device multiplies its own rows by the whole weight: the body sees x as f32[8,32] and needs no collective.",
    function=sharded_matmul,
    args=("f32[64,32]", "f32[32,16]"),
    mesh={"x": 8},
    in_specs=(("x", None), (None, None)),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 160
