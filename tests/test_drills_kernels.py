"""The kernel drill (`kernels`): which instruction of the GPU or TPU compile runs a dot_general, checked against
a fresh compile for the described H100 or TPU v5e, read with jaxlib's own HLO bindings, and the dot re-traced
by JAX."""
from __future__ import annotations

import math
import re

import pytest

KERNEL_OPCODES = {"fusion", "custom-call", "dot", "convolution"}


@pytest.fixture(scope="module")
def kernel_items(read_pool):
    return [i for i in read_pool if i["drill"] == "kernels"]


def _option(item: dict, k: int) -> tuple[str, int]:
    """(instruction name, line) of option k: `%name (GPU HLO line N)`, `%name (TPU HLO line N)`."""
    name, line = re.fullmatch(rf"%([\w.\-]+) \({item['layer'].upper()} HLO line (\d+)\)", item["options"][k]).groups()
    return name, int(line)


def test_kernel_items_offer_the_launches_of_the_shown_computation_that_run_dots(kernel_items, by_slug):
    """The options are two or more kernels the shown computation launches, each running some dot_general of the
    jaxpr (its body holds a dot, or the dot's multiply), in print order; the right one is the named instruction."""
    assert kernel_items and {i["layer"] for i in kernel_items} == {"gpu", "tpu"}
    for item in kernel_items:
        hlo = by_slug[item["program"]]["compiled"][item["layer"]]
        first, last = item["hlo_lines"]
        text = hlo["text"].splitlines()
        rows = text[first - 1:last]
        assert re.match(r"(ENTRY )?%[\w.\-]+ \(", rows[0]) and rows[-1] == "}"  # one whole computation
        offered = [_option(item, k) for k in range(len(item["options"]))]
        assert len(offered) >= 2 and [line for _, line in offered] == sorted({line for _, line in offered})
        for name, line in offered:
            assert first < line < last and text[line - 1].lstrip().startswith(f"%{name} = ")
            assert re.search(rf" (?:{'|'.join(KERNEL_OPCODES)})\(", text[line - 1]), text[line - 1]
        assert offered[item["answer"]][0] == item["instruction"]
        # the dot is shown below the listing, as its jaxpr lines beside their numbers; the question names no instruction
        record = by_slug[item["program"]]
        first_dot, last_dot = item["jaxpr_lines"]
        assert item["shown"][1] == "\n".join(f"{n:>3}  {row}" for n, row in enumerate(
            record["jaxpr"].splitlines()[first_dot - 1:last_dot], start=first_dot))
        assert "dot_general[" in item["shown"][1] and not any(f"%{name} " in item["question"] for name, _ in offered)
        assert item["skill"] in (("triton-gemm", "cublas", "folded", "other") if item["layer"] == "gpu"
                                 else ("mxu", "custom", "folded", "other"))
        assert item["feedback"].startswith(
            f"The `dot_general` on jaxpr line {item['jaxpr_lines'][0]} runs as %{item['instruction']} ")


def test_every_offered_kernel_is_the_answer_of_an_item_and_a_wrong_one_says_which_dot_it_runs(kernel_items):
    """Asked of every dot a computation runs, each offered kernel is right for some item (so no place or name
    is the usual answer); a wrong one tells the dots it runs instead by their operands (their jaxpr lines are
    not on the item's screen, which shows this dot's)."""
    from collections import defaultdict

    right = defaultdict(set)
    for item in kernel_items:
        offered = tuple(item["options"])
        right[(item["program"], offered)].add(item["answer"])
        for k, (reason, rule) in enumerate(zip(item["reasons"], item["rules"])):
            if k == item["answer"]:
                assert reason == rule == ""
            else:
                assert rule == "another-dot" and re.match(
                    rf"%{re.escape(_option(item, k)[0])} runs (another `dot_general`|other `dot_general`s) of the "
                    r"jaxpr \(of `\w+\[[\d,]*\]` and `\w+\[[\d,]*\]`", reason), reason
                assert "line" not in reason
    assert all(found == set(range(len(offered))) for (_, offered), found in right.items()), right


def test_kernel_items_come_from_computations_that_launch_several_kernels(kernel_items, by_slug):
    """Knowing that a kernel is a fusion or custom-call row must not pick it: every shown computation
    launches at least `MIN_LAUNCHES`, counted from the text."""
    from dumpgym.drills.kernels import MIN_LAUNCHES

    for item in kernel_items:
        first, last = item["hlo_lines"]
        rows = by_slug[item["program"]]["compiled"][item["layer"]]["text"].splitlines()[first:last - 1]
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


@pytest.mark.compiled_hlo
@pytest.mark.parametrize("target", [pytest.param("gpu", marks=pytest.mark.needs_gpu),
                                    pytest.param("tpu", marks=pytest.mark.needs_tpu)])
def test_the_answer_runs_the_dot_in_a_fresh_compile(target, kernel_items, by_slug, fresh_module):
    """The right option's instruction, found by name in XLA's fresh module (for the H100, or the TPU v5e), sits in
    the shown computation and runs the dot JAX traced: a GEMM item's kernel holds a `dot` (a TPU's: a `dot` or
    `convolution`) whose operands have as many elements as the jaxpr dot's (a Triton one says so in its backend
    config); a folded item's holds no dot, but a multiply."""
    import numpy as np

    items = [i for i in kernel_items if i["layer"] == target]
    checked = 0
    for item in items:
        facts, module = fresh_module(item["program"], target)
        eqn = facts.jax_eqns[item["eqn"]]
        assert eqn.primitive.name == "dot_general"
        sizes = [int(np.prod(v.aval.shape)) for v in eqn.invars]
        (computation,) = [c for c in module.computations()
                          if any(i.name == item["instruction"] for i in c.instructions())]
        header = by_slug[item["program"]]["compiled"][target]["text"].splitlines()[item["hlo_lines"][0] - 1]
        assert re.match(rf"(ENTRY )?%{re.escape(computation.name)} \(", header)
        (kernel,) = [i for i in computation.instructions() if i.name == item["instruction"]]
        assert item["options"][item["answer"]].startswith(f"%{kernel.name} ")
        inside = [i for c in _called(module, kernel) for i in c.instructions()]
        dots = [i for i in inside if str(i.opcode) in ("HloOpcode.kDot", "HloOpcode.kConvolution")]
        if item["skill"] in ("triton-gemm", "mxu"):
            assert str(kernel.opcode) == "HloOpcode.kFusion"
            if item["skill"] == "triton-gemm":
                assert '"kind":"__triton' in kernel.to_string()
            operand_sizes = [[math.prod(_shape_of(o)) for o in d.operands()] for d in dots]
            devices = math.prod((by_slug[item["program"]]["mesh"] or {}).values())
            assert any(_sizes_match(sizes, found, devices) for found in operand_sizes), \
                (item["program"], item["jaxpr_lines"], sizes, operand_sizes)
        elif item["skill"] == "folded":
            assert not dots and any(str(i.opcode) == "HloOpcode.kMultiply" for i in inside)
        checked += 1
    assert checked == len(items) > 0
