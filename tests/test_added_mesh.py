"""An added program keeps its mesh: the one its arguments' NamedShardings share (with each argument's
spec), or the one its shard_map binds; so the partitioner drill asks about it as about a built-in one."""
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

import dumpgym
from dumpgym.drills import build_pool


def _mesh(kind=jax.sharding.AxisType.Explicit):
    return jax.make_mesh((2, 4), ("data", "model"), devices=jax.devices()[:8], axis_types=(kind, kind))


def _ring(x, mesh=None):
    """A collective_permute ring over `model`, the way a hand-written ring all-gather starts."""
    def body(block):
        n = jax.lax.axis_size("model")
        return jax.lax.ppermute(block, "model", [(i, (i + 1) % n) for i in range(n)])

    return jax.shard_map(body, mesh=mesh or _mesh(), in_specs=P("data", "model"), out_specs=P("data", "model"))(x)


def test_a_program_with_sharded_inputs_records_their_mesh_and_specs(tmp_path):
    mesh = _mesh()
    x = jax.ShapeDtypeStruct((16, 64), jnp.float32, sharding=NamedSharding(mesh, P("data", "model")))
    scale = jax.ShapeDtypeStruct((16, 1), jnp.float32, sharding=NamedSharding(mesh, P("data")))
    record = dumpgym.add(lambda x, s: _ring(x) * s, x, scale, slug="ring", corpus=tmp_path / "c")
    assert record.mesh == dict(zip(mesh.axis_names, mesh.axis_sizes)) == {"data": 2, "model": 4}
    assert record.in_specs == [["data", "model"], ["data", None]]  # the scale's spec names its first axis only
    pool = build_pool({"programs": [record.to_json()]})
    asked = [i for i in pool["items"] if i["drill"] == "partitioner"]
    assert asked and all(i["program"] == "ring" for i in asked)


def test_a_shard_map_over_unsharded_inputs_records_the_mesh_it_binds(tmp_path):
    auto = _mesh(jax.sharding.AxisType.Auto)  # an unsharded input is resharded to the specs
    x = jax.ShapeDtypeStruct((16, 64), jnp.float32)
    record = dumpgym.add(lambda x: _ring(x, auto), x, slug="ring-plain", corpus=tmp_path / "c")
    assert record.mesh == {"data": 2, "model": 4} and record.in_specs is None


def test_a_program_on_one_device_has_no_mesh(tmp_path):
    record = dumpgym.add(jnp.tanh, jax.ShapeDtypeStruct((8,), jnp.float32), slug="one", corpus=tmp_path / "c")
    assert record.mesh is None and record.in_specs is None


def test_a_sharding_constraint_inside_a_function_with_unsharded_inputs_records_its_mesh(tmp_path):
    mesh = _mesh(jax.sharding.AxisType.Auto)

    def constrained(x, w):
        h = jax.lax.with_sharding_constraint(x @ w, NamedSharding(mesh, P("data", "model")))
        return jnp.tanh(h)

    x, w = jax.ShapeDtypeStruct((16, 32), jnp.float32), jax.ShapeDtypeStruct((32, 64), jnp.float32)
    record = dumpgym.add(constrained, x, w, slug="constrained", corpus=tmp_path / "c")
    lowered = jax.jit(constrained).lower(x, w).as_text()
    assert record.stablehlo == lowered and "sharding_constraint" in lowered  # the program states its mesh there
    assert record.mesh == dict(zip(mesh.axis_names, mesh.axis_sizes)) == {"data": 2, "model": 4}
    assert record.in_specs is None  # the arguments are whole: only the constraint names the mesh
    pool = build_pool({"programs": [record.to_json()]})
    assert any(i["drill"] == "partitioner" and i["program"] == "constrained" for i in pool["items"])


def _devices_jax_compiles_onto(function, *args) -> int:
    """How many devices JAX's own compile of the program spans (its executable's argument and result shardings)."""
    compiled = function.lower(*args).compile() if hasattr(function, "lower") else jax.jit(function).lower(*args).compile()
    shardings = jax.tree.leaves([compiled.input_shardings, compiled.output_shardings])
    return max(len(s.device_set) for s in shardings)


def _stated_mesh(lowered) -> dict[str, int]:
    """The mesh JAX's lowering states, read from its module's one `sdy.mesh` op by MLIR's own bindings."""
    from jaxlib.mlir.dialects import sdy

    module = lowered.compiler_ir("stablehlo")
    meshes = [op for op in module.body.operations if op.operation.name == "sdy.mesh"]
    assert len(meshes) == 1, lowered.as_text()[:400]
    axes = [sdy.MeshAxisAttr(a) for a in sdy.MeshAttr(meshes[0].attributes["mesh"]).axes]
    return {a.name: a.size for a in axes}


def test_a_jitted_functions_in_and_out_shardings_record_their_mesh_and_specs(tmp_path):
    from dumpgym.compiled.layer import devices_needed
    from dumpgym.traced.trace import trace

    mesh = _mesh(jax.sharding.AxisType.Auto)
    jitted = jax.jit(lambda x, w: jnp.tanh(x @ w), in_shardings=(NamedSharding(mesh, P("data")), None),
                     out_shardings=NamedSharding(mesh, P(None, "model")))
    x, w = jax.ShapeDtypeStruct((16, 32), jnp.float32), jax.ShapeDtypeStruct((32, 64), jnp.float32)
    record = dumpgym.add(jitted, x, w, slug="jit-sharded", corpus=tmp_path / "c")
    lowered = jitted.lower(x, w)
    assert record.stablehlo == lowered.as_text()
    assert record.mesh == _stated_mesh(lowered) == {"data": 2, "model": 4}
    assert record.in_specs == [list(NamedSharding(mesh, P("data")).spec) + [None], [None, None]]
    assert devices_needed(trace(jitted, (x, w))) == _devices_jax_compiles_onto(jitted, x, w) == 8


def test_a_function_traced_under_set_mesh_records_the_mesh_jit_states(tmp_path):
    mesh = _mesh()  # Explicit axes: jit writes the context mesh into the StableHLO
    x = jax.ShapeDtypeStruct((16, 32), jnp.float32)
    with jax.set_mesh(mesh):
        record = dumpgym.add(lambda x: jnp.tanh(x) * 2, x, slug="in-mesh", corpus=tmp_path / "c")
        lowered = jax.jit(lambda x: jnp.tanh(x) * 2).lower(x)
    assert record.stablehlo == lowered.as_text()
    assert record.mesh == _stated_mesh(lowered) == {"data": 2, "model": 4}


def test_a_sharding_constraint_counts_its_mesh_among_the_devices_the_program_needs():
    from dumpgym.compiled.layer import devices_needed
    from dumpgym.traced.trace import trace

    mesh = _mesh(jax.sharding.AxisType.Auto)

    def constrained(x):
        return jax.lax.with_sharding_constraint(x * 2, NamedSharding(mesh, P("data", "model")))

    x = jax.ShapeDtypeStruct((16, 32), jnp.float32)
    assert devices_needed(trace(constrained, (x,))) == _devices_jax_compiles_onto(constrained, x) == 8
