"""The buffer drill (GYM·09), its answers checked against JAX and XLA themselves.

Donation: JAX's own lowering of each program (the `tf.aliasing_output` attributes of `main`, read
through MLIR), a run on the CPU that shows which output really lands in a donated argument's
buffer, and a fresh TPU compile's `input_output_alias`. Copies and bitcasts: the opcode XLA gives
each instruction in a fresh TPU compile, by name. Layouts: JAX's `Layout`, which names axes major
to minor, compiled on the CPU and printed back by XLA.
"""
from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter

import pytest

from dumpgym import drills
from dumpgym.drills import buffers
from dumpgym.target import libtpu_installed
from jax_reference import jit_of

STEPS = ("lowered-alias", "compiled-alias", "real-copy", "free-bitcast", "minor-axis", "major-axis")
needs_tpu = pytest.mark.needs_tpu


@pytest.fixture(scope="session")
def items(read_pool):
    return [i for i in read_pool if i["drill"] == "buffers"]


def _args(program):
    from dumpgym.program import parse_arg

    return [parse_arg(a).to_struct() for a in program.args]


@pytest.fixture(scope="session")
def tpu_compiles(programs, items):
    """slug -> a fresh TPU compile of each single-device program that has TPU items, for the topology's first chip."""
    import jax

    from dumpgym.target import topology_devices

    device = topology_devices("v5e:2x2")[0]
    out = {}
    for slug in sorted({i["program"] for i in items if i["layer"] == "tpu"}):
        if programs[slug].mesh:
            continue  # a sharded program needs its mesh moved onto the topology; the others suffice here
        with jax.default_device(device):
            out[slug] = jit_of(programs[slug].function).lower(*programs[slug].example_args()).compile()
    return out


# --- the pool ---

def test_at_least_thirty_buffer_items_over_the_built_in_corpus(items):
    assert len(items) >= 30
    steps = Counter(i["step"] for i in items)
    assert set(steps) == set(STEPS), steps
    assert steps["compiled-alias"] >= 8 and steps["lowered-alias"] >= 5
    assert steps["real-copy"] >= 10 and steps["free-bitcast"] >= 10
    assert steps["minor-axis"] + steps["major-axis"] >= 10


def test_items_have_the_fields_the_page_needs(items, by_slug):
    for item in items:
        assert item["step"] in STEPS and item["eqn"] is None and item["question"].endswith("?")
        assert item["layer"] in ("stablehlo", "cpu", "tpu")
        assert isinstance(item["shown"], list) and all(isinstance(b, str) and b for b in item["shown"])
        assert 0 < item["weight"] <= 1
        options = item["options"]
        assert 3 <= len(options) <= 4 and len(set(options)) == len(options), item
        assert len(item["reasons"]) == len(item["rules"]) == len(options)
        for k, (reason, rule) in enumerate(zip(item["reasons"], item["rules"])):
            assert (reason == "" and rule == "") == (k == item["answer"]), item
        if item["layer"] == "tpu":
            hlo = by_slug[item["program"]]["compiled"]["tpu"]
            assert item["shown"][0].startswith(f"compiled by libtpu {hlo['libtpu_version']} for TPU v5 lite")


def test_no_answer_can_be_copied_off_the_screen(items):
    for item in items:
        answer = item["options"][item["answer"]]
        assert not any(answer in block for block in item["shown"]), item
        if item["step"] in ("real-copy", "free-bitcast"):  # the opcode and the names would say it
            text = " ".join(item["shown"] + item["options"])
            assert not re.search(r"\b(copy|bitcast)\b|%", text), item
            assert not any(name in text for name in item["instructions"].values())


def test_answers_vary_within_each_step(items):
    for step in STEPS:
        answers = [i["options"][i["answer"]] for i in items if i["step"] == step]
        assert len(set(answers)) >= 3, step
    alias = [i for i in items if i["step"].endswith("alias")]
    none = [i for i in alias if i["options"][i["answer"]].startswith("none")]
    assert none and len(none) < len(alias)
    positions = Counter(i["answer"] for i in items)
    assert len(positions) >= 3 and max(positions.values()) < 0.5 * len(items)


def test_every_wrong_option_names_its_misreading(items):
    rules = Counter(r for i in items for r in i["rules"] if r)
    assert {"looked-at-result", "same-type", "listing-order", "same-shape", "fresh-buffer", "position-pairing",
            "reshape-as-copy", "space-move-as-free", "major-to-minor", "logical-order"} <= set(rules), rules
    for item in items:
        for option, reason in zip(item["options"], item["reasons"]):
            if reason and option.startswith("%"):  # a named option's reason speaks of that very buffer
                assert option.split(" (")[0] in reason, (option, reason)


def test_the_pool_is_the_same_on_every_run(corpus, pool):
    again = [i for i in drills.build_pool(corpus)["items"] if i["drill"] == "buffers"]
    assert again == [i for i in pool["items"] if i["drill"] == "buffers"]


def test_one_program_does_not_dominate(items):
    weight = Counter()
    for i in items:
        weight[i["program"]] += i["weight"]
    assert max(weight.values()) <= min(buffers.PROGRAM_CAP + 0.05, 0.2 * sum(weight.values())), weight


def test_making_the_items_does_not_import_jax():
    code = ("import sys, json; from dumpgym.corpus import BUILTIN_PATH; from dumpgym.record import ProgramRecord; "
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
    return int(re.match(r"(?:Result |Output \{)(\d+)", item["question"]).group(1)) if "entry's result" not in \
        item["question"] else 0


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


@needs_tpu
def test_compiled_alias_answers_match_a_fresh_tpu_compile(items, tpu_compiles, programs):
    checked = 0
    for item in (i for i in items if i["step"] == "compiled-alias" and i["program"] in tpu_compiles):
        compiled = tpu_compiles[item["program"]]
        module = compiled.runtime_executable().hlo_modules()[0]
        entry = re.search(r"^ENTRY %([\w.\-]+)", compiled.as_text(), re.M).group(1)
        numbers = {ins.name: int(re.search(r" parameter\((\d+)\)", ins.to_string()).group(1))
                   for comp in module.computations() if comp.name == entry for ins in comp.instructions()
                   if str(ins.opcode) == "HloOpcode.kParameter"}
        k, answer = _result_of(item), item["options"][item["answer"]]
        aliasing = _fresh_aliasing(compiled)
        donated = set(_lowered_aliasing(programs[item["program"]]))  # the arguments JAX marks as donated
        if answer == buffers.NONE_COMPILED:
            assert k not in aliasing
        else:
            name = re.match(r"%(\S+) \(line", answer).group(1)
            assert aliasing[k] == numbers[name], (item["question"], answer)
            assert numbers[name] in donated
        checked += 1
    assert checked >= 8


# --- copies and bitcasts, against XLA's opcodes ---

@needs_tpu
def test_copy_and_bitcast_answers_follow_xlas_opcodes(items, tpu_compiles):
    checked = 0
    for item in (i for i in items if i["step"] in ("real-copy", "free-bitcast") and i["program"] in tpu_compiles):
        module = tpu_compiles[item["program"]].runtime_executable().hlo_modules()[0]
        by_name = {ins.name: ins for comp in module.computations() for ins in comp.instructions()}
        kinds = {}
        for option, name in item["instructions"].items():
            ins = by_name[name]
            kinds[option] = "bitcast" if str(ins.opcode) == "HloOpcode.kBitcast" else "copy"
            assert str(ins.opcode) in ("HloOpcode.kBitcast", "HloOpcode.kCopy", "HloOpcode.kCopyStart")
            assert option.split(" → ")[1] in ins.to_string()  # the result's buffer, as XLA prints it
        answer = item["options"][item["answer"]]
        wanted = "copy" if item["step"] == "real-copy" else "bitcast"
        assert kinds[answer] == wanted and all(v != wanted for o, v in kinds.items() if o != answer), item
        checked += 1
    assert checked >= 30


# --- layouts, against JAX's Layout ---

def _axis(option: str) -> int:
    return int(re.match(r"axis (\d+)", option).group(1))


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
        expected = major_to_minor[-1] if item["step"] == "minor-axis" else major_to_minor[0]
        assert _axis(item["options"][item["answer"]]) == expected, item["question"]
        checked += 1
    assert checked >= 10
