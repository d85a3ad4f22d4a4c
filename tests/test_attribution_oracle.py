"""The compiled layer's attribution judged by an independent oracle (tests/compiled_oracle.py): XLA's own
compile of the name-stack-tagged lowering, each instruction's op_name naming the innermost equation that
made it. Every tagged instruction of the layer lists that equation alone, or is a reduce-window computing
the reduction the equation its op_name names reads (rule 4), or (rule 9) is a literal XLA shared whose
op_name names only the jit around the equations it feeds; every equation it lists as absorbed (folded into
it, with no instruction of its own) is one the jaxpr proves merged into it by the rule it names
(docs/corpus.md's rules 2 and 3); none is credited to an equation enclosing its own; no fusion misses an
equation its body's instructions are tagged with. Compiled fresh here: the CPU's compile depends on this
machine's CPU, so nothing stored is read."""
from __future__ import annotations

import pytest

from compiled_oracle import fresh_layer_and_oracle, judge
from merge_proofs import Work, proven_merged, proven_reduction_window
from _heavy_compiles import TARGETS, program_target_cases
from dumpgym.programs import builtin_program

pytestmark = pytest.mark.compiled_hlo

@pytest.mark.parametrize("slug, target", program_target_cases())
def test_every_tagged_instruction_is_its_oracle_equation_alone_and_absorbs_only_proven_merges(slug, target):
    from dumpgym.traced.facts import build_facts
    from dumpgym.traced.trace import trace

    program = builtin_program(slug)
    traced = trace(program.function, program.example_args())
    facts = build_facts(traced)
    layer, compiled, oracle = fresh_layer_and_oracle(traced, facts, TARGETS[target])
    found = judge(layer, compiled, oracle, facts)
    assert found["count"]["exact"] > 0
    assert found["missing"] == [], f"{slug}: fusions missing an equation their body is tagged with"
    work = Work(facts)
    by_name = {r.name: r for r in layer.instructions}
    for name, opcode, own, got, verdict in found["cases"]:
        if verdict == "inner":
            # Rule 9: a literal (a constant, or XLA's broadcast of one) whose op_name stops at a jit's call: JAX
            # lowered it with no location of its own, and XLA kept one copy of equal literals.
            assert opcode in ("constant", "broadcast"), (slug, name, opcode)
            if opcode == "broadcast":
                row = by_name[name]
                assert all(by_name_of_line(layer, line).opcode == "constant" for line in row.operands), (slug, name)
            assert facts.eqns[own].primitive in ("jit", "pjit"), (slug, name)
        elif verdict == "other" and opcode == "reducewindow":
            # Rule 4: a reduction and the broadcast of its result, as one window spanning the reduced axis
            assert proven_reduction_window(facts, set(got), own), (slug, name, got, own)
        else:
            pytest.fail(f"{slug}: {name} ({opcode}) credited to {got}, its op_name names equation {own} ({verdict})")
    tags = found["tagged"]
    owners = {e for r in layer.instructions if r.opcode != "fusion" for e in r.eqns}
    for r in layer.instructions:
        for a in r.absorbed:
            # A folded equation has no instruction of its own; the jaxpr proves it merged by the rule named.
            assert a.eqn not in owners, f"{slug}: {r.name} absorbs eqn {a.eqn}, which has an instruction of its own"
            # An instruction the oracle does not judge (a region's, one whose op_name XLA dropped) is
            # judged against its one own equation.
            own = tags.get(r.name, r.eqns[0] if len(r.eqns) == 1 else None)
            assert own is not None or a.rule == 3, (slug, r.name, r.eqns, a)
            assert proven_merged(facts, work, a.eqn, {*r.eqns, *(b.eqn for b in r.absorbed)}, own, a.rule), \
                f"{slug}: {r.name} absorbs {facts.eqns[a.eqn].primitive} (eqn {a.eqn}, rule {a.rule}) beside " \
                f"{facts.eqns[own].primitive}"


def by_name_of_line(layer, line):
    (row,) = [r for r in layer.instructions if r.line == line]
    return row
