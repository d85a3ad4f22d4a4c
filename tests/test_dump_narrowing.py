"""The dumps' narrowing by dataflow (`dumps/dataflow.py`), on random graphs against a plain reference.

The reference is the rule as docs/dumps.md states it, done the slow way: narrow every edge until nothing
changes; where an edge leaves an instruction no candidate, leave both its ends out and start again from
every instruction's own candidates. The narrowing under test rewinds only what rests on a broken edge;
both must keep, for the same broken ends, the same candidates, and what it keeps must satisfy every edge.
"""
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from dumpgym.dumps.dataflow import _consistent, _supported


@dataclass(frozen=True)
class Op:
    index: int
    upstream: int  # bit set of the ops upstream of this one
    operands: int
    operands2: int

    @property
    def within(self) -> int:
        """The ops upstream of it in one pass of each loop: the graphs here have no loop."""
        return self.upstream


def _pair_ok(o, c, how) -> bool:
    """Whether op `o` stands to op `c` as `how` says, pair by pair (the rule, unoptimised)."""
    if o.index == c.index:
        return how in ("=", "<=", "operand", "~")
    if how == "~":
        return bool(c.upstream >> o.index & 1 or o.upstream >> c.index & 1)
    if how == "operand":
        return bool((c.operands | c.operands2) >> o.index & 1)
    return how != "=" and bool(c.upstream >> o.index & 1)


def _reference(start, edges, relation, left_out=()):
    """Narrow to the fixed point, leaving out the edges at `left_out`; the first broken edge's ends are left
    out too and it starts again from `start`."""
    left_out = set(left_out)
    while True:
        cands, broken = dict(start), None
        changed = True
        while changed and broken is None:
            changed = False
            for j, i in edges:
                if j in left_out or i in left_out:
                    continue
                how = relation[(j, i)]
                keep_i = [c for c in cands[i] if any(_pair_ok(o, c, how) for o in cands[j])]
                keep_j = [o for o in cands[j] if any(_pair_ok(o, c, how) for c in keep_i)]
                if not keep_i or not keep_j:
                    broken = (j, i)
                    break
                if len(keep_i) < len(cands[i]) or len(keep_j) < len(cands[j]):
                    cands[i], cands[j], changed = keep_i, keep_j, True
        if broken is None:
            return cands, left_out
        left_out.update(broken)


@st.composite
def graphs(draw):
    n = draw(st.integers(2, 9))
    ops = []
    for k in range(n):  # a DAG: each op's operands come before it
        direct = [a for a in range(k) if draw(st.booleans())]
        operands = sum(1 << a for a in direct)
        operands2 = 0
        upstream = 0
        for a in direct:
            operands2 |= ops[a].operands
            upstream |= (1 << a) | ops[a].upstream
        ops.append(Op(k, upstream, operands, operands2))
    names = [f"i{k}" for k in range(draw(st.integers(2, 8)))]
    start = {name: draw(st.lists(st.sampled_from(ops), min_size=1, max_size=n, unique=True)) for name in names}
    pairs = draw(st.lists(st.tuples(st.sampled_from(names), st.sampled_from(names)).filter(lambda p: p[0] != p[1]),
                          max_size=14, unique=True))
    relation = {p: draw(st.sampled_from(["<", "<=", "=", "operand", "~"])) for p in pairs}
    return start, pairs, relation


@settings(max_examples=400, deadline=None)
@given(graphs())
def test_rewinding_keeps_what_narrowing_afresh_keeps(graph):
    start, edges, relation = graph
    cands, broken = _consistent(start, edges, relation)
    kept = [e for e in edges if not broken & set(e)]
    # Afresh without the broken ends' edges, the reference finds no break and keeps the same candidates.
    again, left_out = _reference(start, edges, relation, left_out=broken)
    assert left_out == broken
    assert {k: sorted(o.index for o in v) for k, v in cands.items()} == \
           {k: sorted(o.index for o in v) for k, v in again.items()}
    # Every kept edge holds: each kept candidate has a partner at the other end.
    for j, i in kept:
        how = relation[(j, i)]
        assert all(any(_pair_ok(o, c, how) for o in cands[j]) for c in cands[i])
        assert all(any(_pair_ok(o, c, how) for c in cands[i]) for o in cands[j])
    # A broken end keeps its own candidates; and where the reference finds no break, neither does it.
    assert all(cands[name] == start[name] for name in broken)
    if not _reference(start, edges, relation)[1]:
        assert not broken


@settings(max_examples=300, deadline=None)
@given(graphs())
def test_support_by_bit_sets_is_the_rule_pair_by_pair(graph):
    start, edges, relation = graph
    for j, i in edges:
        how = relation[(j, i)]
        keep_i = [c for c in start[i] if any(_pair_ok(o, c, how) for o in start[j])]
        keep_j = [o for o in start[j] if any(_pair_ok(o, c, how) for c in keep_i)]
        assert _supported(start[j], start[i], how) == (keep_j, keep_i)
