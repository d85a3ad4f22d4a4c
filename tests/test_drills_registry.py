"""The drill registry: kinds register by name, the pool follows dumpgym.drills/2, and every kind is documented."""
import copy
import json
import re
import sys
import textwrap
from pathlib import Path

import pytest

import dumpgym.drills as drills
from dumpgym.drills import build_pool, kinds
from dumpgym.drills._misreadings import distractor_rules, rule_name
from dumpgym.drills.decisions import decision_rules
from dumpgym.drills.decoder import AXIS_MISREADINGS
from dumpgym.record.schema import RecordError
from pool_checks import assert_pool_item

DOCS = Path(__file__).resolve().parents[1] / "docs" / "drills.md"


def test_built_in_kinds_are_registered():
    assert {"decoder", "shapes", "decisions"} <= kinds().keys()


def test_pool_follows_the_schema(corpus, pool):
    assert pool["schema"] == "dumpgym.drills/2"
    ids = {p["slug"]: {e["id"] for e in p["eqns"]} for p in corpus["programs"]}
    for item in pool["items"]:
        assert_pool_item(item, ids[item["program"]])
    assert {i["drill"] for i in pool["items"]} >= {"decoder", "shapes", "decisions", "fusions", "layouts", "units",
                                                   "partitioner", "loops", "backward", "buffers"}
    json.dumps(pool)


def test_pool_is_the_same_every_time(corpus, pool):
    assert build_pool(corpus) == pool


def test_answers_are_not_always_in_the_same_place(pool):
    places = {i["answer"]["index"] for i in pool["items"] if i["answer"]["form"] == "choice"}
    assert places >= {0, 1, 2, 3}


def test_every_kind_has_150_items_from_six_programs(whole_corpus, whole_pool):
    """The pool `dumpgym drills` prints (the built-in programs with their variants and changes) asks every kind
    at least 150 times, from at least six programs, a program and its variants counted as one."""
    base = {p["slug"]: p.get("variant_of") or p["slug"] for p in whole_corpus["programs"]}
    items, programs = {}, {}
    for item in whole_pool["items"]:
        items[item["drill"]] = items.get(item["drill"], 0) + 1
        programs.setdefault(item["drill"], set()).add(base[item["program"]])
    assert set(items) == set(kinds())
    thin = {kind: (n, sorted(programs[kind])) for kind, n in items.items() if n < 150 or len(programs[kind]) < 6}
    assert not thin, thin


def test_a_kind_registered_twice_is_an_error():
    kinds()  # the built-in kinds are registered first
    with pytest.raises(ValueError, match="registered twice"):
        drills.drill("shapes", number="02", title="t", aim="a")(lambda program: [])


def test_a_number_used_twice_is_an_error():
    kinds()
    with pytest.raises(ValueError, match="already 'shapes'"):
        drills.drill("another", number="02", title="t", aim="a")(lambda program: [])
    assert "another" not in kinds()


def test_a_number_must_be_two_digits():
    with pytest.raises(ValueError, match="two digits"):
        drills.drill("another", number="7", title="t", aim="a")


def test_kinds_are_listed_by_number_with_their_titles(pool):
    assert list(pool) == ["schema", "kinds", "items"]
    assert pool["kinds"] == [
        {"name": "decoder", "number": "01", "title": "dot_general, decoded",
         "aim": "Read dimension_numbers and name the contracted and batch axes of each side."},
        {"name": "shapes", "number": "02", "title": "shape on sight",
         "aim": "Say what comes out of one equation: every dimension and the dtype."},
        {"name": "decisions", "number": "03", "title": "the framework's hand",
         "aim": "Say what a line the framework wrote is for, and spot it: a broadcast, an upcast, a transpose, a mark."},
        {"name": "fusions", "number": "05", "title": "what XLA fused",
         "aim": "Name the equations XLA merged into one fusion of the compiled program."},
    ] + [k for k in pool["kinds"] if "05" < k["number"] < "10"] + [
        {"name": "layouts", "number": "10", "title": "TPU layouts, read",
         "aim": "Read a TPU buffer's layout: the shape its tile pads it to, the bytes it takes, and where it lives."},
        {"name": "units", "number": "11", "title": "which unit runs it",
         "aim": "Say which unit does an instruction's work (a TPU's MXU, VPU or DMA engines, a GPU's tensor or "
                "CUDA cores), and what the MXU's multiply makes inside a fusion."},
        {"name": "kernels", "number": "12", "title": "which kernel runs a dot",
         "aim": "Find the instruction of the GPU or TPU compile that runs a dot_general: a Triton GEMM fusion, a "
                "cuBLAS call, a fusion around the MXU's multiply, or a fusion it was folded into."},
        {"name": "cost", "number": "13", "title": "where the time goes",
         "aim": "Read a compiled program's costs on a named chip: which instruction takes the longest, whether it "
                "is compute- or memory-bound, the bytes its tiles waste, and what a collective sends."},
    ]


def test_only_kinds_with_items_are_listed(by_slug):
    # `gqa` has dot_generals but no decisions; without its compiled layers it has no fusions (nor TPU kinds).
    gqa = {**by_slug["gqa"], "compiled": {}}
    pool = build_pool({"programs": [gqa]})
    assert [k["name"] for k in pool["kinds"]] == ["decoder", "shapes"]
    assert {i["drill"] for i in pool["items"]} == {"decoder", "shapes"}


def test_an_empty_corpus_lists_no_kinds():
    assert build_pool({"programs": []}) == {"schema": "dumpgym.drills/2", "kinds": [], "items": []}


def test_a_damaged_program_is_refused_naming_the_field(corpus):
    damaged = copy.deepcopy(corpus["programs"][0])
    damaged["eqns"][0]["outputs"][0]["shape"] = ["64"]
    with pytest.raises(RecordError, match=r"^programs\[0\]\.eqns\[0\]\.outputs\[0\]\.shape\[0\]: expected a whole"):
        build_pool({"programs": [damaged]})


def test_adding_a_kind_is_adding_one_file(tmp_path, monkeypatch, corpus):
    (tmp_path / "countdown.py").write_text(textwrap.dedent('''
        """A toy kind: one item per program."""
        from dumpgym.drills import drill
        from dumpgym.drills.item import Choice, Item, Note

        @drill("countdown", number="99", title="count down", aim="Count the equations.")
        def countdown(program):
            return [Item(question="How many equations?", answer=Choice(("1", "2", "3"), 0, ("", "a", "b"), ("", "x", "y")),
                         context=(Note("count"),), card=("all",), layer="jaxpr")]
    '''))
    monkeypatch.setattr(drills, "__path__", [*drills.__path__, str(tmp_path)])
    try:
        pool = build_pool({"programs": corpus["programs"][:1]})
        assert [i for i in pool["items"] if i["drill"] == "countdown"] == [
            {"drill": "countdown", "program": corpus["programs"][0]["slug"],
             "card": f"countdown/{corpus['programs'][0]['slug']}/all", "eqn": None, "layer": "jaxpr", "weight": 1.0,
             "question": "How many equations?",
             "answer": {"form": "choice", "options": ["1", "2", "3"], "index": 0, "reasons": ["", "a", "b"],
                        "rules": ["", "x", "y"]},
             "context": [{"text": "count"}]}]
        assert pool["kinds"][-1] == {"name": "countdown", "number": "99", "title": "count down",
                                     "aim": "Count the equations."}
    finally:
        drills._kinds.pop("countdown", None)
        sys.modules.pop("dumpgym.drills.countdown", None)


# -- docs ------------------------------------------------------------------------------------------

def _doc():
    return DOCS.read_text(encoding="utf-8")


def test_every_registered_kind_is_documented():
    headings = set(re.findall(r"^## .*`([a-z-]+)`", _doc(), flags=re.M))
    missing = kinds().keys() - headings
    assert not missing, f"drill kinds without a '## ... `name`' section in docs/drills.md: {sorted(missing)}"


def test_every_decision_kind_is_documented():
    missing = [k for k in decision_rules if f"`{k}`" not in _doc()]
    assert not missing, f"decision kinds missing from docs/drills.md: {missing}"


def test_every_misreading_rule_is_documented():
    names = {rule_name(fn) for fns in distractor_rules.values() for fn in fns}
    missing = sorted(n for n in names if f"`{n}`" not in _doc())
    assert not missing, f"misreading rules missing from docs/drills.md: {missing}"


def test_every_decoder_rule_is_documented(pool):
    used = {m["rule"] for i in pool["items"] if i["drill"] == "decoder" and i["step"] != "output"
            for m in i["answer"].get("misread", {}).values()}
    assert used <= set(AXIS_MISREADINGS)
    missing = sorted(n for n in AXIS_MISREADINGS if f"`{n}`" not in _doc())
    assert not missing, f"decoder rules missing from docs/drills.md: {missing}"


def test_sharding_loops_remat_and_the_backward_pass_are_a_quarter_of_the_pool(corpus, pool):
    from dumpgym.drills._topics import TOPICS, shares
    from dumpgym.record.schema import Corpus

    programs = {p.slug: p for p in Corpus.from_json(corpus).programs}
    counted = shares(pool, programs)
    items, weight = counted.pop("all")
    assert sum(n for n, _ in counted.values()) >= 0.25 * items
    assert sum(w for _, w in counted.values()) >= 0.25 * weight  # the sampler draws by weight
    assert all(counted[t][0] > 0 for t in TOPICS)


def test_an_items_topic_follows_its_equation_up_through_containers(corpus):
    from dumpgym.drills._topics import topic
    from dumpgym.record.schema import Corpus

    programs = {p.slug: p for p in Corpus.from_json(corpus).programs}
    layers = programs["scan-layers"]
    (scan,) = [e for e in layers.eqns if e.primitive == "scan"]
    inside = next(e for e in layers.eqns if e.parent == scan.id and e.primitive == "dot_general")
    assert topic({"drill": "shapes", "eqn": inside.id}, layers) == "loops"
    grads = programs["ckpt-policy"]
    (remat,) = [e for e in grads.eqns if e.primitive == "remat2"]
    recomputed = next(e for e in grads.eqns if e.parent == remat.id and e.primitive == "sin")
    assert topic({"drill": "shapes", "eqn": recomputed.id}, grads) == "remat"  # and backward: remat comes first
    forward = next(e for e in grads.eqns if e.parent is None and e.primitive == "dot_general")
    assert topic({"drill": "decoder", "eqn": forward.id}, grads) is None
    mlp = programs["mlp"]
    assert topic({"drill": "shapes", "eqn": 0}, mlp) is None
    assert topic({"drill": "loops", "eqn": None}, mlp) == "loops"
