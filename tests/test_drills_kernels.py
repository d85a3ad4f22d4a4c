"""The GPU kernel drill (`kernels`): which instruction of the GPU compile runs a dot_general, checked against a
fresh compile for the described H100, read with jaxlib's own HLO bindings, and the dot re-traced by JAX."""
from __future__ import annotations

import math
import re

import pytest

KERNEL_OPCODES = {"fusion", "custom-call", "dot", "convolution"}


@pytest.fixture(scope="module")
def kernel_items(read_pool):
    return [i for i in read_pool if i["drill"] == "kernels"]


def test_kernel_items_ask_to_tap_one_launch_of_the_shown_computation(kernel_items, by_slug):
    assert kernel_items and {i["layer"] for i in kernel_items} == {"gpu"}
    for item in kernel_items:
        hlo = by_slug[item["program"]]["compiled"]["gpu"]
        first, last = item["hlo_lines"]
        rows = hlo["text"].splitlines()[first - 1:last]
        assert item["answer_line"] in item["accepted_lines"]  # the `line` form
        assert re.match(r"(ENTRY )?%[\w.\-]+ \(", rows[0]) and rows[-1] == "}"  # one whole computation
        for n in item["accepted_lines"]:
            row = rows[n - 1]
            assert re.search(rf" (?:{'|'.join(KERNEL_OPCODES)})\(", row), row
        assert f"%{item['instruction']} = " in rows[item["answer_line"] - 1]
        # the dot is shown below the listing, as its jaxpr line; the question names no instruction
        record = by_slug[item["program"]]
        assert item["shown"][1] == "\n".join(record["jaxpr"].splitlines()[item["jaxpr_lines"][0] - 1:item["jaxpr_lines"][1]])
        assert "dot_general[" in item["shown"][1] and f"%{item['instruction']} " not in item["question"] + " "
        assert item["skill"] in ("triton-gemm", "cublas", "folded", "other")
        assert item["feedback"].startswith(f"Line {item['jaxpr_lines'][0]}'s `dot_general` runs as %{item['instruction']} ")


def test_a_wrong_row_says_what_it_runs_instead(kernel_items):
    from dumpgym.drills.answer import from_json

    told = 0
    for item in kernel_items:
        form = from_json({"form": "line", "line": item["answer_line"], "accepted": item["accepted_lines"], "explain": item["explain"]})
        assert form.check(item["answer_line"]).right
        for row, why in item["explain"].items():
            assert int(row) not in item["accepted_lines"]
            verdict = form.check(int(row))
            assert not verdict.right and verdict.reason == why and why.startswith("%")
            told += 1
    assert told >= 5 * len(kernel_items)


def test_kernel_items_come_from_computations_that_launch_several_kernels(kernel_items, by_slug):
    """Knowing that a kernel is a fusion or custom-call row must not pick it: every shown computation
    launches at least `MIN_LAUNCHES`, counted from the text."""
    from dumpgym.drills.kernels import MIN_LAUNCHES

    for item in kernel_items:
        first, last = item["hlo_lines"]
        rows = by_slug[item["program"]]["compiled"]["gpu"]["text"].splitlines()[first:last - 1]
        launches = [r for r in rows if re.search(rf" = .*?[\s}})](?:{'|'.join(KERNEL_OPCODES)})\(", r)]
        assert len(launches) >= MIN_LAUNCHES, (item["program"], len(launches))


# ---------------------------------------------------------------------------------------------
# Against a fresh compile for the described H100.

def _shape_of(instruction) -> list[int]:
    """An instruction's result dims, from XLA's own printing of it and XLA's shape parser."""
    from jaxlib import xla_client

    text = instruction.to_string().split(" = ", 1)[1]
    printed = re.match(r"(\w+\[[\d,]*\](?:\{[^}]*\})?)", text).group(1)
    return list(xla_client.Shape(printed).dimensions())


def _called(module, instruction) -> list:
    """The computations an instruction runs (what it calls, and what those call), from XLA's module."""
    by_name = {c.name: c for c in module.computations()}
    stack, out = re.findall(r"\bcalls=%([\w.\-]+)", instruction.to_string()), []
    while stack:
        c = by_name[stack.pop()]
        if c not in out:
            out.append(c)
            for i in c.instructions():
                stack += re.findall(r"\bcalls=%([\w.\-]+)", i.to_string())
    return out


def _sizes_match(jaxpr_sizes: list[int], hlo_sizes: list[int], devices: int) -> bool:
    """Whether a compiled dot's operands hold the jaxpr dot's elements (in either order): all of them on one
    device; on a mesh, each operand a shard of them (a share dividing the mesh's device count)."""
    if len(hlo_sizes) != 2:
        return False

    def shard(whole, part):
        return part > 0 and whole % part == 0 and devices % (whole // part) == 0 if devices > 1 else whole == part
    a, b = jaxpr_sizes
    return any(shard(a, x) and shard(b, y) for x, y in (hlo_sizes, hlo_sizes[::-1]))


@pytest.fixture(scope="module")
def fresh_gpu():
    """slug -> (facts re-traced by JAX, XLA's module of a fresh GPU compile), made once per program."""
    cache = {}

    def get(slug):
        if slug not in cache:
            from test_hlo_fresh import _fresh

            facts, _layer, _tagged, plain = _fresh(slug, "gpu")
            cache[slug] = facts, plain.runtime_executable().hlo_modules()[0]
        return cache[slug]
    return get


@pytest.mark.compiled_hlo
@pytest.mark.needs_gpu
def test_the_answer_runs_the_dot_in_a_fresh_h100_compile(kernel_items, by_slug, fresh_gpu):
    """The tapped instruction, found by name in XLA's fresh module, sits in the shown computation and runs
    the dot JAX traced: a GEMM item's kernel holds a `dot` whose operands have as many elements as the
    jaxpr dot's (a Triton one says so in its backend config); a folded item's holds no dot, but a multiply."""
    import numpy as np

    checked = 0
    for item in kernel_items:
        if item["program"] not in by_slug:
            continue
        facts, module = fresh_gpu(item["program"])
        eqn = facts.jax_eqns[item["eqn"]]
        assert eqn.primitive.name == "dot_general"
        sizes = [int(np.prod(v.aval.shape)) for v in eqn.invars]
        (computation,) = [c for c in module.computations()
                          if any(i.name == item["instruction"] for i in c.instructions())]
        header = by_slug[item["program"]]["compiled"]["gpu"]["text"].splitlines()[item["hlo_lines"][0] - 1]
        assert re.match(rf"(ENTRY )?%{re.escape(computation.name)} \(", header)
        (kernel,) = [i for i in computation.instructions() if i.name == item["instruction"]]
        inside = [i for c in _called(module, kernel) for i in c.instructions()]
        dots = [i for i in inside if str(i.opcode) in ("HloOpcode.kDot", "HloOpcode.kConvolution")]
        if item["skill"] == "triton-gemm":
            assert str(kernel.opcode) == "HloOpcode.kFusion" and '"kind":"__triton' in kernel.to_string()
            operand_sizes = [[math.prod(_shape_of(o)) for o in d.operands()] for d in dots]
            devices = math.prod((by_slug[item["program"]]["mesh"] or {}).values())
            assert any(_sizes_match(sizes, found, devices) for found in operand_sizes), \
                (item["program"], item["jaxpr_lines"], sizes, operand_sizes)
        elif item["skill"] == "folded":
            assert not dots and any(str(i.opcode) == "HloOpcode.kMultiply" for i in inside)
        checked += 1
    assert checked == len(kernel_items)
