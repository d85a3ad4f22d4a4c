"""cost/estimate.py recounted by code of its own, from the compiled HLO text of the committed corpus (every layer) and
XLA's shape parser: the bytes each instruction outside a fusion reads and writes, by memory space; the bytes each
device sends, each collective once (one channel: an async collective's start, continuation and done fusions hold
copies of it); and every `layouts/memory-space` answer by that recount (test_cost_recount_pool.py checks the `cost`
items by it, with the FLOPs test_cost_recount_flops.py recounts).

Nothing here calls cost/estimate.py's byte or send rules: the text is read line by line, each array padded to its tiles by
the tiling rule `test_drills_cost.py` writes out (itself checked against XLA's `memory_analysis()`).
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field

import pytest

from dumpgym.cost import estimate as cost
from test_drills_cost import _after_shape, _arrays, _group_size, _space, _tiled_bytes

pytestmark = pytest.mark.compiled_hlo

NO_BYTES = {"parameter", "constant", "get-tuple-element", "bitcast", "while", "conditional", "call", "after-all",
            "opt-barrier", "add-dependency"}
COLLECTIVES = {"all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute"}


@dataclass
class Line:
    """One instruction line of the text, as read here."""

    line: int
    name: str
    shape: str
    opcode: str
    operands: list[str]
    text: str
    computation: str
    root: bool
    users: list["Line"] = field(default_factory=list, repr=False)  # its users print by name alone

    def attr(self, key: str) -> str | None:
        found = re.search(rf"\b{key}=%?([\w.\-]+)", self.text)
        return found.group(1) if found else None


class Module:
    """A compiled module's text, read here: its instructions by name and line, each computation's members."""

    def __init__(self, text: str):
        self.by_name: dict[str, Line] = {}
        self.by_line: dict[int, Line] = {}
        self.members: dict[str, list[Line]] = {}
        self.entry = ""
        computation = ""
        for n, raw in enumerate(text.splitlines(), start=1):
            head = re.match(r"^(ENTRY )?%([\w.\-]+) .*\{$", raw)
            if head:
                computation = head.group(2)
                self.entry = computation if head.group(1) else self.entry
                self.members[computation] = []
                continue
            found = re.match(r"^\s+(ROOT )?%([\w.\-]+) = (.*)$", raw)
            if not found:
                continue
            shape, rest = _after_shape(found.group(3))
            opcode = re.match(r"[\w-]+", rest).group(0)
            depth, k = 0, len(opcode)
            for k in range(len(opcode), len(rest)):
                depth += {"(": 1, ")": -1}.get(rest[k], 0)
                if depth == 0:
                    break
            operands = re.findall(r"%([\w.\-]+)", rest[len(opcode):k + 1])
            ins = Line(n, found.group(2), shape, opcode, operands, rest, computation, bool(found.group(1)))
            self.by_name[ins.name] = self.by_line[n] = ins
            self.members[computation].append(ins)
        for ins in self.by_line.values():
            for name in dict.fromkeys(ins.operands):
                self.by_name[name].users.append(ins)
        self.fused = {i.attr("calls") for i in self.by_line.values() if i.opcode == "fusion"}
        self.regions = {i.attr("to_apply") for i in self.by_line.values() if i.attr("to_apply")}

    def outside(self, ins: Line) -> bool:
        """Whether an instruction's result is a buffer: not in a fusion's body nor a reducer's region."""
        return ins.computation not in self.fused and ins.computation not in self.regions


def _spaces(shape: str) -> dict[int, int]:
    out: dict[int, int] = {}
    for a in _arrays(shape):
        out[_space(a)] = out.get(_space(a), 0) + _tiled_bytes(a)
    return out


def _plain(shape: str) -> str:
    """A printed shape without its layouts (an async start's tuple and its continuation's member print alike)."""
    return re.sub(r"\{[^{}]*\}", "", shape)


def _plus(a: dict[int, int], b: dict[int, int]) -> dict[int, int]:
    return {k: a.get(k, 0) + b.get(k, 0) for k in {*a, *b}}


def _one_space(part: int, whole: dict[int, int]) -> dict[int, int]:
    (space,) = [k for k, v in whole.items() if v] or [0]
    return {space: part}


def _param_reads(module: Module, param: Line, whole: dict[int, int]) -> dict[int, int]:
    """What a fusion reads of one operand (HloCostAnalysis's rule, as docs/cost.md states it): a slice's bytes
    where the operand lives, nothing of an in-place update's target, the operand once for any other use."""
    parts: list[dict[int, int]] = []
    plain_uses = 0  # any other uses share one read of the whole operand
    for user in param.users:
        first = user.operands[0] == param.name
        if user.opcode == "fusion":
            parts += [_param_reads(module, _parameter(module, user.attr("calls"), k), whole)
                      for k, name in enumerate(user.operands) if name == param.name]
        elif first and user.opcode in ("slice", "dynamic-slice"):
            parts.append(_one_space(sum(_spaces(user.shape).values()), whole))
        elif user.opcode in ("broadcast", "reshape"):
            parts.append(whole)
        elif not (first and user.opcode == "dynamic-update-slice"):
            plain_uses += 1
    out: dict[int, int] = whole if plain_uses else {}
    for part in parts:
        out = _plus(out, part)
    return out


def _parameter(module: Module, body: str, k: int) -> Line | None:
    """A fused computation's parameter(k)."""
    return next((p for p in module.members[body] if p.opcode == "parameter"
                 and re.search(rf"parameter\({k}\)", p.text)), None)


def recount_bytes(module: Module, ins: Line) -> tuple[dict[int, int], dict[int, int]]:
    """(read, written) bytes by memory space of an instruction outside a fusion."""
    if ins.opcode == "tuple":
        return {}, {0: 8 * len(ins.operands)}
    if ins.opcode in NO_BYTES:
        return {}, {}
    if ins.opcode.endswith("-done"):
        return {}, _spaces(ins.shape)
    read: dict[int, int] = {}
    if ins.opcode == "fusion":
        body = ins.attr("calls")
        for k, name in enumerate(ins.operands):
            whole = _spaces(module.by_name[name].shape)
            param = _parameter(module, body, k)
            read = _plus(read, whole if param is None else _param_reads(module, param, whole))
        root = next(i for i in module.members[body] if i.root)
        if root.opcode == "dynamic-update-slice":
            return read, _one_space(sum(_spaces(module.by_name[root.operands[1]].shape).values()), _spaces(ins.shape))
    else:
        for name in ins.operands:
            read = _plus(read, _spaces(module.by_name[name].shape))
    return read, ({} if ins.opcode.endswith("-start") else _spaces(ins.shape))


def _devices(text: str) -> int:
    """The devices in each replica group; a mesh's named axes may print its device order between the mesh and
    the axes (`mesh['axis_0'=4,'axis_1'=1] , device_ids=([2,4]T(1,0)) {'axis_0'}`)."""
    found = re.search(r"replica_groups=mesh\[([^\]]*)\][^{]*\{([^}]*)\}", text)
    if found:
        sizes = dict((a, int(n)) for a, n in re.findall(r"'(\w+)'=(\d+)", found.group(1)))
        return math.prod(sizes[a] for a in re.findall(r"'(\w+)'", found.group(2)))
    return _group_size(text) if "replica_groups=" in text else 1


def _holder(module: Module, ins: Line) -> Line:
    """The instruction outside fusions whose run runs this one (itself, or the fusion holding it)."""
    while not module.outside(ins):
        ins = next(i for i in module.by_line.values() if i.opcode == "fusion" and i.attr("calls") == ins.computation)
    return ins


def recount_sends(module: Module) -> dict[int, int]:
    """By line of the instruction outside fusions that first runs it, what each collective sends, each channel once."""
    out: dict[int, int] = {}
    seen: dict[tuple, str] = {}  # a collective's key -> the computation it was first counted in
    found = [i for i in module.by_line.values()
             if i.opcode.removesuffix("-start") in COLLECTIVES and i.computation not in module.regions]
    for ins in sorted(found, key=lambda i: (_holder(module, i).line, i.line)):
        base = ins.opcode.removesuffix("-start")
        # One collective's copies (an async start, continuation, done) share its channel, op, groups and shapes;
        # a channel number alone does not say it (a TPU's halo exchange prints two permutes on one channel).
        # The copies stand in other computations than the first (the fusions that continue it); alike ones in
        # one computation are collectives of their own (a ppermute ring's steps, each on channel 1).
        channel = ins.attr("channel_id")
        if channel is not None:
            key = (channel, base, re.search(r"replica_groups=\S+|source_target_pairs=\S+", ins.text).group(0),
                   tuple(_plain(module.by_name[n].shape) for n in ins.operands), _plain(ins.shape))
            if seen.setdefault(key, ins.computation) != ins.computation:
                continue
        n = _devices(ins.text)
        operands = sum(_tiled_bytes(a) for name in ins.operands for a in _arrays(module.by_name[name].shape))
        if base == "collective-permute":
            sent = operands
        elif base == "all-gather":
            arrays = _arrays(ins.shape)
            k = len(ins.operands)
            sent = sum(map(_tiled_bytes, arrays[k:2 * k] if ins.opcode.endswith("-start") else arrays)) * (n - 1) // n
        elif base == "all-reduce" and not (ins.users and all(u.opcode == "dynamic-slice" for u in ins.users)):
            sent = 2 * operands * (n - 1) // n
        else:  # a reduce-scatter, an all-to-all, an all-reduce whose users keep one slice each (all-reduce-scatter)
            sent = operands * (n - 1) // n
        holder = _holder(module, ins).line
        out[holder] = out.get(holder, 0) + sent
    return out


@functools.cache
def _layers():
    """Every compiled layer of the committed corpus recorded with the compiled facts, by (program, target)."""
    from dumpgym.corpus.builtin import load_builtin
    from dumpgym.record.schema import ProgramRecord

    out = {}
    for p in load_builtin()["programs"]:
        record = ProgramRecord.from_json(p)
        for target, layer in record.compiled.items():
            if layer.has_facts:
                out[record.slug, target] = layer
    return out


def _tpu_layers():
    return {k: v for k, v in _layers().items() if v.backend == "tpu"}


@functools.cache
def _recount(slug: str, target: str):
    layer = _layers()[slug, target]
    module = Module(layer.text)
    rows = {i.line: recount_bytes(module, i) for i in module.by_line.values() if module.outside(i)}
    return module, rows, recount_sends(module)


def test_fsdp_step_on_a_tpu_sends_61440_bytes_per_device_each_collective_once():
    """Its five collectives, by their printed shapes and groups: the all-gather of w_in's bf16[64,32] over 2 devices
    and the async all-gather (start, continuation, done: channel 3) of bf16[32,64] over 2 send half their 16 KiB
    tiled results, 8,192 bytes each; the all-reduce of f32[16,64] over 4 sends 2·3/4 of 8 KiB, 12,288; the
    all-reduce-scatter fusion's f32[64,32] over 2 sends half of 32 KiB once, 16,384; the all-reduce of f32[32,64]
    over 2 sends 2·1/2 of 16 KiB, 16,384."""
    module, _rows, sends = _recount("fsdp-step", "tpu")
    assert sum(sends.values()) == 8192 + 8192 + 12288 + 16384 + 16384 == 61440
    costs = cost.layer_cost(_tpu_layers()["fsdp-step", "tpu"], "tpu")
    assert costs.total.sends == 61440
    channels = [i.attr("channel_id") for i in module.by_line.values() if i.opcode == "all-gather"]
    assert channels.count("3") == 3  # the one async all-gather, printed in its start, continuation and done


# Gaps in the record the recount finds, each a strict expected failure until fixed (none today).
RECORD_GAPS: dict[tuple[str, str], str] = {}


@pytest.mark.parametrize("slug, target", [
    pytest.param(slug, target, marks=[pytest.mark.xfail(strict=True, reason=RECORD_GAPS[slug, target])]
                 if (slug, target) in RECORD_GAPS else []) for slug, target in sorted(_layers())])
def test_every_instructions_bytes_by_space_and_sends_are_the_recount(slug, target):
    module, rows, sends = _recount(slug, target)
    costs = cost.layer_cost(_layers()[slug, target], target)
    for c in costs.instructions:
        if c.place not in ("entry", "control"):
            assert not c.work.read and not c.work.written and not c.work.sends, (slug, c.line)  # no buffer
            continue
        read, written = rows[c.line]
        clean = lambda d: {k: v for k, v in d.items() if v}  # noqa: E731
        assert (clean(c.work.read), clean(c.work.written)) == (clean(read), clean(written)), (slug, c.line, c.name)
        assert c.work.sends == sends.get(c.line, 0), (slug, c.line, c.name)


def test_no_operand_in_vmem_is_charged_as_hbm():
    """A fusion reading a slice of an `S(1)` operand reads VMEM: every TPU fusion whose operands and result are all
    outside HBM moves no HBM bytes."""
    checked = 0
    for (slug, target), layer in _tpu_layers().items():
        module, rows, _ = _recount(slug, target)
        costs = {c.line: c for c in cost.layer_cost(layer, target).instructions}
        for ins in module.by_line.values():
            if ins.opcode == "fusion" and module.outside(ins) and ins.operands and all(
                    0 not in _spaces(module.by_name[n].shape) for n in ins.operands) and 0 not in _spaces(ins.shape):
                assert costs[ins.line].work.hbm_bytes == 0, (slug, ins.line)
                checked += 1
    assert checked > 20


def test_every_memory_space_answer_is_the_rows_whose_buffers_print_that_space(read_pool):
    """Every row asked about is a buffer (outside fusions' bodies), and the right rows are those whose printed
    result holds an array in the asked space (HBM: one printing no `S(n)`)."""
    items = [i for i in read_pool if i["drill"] == "layouts" and i["step"] == "memory-space"]
    assert items
    for item in items:
        module, _rows, _sends = _recount(item["program"], item["layer"])
        first, last = item["hlo_lines"]
        run = [module.by_line[n] for n in range(first, last + 1)]
        assert all(module.outside(i) for i in run), item["card"]
        right = [k for k, i in enumerate(run, start=1) if item["space"] in _spaces(i.shape)]
        assert right == list(item["answer_lines"]), item["card"]


def test_a_kernel_without_a_cost_estimate_is_unknown_in_every_row_and_sum():
    """pallas-matmul's Mosaic kernel carries no `cost_estimate` in its printed backend_config: its FLOPs are shown
    unknown in its row, and the sums are "at least" with the kernel counted apart, never a silent 0."""
    import subprocess
    import sys

    layer = _tpu_layers()["pallas-matmul", "tpu"]
    module = Module(layer.text)
    kernels = [i for i in module.by_line.values() if 'custom_call_target="tpu_custom_call"' in i.text]
    assert len(kernels) == 1 and '"cost_estimate"' not in kernels[0].text
    costs = cost.layer_cost(layer, "tpu")
    row = next(c for c in costs.instructions if c.line == kernels[0].line)
    assert row.work.unknown == 1 and costs.total.unknown == costs.once.unknown == 1
    out = subprocess.run([sys.executable, "-m", "dumpgym", "cost", "pallas-matmul", "--target", "tpu"],
                         capture_output=True, text=True, timeout=600).stdout.splitlines()
    (printed,) = [line for line in out if re.match(rf"\s*{kernels[0].line} ", line)]
    assert printed.split()[4] == "unknown"
    assert any("plus 1 kernel of unknown cost" in line and line.startswith("sums") for line in out)
    assert any(line.startswith("roofline: at least ") for line in out)
    from dumpgym.cost.view import cost_view

    view = cost_view(layer, "tpu")
    assert view.unknown_kernels == 1 and next(r for r in view.rows if r.line == kernels[0].line).unknown


@pytest.mark.needs_tpu
def test_a_kernels_own_cost_estimate_is_its_cost_as_libtpu_counts_it():
    """A Pallas kernel given a `CostEstimate`: JAX writes it into the custom call's backend_config; its row's FLOPs and
    transcendentals are the estimate's, and the program's (the kernel alone) are what libtpu's cost_analysis() says."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.sharding import SingleDeviceSharding

    from dumpgym.record.targets import DEFAULT_TOPOLOGY
    from dumpgym.traced.devices import topology_devices
    from test_cost_view import _compile_for_tpu

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], y_ref[...])

    def f(x, y):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((128, 128), jnp.float32),
                              cost_estimate=pl.CostEstimate(flops=2 * 128 ** 3, transcendentals=7,
                                                            bytes_accessed=3 * 128 * 128 * 4))(x, y)

    chip = SingleDeviceSharding(topology_devices(DEFAULT_TOPOLOGY)[0])
    arg = jax.ShapeDtypeStruct((128, 128), jnp.float32, sharding=chip)
    layer, plain = _compile_for_tpu(f, (arg, arg))
    xla = plain.cost_analysis()
    (call,) = [i for i in Module(layer.text).by_line.values() if i.opcode == "custom-call"]
    assert '"cost_estimate":{"flops":"4194304","transcendentals":"7"' in call.text
    costs = cost.layer_cost(layer, "tpu")
    row = next(c for c in costs.instructions if c.line == call.line)
    assert (row.work.flops, row.work.transcendentals, row.work.unknown) == (2 * 128 ** 3, 7, 0)
    assert (costs.once.flops, costs.once.transcendentals) == (xla["flops"], xla["transcendentals"])


@pytest.mark.parametrize("slug", sorted(slug for slug, target in _layers() if target == "cpu"))
def test_the_recount_sums_to_xlas_bytes_accessed_on_the_cpu(slug):
    """The recount's own check against XLA: on the CPU, where `cost_analysis()` is XLA's HloCostAnalysis, every
    instruction outside fusions' bytes (each loop body once, a conditional's largest branch) add up to the bytes
    accessed XLA reported when the corpus was built (`CompiledLayer.xla_cost`)."""
    layer = _layers()[slug, "cpu"]
    module, rows, _sends = _recount(slug, "cpu")
    moved = {line: sum(r.values()) + sum(w.values()) for line, (r, w) in rows.items()}
    branches: list[list[str]] = []
    for ins in module.by_line.values():
        if ins.opcode == "conditional":
            listed = re.search(r"branch_computations=\{([^}]*)\}", ins.text)
            names = re.findall(r"%([\w.\-]+)", listed.group(1)) if listed else [
                ins.attr("true_computation"), ins.attr("false_computation")]
            branches.append(names)
    in_branch = {name for names in branches for name in names}
    total = sum(v for line, v in moved.items() if module.by_line[line].computation not in in_branch)
    total += sum(max(sum(moved[i.line] for i in module.members[name]) for name in names) for names in branches)
    assert total == layer.xla_cost["bytes accessed"]
