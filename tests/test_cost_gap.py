"""cost/gap.py held to libtpu: XLA's `optimal_seconds` on a TPU is its `bytes accessed` at one fixed rate (every
compile of the built-in corpus, and fresh compiles here of shapes the corpus has not), and each FLOP gap the gap
pins to instructions is the FLOPs XLA's own count leaves out of them, on fresh compiles of those instructions alone.
"""
from __future__ import annotations

import functools
import re
import subprocess
import sys

import pytest

from dumpgym.cost import estimate as cost
from dumpgym.cost.gap import XLA_TPU_BYTES_PER_S, gap
from test_cost import documented_differences

pytestmark = pytest.mark.compiled_hlo


@functools.cache
def _tpu_layers():
    from dumpgym.corpus.builtin import load_builtin
    from dumpgym.record.schema import ProgramRecord

    out = {}
    for p in load_builtin()["programs"]:
        record = ProgramRecord.from_json(p)
        layer = record.compiled.get("tpu")
        if layer is not None and layer.has_facts and "optimal_seconds" in layer.xla_cost:
            out[record.slug] = layer
    return out


def test_xlas_optimal_seconds_is_its_bytes_accessed_at_one_rate_on_every_built_in_compile():
    """The figures libtpu reported when the corpus was built (`CompiledLayer.xla_cost`), program by program."""
    layers = _tpu_layers()
    assert len(layers) > 40
    for slug, layer in layers.items():
        xla = layer.xla_cost
        assert xla["bytes accessed"] / xla["optimal_seconds"] == pytest.approx(XLA_TPU_BYTES_PER_S, rel=1e-5), slug
        found = gap(cost.layer_cost(layer, "tpu"), layer)
        assert found is not None and found.xla_rate == XLA_TPU_BYTES_PER_S, slug


def test_every_flop_gap_is_pinned_or_named_in_the_docs():
    """A program whose FLOPs differ from XLA's has them pinned to instructions by a rule of gap.py, and the docs'
    table names it; one pinned to none is named there too."""
    named = {slug for slug, target, figure in documented_differences() if target == "tpu" and figure == "flops"}
    unpinned = set()
    for slug, layer in _tpu_layers().items():
        costs = cost.layer_cost(layer, "tpu")
        found = gap(costs, layer)
        if not found.flops_gap:
            assert found.pinned is None
            continue
        base = re.sub(r"-\d+$|-whole-grads$", "", slug)
        assert slug in named or base in named, slug
        if found.pinned is None:
            unpinned.add(base)
        else:
            assert -found.flops_gap <= found.pinned.flops, slug
    assert unpinned <= {"fsdp-step", "sp-mlp"}  # the docs' table says which of their compiles, and that none is pinned


def _fresh_tpu(f, *args):
    from test_cost_view import _compile_for_tpu

    return _compile_for_tpu(f, args)


@pytest.mark.needs_tpu
def test_the_rate_holds_for_shapes_the_corpus_has_not():
    """Fresh compiles of an elementwise op, a matmul and a reduction at sizes of their own: libtpu's optimal_seconds
    is each one's bytes accessed at the same rate."""
    import jax
    import jax.numpy as jnp

    cases = [(lambda x: jnp.tanh(x) * 3, (jax.ShapeDtypeStruct((37, 300), jnp.float32),)),
             (lambda a, b: a @ b, (jax.ShapeDtypeStruct((256, 96), jnp.bfloat16),
                                   jax.ShapeDtypeStruct((96, 640), jnp.bfloat16))),
             (lambda x: x.sum(axis=0), (jax.ShapeDtypeStruct((1000, 24), jnp.float32),))]
    for f, args in cases:
        _layer, compiled = _fresh_tpu(f, *args)
        xla = compiled.cost_analysis()
        assert xla["bytes accessed"] / xla["optimal_seconds"] == pytest.approx(XLA_TPU_BYTES_PER_S, rel=1e-5)


@pytest.mark.needs_tpu
def test_a_gather_fusions_index_unpacking_is_the_flops_xla_leaves_out():
    """take_along_axis alone: the FLOPs ours counts more than libtpu are the ands and shifts in its gather fusion,
    the instruction the gap pins them to."""
    import jax
    import jax.numpy as jnp

    def pick(x, i):
        return jnp.take_along_axis(x, i[:, None], axis=1)

    layer, compiled = _fresh_tpu(pick, jax.ShapeDtypeStruct((24, 100), jnp.float32),
                                 jax.ShapeDtypeStruct((24,), jnp.int32))
    costs = cost.layer_cost(layer, "tpu")
    found = gap(costs, layer)
    missing = costs.once.flops - compiled.cost_analysis()["flops"]
    assert missing > 0 and found.flops_gap == -missing
    assert found.pinned is not None and found.pinned.rule == "gather-indices" and found.pinned.flops == missing
    (line,) = found.pinned.lines
    text = layer.text.splitlines()[line - 1]
    assert " fusion(" in text and "kind=kCustom" in text


@pytest.mark.needs_tpu
def test_a_padded_reduce_window_holds_the_flops_xla_leaves_out():
    """A running max over a padded window alone: libtpu counts fewer FLOPs than XLA's HloCostAnalysis rule, all in
    the reduce-window the gap pins them to."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def running_max(x):  # sdpa's row max as the TPU writes it: a window of 31 padded 15 each side over 16 columns
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 31), (1, 1, 1), ((0, 0), (0, 0), (15, 15)))

    layer, compiled = _fresh_tpu(running_max, jax.ShapeDtypeStruct((8, 16, 16), jnp.float32))
    costs = cost.layer_cost(layer, "tpu")
    found = gap(costs, layer)
    missing = costs.once.flops - compiled.cost_analysis()["flops"]
    assert missing > 0 and found.flops_gap == -missing
    assert found.pinned is not None and found.pinned.rule == "reduce-window" and missing <= found.pinned.flops
    from test_cost_recount import Module, _holder

    module = Module(layer.text)  # the tests' own reading: the instructions outside fusions that run a reduce-window
    windows = [i for i in module.by_line.values() if i.opcode == "reduce-window"]
    assert windows and {_holder(module, i).line for i in windows} == set(found.pinned.lines)


def test_dumpgym_cost_says_why_beside_the_roofline():
    """fsdp-step on the TPU: the line after the roofline's gives XLA's bytes accessed at its rate, our HBM and VMEM
    bytes and what libtpu counts beyond them, which add up to XLA's bytes; and that ours is bound by the bytes sent."""
    out = subprocess.run([sys.executable, "-m", "dumpgym", "cost", "fsdp-step", "--target", "tpu"],
                         capture_output=True, text=True, timeout=600).stdout.splitlines()
    k = next(k for k, line in enumerate(out) if line.startswith("roofline: "))
    why = out[k + 1]
    layer = _tpu_layers()["fsdp-step"]
    found = gap(cost.layer_cost(layer, "tpu"), layer)
    assert why.startswith("why they differ: ") and f"{XLA_TPU_BYTES_PER_S / 1e9:.0f} GB/s" in why
    assert found.hbm_bytes + found.other_bytes + found.beyond == layer.xla_cost["bytes accessed"]
    assert "interconnect-bound" in out[k] and "61.4k bytes each device sends" in why
