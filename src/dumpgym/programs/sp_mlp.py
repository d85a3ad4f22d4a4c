"""A sequence-parallel MLP under jax.jit with in_shardings and out_shardings on a 2x4 mesh."""
from functools import partial

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from dumpgym.traced.program import Program, on_mesh, sharded_structs, variant
# Auto axes, the 2x4 and 4x2 meshes of auto-sharded: the partitioner decides every collective.
from dumpgym.programs.auto_sharded import FOUR_BY_TWO, MESH

# The batch over data and the sequence over model (sequence parallel); the weights cut over model (tensor parallel).
SPECS = (("data", "model", None), (None, "model"), ("model", None))
ARGS = ("f32[4,32,64]", "f32[64,128]", "f32[128,64]")


def sp_mlp(x, w_up, w_down, mesh=MESH):
    @partial(jax.jit, in_shardings=tuple(NamedSharding(mesh, P(*spec)) for spec in SPECS),
             out_shardings=NamedSharding(mesh, P("data", "model", None)))
    def mlp(x, w_up, w_down):
        return jax.nn.gelu(x @ w_up) @ w_down

    return mlp(x, w_up, w_down)


PROGRAM = Program(
    slug="sp-mlp",
    title="sequence-parallel MLP, sharded by jit's in_shardings",
    lesson=("The MLP is a jit of its own whose in_shardings cut the batch over data and the sequence over model, "
            "w_up by columns and w_down by rows over model, and whose out_shardings cut the result as the input "
            "came. The jaxpr shows one jit equation with global shapes, its shardings among its params. Nothing "
            "names a collective: the partitioner chooses. Here the compiled HLO all-gathers both weights over "
            "model, so that each device multiplies its own block of the sequence by whole weights and no partial "
            "sum is left to reduce."),
    function=sp_mlp,
    args=ARGS,
    mesh={"data": 2, "model": 4},
    in_specs=SPECS,
    structs=sharded_structs(MESH, ARGS, SPECS),
)

# The same code on a 4x2 mesh and at other shapes, so that per-device blocks and groups are read, not remembered.
VARIANTS = (
    variant(PROGRAM, 2, ("f32[8,16,32]", "f32[32,96]", "f32[96,32]"), function=on_mesh(sp_mlp, FOUR_BY_TWO),
            mesh=FOUR_BY_TWO),
    variant(PROGRAM, 3, ("f32[2,48,40]", "f32[40,64]", "f32[64,40]"), mesh=MESH),
    variant(PROGRAM, 4, ("f32[4,24,48]", "f32[48,80]", "f32[80,48]"), function=on_mesh(sp_mlp, FOUR_BY_TWO),
            mesh=FOUR_BY_TWO),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 310
