"""A step sharded with `NamedSharding` on eight host devices, dumped as a run dumps it (the flags set before JAX
starts, in a fresh process), then added with `add --dump`: its StableHLO declares the mesh its shardings name,
so the partitioner's drills ask of it as of a traced sharded program, each device's block checked against
JAX's own `NamedSharding.shard_shape`."""
import json
import subprocess
import sys

from dump_programs import dump_script
from dumpgym import cli

# The mesh, the arguments' global shapes and specs, and the constraint inside the step.
AXES = (("data", 2), ("model", 4))
ARGS = (((16, 32), (None, "model")), ((32, 16), ("model", None)), ((8, 16), ("data", None)))
CONSTRAINED = ((8, 32), ("data", "model"))

SCRIPT = r'''
import os
os.environ["XLA_FLAGS"] += " --xla_force_host_platform_device_count=8"  # before JAX starts, as a run sets it
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

mesh = jax.make_mesh({sizes}, {names}, axis_types=(jax.sharding.AxisType.Auto,) * {rank})

@jax.jit
def sharded_step(w1, w2, x):
    h = jax.nn.relu(x @ w1)
    h = jax.lax.with_sharding_constraint(h, NamedSharding(mesh, P(*{constrained!r})))
    return ((h @ w2) ** 2).mean(), w1 * 0.99, w2 * 0.99

args = [jax.device_put(jnp.ones(shape), NamedSharding(mesh, P(*spec))) for shape, spec in {args!r}]
sharded_step(*args)
'''


def _script() -> str:
    names, sizes = zip(*AXES)
    return SCRIPT.format(sizes=sizes, names=names, rank=len(AXES), constrained=CONSTRAINED[1], args=ARGS)


def _mesh():
    import jax

    names, sizes = zip(*AXES)
    return jax.make_mesh(sizes, names, axis_types=(jax.sharding.AxisType.Auto,) * len(AXES))


def test_a_sharded_dump_gives_partitioner_items_whose_blocks_are_jaxs_shard_shape(tmp_path):
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    folder = tmp_path / "dump"
    dump_script(_script(), folder, folder)
    corpus = tmp_path / "corpus"
    assert cli.main(["add", "--dump", str(folder), "--corpus", str(corpus)]) == 0
    record = json.loads((corpus / "dump-jit-sharded-step.json").read_text())
    assert record["mesh"] == dict(AXES)
    run = subprocess.run([sys.executable, "-m", "dumpgym", "drills", "--corpus", str(corpus), "--unpacked"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    items = [i for i in json.loads(run.stdout)["items"]
             if i["program"] == "dump-jit-sharded-step" and i["drill"] == "partitioner"]
    mesh = _mesh()
    blocks = [i for i in items if i.get("step") == "shard-shape"]
    assert {i["facts"]["argument"] for i in blocks if "argument" in i["facts"]} == set(range(len(ARGS)))
    for item in blocks:
        value = item["answer"]["value"]
        shape = tuple(int(d) for d in value[value.index("[") + 1:-1].split(",") if d)
        about = item["facts"]
        global_shape, spec = ARGS[about["argument"]] if "argument" in about else CONSTRAINED
        assert shape == NamedSharding(mesh, P(*spec)).shard_shape(global_shape), item["question"]
    assert any("stablehlo_line" in i["facts"] for i in blocks)  # the constraint's block is asked too
