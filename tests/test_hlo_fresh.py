"""Each compiled layer's attribution, checked against a fresh compile made here: every instruction whose
source file carries an equation's tag is attributed to it (or, where rule 4 of docs/corpus.md applies, to the
reduction the tag hides), any other equation it lists is one the jaxpr (re-traced by JAX here) proves
merged into it, and every fusion holds the work its body does. The GPU layer (the described H100) and the
TPU layer are also the committed ones; the CPU's depends on this machine's CPU, so only its properties are
checked."""
from __future__ import annotations

from unittest import mock

import pytest

from dumpgym.programs import builtin_program
from _heavy_compiles import TARGETS, program_target_cases, tagged_instructions
from fusion_work import fusion_work
from merge_proofs import Work, proven_merged

pytestmark = pytest.mark.compiled_hlo


def _fresh(slug, target):
    """A program compiled here for a target: its facts, its layer, and the compile it was made from."""
    from dumpgym.compiled import layer as hlo
    from dumpgym.traced.facts import build_facts
    from dumpgym.traced.trace import trace
    program = builtin_program(slug)
    traced = trace(program.function, program.example_args())
    facts = build_facts(traced)
    compiles = []

    def recorded(real):
        def call(*args):
            compiles.append(real(*args))
            return compiles[-1]
        return call

    with mock.patch.object(hlo, "_compile_for_topology", recorded(hlo._compile_for_topology)), \
            mock.patch.object(hlo, "_compile_for_cpu", recorded(hlo._compile_for_cpu)):
        layer = hlo.compile_layer(traced, facts, TARGETS[target])
    (made,) = compiles  # set going by the call, done by the time the layer is
    return facts, layer, made


@pytest.mark.parametrize("slug, target", program_target_cases(("cpu", "tpu", "gpu")))
def test_a_fresh_compile_is_attributed_by_its_tags_and_the_documented_rules(slug, target, by_slug):
    """One compile per program and target, judged three ways (each compile is the costly part)."""
    facts, layer, compiled = _fresh(slug, target)
    _tagged_instructions_are_their_tags_plus_proven_merges(slug, facts, layer, compiled)
    _fusions_hold_the_work_their_bodies_do(slug, facts, layer)
    if target != "cpu":  # the CPU's compile depends on this machine's CPU; a TPU's or GPU's on nothing of it
        _is_the_committed_layer(layer, by_slug[slug]["compiled"][target])


def _tagged_instructions_are_their_tags_plus_proven_merges(slug, facts, layer, compiled):
    rows = {i.name: i for i in layer.instructions}
    work = Work(facts)
    checked = 0
    for _computation, instruction, tag in tagged_instructions(compiled):
        if instruction.name not in rows:
            continue  # folded into an async collective's `-start` line
        row, own = rows[instruction.name], facts.eqn_of_tag[tag]
        checked += 1
        if row.opcode == "fusion":
            # a fusion holds the work its body does (judged below); one that only lays out or moves a
            # dot's operand holds nothing (docs/corpus.md, rule 7)
            assert row.eqns or facts.eqns[own].primitive in ("dot_general", "conv_general_dilated"), row.name
            continue
        assert row.eqns, f"{slug}: {row.name} carries tag {tag} but is not attributed"
        if row.via == "tag":
            assert row.eqns == (own,), (slug, row.name)
            for a in row.absorbed:  # rules 2 and 3: folded in, apart from its own
                assert proven_merged(facts, work, a.eqn, set(row.computed_eqns), own, a.rule), \
                    f"{slug}: {row.name} absorbs {facts.eqns[a.eqn].primitive} (eqn {a.eqn}) beside its tag's " \
                    f"{facts.eqns[own].primitive}"
        elif row.via == "inferred":
            assert row.opcode == "reducewindow" and own not in row.eqns, (slug, row.name)  # rule 4
        elif row.via == "region":  # rule 5: what applies the region, whatever reducer its tag names
            holders = [i for i in layer.instructions if row.computation in i.to_apply]
            assert set(row.eqns) == set().union(*(set(h.eqns) for h in holders)), (slug, row.name)
            assert set(row.absorbed) == set().union(*(set(h.absorbed) for h in holders)), (slug, row.name)
    assert checked > 0 and layer.stats.unattributed_with_op_name == 0


def _fusions_hold_the_work_their_bodies_do(slug, facts, layer):
    record = layer.to_json()
    eqns = facts.to_json()
    for fusion in record["fusions"]:
        held, listed = fusion_work(record, eqns, fusion)
        if not listed and fusion["eqns"]:
            continue  # a fusion XLA built around untagged instructions of its own: its own tag's
        assert set(fusion["eqns"]) == held, (slug, fusion["name"])


def _is_the_committed_layer(layer, committed):
    now = layer.to_json()
    assert now["text"] == committed["text"]
    key = ("line", "name", "opcode", "eqns", "via", "absorbed")
    assert [tuple(i.get(k, []) for k in key) for i in now["instructions"]] == \
        [tuple(i.get(k, []) for k in key) for i in committed["instructions"]]
    assert now["fusions"] == committed["fusions"]
