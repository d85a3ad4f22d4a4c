"""Drills from a dump: a user's dump folder, added with `add --dump --module`, gives the drill kinds whose answers
its texts hold, as a traced program does. Dumps are made as a run makes them (the flags set before JAX starts,
in a fresh process) of programs as users write them (`tests/dump_drill_programs.py`): an RNN's train step
over a `lax.scan`, a fit in a `lax.while_loop` with a `lax.cond` inside, a `jax.checkpoint`ed MLP under
`jax.grad` (CPU), and a transformer block's train step with Adam (a TPU compile with libtpu and no TPU).
Every item passes the pool's checks; typed avals are checked against the jaxpr JAX traces of the same
function here, the names a dumped jaxpr reads against JAX's own variables, and the chip a TPU dump names
against JAX's device kind for that topology."""
import subprocess
import sys
from collections import Counter

import pytest

from dump_drill_programs import PROGRAMS, added_pool, jax_equations, load
from dump_programs import make_dump
from dumpgym.record.schema import ProgramRecord
from pool_checks import assert_choice_item, assert_pool_item, readable

CPU_PROGRAMS = ("rnn_train_step", "fit_while", "remat_mlp_step")
# The kinds each program's texts hold on the CPU (a TPU layer adds layouts, units and cost): its jaxpr and
# StableHLO give shapes, decoder and decisions everywhere, a gradient backward items, a loop loops items.
CPU_KINDS = {
    "rnn_train_step": {"backward", "decisions", "decoder", "fusions", "loops", "shapes"},
    "fit_while": {"decisions", "decoder", "loops", "shapes"},
    "remat_mlp_step": {"backward", "decisions", "decoder", "fusions", "shapes"},
}
BAR_ITEMS = 20  # issue 43: each of these programs gives at least this many items on the CPU
BAR_TPU_KINDS = 7  # and a TPU dump of a train step at least this many kinds


@pytest.fixture(scope="module")
def cpu(tmp_path_factory):
    root = tmp_path_factory.mktemp("dumpdrills")
    folder = make_dump(root / "cpu", CPU_PROGRAMS, "cpu", module="dump_drill_programs")
    return added_pool(folder, root / "corpus", CPU_PROGRAMS)


def _items(pool: dict, record: ProgramRecord) -> list[dict]:
    return [i for i in pool["items"] if i["program"] == record.slug]


@pytest.mark.parametrize("name", CPU_PROGRAMS)
def test_each_program_dumped_on_the_cpu_gives_twenty_items_of_every_kind_its_texts_hold(cpu, name):
    pool, records = cpu
    items = _items(pool, records[name])
    kinds = Counter(i["drill"] for i in items)
    assert len(items) >= BAR_ITEMS, kinds
    assert set(kinds) >= CPU_KINDS[name], kinds
    assert not [s for s in pool.get("skipped", ()) if s["program"] == records[name].slug]


def _check_items(pool: dict, records: dict[str, ProgramRecord]) -> None:
    for name, record in records.items():
        ids = {e.id for e in record.eqns}
        for item in _items(pool, record):
            assert_pool_item(item, ids)
            shown = readable(item, record)
            assert shown["shown"] and all(isinstance(b, str) and b for b in shown["shown"]), item["card"]
            if (item["drill"], item.get("step")) == ("loops", "role") or (item["drill"], item["layer"], item["answer"]["form"]) == ("fusions", "tpu", "choice"):
                assert_choice_item(shown)  # as the loops and TPU tests hold built-in items of these


def test_every_item_of_a_cpu_dump_passes_the_pool_checks(cpu):
    _check_items(*cpu)


def _short(aval) -> str:
    return aval.str_short(short_dtypes=True)


def test_typed_avals_are_those_jax_traces(cpu):
    """A shapes item's answer and a decoder item's output aval are the aval JAX gives that equation's output (an
    equation of the same primitive on the same input avals), and a loop body's view of a scanned operand is the
    aval the scan's own body takes, as JAX traces the same function."""
    pool, records = cpu
    checked = Counter()
    for name, record in records.items():
        outputs, bodies = {}, {}
        for eqn in jax_equations(name):
            key = (eqn.primitive.name, tuple(_short(v.aval) for v in eqn.invars), str(eqn.params.get("new_dtype")),
                   tuple(eqn.params.get("axes", ())))
            outputs.setdefault(key, set()).add(tuple(_short(v.aval) for v in eqn.outvars))
            if eqn.primitive.name == "scan":
                bodies.setdefault(key, set()).add(tuple(map(_short, eqn.params["jaxpr"].in_avals)))
        for item in _items(pool, record):
            if item["eqn"] is None or item["answer"]["form"] != "typed":
                continue
            eqn = record.eqns[item["eqn"]]
            key = (eqn.primitive, tuple(str(x.aval if hasattr(x, "literal") else x) for x in eqn.inputs),
                   str(eqn.param("new_dtype")), tuple(eqn.param("axes") or ()))  # what a conversion, a reduction makes
            value = item["answer"]["value"]
            if item["drill"] == "shapes" or (item["drill"] == "decoder" and item.get("step") == "output"):
                assert key in outputs, (name, key)
                assert all(value in found for found in outputs[key]), (name, item["card"], value, outputs[key])
                checked[item["drill"]] += 1
            elif item["drill"] == "loops" and item.get("step") == "body-aval":
                operand = item["facts"]["operand"]
                assert {avals[operand] for avals in bodies[key]} == {value}, (name, item["card"])
                checked["loops"] += 1
    assert checked["shapes"] >= 10 and checked["decoder"] >= 3 and checked["loops"] >= 3, checked


def test_a_dumped_jaxpr_reads_its_names_as_jax_binds_them():
    """Each input's source, read from the printed names, is the equation whose output JAX binds to that variable
    (or the argument), in a jaxpr of more than 222 variables, where JAX names one `in`."""
    import jax
    import jax.numpy as jnp

    from dumpgym.ir.jaxpr_text import read_jaxpr

    def many(x):
        for _ in range(120):
            x = jnp.sin(x) * x
        return x

    closed = jax.make_jaxpr(many)(jnp.ones(4))
    text = str(closed)
    assert " in " in text.split("in (")[0]  # a variable named `in` is read by some equation
    read = read_jaxpr(text)
    assert read is not None and len(read.eqns) == len(closed.jaxpr.eqns)
    made_by = {v: (n, k) for n, eqn in enumerate(closed.jaxpr.eqns) for k, v in enumerate(eqn.outvars)}
    arguments = {v: k for k, v in enumerate((*closed.jaxpr.constvars, *closed.jaxpr.invars))}
    for ours, theirs in zip(read.eqns, closed.jaxpr.eqns):
        assert ours.primitive == theirs.primitive.name
        for source, var in zip(ours.sources, theirs.invars, strict=True):
            if var in made_by:
                assert (source.eqn, source.index) == made_by[var]
            else:
                assert source.eqn is None and source.index == arguments[var]


def test_a_jaxpr_sharded_over_two_mesh_axes_reads_as_jax_printed_it(programs):
    """A dimension cut over two mesh axes prints `64@(x,y)` (collective-matmul's shard_map result): its comma is
    not a dimension's. The dumped text reads whole, each equation's results the shapes JAX gave them."""
    import jax

    from dumpgym.ir.jaxpr_text import read_jaxpr
    from dumpgym.ir.parse import jaxpr_results

    program = programs["collective-matmul"]
    closed = jax.make_jaxpr(program.function)(*program.example_args())
    text = str(closed)
    assert "@(x,y)]" in text
    read = read_jaxpr(text)
    assert read is not None
    (ours,) = [e for e in read.eqns if e.primitive == "shard_map"]
    (theirs,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "shard_map"]
    assert [o.shape for o in ours.outputs] == [v.aval.shape for v in theirs.outvars]
    assert jaxpr_results(text) == tuple(v.aval.shape for v in closed.jaxpr.outvars)


def test_a_while_loops_cond_and_body_are_linked_as_a_trace_links_them(cpu):
    """fit_while's loop: every equation of its cond and body that `dumpgym add` of the same function links to
    StableHLO ops is linked in the dump's record too (JAX lowers the cond first, though it prints second)."""
    from dumpgym.corpus.pipeline import program_record
    from dumpgym.record.targets import CPU

    _pool, records = cpu
    record = records["fit_while"]
    traced = program_record(load("fit_while"), targets=(CPU,))
    assert [e.primitive for e in record.eqns] == [e.primitive for e in traced.eqns]
    linked = {g.eqn for g in record.xray}
    loop = next(e.id for e in record.eqns if e.primitive == "while")
    inside = [e for e in traced.eqns if loop in {a.id for a in traced.ancestors(e)}]
    assert inside and {e.id for e in inside if any(g.eqn == e.id for g in traced.xray)} <= linked


def test_a_backward_pass_is_read_from_the_name_stacks(cpu):
    """The dump's top-level equations carry the name stack their ops carry, as a trace's do: a gradient's
    backward equations are `transpose(jvp())`'s, and the backward items come from them."""
    from dumpgym.corpus.pipeline import program_record
    from dumpgym.record.targets import CPU

    pool, records = cpu
    for name in ("rnn_train_step", "remat_mlp_step"):
        record, traced = records[name], program_record(load(name), targets=(CPU,))
        ours = Counter((e.primitive, e.name_stack) for e in record.eqns if e.parent is None and e.name_stack)
        theirs = Counter((e.primitive, e.name_stack) for e in traced.eqns if e.parent is None)
        assert ours and not ours - theirs, (name, ours - theirs)
        assert any(record.in_backward(e) for e in record.eqns)


@pytest.mark.needs_tpu
def test_a_tpu_dump_of_a_train_step_gives_seven_kinds(tmp_path):
    names = ("transformer_train_step", "rnn_train_step")
    folder = make_dump(tmp_path / "tpu", names, "tpu", module="dump_drill_programs")
    pool, records = added_pool(folder, tmp_path / "corpus", names)
    kinds = Counter(i["drill"] for i in _items(pool, records["transformer_train_step"]))
    assert len(kinds) >= BAR_TPU_KINDS, kinds
    assert set(kinds) >= {"backward", "buffers", "cost", "decisions", "decoder", "fusions", "layouts", "shapes",
                          "units"}, kinds
    # The scan's loop runs once per step of its sequence, the length of xs JAX scans over.
    length = load("rnn_train_step").example_args()[4].shape[0]
    trips = [i["answer"]["value"] for i in _items(pool, records["rnn_train_step"]) if i.get("step") == "trips"]
    assert trips and set(trips) == {str(length)}, trips
    _check_items(pool, records)
    # A compiled item says the dump's run compiled it, for the chip JAX names (no libtpu or host of this machine).
    by_slug = {r.slug: r for r in records.values()}
    notes = {b for i in pool["items"] if i["layer"] == "tpu" and i["program"] in by_slug
             for b in readable(i, by_slug[i["program"]])["shown"] if b.startswith("compiled")}
    assert notes == {"compiled for TPU v5 lite by the run that wrote your dump, read from it"}


_GENERATIONS_SCRIPT = r'''
import sys
import jax, jax.numpy as jnp
from dumpgym.traced.devices import topology_devices
device = topology_devices(sys.argv[1])[0]
print(device.device_kind)
with jax.default_device(device):
    jax.jit(lambda x: x * 2).trace(jax.ShapeDtypeStruct((8,), jnp.float32)).lower(lowering_platforms=("tpu",)).compile()
'''


@pytest.mark.needs_tpu
def test_the_chip_a_tpu_dump_names_is_the_device_kind_jax_gives_it(tmp_path):
    """libtpu names the TPU version it compiled for in the dump; the record's device kind is JAX's for the same
    topology, for every generation the gym compiles for."""
    import os

    from dumpgym.dumps.folder import read_folder
    from dumpgym.dumps.facts import LIBTPU_DEVICE_KINDS
    from dumpgym.dumps.record import module_record
    from dumpgym.record.targets import GENERATIONS

    for generation in GENERATIONS:
        topology = f"{generation}:2x2" if generation in ("v5e", "v6e") else f"{generation}:2x2x1"
        folder = tmp_path / generation
        env = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={folder}"}
        run = subprocess.run([sys.executable, "-c", _GENERATIONS_SCRIPT, topology], env=env, capture_output=True,
                             text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
        (module,) = [m for m in read_folder(folder).modules if m.backend == "tpu"]
        kind = run.stdout.strip().splitlines()[-1]
        assert LIBTPU_DEVICE_KINDS[module.target] == kind, generation
        # The program's title and lesson name the chip as JAX does, not by libtpu's code name.
        record = module_record(module, "dump-x", (str(folder),))
        assert f"(dump, {kind})" in record.title and "TPU_VERSION" not in record.title + record.lesson
        assert record.dump.target == kind  # the panel under the x-ray says it the same way
