"""The FLOPs of every compiled instruction recounted by code of its own from the HLO text, not from the record's facts
nor cost/estimate.py: each dot's and convolution's dimension numbers, window and groups read off its printed line,
each array's shape by XLA's shape parser, each reducer's region recounted the same way. On the CPU, where
`cost_analysis()` is XLA's own HloCostAnalysis, the recount's sums (each loop body once, a conditional's largest
branch) are the FLOPs and transcendentals XLA reported for every built-in program, so the recount is held to XLA;
and on every layer (CPU, TPU, GPU) each instruction's FLOPs, transcendentals and f32-dot FLOPs in `dumpgym cost`
are the recount's.
"""
from __future__ import annotations

import functools
import json
import math
import re

import pytest

from dumpgym.cost import estimate as cost
from dumpgym.cost.chips import CHIPS
from test_cost import documented_differences
from test_cost_recount import Line, Module, _layers
from test_drills_cost import _arrays

pytestmark = pytest.mark.compiled_hlo

# As XLA's HloCostAnalysis counts them, by printed opcode: one transcendental per result element ...
TRANSCENDENTAL = {"exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "power", "sqrt", "cbrt",
                  "rsqrt", "tanh", "sine", "cosine", "tan", "atan2", "erf"}
# ... or one FLOP per result element.
ELEMENTWISE = {"abs", "add", "and", "clamp", "compare", "convert", "divide", "is-finite", "maximum", "minimum",
               "multiply", "negate", "not", "or", "reduce-precision", "remainder", "select", "shift-left",
               "shift-right-arithmetic", "shift-right-logical", "sign", "subtract", "xor", "floor", "ceil",
               "round-nearest-afz", "round-nearest-even", "popcnt", "count-leading-zeros", "bitcast-convert"}


def _dims(shape: str) -> list[tuple[int, ...]]:
    return [tuple(a.dimensions()) for a in _arrays(shape)]


def _types(shape: str) -> list[str]:
    return [re.match(r"\w+", str(a)).group(0) for a in _arrays(shape)]


def _elements(shape: str) -> int:
    found = _dims(shape)
    return math.prod(found[0]) if found else 1


def _ints(text: str, key: str) -> list[int]:
    found = re.search(rf"\b{key}=\{{([\d,]*)\}}", text)
    return [int(k) for k in found.group(1).split(",") if k] if found else []


class Recount:
    """One compiled module's FLOPs, recounted: each instruction's (flops, transcendentals, f32 dot FLOPs) for one
    run of it (a fusion's its body's), and the module's sums as XLA's cost_analysis() counts them."""

    def __init__(self, module: Module):
        self.module = module
        self.calls, self._own, self._region = {}, {}, {}
        for ins in module.by_line.values():
            self.calls[ins.name] = re.findall(r"\bcalls=%([\w.\-]+)", ins.text)

    def shape(self, name: str) -> str:
        return self.module.by_name[name].shape

    def region(self, computation: str) -> int:
        """FLOPs (transcendentals counted as FLOPs) of one application of a reducer's region."""
        if computation not in self._region:
            self._region[computation] = sum(f + t for f, t, _ in map(self.own, self.module.members[computation]))
        return self._region[computation]

    def own(self, ins: Line) -> tuple[int, int, int]:
        if ins.line not in self._own:
            self._own[ins.line] = self._count(ins)
        return self._own[ins.line]

    def _count(self, ins: Line) -> tuple[int, int, int]:
        op, text = ins.opcode, ins.text
        n = _elements(ins.shape)
        if op in TRANSCENDENTAL:
            return 0, n, 0
        if op in ELEMENTWISE:
            return n, 0, 0
        if op == "dot":
            lhs = _dims(self.shape(ins.operands[0]))[0]
            flops = 2 * n * math.prod(lhs[d] for d in _ints(text, "lhs_contracting_dims"))
            return flops, 0, flops if self.f32(ins) else 0
        if op == "convolution":
            flops = self.convolution(ins)
            return flops, 0, flops if self.f32(ins) else 0
        if op == "reduce":
            half = len(ins.operands) // 2  # a variadic reduce: inputs, then as many inits
            inputs = math.prod(_dims(self.shape(ins.operands[0]))[0])
            out = math.prod(_dims(ins.shape)[0]) if half else n
            return (inputs - out) * self.region(ins.attr("to_apply")), 0, 0
        if op == "reduce-window":
            size = re.search(r"window=\{size=([\dx]+)", text).group(1)
            return (math.prod(map(int, size.split("x"))) - 1) * n * self.region(ins.attr("to_apply")), 0, 0
        if op == "scatter":
            return _elements(self.shape(ins.operands[-1])) * self.region(ins.attr("to_apply")), 0, 0
        if op in ("all-reduce", "all-reduce-start"):
            return sum(math.prod(d) for d in _dims(ins.shape)), 0, 0
        if op == "custom-call":
            found = re.search(r'"cost_estimate":(\{[^}]*\})', text)
            if found:
                estimate = json.loads(found.group(1))
                return int(estimate.get("flops", 0)), int(estimate.get("transcendentals", 0)), 0
            return 0, 0, 0
        if op == "fusion":
            parts = [self.own(i) for c in self.calls[ins.name] for i in self.module.members[c]]
            return tuple(sum(p[k] for p in parts) for k in range(3))
        return 0, 0, 0

    def f32(self, ins: Line) -> bool:
        """Both operands f32 and no printed algorithm naming another type."""
        if any(_types(self.shape(o))[0] != "f32" for o in ins.operands[:2]):
            return False
        found = re.search(r"\balgorithm=dot_([a-z0-9]+?)_", ins.text)
        return found is None or found.group(1) in ("tf32", "f32")

    def convolution(self, ins: Line) -> int:
        """XLA's rule written out: 2 · input features per group · output features · batch per batch group · per
        spatial dimension, the (output, kernel) index pairs whose input index is real (not padding, not a hole of a
        dilated input)."""
        text = ins.text
        labels = re.search(r"dim_labels=(\w+)_(\w+)->(\w+)", text)
        lhs_l, rhs_l, out_l = labels.groups()
        lhs, rhs = _dims(self.shape(ins.operands[0]))[0], _dims(self.shape(ins.operands[1]))[0]
        out = _dims(ins.shape)[0]
        spatial = sorted(c for c in lhs_l if c.isdigit())
        window = re.search(r"window=\{([^}]*)\}", text)
        fields = dict(re.findall(r"(\w+)=([\w_x\-]+)", window.group(1))) if window else {}

        def per_dim(key, default):
            return [default(p) for p in fields[key].split("x")] if key in fields else [default(None)] * len(spatial)

        strides = per_dim("stride", lambda p: int(p) if p else 1)
        pads = per_dim("pad", lambda p: int(p.split("_")[0]) if p else 0)
        lhs_dilate = per_dim("lhs_dilate", lambda p: int(p) if p else 1)
        rhs_dilate = per_dim("rhs_dilate", lambda p: int(p) if p else 1)
        valid = 1
        for k, c in enumerate(spatial):
            kernel, outputs, inputs = rhs[rhs_l.index(c)], out[out_l.index(c)], lhs[lhs_l.index(c)]
            count = 0
            for kk in range(kernel):
                for o in range(outputs):
                    at = o * strides[k] - pads[k] + kk * rhs_dilate[k]
                    if at % lhs_dilate[k] == 0 and 0 <= at // lhs_dilate[k] < inputs:
                        count += 1
            valid *= count
        groups = int(re.search(r"feature_group_count=(\d+)", text).group(1)) if "feature_group_count" in text else 1
        batch_groups = int(re.search(r"batch_group_count=(\d+)", text).group(1)) if "batch_group_count" in text else 1
        return (2 * lhs[lhs_l.index("f")] // groups * out[out_l.index("f")] * lhs[lhs_l.index("b")] // batch_groups
                * valid)

    def sums(self) -> tuple[int, int]:
        """(FLOPs, transcendentals) of the module as cost_analysis() counts them: every instruction outside fusions
        and regions once (each loop body once), a conditional's branches by their largest."""
        module = self.module
        branches = []
        for ins in module.by_line.values():
            if ins.opcode == "conditional":
                listed = re.search(r"branch_computations=\{([^}]*)\}", ins.text)
                branches.append(re.findall(r"%([\w.\-]+)", listed.group(1)) if listed else [
                    ins.attr("true_computation"), ins.attr("false_computation")])
        in_branch = {c for names in branches for c in names}
        outside = [i for i in module.by_line.values() if module.outside(i)]
        flops = sum(self.own(i)[0] for i in outside if i.computation not in in_branch)
        transcendentals = sum(self.own(i)[1] for i in outside if i.computation not in in_branch)
        for names in branches:
            flops += max(sum(self.own(i)[0] for i in module.members[c]) for c in names)
            transcendentals += max(sum(self.own(i)[1] for i in module.members[c]) for c in names)
        return flops, transcendentals


@functools.cache
def _recount(slug: str, target: str) -> Recount:
    return Recount(Module(_layers()[slug, target].text))


@pytest.mark.parametrize("slug", sorted(slug for slug, target in _layers() if target == "cpu"))
def test_the_recount_is_xlas_flops_and_transcendentals_on_the_cpu(slug):
    """The recount held to XLA: its sums are what `cost_analysis()` reported when the corpus was built."""
    xla = _layers()[slug, "cpu"].xla_cost
    assert _recount(slug, "cpu").sums() == (xla["flops"], xla.get("transcendentals", 0))


@pytest.mark.parametrize("slug", sorted(slug for slug, target in _layers() if target == "tpu"))
def test_the_recount_is_libtpus_flops_but_where_the_docs_name_a_difference(slug):
    """On the TPU, libtpu's own model: the recount's sums are its FLOPs but for the programs docs/cost.md names."""
    layer = _layers()[slug, "tpu"]
    named = {s for s, target, figure in documented_differences() if target == "tpu" and figure == "flops"}
    flops, transcendentals = _recount(slug, "tpu").sums()
    assert transcendentals == layer.xla_cost.get("transcendentals", 0)
    if slug not in named and re.sub(r"-\d+$|-whole-grads$", "", slug) not in named:
        assert flops == layer.xla_cost["flops"]


@pytest.mark.parametrize("slug, target", sorted(_layers()))
def test_every_instructions_flops_in_dumpgym_cost_are_the_recount(slug, target):
    recount = _recount(slug, target)
    costs = cost.layer_cost(_layers()[slug, target], target)
    for c in costs.instructions:
        ins = recount.module.by_line[c.line]
        if ins.computation in recount.module.regions:
            continue  # a reducer's scalar body: counted in its holder, per combine
        ours, recounted = (c.work.flops, c.work.transcendentals, c.work.f32_matmul), recount.own(ins)
        assert ours == recounted, (slug, c.line, c.name)


def test_an_h100s_f32_dots_take_the_tf32_peak_and_the_rest_the_bf16_one():
    """Each GPU row's compute term: its recounted f32 dot FLOPs at the dense TF32 peak (494.7 TFLOP/s, half the
    datasheet's 989 with sparsity), the rest of its FLOPs and transcendentals at the bf16 peak; and some built-in
    GPU compile holds both kinds of dot."""
    chip = CHIPS["NVIDIA H100 80GB HBM3"]
    assert chip.f32_flops_per_s == 989.4e12 / 2 and chip.flops_per_s == 989e12
    kinds = set()
    for (slug, target), layer in _layers().items():
        if target != "gpu":
            continue
        recount = _recount(slug, target)
        for c in cost.layer_cost(layer, target).instructions:
            if c.place not in ("entry", "control"):
                continue
            flops, transcendentals, f32 = recount.own(recount.module.by_line[c.line])
            kinds |= {"f32"} if f32 else set()
            kinds |= {"other"} if flops - f32 else set()
            assert c.work.compute_seconds(chip) == pytest.approx(
                (flops + transcendentals - f32) / 989e12 + f32 / 494.7e12, rel=1e-12), (slug, c.line)
    assert kinds == {"f32", "other"}


def test_no_kernel_shows_a_silent_zero():
    """Every custom call of every layer that is a kernel (not one of the calls XLA itself inserts around a gather,
    an allocation or an async collective, which compute nothing) either carries its own cost estimate, whose FLOPs
    are its row's, or is counted unknown in its row and in the one outside fusions that runs it."""
    helpers = {"AllocateBuffer", "AsyncCollectiveStart", "AsyncCollectiveDone", "AssumeGatherIndicesInBound",
               "GatherScatterIndicesBitpacked"}
    from test_cost_recount import _holder

    kernels = 0
    for (slug, target), layer in _layers().items():
        module = _recount(slug, target).module
        rows = {c.line: c for c in cost.layer_cost(layer, target).instructions}
        for ins in module.by_line.values():
            called = re.search(r'custom_call_target="([^"]+)"', ins.text)
            if ins.opcode != "custom-call" or called.group(1) in helpers:
                continue
            kernels += 1
            row = rows[ins.line].work
            if '"cost_estimate"' in ins.text:
                assert row.kernel == _recount(slug, target).own(ins)[0] and not row.unknown, (slug, ins.line)
            else:
                assert row.unknown == 1 and rows[_holder(module, ins).line].work.unknown >= 1, (slug, ins.line)
    assert kernels >= 5
