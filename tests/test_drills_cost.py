"""The cost drill (`cost`): each answer checked against XLA's own module of the compiled text (jaxlib's HLO
bindings and XLA's shape parser), not against cost/estimate.py: a padding answer against the tiles XLA reads, padded by
this file's own rule; a collective's bytes against its printed replica groups and shapes; a dominant option's
matmul FLOPs against 2·M·N·K from its dot's printed shapes; `bound` on a fresh TPU compile of a large matmul."""
from __future__ import annotations

import math
import re
from collections import Counter, defaultdict

import pytest

from dumpgym.cost import estimate as cost

pytestmark = pytest.mark.compiled_hlo


@pytest.fixture(scope="module")
def cost_items(read_pool):
    return [i for i in read_pool if i["drill"] == "cost"]


@pytest.fixture(scope="module")
def module_of(by_slug):
    """(slug, layer) -> XLA's module of the committed compiled text, parsed once."""
    from jaxlib import xla_client

    cache = {}

    def get(slug, layer):
        if (slug, layer) not in cache:
            cache[slug, layer] = xla_client.hlo.hlo_module_from_text(by_slug[slug]["compiled"][layer]["text"])
        return cache[slug, layer]
    return get


def _instruction(module, name: str):
    (found,) = [i for c in module.computations() for i in c.instructions() if i.name == name]
    return found


def _after_shape(text: str) -> tuple[str, str]:
    """(the result shape as printed, the rest) of an instruction's text after ` = `: a tuple's parentheses
    are balanced, an array ends at its layout's brace."""
    if text.startswith("("):
        depth = 0
        for k, ch in enumerate(text):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0:
                return text[:k + 1], text[k + 1:].strip()
    shape = re.match(r"\w+\[[\d,]*\](?:\{[^}]*\})?", text).group(0)
    return shape, text[len(shape):].strip()


def _printed(instruction) -> tuple[str, str]:
    """(result shape, printed opcode) of an instruction, from XLA's printing of it."""
    shape, rest = _after_shape(instruction.to_string().split(" = ", 1)[1])
    return shape, re.match(r"[\w-]+", rest).group(0)


def _arrays(shape_text: str) -> list:
    """The array leaves of a printed shape, as XLA's shape parser reads them."""
    from jaxlib import xla_client

    out, stack = [], [xla_client.Shape(shape_text)]
    while stack:
        s = stack.pop(0)
        if s.is_tuple():
            stack = list(s.tuple_shapes()) + stack
        elif s.is_array():
            out.append(s)
    return out


def _space(shape) -> int:
    found = re.search(r"S\((\d+)\)", shape.layout().to_string())
    return int(found.group(1)) if found else 0


def _bits(shape) -> int:
    return shape.layout().element_size_in_bits() or shape.numpy_dtype().itemsize * 8


def _tiled_bytes(shape) -> int:
    """The bytes an array takes at its layout, by XLA's tiling rule written out here: each tile, major to
    minor, splits the shape's minor dims into tile counts (rounded up) times the tile itself, the next tile
    then applying to that shape; missing leading dims count as 1."""
    layout = shape.layout()
    dims = list(shape.dimensions())
    current = [dims[a] for a in reversed(layout.minor_to_major())]
    for tile in layout.tiling():
        tile = list(tile)
        if len(tile) > len(current):
            current = [1] * (len(tile) - len(current)) + current
        head, tail = current[:len(current) - len(tile)], current[len(current) - len(tile):]
        current = head + [-(-d // t) for d, t in zip(tail, tile)] + tile
    return -(-math.prod(current) * _bits(shape) // 8)


def _dense_bytes(shape) -> int:
    return -(-math.prod(shape.dimensions()) * _bits(shape) // 8)


# --- the pool -----------------------------------------------------------------------------------

def test_the_built_in_pool_asks_at_least_a_hundred_cost_items_each_a_card_of_its_own(cost_items):
    steps = Counter(i["step"] for i in cost_items)
    assert len(cost_items) >= 100 and steps["dominant"] >= 100 and steps["padding"] and steps["sends"]
    assert {i["layer"] for i in cost_items if i["step"] == "dominant"} == {"tpu", "gpu"}
    assert {i["layer"] for i in cost_items if i["step"] == "sends"} == {"cpu", "tpu", "gpu"}
    cards = [i["card"] for i in cost_items]
    assert len(cards) == len(set(cards))
    assert all(c.startswith(f"cost/{i['program']}/{i['step']}/") and c.endswith(f"/{i['layer']}")
               for c, i in zip(cards, cost_items))


def test_a_dominant_answer_stands_at_every_place_among_its_options(cost_items):
    """The options are line numbers in print order; over the pool the answer is at each place about as often
    (weighted), so neither the first, the last nor the largest number is a habit that pays."""
    dominant = [i for i in cost_items if i["step"] == "dominant"]
    four = [i for i in dominant if len(i["options"]) == 4]
    share = Counter()
    for item in four:
        share[item["answer"]] += item["weight"]
        lines = [int(o.removeprefix("line ")) for o in item["options"]]
        assert lines == sorted(lines) and lines[item["answer"]] == item["hlo_line"]
    total = sum(share.values())
    assert set(share) == {0, 1, 2, 3} and max(share.values()) / total < 0.35, share


def test_every_dominant_option_is_a_row_of_the_shown_numbered_computation(cost_items, by_slug):
    for item in (i for i in cost_items if i["step"] == "dominant"):
        first, last = item["context"][0]["lines"]
        text = by_slug[item["program"]]["compiled"][item["layer"]]["text"].split("\n")
        rows = item["shown"][0].split("\n")
        assert len(rows) == last - first + 1 and re.match(rf"\s*{first}  ", rows[0])
        for option, name in zip(item["options"], item["option_names"]):
            n = int(option.removeprefix("line "))
            assert first < n < last and re.match(rf"\s*(ROOT )?%{re.escape(name)} = ", text[n - 1])


def _dot_flops(module, instruction) -> int:
    """2·M·N·K of every dot an instruction runs (itself, or inside the computations it calls), from the dots'
    printed shapes and lhs_contracting_dims, read from XLA's module."""
    by_name = {c.name: c for c in module.computations()}
    stack, seen, total = [instruction], set(), 0
    while stack:
        ins = stack.pop()
        text = ins.to_string()
        if _printed(ins)[1] == "dot":
            (lhs, *_rest) = ins.operands()
            lhs_dims = _arrays(_printed(lhs)[0])[0].dimensions()
            contracting = [int(d) for d in re.search(r"lhs_contracting_dims=\{([\d,]*)\}", text).group(1).split(",") if d]
            out = _arrays(_printed(ins)[0])[0].dimensions()
            total += 2 * math.prod(out) * math.prod(lhs_dims[d] for d in contracting)
        for called in re.findall(r"\bcalls=%([\w.\-]+)", text):
            if called not in seen:
                seen.add(called)
                stack += list(by_name[called].instructions())
    return total


def _updates_in_place(module, instruction) -> bool:
    """Whether a fusion's fused ROOT (the last of its computation's instructions, in XLA's post order) is a
    dynamic-update-slice."""
    by_name = {c.name: c for c in module.computations()}
    called = re.findall(r"\bcalls=%([\w.\-]+)", instruction.to_string())
    return any(_printed(list(by_name[c].instructions())[-1])[1] == "dynamic-update-slice" for c in called)


def test_a_dominant_options_dots_and_written_bytes_are_what_xlas_module_prints(cost_items, module_of, by_slug):
    """Each option's matmul FLOPs (where it runs dots, not convolutions) are 2·M·N·K from XLA's module, and the
    bytes it writes are its printed result's arrays at their layouts (an async start writes at its done, a
    tuple only its index table, a fusion whose ROOT updates in place only the update: those are not compared)."""
    from dumpgym.record.schema import ProgramRecord

    layers = {}
    dots = writes = 0
    for item in (i for i in cost_items if i["step"] == "dominant"):
        key = item["program"], item["layer"]
        if key not in layers:
            record = ProgramRecord.from_json(by_slug[item["program"]])
            layers[key] = {c.name: c for c in cost.layer_cost(record.compiled[item["layer"]]).instructions
                           if c.place in ("entry", "control")}
        module = module_of(*key)
        for name in item["option_names"]:
            row, ins = layers[key][name], _instruction(module, name)
            flops = _dot_flops(module, ins)
            if flops and "convolution" not in ins.to_string():
                assert row.work.matmul == flops, (key, name)
                dots += 1
            shape, opcode = _printed(ins)
            if not opcode.endswith("start") and opcode != "tuple" and not _updates_in_place(module, ins):
                assert sum(row.work.written.values()) == sum(map(_tiled_bytes, _arrays(shape))), (key, name)
                writes += 1
    assert dots and writes


def test_the_dominant_answer_takes_the_longest_and_the_others_clearly_less(cost_items, by_slug):
    """By the roofline written out here from the chip's peaks (cost/chips.py) and the rows' counts (checked against
    XLA above and in test_cost.py): the answer's time is the longest, every other option's at most 90% of it."""
    from dumpgym.record.schema import ProgramRecord

    layers = {}
    for item in (i for i in cost_items if i["step"] == "dominant"):
        key = item["program"], item["layer"]
        if key not in layers:
            layer = ProgramRecord.from_json(by_slug[item["program"]]).compiled[item["layer"]]
            costs = cost.layer_cost(layer)
            layers[key] = costs.chip, {c.name: c.work for c in costs.instructions}
        chip, works = layers[key]
        times = [max(works[n].compute_seconds(chip),  # an H100's f32 dots at its TF32 rate
                     (works[n].read.get(0, 0) + works[n].written.get(0, 0)) / chip.hbm_bytes_per_s,
                     works[n].sends / chip.interconnect_bytes_per_s)
                 for n in item["option_names"]]
        best = times[item["answer"]]
        assert all(t <= 0.9 * best for k, t in enumerate(times) if k != item["answer"]), (item["card"], times)
        assert chip.name in item["question"] and f"{chip.flops_per_s / 1e12:g} TFLOP/s" in item["question"]
        assert item["rules"][item["answer"]] == "" and all(r in ("shorter", "flops-not-time")
                                                           for k, r in enumerate(item["rules"]) if k != item["answer"])
        assert f"{item['instruction']} (line {item['hlo_line']})" in item["feedback"]


# --- padding ------------------------------------------------------------------------------------

def test_each_padding_answer_is_the_tiles_padding_of_the_hbm_arrays_xla_prints(cost_items, module_of):
    padding = [i for i in cost_items if i["step"] == "padding"]
    assert padding and {i["layer"] for i in padding} == {"tpu"}
    for item in padding:
        module = module_of(item["program"], item["layer"])
        ins = _instruction(module, item["instruction"])
        arrays = _arrays(_printed(ins)[0]) + [a for o in ins.operands() for a in _arrays(_printed(o)[0])]
        hbm = [a for a in arrays if _space(a) == 0]
        assert all(a.dimensions() for a in hbm)  # no scalar is asked about
        wasted = sum(_tiled_bytes(a) - _dense_bytes(a) for a in hbm)
        assert wasted > 0 and item["value"] == str(wasted), item["card"]
        assert item["hbm_bytes"] == sum(map(_tiled_bytes, hbm))
        assert item["misread"]["0"]["rule"] == "no-padding"


def test_the_tiling_rule_here_is_xlas_on_a_known_buffer():
    """`bf16[3,5]{1,0:T(8,128)(2,1)}` is stored as one 8x128 tile of 2-byte elements; `f32[3,5]{1,0:T(2,2)}`
    (How to Scale Your Model's example) as [4,6]."""
    (bf16,) = _arrays("bf16[3,5]{1,0:T(8,128)(2,1)}")
    (f32,) = _arrays("f32[3,5]{1,0:T(2,2)}")
    assert (_tiled_bytes(bf16), _dense_bytes(bf16)) == (2048, 30)
    assert _tiled_bytes(f32) == 4 * 6 * 4


# --- sends --------------------------------------------------------------------------------------

def _group_size(text: str) -> int:
    """The devices in each replica group, from the printed `replica_groups=`: a list `{{0,4},{1,5}}`, an
    iota `[4,2]<=[2,4]T(1,0)` (groups by devices per group), or a mesh's named axes `mesh[...] {'axis_0'}`
    (with the mesh's device order between, `mesh[...], device_ids=([2,4]T(1,0)) {'axis_0'}`)."""
    printed = re.search(r"replica_groups=(\{\{[^=]*?\}\}|\[[\d,]+\]<=\[[\d,]+\](?:T\([\d,]+\))?"
                        r"|mesh\[[^\]]*\](?:, device_ids=\(\[[\d,]+\](?:T\([\d,]+\))?\))? \{[^}]*\})", text).group(1)
    if printed.startswith("{{"):
        return len(printed[2:].split("}")[0].split(","))
    if printed.startswith("["):
        return int(re.match(r"\[([\d,]+)\]", printed).group(1).split(",")[-1])
    sizes = dict((a, int(n)) for a, n in re.findall(r"'(\w+)'=(\d+)", printed))
    return math.prod(sizes[a] for a in re.findall(r"'(\w+)'", printed.split("{", 1)[1]))


def test_each_sends_answer_is_the_ring_count_of_the_printed_shapes_and_groups(cost_items, module_of):
    sends = [i for i in cost_items if i["step"] == "sends"]
    assert sends
    seen = set()
    for item in sends:
        ins = _instruction(module_of(item["program"], item["layer"]), item["instruction"])
        shape, opcode = _printed(ins)
        n = _group_size(ins.to_string())
        base = opcode.removesuffix("-start")
        if base == "all-gather":
            arrays = _arrays(shape)
            # A start's tuple: its operands' arrays, then as many results (then a TPU's sync flags).
            k = len(ins.operands())
            data = sum(map(_tiled_bytes, arrays[k:2 * k] if opcode.endswith("start") else arrays))
        else:
            data = sum(_tiled_bytes(a) for o in ins.operands() for a in _arrays(_printed(o)[0]))
        passes = 2 if base == "all-reduce" else 1
        assert n == item["devices"] and item["value"] == str(passes * data * (n - 1) // n), item["card"]
        seen.add(base)
    assert {"all-gather", "all-reduce"} <= seen


# --- bound --------------------------------------------------------------------------------------

def _matmul_then_scale(a, b, x):
    return a @ b, x * 2.0 + 1.0


@pytest.mark.needs_tpu
def test_bound_asks_both_answers_half_the_weight_each_on_a_large_matmul():
    """A 2048³ bf16 matmul does 2·2048³ FLOPs on 3·2048²·2 bytes (683 FLOP/B, above v5e's ridge of 241): on a
    fresh TPU compile its instruction is the compute-bound item, the elementwise work's are memory-bound, and
    the two answers share the layer's weight evenly. None of the built-in programs is asked (all memory-bound)."""
    from dumpgym.corpus.pipeline import program_record
    from dumpgym.drills.cost import BOUNDS, cost_items as make
    from dumpgym.traced.program import Program
    from dumpgym.record.targets import TARGETS
    from jaxlib import xla_client

    record = program_record(Program(slug="big", title="t", lesson="l", function=_matmul_then_scale,
                                    args=("bf16[2048,2048]", "bf16[2048,2048]", "f32[512,512]")),
                            targets=[TARGETS["tpu"].target])
    items = [i for i in make(record) if i.step == "bound"]
    module = xla_client.hlo.hlo_module_from_text(record.compiled["tpu"].text)
    weight = defaultdict(float)
    for item in items:
        answer = BOUNDS[item.answer.index]
        weight[answer] += item.weight
        matmul = _dot_flops(module, _instruction(module, item.facts["instruction"])) or \
            "convolution" in _instruction(module, item.facts["instruction"]).to_string()
        assert (answer == "compute-bound") == bool(matmul), item.facts
        assert (item.facts["intensity"] > item.facts["ridge"]) == (answer == "compute-bound")
    assert set(weight) == set(BOUNDS) and math.isclose(weight["compute-bound"], weight["memory-bound"], rel_tol=0.01)
