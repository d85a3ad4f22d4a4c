"""The GPU layer's attribution, checked against a fresh compile on the described H100, as the CPU's and
the TPU's are: every instruction whose op_name carries an equation's tag is attributed to it (or, where
rule 4 of docs/corpus.md applies, to the reduction the tag hides), any other equation it lists is one the
jaxpr (re-traced by JAX here) proves merged into it, every fusion holds the work its body does, and the
committed layer is the one this compile gives."""
from __future__ import annotations

import pytest

from _heavy_compiles import layer_and_its_compiles
from dumpgym.programs import SLUGS, builtin_program
from dumpgym.target import GPU
from fusion_work import fusion_work

GPU_COMPILED = [s for s in SLUGS if builtin_program(s).platform == "cpu"]  # a Mosaic kernel has no GPU compile

pytestmark = [pytest.mark.needs_gpu, pytest.mark.compiled_hlo]


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


@pytest.fixture(scope="module")
def fresh():
    """Each program compiled for the H100 here: its trace, facts, layer and the tagged compile it was made from."""
    from dumpgym.facts import build_facts
    from dumpgym.trace import trace

    made = {}

    def get(slug):
        if slug not in made:
            program = builtin_program(slug)
            traced = trace(program.function, program.example_args())
            facts = build_facts(traced)
            layer, (tagged, plain, _about) = layer_and_its_compiles(traced, facts, GPU)
            made[slug] = (facts, layer, tagged, plain)
        return made[slug]

    return get


@pytest.mark.parametrize("slug", GPU_COMPILED)
def test_every_gpu_instruction_is_its_tags_equation_plus_only_proven_merges(slug, fresh):
    from dumpgym.hlo import _instructions
    from dumpgym.trace import innermost_tag

    facts, layer, tagged, plain = fresh(slug)
    rows = {i.name: i for i in layer.instructions}
    tagged_list = list(_instructions(tagged.runtime_executable().hlo_modules()[0]))
    # XLA may name an instruction after its op_name: the plain compile's names are the text's
    shown = {t.name: p.name for (_, t), (_, p) in zip(tagged_list, _instructions(plain.runtime_executable().hlo_modules()[0]))}
    work = _Work(facts)
    checked = 0
    for _computation, instruction in tagged_list:
        printed = instruction.to_string()
        tag = innermost_tag(printed.split("metadata={", 1)[1] if "metadata={" in printed else "")
        if tag is None or shown[instruction.name] not in rows:
            continue  # untagged, or folded into an async collective's `-start` line
        row, own = rows[shown[instruction.name]], facts.eqn_of_tag[tag]
        if row.opcode == "fusion" and not row.eqns:
            # a fusion holds the work its body does; one that only lays out or moves a dot's operand
            # holds nothing (docs/corpus.md, rule 7)
            assert facts.eqns[own].primitive in ("dot_general", "conv_general_dilated"), row.name
            continue
        assert row.eqns, f"{slug}: {row.name} carries tag {tag} but is not attributed"
        if row.opcode == "fusion":
            pass  # a fusion holds its body's work: the next test
        elif row.via == "tag":
            assert own in row.eqns, (slug, row.name)
            for e in set(row.eqns) - {own}:
                assert _proven_merged(facts, work, e, set(row.eqns), own), \
                    f"{slug}: {row.name} lists {facts.eqns[e].primitive} (eqn {e}) beside its tag's {facts.eqns[own].primitive}"
        elif row.via == "inferred":
            assert row.opcode == "reducewindow" and own not in row.eqns, (slug, row.name)  # rule 4
        checked += 1
    assert checked > 0 and layer.stats.unattributed_with_op_name == 0


@pytest.mark.parametrize("slug", GPU_COMPILED)
def test_every_gpu_fusion_holds_the_work_its_body_does(slug, fresh):
    facts, layer, *_compiles = fresh(slug)
    record = layer.to_json()
    eqns = facts.to_json()
    for fusion in record["fusions"]:
        held, listed = fusion_work(record, eqns, fusion)
        if not listed and fusion["eqns"]:
            continue  # a fusion XLA built around untagged instructions of its own: its own tag's
        assert set(fusion["eqns"]) == held, (slug, fusion["name"])


@pytest.mark.parametrize("slug", GPU_COMPILED)
def test_the_committed_gpu_attribution_is_a_fresh_compiles(slug, fresh, by_slug):
    _facts, layer, *_compiles = fresh(slug)
    committed = by_slug[slug]["compiled"]["gpu"]
    now = layer.to_json()
    assert now["text"] == committed["text"]
    key = ("line", "name", "opcode", "eqns", "via")
    assert [tuple(i[k] for k in key) for i in now["instructions"]] == \
        [tuple(i[k] for k in key) for i in committed["instructions"]]
    assert now["fusions"] == committed["fusions"]
