"""A data-parallel matmul under shard_map: rows split over eight devices."""
from functools import partial

import jax
from jax.sharding import PartitionSpec as P

from dumpgym.traced.program import Program, cpu_mesh, on_mesh, variant

MESH = cpu_mesh(x=8)


def sharded_matmul(x, w, mesh=MESH):
    @partial(jax.shard_map, mesh=mesh, in_specs=(P("x", None), P(None, None)), out_specs=P("x", None))
    def rows(x, w):
        return x @ w

    return rows(x, w)


PROGRAM = Program(
    slug="sharded",
    title="sharded matmul (data parallel)",
    lesson="Each device multiplies its own rows by the whole weight: the body sees x as f32[8,32] and needs no collective.",
    function=sharded_matmul,
    args=("f32[64,32]", "f32[32,16]"),
    mesh={"x": 8},
    in_specs=(("x", None), (None, None)),
)

# The same code at other shapes, on four devices and on eight, so that per-device sizes are read, not remembered.
FOUR = cpu_mesh(x=4)
VARIANTS = (
    variant(PROGRAM, 2, ("f32[48,40]", "f32[40,24]"), function=on_mesh(sharded_matmul, FOUR), mesh=FOUR),
    variant(PROGRAM, 3, ("f32[24,48]", "f32[48,32]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 160
