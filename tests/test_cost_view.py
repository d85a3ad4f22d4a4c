"""The costs the x-ray shows (cost/view.py, data/cost/TARGET/SLUG.json): a line's share of the estimated time
checked against one worked out here from JAX's shapes, XLA's own counts and the compiled module read through
jaxlib's HLO bindings; one file per program and target, fetched apart from the page; and a layer recorded
without the facts cost/estimate.py needs gets a one-line note, never an error."""
from __future__ import annotations

import copy
import dataclasses
import json
import math
from unittest import mock

import pytest

from dumpgym.cost import estimate as cost
from dumpgym.cost.chips import CHIPS
from dumpgym.cost.view import COST_SCHEMA, cost_file, cost_view
from dumpgym.record.schema import Corpus
from dumpgym.site.files import site_files

EMPTY_POOL = {"schema": "dumpgym.drills/2", "kinds": [], "items": []}  # the cost files need no drills
# 8 bytes a member: XLA's index table of a tuple result, as its CPU and GPU compilers size it (cost/estimate.py's rule)
POINTER = 8


def _compile_for_tpu(f, args):
    """`f` compiled for the TPU as the gym compiles a program: its compiled layer and XLA's plain compile."""
    from dumpgym.compiled import layer as hlo
    from dumpgym.traced.facts import build_facts
    from dumpgym.record.targets import TPU
    from dumpgym.traced.trace import trace
    traced = trace(f, args)
    compiles = []
    real = hlo._compile_for_topology

    def recorded(*a):
        compiles.append(real(*a))
        return compiles[-1]

    with mock.patch.object(hlo, "_compile_for_topology", recorded):
        layer = hlo.compile_layer(traced, build_facts(traced), TPU)
    (made,) = compiles  # set going by the call, done by the time the layer is
    return layer, made.compiled.result()


@pytest.mark.compiled_hlo
@pytest.mark.needs_tpu
def test_each_lines_share_is_its_roofline_time_over_the_programs_as_worked_out_from_xla():
    """A matmul and a sine side by side: each instruction's time worked out here from the arrays' sizes
    (JAX's), the FLOPs and transcendentals XLA's cost_analysis() counts (the module's only ones), and which operand the TPU prefetched into VMEM (the
    module's copy-start, read through jaxlib's bindings); then each share is that time over their sum."""
    import jax
    import jax.numpy as jnp

    def f(x, w, y):
        return x @ w, jnp.sin(y)

    x, w, y = jnp.zeros((256, 512), jnp.bfloat16), jnp.zeros((512, 1024), jnp.bfloat16), jnp.zeros((1024, 1024))
    layer, plain = _compile_for_tpu(f, (x, w, y))
    dot_out, sin_out = (jax.eval_shape(g, x, w, y) for g in (lambda *a: f(*a)[0], lambda *a: f(*a)[1]))
    size = lambda a: math.prod(a.shape) * jnp.dtype(a.dtype).itemsize  # noqa: E731  (tiles fit: no padding)
    memory, xla = plain.memory_analysis(), plain.cost_analysis()
    assert memory.argument_size_in_bytes == size(x) + size(w) + size(y)
    assert xla["flops"] == 2 * 256 * 512 * 1024 and xla["transcendentals"] == math.prod(y.shape)
    module = plain.runtime_executable().hlo_modules()[0]
    entry = {ins.name: ins for ins in list(module.computations())[-1].instructions()}
    opcode = {name: str(ins.opcode).rsplit(".k", 1)[-1] for name, ins in entry.items()}
    params = {n: a for n, a in zip(("x.1", "w.1", "y.1"), (x, w, y))}
    # What each instruction's result is, in bytes; a copy-done holds its copy-start's operand, in VMEM.
    starts = {name: ins.operands()[0].name for name, ins in entry.items() if opcode[name] == "CopyStart"}
    done = {name: starts[ins.operands()[0].name] for name, ins in entry.items() if opcode[name] == "CopyDone"}
    assert list(done.values()) == ["w.1"], "the TPU prefetches the matmul's weight into VMEM"
    result = {**{n: size(a) for n, a in params.items()}, **{n: size(w) for n in done}}
    result |= {name: size(dot_out) if opcode[name] == "Fusion" else size(sin_out)
               for name in entry if opcode[name] in ("Fusion", "Sin")}
    chip = CHIPS["TPU v5 lite"]
    times = {}
    for name, ins in entry.items():
        hbm = 0
        if opcode[name] in ("Fusion", "Sin"):  # reads its operands from HBM (not a prefetched one), writes its result
            hbm = sum(result[o.name] for o in ins.operands() if o.name not in done) + result[name]
        elif opcode[name] == "CopyStart":
            hbm = result[starts[name]]
        elif opcode[name] == "Tuple":
            hbm = POINTER * len(ins.operands())  # (libtpu allocates 512 bytes for it: memory_analysis() says so)
        work = {"Fusion": xla["flops"], "Sin": xla["transcendentals"]}.get(opcode[name], 0)
        times[name] = max(work / chip.flops_per_s, hbm / chip.hbm_bytes_per_s)
    view = cost_view(layer, "tpu")
    shares = {r.name: r.share for r in view.rows}
    expected = {name: t / sum(times.values()) for name, t in times.items() if t}
    assert shares.keys() >= expected.keys()
    assert {n: shares[n] for n in expected} == pytest.approx(expected, rel=1e-9)
    assert all(not shares[n] for n in shares.keys() - expected.keys())
    assert view.seconds == pytest.approx(sum(times.values()), rel=1e-9)
    sine, = (r for r in view.rows if opcode[r.name] == "Sin")
    matmul, = (r for r in view.rows if opcode[r.name] == "Fusion")
    assert view.top == sine.line and sine.bound == "memory"
    # 2·M·N·K over only x and the result from HBM (the weight comes from VMEM): above the ridge point
    assert matmul.bound == "compute" and matmul.per_byte == xla["flops"] / (size(x) + size(dot_out)) > chip.ridge


@pytest.fixture(scope="module")
def record(corpus):
    return Corpus.from_json(corpus)


def test_every_timed_layers_shares_add_up_to_one_and_its_top_has_the_largest(record):
    for program in record.programs:
        for target, layer in program.compiled.items():
            view = cost_view(layer, target)
            assert view.error == "" and view.schema == COST_SCHEMA
            if view.chip is None:  # the CPU: figures, no time
                assert view.seconds is None and view.top is None and all(r.share is None for r in view.rows)
                continue
            assert sum(r.share for r in view.rows) == pytest.approx(1.0), (program.slug, target)
            assert sum(r.seconds for r in view.rows) == pytest.approx(view.seconds)
            top = next(r for r in view.rows if r.line == view.top)
            assert top.share == max(r.share for r in view.rows) and top.bound in ("compute", "memory", "interconnect")


def test_the_rows_are_the_instructions_outside_fusions_that_compute_or_move_something(record):
    mlp = next(p for p in record.programs if p.slug == "mlp")
    for target, layer in mlp.compiled.items():
        view = cost_view(layer, target)
        costs = cost.layer_cost(layer, target)
        outside = {c.line for c in costs.instructions if c.place in ("entry", "control")}
        busy = {c.line for c in costs.instructions if c.line in outside and c.work.bytes + c.work.flops}
        assert {r.line for r in view.rows} == busy and view.idle == len(outside - busy)
        printed = {i.line: layer.printed(i) for i in layer.instructions}
        assert all(r.opcode == printed[r.line] for r in view.rows)  # as the listing prints it: copy-start


def test_a_layer_recorded_without_the_cost_facts_gets_a_one_line_note_not_an_error(record):
    mlp = next(p for p in record.programs if p.slug == "mlp")
    old = dataclasses.replace(mlp.compiled["tpu"], computations=())
    with pytest.raises(cost.CostError) as raised:
        cost.layer_cost(old, "tpu")
    made = cost_file(old, "tpu")
    assert made["error"] == str(raised.value) and "\n" not in made["error"]
    assert not made["rows"] and made["chip"] is None


def test_a_device_kind_without_registered_peaks_gets_figures_and_no_time(record):
    """A dump added with `add --dump` names its TPU as the folder does (`TPU (v5 lite)`), not as XLA's device
    kind: no chip is registered for it, so it gets FLOPs and bytes, and the view says which device it is."""
    mlp = next(p for p in record.programs if p.slug == "mlp")
    dumped = dataclasses.replace(mlp.compiled["tpu"], device_kind="TPU (v5 lite)")
    assert "TPU (v5 lite)" not in CHIPS
    view, timed = cost_view(dumped, "tpu"), cost_view(mlp.compiled["tpu"], "tpu")
    assert view.chip is None and view.top is None and view.seconds is None
    assert (view.backend, view.device_kind) == ("tpu", "TPU (v5 lite)")
    assert [(r.line, r.flops, r.hbm_bytes) for r in view.rows] == [(r.line, r.flops, r.hbm_bytes) for r in timed.rows]
    assert all(r.share is None and r.bound == "" for r in view.rows)


def test_each_program_and_target_has_its_own_cost_file_and_the_page_carries_none(corpus):
    data = copy.deepcopy(corpus)
    mine = copy.deepcopy(next(p for p in data["programs"] if p["slug"] == "mlp"))
    mine.update(slug="mine", added=True)  # a user's program, added with `--hlo`
    data["programs"].append(mine)
    files = site_files(data, EMPTY_POOL)
    record = Corpus.from_json(data)
    expected = {f"data/cost/{t}/{p.slug}.json" for p in record.programs for t, layer in p.compiled.items() if layer.text}
    assert {path for path in files if path.startswith("data/cost/")} == expected
    assert "data/cost/tpu/mine.json" in expected
    made = json.loads(files["data/cost/tpu/mine.json"])
    layer = next(p for p in record.programs if p.slug == "mine").compiled["tpu"]
    costs = cost.layer_cost(layer, "tpu")
    assert {r["line"]: r["share"] for r in made["rows"]} == {
        c.line: costs.share(c) for c in costs.instructions if c.line in {r["line"] for r in made["rows"]}}
    page = files["index.html"].decode("utf-8")
    assert COST_SCHEMA not in page and "data/cost/" not in page
