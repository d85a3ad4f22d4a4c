"""Every `cost` drill item of the whole pool (the built-in programs and their variants) right by the independent
recount, nothing of cost/estimate.py: FLOPs from test_cost_recount_flops.py (held to XLA's cost_analysis()), bytes by
memory space and bytes sent from test_cost_recount.py (held to XLA's bytes accessed and memory_analysis()), timed
on the chips' published peaks (an H100's f32 dots at its TF32 rate). `dominant`: the answer takes the longest, every
other option at most 90% of it; `bound`: the answer is the longer of the compute and memory terms, and the bytes
sent are not the longest; `padding`: the tiles' padding of the HBM arrays the row moves, which are all it moves in
HBM; `sends`: the bytes the collective sends, each collective once. (`layouts/memory-space` is checked by the same
recount in test_cost_recount.py.)
"""
from __future__ import annotations

import pytest

from dumpgym.cost.chips import CHIPS
from test_cost_recount import _layers, _recount, _spaces
from test_cost_recount_flops import _recount as _recount_flops
from test_drills_cost import _arrays, _dense_bytes, _space, _tiled_bytes

pytestmark = pytest.mark.compiled_hlo


@pytest.fixture(scope="module")
def read_pool(whole_pool, whole_corpus):
    """Every item of the whole pool, the variants' included, as the drill tests read them."""
    from pool_checks import readable_pool

    return readable_pool(whole_pool, whole_corpus)


def _terms(item, line: int) -> tuple[float, float, float]:
    """(compute, memory, interconnect) seconds of one row by the recount."""
    layer = _layers()[item["program"], item["layer"]]
    chip = CHIPS[layer.device_kind]
    module, rows, sends = _recount(item["program"], item["layer"])
    flops, transcendentals, f32 = _recount_flops(item["program"], item["layer"]).own(module.by_line[line])
    f32_rate = chip.f32_flops_per_s or chip.flops_per_s
    compute = (flops + transcendentals - f32) / chip.flops_per_s + f32 / f32_rate
    read, written = rows[line]
    memory = (read.get(0, 0) + written.get(0, 0)) / chip.hbm_bytes_per_s
    return compute, memory, sends.get(line, 0) / chip.interconnect_bytes_per_s


def _items(read_pool, step: str) -> list[dict]:
    found = [i for i in read_pool if i["drill"] == "cost" and i["step"] == step]
    assert found, step
    return found


def _line(item, name: str) -> int:
    module, _rows, _sends = _recount(item["program"], item["layer"])
    return module.by_name[name].line


def test_the_pool_asks_about_variants_too(read_pool):
    programs = {i["program"] for i in read_pool if i["drill"] == "cost"}
    assert any(slug[-2:] in ("-2", "-3") for slug in programs) and "mlp" in programs


def test_every_dominant_answer_is_the_longest_by_the_recount(read_pool):
    for item in _items(read_pool, "dominant"):
        times = [max(_terms(item, _line(item, name))) for name in item["option_names"]]
        best = times[item["answer"]]
        assert all(t <= 0.9 * best for k, t in enumerate(times) if k != item["answer"]), (item["card"], times)


def test_every_bound_answer_is_the_longer_term_by_the_recount(read_pool):
    for item in _items(read_pool, "bound"):
        compute, memory, network = _terms(item, item["hlo_line"])
        assert compute and memory and network <= max(compute, memory), item["card"]
        assert item["answer"] == (0 if compute >= memory else 1), (item["card"], compute, memory)


def test_every_padding_answer_is_the_tiles_padding_of_all_the_row_moves_in_hbm(read_pool):
    for item in _items(read_pool, "padding"):
        module, rows, _sends = _recount(item["program"], item["layer"])
        ins = module.by_name[item["instruction"]]
        arrays = _arrays(ins.shape) + [a for name in ins.operands for a in _arrays(module.by_name[name].shape)]
        hbm = [a for a in arrays if _space(a) == 0]
        read, written = rows[ins.line]
        assert read.get(0, 0) + written.get(0, 0) == sum(map(_tiled_bytes, hbm)), item["card"]
        assert item["value"] == str(sum(_tiled_bytes(a) - _dense_bytes(a) for a in hbm)), item["card"]


def test_every_sends_answer_is_the_recounted_bytes_sent(read_pool):
    for item in _items(read_pool, "sends"):
        module, _rows, sends = _recount(item["program"], item["layer"])
        line = module.by_name[item["instruction"]].line
        assert item["value"] == str(sends[line]) and sends[line] > 0, item["card"]


def test_every_memory_space_row_is_a_buffer_in_its_recounted_space(read_pool):
    """The asked rows by the recount's own buffers: each right row's result holds bytes in the asked space."""
    items = [i for i in read_pool if i["drill"] == "layouts" and i["step"] == "memory-space"]
    assert {i["program"] for i in items} & {slug for slug, _ in _layers() if slug[-2:] in ("-2", "-3")}
    for item in items:
        module, _rows, _sends = _recount(item["program"], item["layer"])
        for k in item["answer_lines"]:
            ins = module.by_line[item["hlo_lines"][0] + k - 1]
            assert _spaces(ins.shape).get(item["space"], 0) > 0, item["card"]
