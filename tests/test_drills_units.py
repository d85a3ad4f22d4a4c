"""The units drill's `unit` step: which unit of the chip does the bulk of an instruction's work, checked
against XLA's own module of a fresh compile (the instruction found by name, its opcode and what it calls, a
GEMM's emitter in its backend config), and its options checked for balance: no unit and no place is right
more often than chance."""
from __future__ import annotations

import re
from collections import Counter, defaultdict

import pytest

from dumpgym.drills._which_unit import UNITS

# XLA's elementwise opcodes (HloOpcode names, as jaxlib's bindings print them), and what only names or places
# values: a vector fusion holds nothing else.
ELEMENTWISE = {f"HloOpcode.k{name}" for name in (
    "Add", "Subtract", "Multiply", "Divide", "Maximum", "Minimum", "Negate", "Abs", "Exp", "Expm1", "Log", "Log1p",
    "Tanh", "Logistic", "Sqrt", "Rsqrt", "Cbrt", "Power", "Convert", "Select", "Compare", "And", "Or", "Xor", "Not",
    "Clamp", "Sign", "Floor", "Ceil", "RoundNearestAfz", "RoundNearestEven", "Remainder", "Sin", "Cos", "Tan",
    "Atan2", "Erf", "IsFinite", "ShiftLeft", "ShiftRightLogical", "ShiftRightArithmetic", "Parameter", "Constant",
    "Broadcast", "Bitcast", "Tuple", "GetTupleElement", "ReducePrecision", "PopulationCount")}
MATMULS = {"HloOpcode.kDot", "HloOpcode.kConvolution"}


@pytest.fixture(scope="module")
def unit_items(read_pool):
    return [i for i in read_pool if i["drill"] == "units" and i["step"] == "unit"]


def test_unit_items_ask_of_both_chips_and_every_unit(unit_items):
    found = Counter((i["layer"], i["skill"]) for i in unit_items)
    assert {k for k in found} == {("tpu", u.key) for u in UNITS["tpu"]} | {("gpu", u.key) for u in UNITS["gpu"]}
    assert min(found.values()) >= 10, found


def test_the_question_names_no_unit_and_no_instruction(unit_items):
    words = {w for units in UNITS.values() for u in units for w in ("MXU", "VPU", "DMA", "tensor", "CUDA")}
    for item in unit_items:
        assert not any(w in item["question"] for w in words)
        assert f"%{item['instruction']}" not in item["question"]
        assert item["question"] == (f"Which unit of the {item['layer'].upper()} does the bulk of the work of the "
                                    f"instruction on {item['layer'].upper()} HLO line {item['hlo_line']} (shown "
                                    "with any computation it calls)?")


def test_every_unit_and_every_place_shares_a_programs_weight_equally(unit_items):
    """Per program and layer, each unit offered answers the same total weight, in the same place every time: a
    reader who always picks one unit, or one place, is right as often as chance."""
    weight, options = defaultdict(Counter), {}
    for item in unit_items:
        key = (item["program"], item["layer"])
        assert options.setdefault(key, item["options"]) == item["options"]
        assert item["options"] == [u.option for u in UNITS[item["layer"]] if u.option in item["options"]]
        weight[key][item["answer"]] += item["weight"]
    for key, by_place in weight.items():
        assert len(by_place) == len(options[key]) >= 2, key
        assert max(by_place.values()) - min(by_place.values()) <= 0.02 * max(by_place.values()) + 0.01, (key, by_place)


def test_wrong_options_name_their_misreading_and_the_feedback_the_reason(unit_items):
    """A miss prints the picked option's misreading, then the feedback with the reason: said once."""
    for item in unit_items:
        for k, (reason, rule) in enumerate(zip(item["reasons"], item["rules"])):
            if k == item["answer"]:
                assert reason == rule == ""
            else:
                assert rule and reason.startswith(f"took %{item['instruction']} for ")
                assert item["feedback"][:-1] not in reason and item["feedback"].startswith(f"%{item['instruction']} ")


def _called(module, instruction) -> list:
    """Every instruction of the computations an instruction calls, transitively, from XLA's module."""
    by_name = {c.name: c for c in module.computations()}
    out, seen = [], set()
    stack = re.findall(r"\bcalls=%([\w.\-]+)", instruction.to_string())
    while stack:
        name = stack.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        for i in by_name[name].instructions():
            out.append(i)
            stack += re.findall(r"\b(?:calls|to_apply)=%([\w.\-]+)", i.to_string())
    return out


@pytest.mark.compiled_hlo
@pytest.mark.parametrize("target", [pytest.param("tpu", marks=pytest.mark.needs_tpu),
                                    pytest.param("gpu", marks=pytest.mark.needs_gpu)])
def test_each_answer_is_what_xlas_fresh_module_says_the_instruction_is(target, unit_items, by_slug, fresh_module):
    """The MXU: a fusion calling a convolution or dot (or a bare one); the VPU: a fusion calling only elementwise
    work; a DMA engine: a `copy-start`. The tensor cores: a fusion XLA emitted with Triton around a dot; the CUDA
    cores: a fusion with no dot or convolution in what it calls."""
    checked = 0
    for item in (i for i in unit_items if i["layer"] == target):
        _facts, module = fresh_module(item["program"], target)
        (ins,) = [i for c in module.computations() for i in c.instructions() if i.name == item["instruction"]]
        opcode, inside = str(ins.opcode), {str(i.opcode) for i in _called(module, ins)}
        if item["skill"] == "mxu":
            assert opcode in MATMULS or (opcode == "HloOpcode.kFusion" and inside & MATMULS)
        elif item["skill"] == "vpu":
            assert opcode == "HloOpcode.kFusion" and inside <= ELEMENTWISE and inside - {
                "HloOpcode.kParameter", "HloOpcode.kConstant", "HloOpcode.kBroadcast", "HloOpcode.kBitcast"}
        elif item["skill"] == "dma":
            assert opcode == "HloOpcode.kCopyStart"
        elif item["skill"] == "tensor":
            assert opcode == "HloOpcode.kFusion" and '"kind":"__triton' in ins.to_string() and inside & MATMULS
        else:
            assert item["skill"] == "cuda" and opcode == "HloOpcode.kFusion" and not inside & MATMULS
        checked += 1
    assert checked >= 10
