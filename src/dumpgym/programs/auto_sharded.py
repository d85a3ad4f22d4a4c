"""A tensor-parallel MLP under jax.jit on a 2x4 mesh: sharded inputs, a sharding constraint, no shard_map."""
import jax
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from dumpgym.program import Program, sharded_structs

# Auto axes, the partitioner's to propagate (jax.make_mesh's default here is Explicit, where jnp's
# matmul over a sharded contraction asks for an out_sharding instead).
MESH = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2, devices=jax.devices()[:8])
SPECS = (("data", None), (None, "model"), ("model", None))
ARGS = ("f32[16,32]", "f32[32,64]", "f32[64,32]")


def tensor_parallel_mlp(x, w_up, w_down):
    h = jax.nn.relu(x @ w_up)
    return jax.lax.with_sharding_constraint(h @ w_down, NamedSharding(MESH, P("data", None)))


PROGRAM = Program(
    slug="auto-sharded",
    title="tensor-parallel MLP, sharded by jit",
    lesson=("No shard_map here: the inputs arrive sharded (x by rows over data, w_up by columns and w_down by "
            "rows over model) and jit's partitioner decides the rest. The jaxpr keeps global shapes and holds one "
            "sharding_constraint, on the output; StableHLO writes each input's sharding on main's arguments as "
            "sdy.sharding and the constraint as sdy.sharding_constraint. The second dot_general contracts the "
            "axis sharded over model, so the compiled HLO finishes it with an all-reduce that no equation names."),
    function=tensor_parallel_mlp,
    args=ARGS,
    mesh={"data": 2, "model": 4},
    in_specs=SPECS,
    structs=sharded_structs(MESH, ARGS, SPECS),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 230
