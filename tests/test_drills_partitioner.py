"""The partitioner drill, its answers checked against JAX and XLA.

Blocks: `NamedSharding(mesh, spec).shard_shape(global_shape)` with the mesh built as the program builds
it, and, on the TPU and GPU compiles, the parameter shape XLA prints in a fresh compile for the topology.
Copies and device groups: the mesh's own `devices` on the TPU or GPU topology (`compiled.input_shardings`
of that fresh compile), read as XLA's logical device numbers (positions in the mesh's device order).
"""
from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from dumpgym.ir import hlo_facts
from dumpgym.drills import _sharding
from dumpgym.traced.program import parse_arg
from jax_reference import jaxpr_of, jit_of

TOPOLOGY = "v5e:2x4"
# The compiled layers the drill reads, each with its topology (as the corpus build compiles mesh programs)
# and the marker that skips a test where its compiler is missing.
TOPOLOGIES = {"tpu": TOPOLOGY, "gpu": "h100"}  # eight H100s: the build sizes a GPU topology to the mesh
COMPILED = [pytest.param("tpu", marks=pytest.mark.needs_tpu), pytest.param("gpu", marks=pytest.mark.needs_gpu)]


@pytest.fixture(scope="session")
def items(read_pool):
    return [i for i in read_pool if i["drill"] == "partitioner"]


def _mesh_on(program, devices):
    """The program's mesh (axis names and sizes in its order) over `devices`, as the program builds it."""
    import math

    import jax

    sizes = tuple(program.mesh.values())
    return jax.make_mesh(sizes, tuple(program.mesh), devices=list(devices[:math.prod(sizes)]))


@pytest.fixture(scope="session")
def fresh_compiles(programs):
    """target -> slug -> the compile of each mesh program for that target's topology (v5e:2x4, or eight
    H100s), as the corpus build makes it; made when first asked for."""
    from dumpgym.compiled.layer import _compile_for_topology  # the same retargeting the corpus build used
    from dumpgym.record.targets import Target
    from dumpgym.traced.trace import trace
    made = {}

    def get(target):
        if target not in made:
            made[target] = {}
            for program in programs.values():
                if program.mesh:
                    traced = trace(program.function, program.example_args())
                    made[target][program.slug] = _compile_for_topology(
                        traced, Target(target, TOPOLOGIES[target])).compiled.result()
        return made[target]
    return get


def _shape(text: str) -> tuple[int, ...]:
    """A typed block answer as a shape: `[16,32]`."""
    return tuple(int(d) for d in text[text.index("[") + 1:-1].split(",") if d)


def _answer(item):
    """The right answer as the item's form holds it: a typed value, or the tapped mesh axes."""
    return item["value"] if "value" in item else tuple(item["axes"])


def _rules(item) -> list[str]:
    return [m["rule"] for m in item["misread"].values()]


# --- the pool ---------------------------------------------------------------------------------

def test_the_partitioner_has_at_least_thirty_items_over_the_built_in_corpus(items):
    steps = Counter(i["step"] for i in items)
    assert len(items) >= 30, steps
    assert set(steps) == {"shard-shape", "group-axis"}
    assert steps["shard-shape"] >= 15 and steps["group-axis"] >= 8
    skills = Counter(i["skill"] for i in items if i["step"] == "group-axis")
    assert skills["copies"] >= 3 and skills["collective"] >= 4


def test_partitioner_items_have_the_fields_the_page_needs(items, by_slug):
    for item in items:
        assert item["layer"] in ("stablehlo", "tpu", "gpu") and item["question"].endswith("?")
        assert item["eqn"] is None or 0 <= item["eqn"] < len(by_slug[item["program"]]["eqns"])
        assert item["feedback"] and 0 < item["weight"] <= 1
        if item["step"] == "shard-shape":
            assert item["spelling"] == "shape" and len(item["misread"]) >= 2
        else:
            program = by_slug[item["program"]]
            assert item["dims"] == list(program["mesh"].values()) and (item["axes"] or item["skill"] == "copies")


def test_no_item_reads_the_cpu_compile(items, by_slug):
    for item in items:
        if item["layer"] in ("tpu", "gpu"):
            hlo = by_slug[item["program"]]["compiled"][item["layer"]]
            assert item["shown"][0].startswith(f"compiled by libtpu {hlo['libtpu_version']} for TPU v5 lite"
                                               if item["layer"] == "tpu" else "compiled by XLA for NVIDIA H100")
            if "instruction" in item:  # a StableHLO-read item names no compiled instruction
                assert f"%{item['instruction']} = " in hlo["text"].splitlines()[item["hlo_line"] - 1]
        assert not any("for CPU" in block for block in item["shown"])


def test_no_answer_can_be_copied_from_what_is_shown(items):
    for item in items:
        if item["step"] == "shard-shape":
            shown = "\n".join(item["shown"])
            dims = _shape(item["value"])
            assert item["value"] not in shown and "x".join(map(str, dims)) + "x" not in shown, item["question"]


def test_every_wrong_option_names_its_misreading(items):
    known = {"wrong-axis", "other-mesh-axis", "whole-mesh", "global-shape", "forgot-replicate", "reshape-as-tiles",
             "ignored-transpose", "split-as-copies", "other-axis", "groups-as-one", "one-axis-only",
             "replicated-as-split"}
    rules = Counter(r for i in items for r in _rules(i))
    assert set(rules) <= known
    assert {"wrong-axis", "other-mesh-axis", "forgot-replicate", "reshape-as-tiles", "ignored-transpose",
            "split-as-copies", "other-axis", "groups-as-one"} <= set(rules), rules


def test_answers_vary_within_each_step(items):
    for step in ("shard-shape", "group-axis"):
        asked = [i for i in items if i["step"] == step]
        assert len({_answer(i) for i in asked}) >= 2, step


# --- blocks against JAX -----------------------------------------------------------------------

def _expected_block(item, program, jaxpr_eqns):
    """What JAX says each device holds of the value the item asks about."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = _mesh_on(program, jax.devices())
    if "argument" in item:
        k = item["argument"]
        return NamedSharding(mesh, P(*program.in_specs[k])).shard_shape(parse_arg(program.args[k]).shape)
    if "stablehlo_line" in item:  # a sharding_constraint: the equation's own NamedSharding
        eqn = jaxpr_eqns[item["eqn"]]
        if eqn.primitive.name in ("jit", "pjit"):  # a jit's given sharding of an argument or result of that shape
            shape = _constrained_shape(item, program)
            given = zip((*eqn.params["in_shardings"], *eqn.params["out_shardings"]), (*eqn.invars, *eqn.outvars))
            (block,) = {s.shard_shape(v.aval.shape) for s, v in given
                        if isinstance(s, NamedSharding) and v.aval.shape == shape}
            return block
        assert eqn.primitive.name == "sharding_constraint"
        return eqn.params["sharding"].shard_shape(eqn.outvars[0].aval.shape)
    # A result: the sharding jit gives it (JAX's sharding object; the compiled text is not read).
    compiled = jit_of(program.function).lower(*program.example_args()).compile()
    k = item["result"]
    return jax.tree.leaves(compiled.output_shardings)[k].shard_shape(jax.tree.leaves(compiled.out_info)[k].shape)


def _constrained_shape(item, program) -> tuple[int, ...]:
    """The global shape of the value an `sdy.sharding_constraint` line constrains, as JAX's lowering prints it."""
    import re

    lowered = jit_of(program.function).lower(*program.example_args()).as_text()
    line = lowered.splitlines()[item["stablehlo_line"] - 1]
    assert "sdy.sharding_constraint" in line
    dims = re.search(r": tensor<([\dx]*)x?[a-z]\w*>$", line.strip()).group(1)
    return tuple(int(d) for d in dims.split("x") if d)


def _printed_eqns(closed_jaxpr):
    """The equations in print order, nested ones after their container (the record's ids)."""
    from jax.extend import core as jex

    out = []

    def visit(jaxpr):
        for eqn in jaxpr.eqns:
            out.append(eqn)
            for value in eqn.params.values():
                for sub in value if isinstance(value, (list, tuple)) else [value]:
                    if isinstance(sub, jex.ClosedJaxpr):
                        visit(sub.jaxpr)
                    elif isinstance(sub, jex.Jaxpr):
                        visit(sub)
    visit(closed_jaxpr.jaxpr)
    return out


def test_stablehlo_blocks_are_jaxs_shard_shape(items, programs):
    checked = 0
    for item in items:
        if item["step"] != "shard-shape" or item["layer"] != "stablehlo":
            continue
        program = programs[item["program"]]
        eqns = _printed_eqns(jaxpr_of(program.function, program.example_args())) if "stablehlo_line" in item else []
        assert _shape(_answer(item)) == tuple(_expected_block(item, program, eqns)), item["question"]
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize("target", COMPILED)
def test_compiled_blocks_are_jaxs_shard_shape_and_xlas_parameter_shape(target, items, programs, fresh_compiles):
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    checked = 0
    for item in items:
        if item["step"] != "shard-shape" or item["layer"] != target:
            continue
        program, k = programs[item["program"]], item["argument"]
        compiled = fresh_compiles(target)[item["program"]]
        global_shape = parse_arg(program.args[k]).shape
        mesh = compiled.input_shardings[0][k].mesh
        assert _shape(_answer(item)) == NamedSharding(mesh, P(*program.in_specs[k])).shard_shape(global_shape)
        assert _shape(_answer(item)) == compiled.input_shardings[0][k].shard_shape(global_shape)
        assert _shape(_answer(item)) == _xla_parameter_dims(compiled, k)
        checked += 1
    assert checked >= 6


def _xla_parameter_dims(compiled, number: int) -> tuple[int, ...]:
    """The shape XLA gives the entry computation's parameter `number`, from the compiled module."""
    module = compiled.runtime_executable().hlo_modules()[0]
    entry = list(module.computations())[-1]
    for ins in entry.instructions():
        text = ins.to_string()
        if re.search(rf" parameter\({number}\)", text):
            return hlo_facts.read_buffer(hlo_facts.defined(text)[1]).dims
    raise AssertionError(f"no parameter {number}")


# --- copies and groups against the mesh -------------------------------------------------------

@pytest.mark.parametrize("target", COMPILED)
def test_copies_answers_are_the_mesh_axes_of_the_devices_jax_gives_the_same_index(target, items, programs,
                                                                                  fresh_compiles):
    checked = 0
    for item in items:
        if item.get("skill") != "copies" or item["layer"] != target:
            continue
        program, k = programs[item["program"]], item["argument"]
        sharding = fresh_compiles(target)[item["program"]].input_shardings[0][k]
        mesh_devices = sharding.mesh.devices
        order = list(mesh_devices.flat)  # XLA's device numbers are positions in this order
        indices = sharding.devices_indices_map(parse_arg(program.args[k]).shape)
        same = [d for d in order if indices[d] == indices[order[0]]]
        coords = np.array([np.argwhere(mesh_devices == d)[0] for d in same])
        varying = tuple(a for a in range(mesh_devices.ndim) if len(set(coords[:, a])) > 1)
        assert _answer(item) == varying, item["question"]
        assert len(same) == int(np.prod([mesh_devices.shape[a] for a in varying]))
        checked += 1
    assert checked >= 3


@pytest.mark.parametrize("target", COMPILED)
def test_group_answers_are_the_mesh_axes_the_groups_run_along(target, items, programs, fresh_compiles):
    checked = 0
    for item in items:
        if item["step"] != "group-axis" or item["skill"] != "collective" or item["layer"] != target:
            continue
        compiled = fresh_compiles(target)[item["program"]]
        mesh = compiled.input_shardings[0][0].mesh
        assert tuple(mesh.axis_names) == tuple(programs[item["program"]].mesh)
        line = _xla_line(compiled, item["instruction"])  # the same collective in a fresh compile
        groups = hlo_facts.read_groups(hlo_facts.groups_text(line))
        axes = list(_answer(item))
        # The groups over those mesh axes: every device in mesh.devices with the other coordinates fixed.
        moved = np.moveaxis(mesh.devices, axes, list(range(-len(axes), 0)))
        size = int(np.prod([mesh.devices.shape[a] for a in axes]))
        expected = {frozenset(d.id for d in row) for row in moved.reshape(-1, size)}
        flat = list(mesh.devices.flat)
        assert {frozenset(flat[p].id for p in g) for g in groups} == expected, item["question"]
        checked += 1
    assert checked >= 4


def _xla_line(compiled, name: str) -> str:
    module = compiled.runtime_executable().hlo_modules()[0]
    for computation in module.computations():
        for ins in computation.instructions():
            if ins.name == name:
                return ins.to_string()
    raise AssertionError(f"no instruction {name}")


def test_iota_groups_are_read_by_xla_as_printed_lists():
    # `[4,2]<=[2,4]T(1,0)` numbers a 2x4 grid, transposes it, and cuts four groups of two.
    assert hlo_facts.read_groups("[4,2]<=[2,4]T(1,0)") == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert hlo_facts.read_groups("[2,4]<=[8]") == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert hlo_facts.read_groups("{{0,4},{1,5},{2,6},{3,7}}") == ((0, 4), (1, 5), (2, 6), (3, 7))


def test_the_mesh_axes_of_groups_follow_row_major_positions():
    assert _sharding.group_axes([[0, 1, 2, 3], [4, 5, 6, 7]], (2, 4)) == (1,)
    assert _sharding.group_axes([[0, 4], [1, 5], [2, 6], [3, 7]], (2, 4)) == (0,)
    assert _sharding.group_axes([list(range(8))], (2, 4)) == (0, 1)
    assert _sharding.group_axes([[0, 1], [2, 3], [4, 5], [6, 7]], (2, 4)) is None  # half a row: no whole axis


def test_mesh_groups_with_a_device_order_are_the_groups_other_backends_print_for_that_collective(whole_corpus):
    """XLA prints some CPU collectives' groups as a mesh with its device order (`mesh['axis_0'=4,'axis_1'=1,
    'axis_2'=2], device_ids=([2,4]T(1,0)) {'axis_0'}`); the TPU or GPU compile of the same program prints the
    same collective (same opcode, same op_name) as a list or an iota, which XLA's own sharding parser reads.
    Read both ways, the groups are the same sets of devices."""
    from dumpgym.record.schema import ProgramRecord

    def collectives(layer):
        lines = layer.text.splitlines()
        for g in layer.replica_groups:
            line = lines[g.line - 1]
            op = re.search(r'op_name="([^"]*)"', line)
            yield g, re.search(r" ([a-z-]+)\(", line.split("=", 1)[1]).group(1), op.group(1) if op else None

    checked = 0
    for data in whole_corpus["programs"]:  # the compiles with one change too
        record = ProgramRecord.from_json(data, data["slug"])
        if "cpu" not in record.compiled:
            continue
        others = {}
        for target in ("tpu", "gpu"):
            if target in record.compiled:
                for g, opcode, op in collectives(record.compiled[target]):
                    if not g.printed.startswith("mesh"):
                        others.setdefault((opcode.removesuffix("-start"), op), set()).add(
                            frozenset(map(frozenset, hlo_facts.read_groups(g.printed))))
        for g, opcode, op in collectives(record.compiled["cpu"]):
            if "device_ids=" in g.printed and (opcode, op) in others:
                assert frozenset(map(frozenset, g.groups)) in others[opcode, op], (record.slug, g.printed)
                checked += 1
    assert checked >= 1
