"""The costs of cost/estimate.py, checked against JAX and XLA: each compiled dot's FLOPs against XLA's count of that
dot compiled alone, each dot_general equation's against `jax.experimental.roofline`, and each program's sums
against `cost_analysis()` and `memory_analysis()` of a fresh compile, differing only where docs/cost.md
names the difference (which instruction, whose rule)."""
from __future__ import annotations

import functools
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dumpgym.cost import chips

from dumpgym.cost import estimate as cost

pytestmark = pytest.mark.compiled_hlo
DOC = Path(__file__).resolve().parents[1] / "docs" / "cost.md"
MARKS = {"tpu": [pytest.mark.needs_tpu], "gpu": [pytest.mark.needs_gpu], "cpu": []}
# Programs whose compiles hold every kind the cost rules tell apart: dots and batched dots (TPU: convolutions
# with windows), scans' whiles (with in-place updates), a conditional, collectives, a scatter, gathers and
# windowed reduces.
PROGRAMS = ("mlp", "gqa", "scan-layers", "decode-loop", "rnn-bptt", "cond-switch", "psum", "fsdp-step", "moe",
            "embed-xent", "sdpa", "sp-mlp-3", "sp-mlp-4")


@functools.cache
def fresh(slug: str, target: str):
    """A built-in program compiled here (as test_hlo_fresh.py compiles it): its layer and XLA's compile it was made from."""
    from test_hlo_fresh import _fresh

    _facts, layer, made = _fresh(slug, target)
    return layer, made.compiled.result()


def _cases(targets):
    return [pytest.param(slug, t, marks=MARKS[t], id=f"{slug}-{t}") for t in targets for slug in PROGRAMS]


def documented_differences() -> dict[tuple[str, str, str], str]:
    """The rows of docs/cost.md's table of differences: (program, target, figure) -> why."""
    rows = re.findall(r"^\| `([\w*-]+)` \| (cpu|tpu|gpu) \| (flops|transcendentals|bytes) \| (.+) \|$",
                      DOC.read_text(encoding="utf-8"), flags=re.M)
    return {(slug, target, figure): why for slug, target, figure, why in rows}


@functools.cache
def _xla_dot_flops(lhs: tuple, rhs: tuple, dims: tuple) -> tuple[float, tuple]:
    """XLA's FLOPs for one dot of these shapes and dimension numbers, compiled alone here, and its result shape."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def dot(a, b):
        return lax.dot_general(a, b, dims)

    args = (jax.ShapeDtypeStruct(lhs, jnp.float32), jax.ShapeDtypeStruct(rhs, jnp.float32))
    flops = jax.jit(dot).lower(*args).compile().cost_analysis()["flops"]
    return flops, jax.eval_shape(dot, *args).shape


@pytest.mark.parametrize("slug, target", _cases(("cpu", "gpu")))
def test_every_compiled_dot_counts_what_xla_counts_for_that_dot_alone(slug, target):
    layer, _ = fresh(slug, target)
    layer_cost = cost.layer_cost(layer, target)
    costs = {c.line: c for c in layer_cost.instructions}
    by_line = {i.line: i for i in layer.instructions}

    def dims(line):
        return layer.buffers[layer.shapes[by_line[line].shape].buffers[0]].dims

    dots = [i for i in layer.instructions if i.opcode == "dot"]
    if not dots:  # a GPU writes decode-loop's matrix-vector products as reduces: no matmul FLOPs then
        assert layer_cost.total.matmul == 0 and layer_cost.total.reduction > 0
    for ins in dots:
        d = ins.dot
        numbers = ((d.lhs_contracting, d.rhs_contracting), (d.lhs_batch, d.rhs_batch))
        flops, shape = _xla_dot_flops(dims(ins.operands[0]), dims(ins.operands[1]), numbers)
        assert shape == dims(ins.line), ins.name  # the dimension numbers are read as JAX reads them
        assert costs[ins.line].work.matmul == flops, ins.name


def _documented_or_equal(slug, target, figure, ours, xla):
    differences = documented_differences()
    named = (slug, target, figure) in differences or ("*", target, figure) in differences
    if named:
        assert ours != xla, f"docs/cost.md names a {figure} difference for {slug} on {target} that is gone"
    else:
        assert ours == xla, f"{slug} on {target}: our {figure} {ours}, XLA's {xla}; not named in docs/cost.md"


@pytest.mark.parametrize("slug, target", _cases(("cpu", "tpu")))
def test_program_sums_are_xlas_cost_analysis_or_the_docs_name_the_difference(slug, target):
    layer, plain = fresh(slug, target)
    xla = plain.cost_analysis()
    assert layer.xla_cost["flops"] == xla["flops"]  # the record keeps what XLA said
    once = cost.layer_cost(layer, target).once
    _documented_or_equal(slug, target, "flops", once.flops, xla["flops"])
    _documented_or_equal(slug, target, "transcendentals", once.transcendentals, xla.get("transcendentals", 0.0))
    _documented_or_equal(slug, target, "bytes", once.bytes, xla["bytes accessed"])


def test_every_documented_difference_names_a_program_this_file_compiles():
    for slug, target, figure in documented_differences():
        assert slug == "*" or slug in PROGRAMS, (slug, target, figure)


@pytest.mark.parametrize("target", [pytest.param(t, marks=MARKS[t]) for t in ("cpu", "tpu", "gpu")])
def test_the_arguments_bytes_at_their_layouts_are_what_xla_allocates(target):
    layer, plain = fresh("mlp", target)
    rows = cost.layer_cost(layer, target).instructions
    params = {p.line for p in layer.entry_parameters}
    by_line = {i.line: i for i in layer.instructions}
    # Each parameter is read whole by its users; its padded bytes are XLA's argument sizes.
    padded = sum(layer.buffers[b].padded_bytes() for line in params for b in layer.shapes[by_line[line].shape].buffers)
    assert padded == plain.memory_analysis().argument_size_in_bytes
    assert layer.xla_memory["argument_size_in_bytes"] == padded
    assert any(c.work.read for c in rows if c.place == "entry")


@pytest.mark.needs_tpu
def test_a_tpu_prefetch_moves_hbm_bytes_into_vmem():
    layer, _ = fresh("mlp", "tpu")
    rows = {c.opcode: c for c in cost.layer_cost(layer, "tpu").instructions}
    start, done = rows["copystart"], rows["copydone"]
    assert set(start.work.read) == {0} and set(done.work.written) == {1}  # HBM read, VMEM (S(1)) written
    assert start.work.read[0] == done.work.written[1]


@pytest.mark.parametrize("target", [pytest.param(t, marks=MARKS[t]) for t in ("cpu", "tpu")])
def test_an_all_gather_sends_all_but_its_own_piece_of_the_result(target):
    layer, _ = fresh("fsdp-step", target)
    rows = {c.line: c for c in cost.layer_cost(layer, target).instructions}
    groups = {g.line: g.groups for g in layer.replica_groups}
    gathers = [i for i in layer.instructions if i.opcode in ("allgather", "allgatherstart")]
    assert gathers
    for ins in gathers:
        n = len(groups[ins.line][0])
        read = sum(rows[ins.line].work.read.values())  # one device's piece
        if ins.opcode == "allgather":  # the gathered result holds one piece from each device of the group
            assert sum(rows[ins.line].work.written.values()) == n * read, ins.name
        assert rows[ins.line].work.sends == (n - 1) * read, ins.name


@pytest.mark.parametrize("target", [pytest.param(t, marks=MARKS[t]) for t in ("cpu", "tpu")])
def test_a_scans_while_runs_its_body_as_often_as_the_jaxpr_says(target):
    from dumpgym.programs import builtin_program
    import jax

    program = builtin_program("scan-layers")
    jaxpr = jax.make_jaxpr(program.function)(*program.example_args())
    lengths = {e.params["length"] for e in jaxpr.jaxpr.eqns if e.primitive.name == "scan"}
    layer, _ = fresh("scan-layers", target)
    assert {cost.trips(c) for c in layer.while_counters} <= lengths and layer.while_counters
    costs = cost.layer_cost(layer, target)
    body = {ins.control[1] for ins in layer.instructions if ins.opcode == "while"}
    assert {c.runs for c in costs.instructions if c.computation in body} <= lengths


def test_every_chip_of_the_corpus_has_its_peaks_and_the_docs_state_them(corpus):
    kinds = {layer["device_kind"] for p in corpus["programs"] for layer in p.get("compiled", {}).values()
             if layer.get("device_kind")}
    assert kinds <= set(chips.CHIPS)
    text = DOC.read_text(encoding="utf-8")
    for kind, chip in chips.CHIPS.items():
        assert f"`{kind}`" in text and chip.name in text, kind
        assert f"{chip.flops_per_s / 1e12:g} TFLOP/s" in text and f"{chip.hbm_bytes_per_s / 1e9:g} GB/s" in text
        assert chip.interconnect_bytes_per_s and chip.interconnect_source, kind  # collectives are timed on every chip
        assert f"{chip.interconnect_bytes_per_s / 1e9:g} GB/s" in text, kind


def test_a_record_made_before_the_cost_facts_is_refused_in_one_line(tmp_path):
    import dataclasses

    layer, _ = fresh("mlp", "cpu")
    old = dataclasses.replace(layer, instructions=tuple(dataclasses.replace(i, dot=None) for i in layer.instructions))
    with pytest.raises(cost.CostError, match="dumpgym corpus build"):
        cost.layer_cost(old, "cpu")


def run(*args):
    return subprocess.run([sys.executable, "-m", "dumpgym", *args], capture_output=True, text=True, timeout=600)


def test_the_cost_command_prints_a_row_per_instruction_and_the_sums_beside_xlas():
    result = run("cost", "mlp", "--target", "cpu", "--compile")
    assert result.returncode == 0, result.stderr
    layer, _ = fresh("mlp", "cpu")
    out = result.stdout.splitlines()
    rows = [line for line in out if re.match(r"\s*\d+ ", line)]
    assert len(rows) == sum(1 for i in layer.instructions if i.computation == next(
        c.name for c in layer.computations if c.entry))
    assert any(line.startswith("XLA's cost_analysis(): ") for line in out)


def test_the_cost_table_names_each_opcode_as_xla_prints_it():
    """`copy-start` as the TPU text prints it, not the record's key `copystart`: the row is read against the
    listing."""
    result = run("cost", "mlp", "--target", "tpu")
    assert result.returncode == 0, result.stderr
    rows = {line.split()[2]: line.split()[1] for line in result.stdout.splitlines() if re.match(r"\s*\d+ ", line)}
    text = next(p for p in json.loads(run("export").stdout)["programs"] if p["slug"] == "mlp")["compiled"]["tpu"]["text"]
    for name, opcode in rows.items():
        assert re.search(rf"%{re.escape(name)} = .*?\b{re.escape(opcode)}\(", text), (name, opcode)
    assert rows["copy-start"] == "copy-start"


def test_the_cost_command_refuses_a_layer_the_program_lacks_in_one_line():
    result = run("cost", "pallas-matmul", "--target", "cpu")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "no cpu layer" in result.stderr


@pytest.mark.parametrize("strides, padding, lhs_dilation, rhs_dilation, groups", [
    ((1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1), 1),
    ((2, 1), ((1, 2), (0, 1)), (1, 1), (1, 1), 1),
    ((1, 3), ((2, 2), (1, 1)), (2, 3), (1, 1), 1),
    ((1, 1), ((1, 1), (2, 0)), (1, 1), (2, 2), 1),
    ((2, 2), ((0, 0), (0, 0)), (1, 1), (1, 1), 3),
])
def test_a_convolutions_flops_are_what_xla_counts_for_it(strides, padding, lhs_dilation, rhs_dilation, groups):
    """The convolution rule (valid kernel positions per spatial dimension) against XLA's own count, on a
    convolution compiled here and read back by the compile stage's reader."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jaxlib import xla_client

    from dumpgym.ir.hlo_facts import read_convolution
    from dumpgym.ir.hlo_graph import defined

    def conv(x, k):
        return lax.conv_general_dilated(x, k, strides, padding, lhs_dilation, rhs_dilation,
                                        feature_group_count=groups)

    args = (jax.ShapeDtypeStruct((2, 6, 9, 11), jnp.float32),
            jax.ShapeDtypeStruct((12, 6 // groups, 3, 4), jnp.float32))
    compiled = jax.jit(conv).lower(*args).compile()
    lines = compiled.as_text().splitlines()
    shapes = {found[0]: found[1] for found in map(defined, lines) if found}
    (line,) = [line for line in lines if (found := defined(line)) and found[2] == "convolution"]
    operands = line.split("convolution(", 1)[1].split(")", 1)[0].replace("%", "").split(", ")

    def dims(name):
        return tuple(xla_client.Shape(shapes[name]).dimensions())

    ours = cost.convolution_flops(read_convolution(line), dims(operands[0]), dims(operands[1]),
                                  dims(defined(line)[0]))
    assert ours == compiled.cost_analysis()["flops"]


def test_an_async_all_gather_of_several_arrays_sends_pieces_of_every_result():
    """fsdp-step's GPU compile gathers both weights in one `all-gather-start(a, b)`, printed
    `((a, b), (A, B))`: each device sends n-1 of n pieces of A and of B, read here from the printed shapes."""
    from dumpgym.corpus.builtin import load_builtin
    from dumpgym.record.schema import Corpus

    record = next(p for p in Corpus.from_json(load_builtin()).programs if p.slug == "fsdp-step")
    layer = record.compiled["gpu"]
    line = next(n for n, text in enumerate(layer.text.splitlines(), 1) if " all-gather-start(" in text)
    text = layer.text.splitlines()[line - 1]
    results = re.match(r"\s*%\S+ = \(\((.*?)\), \((.*?)\)\) all-gather-start", text).group(2)
    sizes = [math.prod(int(d) for d in dims.split(",")) * 4 for dims in re.findall(r"f32\[([\d,]+)\]", results)]
    assert len(sizes) == 2
    # replica_groups=mesh['axis_0'=2,'axis_1'=4] {'axis_0'}: a group is the devices along the axes named.
    mesh, axes = re.search(r"replica_groups=mesh\[([^\]]*)\] \{([^}]*)\}", text).groups()
    sizes_of = {name: int(size) for name, size in re.findall(r"'(\w+)'=(\d+)", mesh)}
    devices = math.prod(sizes_of[a] for a in re.findall(r"'(\w+)'", axes))
    assert devices == 2
    ring = cost.rings(layer)[line]
    assert ring.devices == devices
    assert ring.sends == sum(sizes) * (devices - 1) // devices
