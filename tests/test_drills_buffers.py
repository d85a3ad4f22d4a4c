"""The buffer drill (GYM·09), its answers checked against JAX and XLA themselves.

Donation: JAX's own lowering of each program (the `tf.aliasing_output` attributes of `main`, read
through MLIR), a run on the CPU that shows which output really lands in a donated argument's
buffer, and fresh TPU and CPU compiles' `input_output_alias`. Copies and bitcasts: the opcode XLA
gives each instruction in a fresh TPU or CPU compile, by name. Layouts: JAX's `Layout`, which names
axes major to minor, compiled on the CPU and printed back by XLA.
"""
from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter

import pytest

from dumpgym import drills
from dumpgym.drills import buffers
from dumpgym.record.targets import libtpu_installed
from deep_programs import deep_attention
from jax_reference import jit_of

STEPS = ("lowered-alias", "compiled-alias", "copy-or-bitcast", "minor-axis", "major-axis")
FORMS = {"lowered-alias": "choice", "compiled-alias": "line", "copy-or-bitcast": "choice", "minor-axis": "axes",
         "major-axis": "axes"}
needs_tpu = pytest.mark.needs_tpu


@pytest.fixture(scope="session")
def items(read_pool):
    """The buffer items, `readable`, each with its answer form's name as `form`."""
    return [{**i, "form": i.get("form") or ("choice" if "options" in i else "line")}
            for i in read_pool if i["drill"] == "buffers"]


def _args(program):
    from dumpgym.traced.program import parse_arg

    return [parse_arg(a).to_struct() for a in program.args]


@pytest.fixture(scope="session")
def tpu_compiles(programs, items):
    """slug -> a fresh TPU compile of each single-device program that has TPU items, for the topology's first chip."""
    import jax

    from dumpgym.traced.devices import topology_devices

    device = topology_devices("v5e:2x2")[0]
    out = {}
    for slug in sorted({i["program"] for i in items if i["layer"] == "tpu"}):
        if programs[slug].mesh:
            continue  # a sharded program needs its mesh moved onto the topology; the others suffice here
        with jax.default_device(device):
            out[slug] = jit_of(programs[slug].function).lower(*programs[slug].example_args()).compile()
    return out


@pytest.fixture(scope="session")
def cpu_compiles(programs, items, by_slug):
    """slug -> a fresh CPU compile of each single-device program with CPU items that names the record's
    instructions (the CPU's compile belongs to the host: another machine kind prints other names). Compared
    by XLA's own instruction objects, not the text: a program jitted earlier in the session keeps its
    source locations in the text."""
    out = {}
    for slug in sorted({i["program"] for i in items if i["layer"] == "cpu"}):
        if programs[slug].mesh:
            continue
        compiled = jit_of(programs[slug].function).lower(*programs[slug].example_args()).compile()
        module = compiled.runtime_executable().hlo_modules()[0]
        fresh = {ins.name for comp in module.computations() for ins in comp.instructions()}
        if fresh == {i["name"] for i in by_slug[slug]["compiled"]["cpu"]["instructions"]}:
            out[slug] = compiled
    return out


# --- the pool ---

def test_at_least_thirty_buffer_items_over_the_built_in_corpus(items):
    assert len(items) >= 30
    steps = Counter(i["step"] for i in items)
    assert set(steps) == set(STEPS), steps
    assert steps["compiled-alias"] >= 8 and steps["lowered-alias"] >= 5
    assert steps["copy-or-bitcast"] >= 100
    assert steps["minor-axis"] + steps["major-axis"] >= 10


def test_items_have_the_fields_the_page_needs(items, by_slug):
    for item in items:
        assert item["step"] in STEPS and item["eqn"] is None and item["question"].endswith(("?", "."))
        assert item["layer"] in ("stablehlo", "cpu", "tpu") and item["form"] == FORMS[item["step"]]
        assert isinstance(item["shown"], list) and all(isinstance(b, str) and b for b in item["shown"])
        assert 0 < item["weight"] <= 1 and item["feedback"] and item["skill"]
        if item["form"] == "choice":
            options = item["options"]
            assert 2 <= len(options) <= 4 and len(set(options)) == len(options), item
            assert len(item["reasons"]) == len(item["rules"]) == len(options)
            for k, (reason, rule) in enumerate(zip(item["reasons"], item["rules"])):
                assert (reason == "" and rule == "") == (k == item["answer"]), item
        if item["layer"] in ("tpu", "cpu"):
            hlo = by_slug[item["program"]]["compiled"][item["layer"]]
            what = f"compiled by libtpu {hlo['libtpu_version']} for TPU v5 lite" if item["layer"] == "tpu" else \
                "compiled by XLA for CPU"
            assert what in item["shown"][0 if item["step"] != "compiled-alias" else 1]


def _tapped_parameter(item, by_slug) -> str:
    """The instruction on the tapped row of a compiled-alias item's first block, read from the listing."""
    block = item["context"][0]
    line = block["lines"][0] + item["answer_line"] - 1
    text = by_slug[item["program"]]["compiled"][item["layer"]]["text"].splitlines()[line - 1]
    match = re.match(r"\s*%([\w.\-]+) = \S+ parameter\((\d+)\)", text)
    assert match, text
    return match.group(1)


def test_no_answer_can_be_copied_off_the_screen(items):
    for item in items:
        if item["step"] == "lowered-alias":
            answer = item["options"][item["answer"]]
            assert not any(answer in block for block in item["shown"]), item
        if item["step"] == "copy-or-bitcast":  # the opcode and the names would say it
            text = " ".join(item["shown"])
            assert not re.search(r"\b(copy|bitcast)\b|%", text), item
            assert item["instruction"] not in text
        if item["step"] == "compiled-alias":  # the question names the output, never the parameter
            assert "%" not in item["question"] and "parameter(" not in item["question"]


def test_copies_and_bitcasts_are_a_balanced_judgement(items):
    moves = [i for i in items if i["step"] == "copy-or-bitcast"]
    copies = [i for i in moves if i["copies"]]
    weight = sum(i["weight"] for i in copies) / sum(i["weight"] for i in moves)
    assert 0.4 <= len(copies) / len(moves) <= 0.6 and 0.4 <= weight <= 0.6
    positions = Counter(i["answer"] for i in moves)
    assert max(positions.values()) <= 0.6 * len(moves)
    assert len({len(o) for i in moves for o in i["options"]}) == 2 and len({tuple(sorted(i["options"])) for i in moves}) == 1


def test_answers_vary_within_each_step(items):
    for step in STEPS:
        asked = [i for i in items if i["step"] == step]
        answers = [i["options"][i["answer"]] if i["form"] == "choice" else
                   i.get("answer_line") if i["form"] == "line" else tuple(i["axes"]) for i in asked]
        assert len(set(answers)) >= 2, step
    lowered = [i for i in items if i["step"] == "lowered-alias"]
    none = [i for i in lowered if i["options"][i["answer"]].startswith("none")]
    assert none and len(none) < len(lowered)


def test_every_wrong_answer_names_its_misreading(items):
    rules = Counter(r for i in items if i["form"] == "choice" for r in i["rules"] if r)
    rules.update(m["rule"] for i in items if i["form"] == "axes" for m in i["misread"].values())
    assert {"looked-at-result", "same-type", "position-pairing", "reshape-as-copy", "space-move-as-free",
            "relayout-as-free", "major-to-minor", "logical-order"} <= set(rules), rules
    for item in items:
        if item["form"] == "choice":
            for option, reason in zip(item["options"], item["reasons"]):
                if reason and option.startswith("%"):  # a named option's reason speaks of that very buffer
                    assert option.split(" (")[0] in reason, (option, reason)
    for item in (i for i in items if i["step"] == "compiled-alias"):
        # the rows a misreading taps (the first printed, a parameter of the output's shape) are explained
        assert len(item["explain"]) >= 2 and all("parameter" in r or "%" in r for r in item["explain"].values())


def test_a_bitcast_is_called_the_same_order_only_where_it_is(items):
    """Issue 33: a tiled bitcast whose minor sizes change keeps its bytes only because the tiling lines up."""
    from jaxlib import xla_client

    said = Counter()
    for item in (i for i in items if i["step"] == "copy-or-bitcast" and not i["copies"]):
        operand, result = (line.split()[1] for line in item["shown"][1].splitlines())
        shapes = [xla_client.Shape(t) for t in (operand, result)]
        tiled = any("T(" in t for t in (operand, result))
        minor = [tuple(sh.dimensions()[a] for a in sh.layout().minor_to_major()[:2]) for sh in shapes]
        same = not tiled or (minor[0] == minor[1] and operand.split(":")[-1] == result.split(":")[-1])
        said[same] += 1
        assert ("the same bytes in the same order" in item["feedback"]) == same, item["feedback"]
    assert said[True] and said[False]


def test_the_pool_is_the_same_on_every_run(corpus, pool):
    again = [i for i in drills.build_pool(corpus)["items"] if i["drill"] == "buffers"]
    assert again == [i for i in pool["items"] if i["drill"] == "buffers"]


def test_one_program_does_not_dominate(items):
    weight = Counter()
    for i in items:
        weight[i["program"]] += i["weight"]
    assert max(weight.values()) <= min(buffers.PROGRAM_CAP + 0.05, 0.2 * sum(weight.values())), weight


def test_making_the_items_does_not_import_jax():
    code = ("import sys, json; from dumpgym.corpus.builtin import BUILTIN_PATH; from dumpgym.record.schema import ProgramRecord; "
            "from dumpgym.drills import buffers; c = json.loads(BUILTIN_PATH.read_text()); "
            "assert sum(len(buffers.buffer_items(ProgramRecord.from_json(p, 'p'))) for p in c['programs']); "
            "assert 'jax' not in sys.modules, 'jax imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


# --- donation, against JAX ---

def _lowered_aliasing(program) -> dict[int, int]:
    """argument -> result, as JAX's own lowering marks `main` (read through MLIR)."""
    from jaxlib.mlir import ir

    module = jit_of(program.function).lower(*program.example_args()).compiler_ir("stablehlo")
    main = next(op for op in module.body.operations if ir.StringAttr(op.attributes["sym_name"]).value == "main")
    out = {}
    if "arg_attrs" in main.attributes:
        for i, attrs in enumerate(ir.ArrayAttr(main.attributes["arg_attrs"])):
            attrs = ir.DictAttr(attrs)
            if "tf.aliasing_output" in attrs:
                out[i] = ir.IntegerAttr(attrs["tf.aliasing_output"]).value
    return out


def _result_of(item) -> int:
    """The result (output) an alias item asks about, as its question names it."""
    return int(re.search(r"(?:Result |output \{|Output \{)(\d+)", item["question"]).group(1)) \
        if "entry's result" not in item["question"] else 0


def test_lowered_alias_answers_are_jaxs_own_marks(items, programs):
    checked = 0
    for item in (i for i in items if i["step"] == "lowered-alias"):
        program = programs[item["program"]]
        if program.platform == "tpu" and not libtpu_installed():
            continue  # a Pallas TPU kernel lowers only for a TPU
        lenders = {r: a for a, r in _lowered_aliasing(program).items()}
        k = _result_of(item)
        answer = item["options"][item["answer"]]
        expected = f"%arg{lenders[k]} " if k in lenders else buffers.NONE_LOWERED
        assert answer.startswith(expected), (item["question"], answer)
        checked += 1
    assert checked >= 5


def test_donated_buffers_really_go_to_the_answered_results(items, programs):
    import jax.numpy as jnp

    program = programs["train-step"]
    args = [jnp.full(s.shape, 0.5 + i, s.dtype) for i, s in enumerate(_args(program))]
    pointers = [a.unsafe_buffer_pointer() for a in args]
    outputs = program.function(*args)
    for item in (i for i in items if i["program"] == "train-step" and i["step"] == "lowered-alias"):
        k, answer = _result_of(item), item["options"][item["answer"]]
        landed = outputs[k].unsafe_buffer_pointer()
        if answer == buffers.NONE_LOWERED:
            assert landed not in pointers
        else:
            assert landed == pointers[int(re.match(r"%arg(\d+)", answer).group(1))]


def _fresh_aliasing(compiled) -> dict[int, int]:
    """output index -> parameter number, from a fresh compile's `input_output_alias`."""
    header = compiled.as_text().splitlines()[0]
    table = re.search(r"input_output_alias=\{ (.*?) \}", header)
    pairs = re.findall(r"\{(\d*)\}: \((\d+), \{\}", table.group(1)) if table else []
    return {int(o or 0): int(p) for o, p in pairs}


def _check_compiled_alias(item, compiled, programs, by_slug) -> None:
    module = compiled.runtime_executable().hlo_modules()[0]
    entry = re.search(r"^ENTRY %([\w.\-]+)", compiled.as_text(), re.M).group(1)
    numbers = {ins.name: int(re.search(r" parameter\((\d+)\)", ins.to_string()).group(1))
               for comp in module.computations() if comp.name == entry for ins in comp.instructions()
               if str(ins.opcode) == "HloOpcode.kParameter"}
    k = _result_of(item)
    name = _tapped_parameter(item, by_slug)
    assert _fresh_aliasing(compiled)[k] == numbers[name], (item["question"], name)
    assert numbers[name] in set(_lowered_aliasing(programs[item["program"]]))  # JAX marks it donated


@needs_tpu
def test_compiled_alias_answers_match_a_fresh_tpu_compile(items, tpu_compiles, programs, by_slug):
    asked = [i for i in items if i["step"] == "compiled-alias" and i["layer"] == "tpu" and i["program"] in tpu_compiles]
    for item in asked:
        _check_compiled_alias(item, tpu_compiles[item["program"]], programs, by_slug)
    assert len(asked) >= 5


def test_compiled_alias_answers_match_a_fresh_cpu_compile(items, cpu_compiles, programs, by_slug):
    asked = [i for i in items if i["step"] == "compiled-alias" and i["layer"] == "cpu"]
    if not any(i["program"] in cpu_compiles for i in asked):
        pytest.skip("the CPU compile of this machine kind differs from the corpus's")
    for item in (i for i in asked if i["program"] in cpu_compiles):
        _check_compiled_alias(item, cpu_compiles[item["program"]], programs, by_slug)


def test_every_donated_output_is_asked_at_each_compiled_layer(items, by_slug):
    record = by_slug["train-step"]
    for layer in ("tpu", "cpu"):
        outputs = {int(m or 0) for m in re.findall(r"\{(\d*)\}: \(\d+, \{\}",
                                                  record["compiled"][layer]["text"].splitlines()[0])}
        asked = {_result_of(i) for i in items if i["step"] == "compiled-alias" and i["layer"] == layer}
        # the CPU prints a scalar without a layout (`f32[]`), and the record keeps buffers with layouts only,
        # so its output {6}, `count`, has no shape to name in the question
        assert asked == outputs if layer == "tpu" else asked == outputs - {6}, layer


# --- copies and bitcasts, against XLA's opcodes ---

def _check_moves(asked, compiles) -> int:
    checked = 0
    for item in (i for i in asked if i["program"] in compiles):
        module = compiles[item["program"]].runtime_executable().hlo_modules()[0]
        by_name = {ins.name: ins for comp in module.computations() for ins in comp.instructions()}
        ins = by_name[item["instruction"]]
        assert str(ins.opcode) in ("HloOpcode.kBitcast", "HloOpcode.kCopy", "HloOpcode.kCopyStart")
        assert item["shown"][1].splitlines()[1].split()[1] in ins.to_string()  # the result, as XLA prints it
        answer = item["options"][item["answer"]]
        assert answer == (buffers.FREE if str(ins.opcode) == "HloOpcode.kBitcast" else buffers.COPIES), item
        checked += 1
    return checked


@needs_tpu
def test_copy_and_bitcast_answers_follow_xlas_opcodes_on_the_tpu(items, tpu_compiles):
    asked = [i for i in items if i["step"] == "copy-or-bitcast" and i["layer"] == "tpu"]
    assert _check_moves(asked, tpu_compiles) >= 30


def test_copy_and_bitcast_answers_follow_xlas_opcodes_on_the_cpu(items, cpu_compiles):
    asked = [i for i in items if i["step"] == "copy-or-bitcast" and i["layer"] == "cpu"]
    if not any(i["program"] in cpu_compiles for i in asked):
        pytest.skip("the CPU compile of this machine kind differs from the corpus's")
    assert _check_moves(asked, cpu_compiles) >= 10


# --- layouts, against JAX's Layout ---

def test_layout_answers_are_what_jaxs_layout_calls_minor_and_major(items):
    import jax
    import jax.numpy as jnp
    from jax.experimental.layout import Format, Layout
    from jax.sharding import SingleDeviceSharding
    from jaxlib import xla_client

    cpu = SingleDeviceSharding(jax.devices("cpu")[0])
    checked = 0
    for item in (i for i in items if i["step"] in ("minor-axis", "major-axis")):
        shape = xla_client.Shape(item["buffer"])
        printed = re.search(r"`\w+\[[\d,]*\](\{[\d,]+\})`", item["question"]).group(1)
        major_to_minor = tuple(reversed([int(a) for a in printed[1:-1].split(",")]))
        arg = jax.ShapeDtypeStruct(tuple(shape.dimensions()), jnp.dtype(shape.numpy_dtype()),
                                   sharding=Format(Layout(major_to_minor), cpu))
        compiled = jax.jit(lambda x: x).lower(arg).compile()
        assert compiled.input_formats[0][0].layout.major_to_minor == major_to_minor
        assert re.search(rf"\]{re.escape(printed)} parameter\(0\)", compiled.as_text())  # XLA prints it minor first
        k = int(re.search(r"of axis (\d+) ", item["question"]).group(1))
        assert item["axis"] == k, item["question"]
        place, rank = major_to_minor.index(k), len(major_to_minor)
        # JAX names axes major to minor: those after k change faster (minor of it), those before it slower
        expected = major_to_minor[place + 1:] if item["step"] == "minor-axis" else major_to_minor[:place]
        assert item["axes"] == sorted(expected) and item["dims"] == list(shape.dimensions()), item["question"]
        # the shape alone never gives the answer: not none, not the row-major habit's, not the largest or
        # the smallest dims; and the step's end of the layout breaks the row-major habit
        dims = item["dims"]
        habit = list(range(k + 1, rank)) if item["step"] == "minor-axis" else list(range(k))
        by_size = [[a for a in range(rank) if dims[a] == pick(dims)] for pick in (max, min)]
        assert rank >= 3 and item["axes"] and item["axes"] not in (habit, *by_size), item["question"]
        end = major_to_minor[-1] if item["step"] == "minor-axis" else major_to_minor[0]
        assert end != (rank - 1 if item["step"] == "minor-axis" else 0), item["question"]
        checked += 1
    assert checked >= 10


def test_a_deep_programs_copies_and_bitcasts_put_the_answer_first_in_half_the_weight():
    # Four attention layers under grad, compiled on the CPU: four copies, each weighing 1, and six bitcasts. A
    # fixed shuffle by the buffers' text put the answer second in 71% of the weight; the places are dealt now.
    from dumpgym.corpus.pipeline import program_record
    from dumpgym.record.schema import ProgramRecord
    from dumpgym.record.targets import CPU
    from dumpgym.traced.program import Program
    from pool_checks import kind_items

    program = Program(slug="deep-attention", title="t", lesson="l", function=deep_attention,
                      args=("f32[2,8,32]", *["f32[32,32]"] * 4))
    record = ProgramRecord.from_json(program_record(program, targets=(CPU,)).to_json())
    moves = [{**i, "program": "deep"} for i in kind_items(record, "buffers") if i["step"] == "copy-or-bitcast"]
    assert sum(i["copies"] for i in moves) >= 3 and sum(not i["copies"] for i in moves) >= 3
    total = sum(i["weight"] for i in moves)
    first = sum(i["weight"] for i in moves if i["answer"] == 0) / total
    assert 0.4 <= first <= 0.6, first
    for side in (True, False):  # and each side's own items take both places
        assert {i["answer"] for i in moves if i["copies"] == side} == {0, 1}
    # each answer still XLA's opcode for the instruction, in a fresh compile (when this host names them alike)
    compiled = jit_of(deep_attention).lower(*program.example_args()).compile()
    module = compiled.runtime_executable().hlo_modules()[0]
    if {ins.name for comp in module.computations() for ins in comp.instructions()} != {
            i.name for i in record.compiled["cpu"].instructions}:
        pytest.skip("the CPU compile of this machine kind differs from the record's")
    assert _check_moves(moves, {"deep": compiled}) == len(moves)
