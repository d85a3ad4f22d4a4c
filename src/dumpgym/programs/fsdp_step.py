"""Gradients of an MLP under jit with fully sharded weights on a 2x4 mesh: the partitioner's gathers and scatters."""
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from dumpgym.traced.program import Program, change, on_mesh, sharded_structs, variant
from dumpgym.programs.auto_sharded import auto_mesh

# Auto axes, as in auto-sharded: the partitioner decides every collective.
MESH = auto_mesh(2, 4)
# Weights are split over both axes (FSDP over data, tensor parallel over model); the batch over data.
SPECS = (("data", "model"), ("model", "data"), ("data", None), ("data", None))
ARGS = ("f32[64,128]", "f32[128,64]", "f32[32,64]", "f32[32,64]")


def fsdp_grads(w_in, w_out, x, y, mesh=MESH, g_specs=(P("data", "model"), P("model", "data"))):
    def loss(w_in, w_out):
        h = jax.nn.gelu(x @ w_in)
        return jnp.mean((h @ w_out - y) ** 2)

    g_in, g_out = jax.grad(loss, argnums=(0, 1))(w_in, w_out)
    # Gradients leave sharded as the weights came in: an optimizer would update each shard in place.
    return (jax.lax.with_sharding_constraint(g_in, NamedSharding(mesh, g_specs[0])),
            jax.lax.with_sharding_constraint(g_out, NamedSharding(mesh, g_specs[1])))


PROGRAM = Program(
    slug="fsdp-step",
    title="fully sharded gradients on a 2x4 mesh",
    lesson=("Both weights arrive cut over the whole mesh, one axis over data and the other over model, and "
            "the batch is cut over data. The jaxpr and StableHLO keep global shapes; the shardings they state "
            "are the arguments' and the two constraints on the gradients. The compiled HLO is per device: a "
            "weight is all-gathered over data before it is used, a contraction over an axis cut across model "
            "ends in an all-reduce over model, and each weight gradient, summed over the batch's devices, is cut "
            "back to its shard (on TPU, one by an all-reduce-scatter fusion and the other by an all-reduce and a "
            "dynamic-slice)."),
    function=fsdp_grads,
    args=ARGS,
    mesh={"data": 2, "model": 4},
    in_specs=SPECS,
    structs=sharded_structs(MESH, ARGS, SPECS),
)

# The same code at other shapes on a 4x2 mesh, so that shards, gathers and groups are read, not remembered.
FOUR_BY_TWO = auto_mesh(4, 2)
VARIANTS = (
    variant(PROGRAM, 2, ("f32[48,80]", "f32[80,48]", "f32[24,48]", "f32[24,48]"),
            function=on_mesh(fsdp_grads, FOUR_BY_TWO), mesh=FOUR_BY_TWO, title="fully sharded gradients"),
    # The same code compiled with one change, set beside this one's compile (`dumpgym diff fsdp-step-replicated`).
    change(PROGRAM, "replicated", "both weights arrive replicated (PartitionSpec() for w_in and w_out)",
           in_specs=((), (), ("data", None), ("data", None)),
           lesson="no weight is gathered before it is used; the gradients are still cut to their shards"),
    change(PROGRAM, "whole-grads", "the gradients constrained replicated (g_specs=(P(), P())) instead of cut to the weights' shards",
           keywords={"g_specs": (P(), P())},
           lesson="every device must end with the whole of both gradients, not only its shard"),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 280
