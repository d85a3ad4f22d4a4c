"""The compiled layer's attribution, judged by an independent oracle (tests/compiled_oracle.py): XLA's own
compile of the program with each equation's tag in its name stack, for each target. Every instruction the
oracle tags is credited to that equation alone, or by a rule of docs/xray.md proven here from the jaxpr;
no fusion misses the equation of a dot XLA put in it.

The CPU's compiled text depends on this machine's CPU: what is asserted holds whatever XLA printed (the
oracle and the layer are compiled here, the same way), never a particular text."""
from __future__ import annotations

import pytest

from compiled_oracle import judge_layer, traced_builtin
from dumpgym.record.targets import CPU, GPU, TPU

pytestmark = pytest.mark.compiled_hlo

# A spread: merges of every kind (mlp, layernorm, train-step), a nameless callee's body (dropout), loops
# (scan, decode-loop), fusions holding dots (moe, mha), a reduce-window (sdpa), a mesh (fsdp-step).
SLUGS = ["mlp", "layernorm", "dropout", "scan", "decode-loop", "moe", "mha", "sdpa", "train-step", "fsdp-step"]
TARGETS = [pytest.param(TPU, marks=pytest.mark.needs_tpu, id="tpu"),
           pytest.param(GPU, marks=pytest.mark.needs_gpu, id="gpu"), pytest.param(CPU, id="cpu")]
DOCUMENTED = {"exact", "merge", "region", "window", "constant inside the call"}


@pytest.fixture(scope="module")
def traced():
    from functools import cache

    return cache(traced_builtin)


@pytest.fixture(scope="module")
def judged(traced):
    made = {}

    def get(slug, target):
        if (slug, target) not in made:
            made[slug, target] = judge_layer(*traced(slug), target)
        return made[slug, target]

    return get


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("slug", SLUGS)
def test_every_tagged_instruction_is_its_equations_or_a_documented_merge(slug, target, judged):
    result = judged(slug, target)
    assert not result.unpaired
    assert result.tagged > 0
    assert result.kinds["wrong"] == 0, result.wrong
    assert set(result.kinds) <= DOCUMENTED


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("slug", SLUGS)
def test_no_fusion_misses_a_dot_xla_put_in_it(slug, target, judged):
    assert judged(slug, target).missed == []


@pytest.mark.parametrize("target", TARGETS)
def test_random_bits_inside_a_jit_is_credited_its_own_instructions(target, judged, traced):
    """dropout's threefry body, which `random_bits` lowers to a call of a function with no name of its own,
    is credited to `random_bits` (as the oracle says), not to the `jit` around it."""
    _, facts = traced("dropout")
    result = judged("dropout", target)
    assert result.kinds["exact"] >= 0.95 * result.tagged
    assert not any(facts.eqns[expected].primitive == "random_bits" for *_, expected in result.wrong)


def test_the_oracle_finds_a_wrong_attribution(traced, monkeypatch):
    """The oracle can fail: with every instruction's equations moved to another equation, it reports them."""
    from dumpgym.compiled import layer as hlo

    real = hlo.attribute

    def shifted(graph, facts, closed_jaxpr, flow=None):
        eqns, via = real(graph, facts, closed_jaxpr, flow)
        last = len(facts.eqns) - 1
        return {n: {(e + 1) % (last + 1) for e in found} for n, found in eqns.items()}, via

    monkeypatch.setattr(hlo, "attribute", shifted)
    result = judge_layer(*traced("mlp"), CPU)
    assert result.kinds["wrong"] > result.tagged // 2
