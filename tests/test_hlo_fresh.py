"""Each compiled layer's attribution, checked against a fresh compile made here: every instruction whose
source file carries an equation's tag is attributed to it (or, where rule 4 of docs/corpus.md applies, to the
reduction the tag hides), any other equation it lists is one the jaxpr (re-traced by JAX here) proves
merged into it, and every fusion holds the work its body does. The GPU layer (the described H100) and the
TPU layer are also the committed ones; the CPU's depends on this machine's CPU, so only its properties are
checked."""
from __future__ import annotations

from unittest import mock

import pytest

from dumpgym.programs import SLUGS, builtin_program
from dumpgym.record.targets import CPU, GPU, TPU
from _heavy_compiles import tagged_instructions
from fusion_work import fusion_work

TARGETS = {"cpu": CPU, "tpu": TPU, "gpu": GPU}
MARKS = {"tpu": [pytest.mark.needs_tpu], "gpu": [pytest.mark.needs_gpu], "cpu": []}


def _cases(targets):
    """(slug, target id) for each built-in program that compiles for the target, marked with its extra."""
    out = []
    for target in targets:
        for slug in SLUGS:
            platform = builtin_program(slug).platform
            if platform == "cpu" or platform == target:  # a Mosaic kernel compiles for a TPU alone
                marks = MARKS[target] + MARKS.get(platform, [])
                out.append(pytest.param(slug, target, marks=marks, id=f"{slug}-{target}"))
    return out


pytestmark = pytest.mark.compiled_hlo


def _readers(facts, e) -> set[int]:
    """The equations reading an output of `e` in JAX's jaxpr, looking through a stop_gradient (rule 2)."""
    outs = set(map(id, facts.jax_eqns[e].outvars))
    found = set()
    for n, eqn in facts.jax_eqns.items():
        if any(id(v) in outs for v in eqn.invars):
            found |= _readers(facts, n) if eqn.primitive.name == "stop_gradient" else {n}
    return found


class _Work:
    """Which equations do the same work by JAX's own variables (rule 3's relation): one primitive and params
    (a slice compared by what it selects from an iota, computed by JAX) on inputs that are the same value,
    a jit's or checkpoint's binders standing for what its caller passes."""

    def __init__(self, facts):
        from dumpgym.jax_internals import jaxprs_in_params

        self.facts = facts
        self.outer = {}  # id(binder of a sub-jaxpr taking its caller's inputs one for one) -> the caller's var
        self.made_by = {}  # id(var) -> the equation id whose output it is
        for n, eqn in facts.jax_eqns.items():
            for v in eqn.outvars:
                self.made_by[id(v)] = n
            if eqn.primitive.name in ("scan", "while"):
                continue  # a loop body's binders are a new value each iteration
            for sub in jaxprs_in_params(eqn.params):
                if len(sub.invars) == len(eqn.invars):
                    for inner, outer in zip(sub.invars, eqn.invars):
                        self.outer[id(inner)] = outer

    def _origin(self, v):
        while id(v) in self.outer:
            v = self.outer[id(v)]
        return v

    def same_value(self, u, v) -> bool:
        if hasattr(u, "val") or hasattr(v, "val"):
            return hasattr(u, "val") and hasattr(v, "val") and repr(u.val) == repr(v.val)
        u, v = self._origin(u), self._origin(v)
        if u is v:
            return True
        a, b = self.made_by.get(id(u)), self.made_by.get(id(v))
        return a is not None and b is not None and self.same(a, b)

    def same(self, a: int, b: int) -> bool:
        import numpy as np

        ea, eb = self.facts.jax_eqns[a], self.facts.jax_eqns[b]
        if ea.primitive is not eb.primitive or len(ea.invars) != len(eb.invars):
            return False
        if ea.primitive.name == "slice":
            shape = ea.invars[0].aval.shape
            if shape != eb.invars[0].aval.shape:
                return False
            x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
            picked = [np.asarray(e.primitive.bind(x, **e.params)) for e in (ea, eb)]
            if picked[0].shape != picked[1].shape or not np.array_equal(*picked):
                return False
        elif ea.params != eb.params:
            return False
        return all(self.same_value(u, v) for u, v in zip(ea.invars, eb.invars))


def _proven_merged(facts, work, e: int, listed: set[int], tag: int) -> bool:
    """Whether the jaxpr proves `e` merged into an instruction tagged `tag`: its result is read only by the
    tagged equation (rule 2), or it repeats the work of another listed equation (rule 3)."""
    if _readers(facts, e) == {tag}:
        return True
    return any(f != e and work.same(e, f) for f in listed)


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


@pytest.mark.parametrize("slug, target", _cases(("cpu", "tpu", "gpu")))
def test_a_fresh_compile_is_attributed_by_its_tags_and_the_documented_rules(slug, target, by_slug):
    """One compile per program and target, judged three ways (each compile is the costly part)."""
    facts, layer, compiled = _fresh(slug, target)
    _tagged_instructions_are_their_tags_plus_proven_merges(slug, facts, layer, compiled)
    _fusions_hold_the_work_their_bodies_do(slug, facts, layer)
    if target != "cpu":  # the CPU's compile depends on this machine's CPU; a TPU's or GPU's on nothing of it
        _is_the_committed_layer(layer, by_slug[slug]["compiled"][target])


def _tagged_instructions_are_their_tags_plus_proven_merges(slug, facts, layer, compiled):
    rows = {i.name: i for i in layer.instructions}
    work = _Work(facts)
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
            assert own in row.eqns, (slug, row.name)
            for e in set(row.eqns) - {own}:
                assert _proven_merged(facts, work, e, set(row.eqns), own), \
                    f"{slug}: {row.name} lists {facts.eqns[e].primitive} (eqn {e}) beside its tag's {facts.eqns[own].primitive}"
        elif row.via == "inferred":
            assert row.opcode == "reducewindow" and own not in row.eqns, (slug, row.name)  # rule 4
        elif row.via == "region":  # rule 5: what applies the region, whatever reducer its tag names
            holders = [i for i in layer.instructions if row.computation in i.to_apply]
            assert set(row.eqns) == set().union(*(set(h.eqns) for h in holders)), (slug, row.name)
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
    key = ("line", "name", "opcode", "eqns", "via")
    assert [tuple(i[k] for k in key) for i in now["instructions"]] == \
        [tuple(i[k] for k in key) for i in committed["instructions"]]
    assert now["fusions"] == committed["fusions"]
