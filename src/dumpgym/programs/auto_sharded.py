"""A tensor-parallel MLP under jax.jit on a 2x4 mesh: sharded inputs, a sharding constraint, no shard_map."""
import jax
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from dumpgym.traced.program import Program, change, on_mesh, sharded_structs, variant

# Auto axes, the partitioner's to propagate (jax.make_mesh's default here is Explicit, where jnp's
# matmul over a sharded contraction asks for an out_sharding instead).
def auto_mesh(data: int, model: int):
    """A mesh of `data` x `model` CPU devices whose axes the partitioner propagates over."""
    return jax.make_mesh((data, model), ("data", "model"), axis_types=(AxisType.Auto,) * 2,
                         devices=jax.devices()[: data * model])


MESH = auto_mesh(2, 4)
SPECS = (("data", None), (None, "model"), ("model", None))
ARGS = ("f32[16,32]", "f32[32,64]", "f32[64,32]")


def tensor_parallel_mlp(x, w_up, w_down, mesh=MESH, out=P("data", None)):
    h = jax.nn.relu(x @ w_up)
    return jax.lax.with_sharding_constraint(h @ w_down, NamedSharding(mesh, out))


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

# The same code at other shapes, on a 4x2 mesh and on the 2x4, so that per-device sizes and groups are read.
FOUR_BY_TWO = auto_mesh(4, 2)
VARIANTS = (
    variant(PROGRAM, 2, ("f32[24,40]", "f32[40,48]", "f32[48,40]"), function=on_mesh(tensor_parallel_mlp, FOUR_BY_TWO),
            mesh=FOUR_BY_TWO),
    variant(PROGRAM, 3, ("f32[8,48]", "f32[48,24]", "f32[24,48]"), mesh=MESH),
    # The same code compiled with one change, set beside this one's compile (`dumpgym diff auto-sharded-replicated`).
    change(PROGRAM, "replicated", "both weights replicated (PartitionSpec() for w_up and w_down)",
           in_specs=(("data", None), (), ()),
           lesson="every device holds the whole of both weights, so no contraction is split across devices"),
    change(PROGRAM, "gathered", "the output constrained replicated (out=P()) instead of by rows over data",
           keywords={"out": P()},
           lesson="every device must end with every row of the result, not only its own"),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 230
