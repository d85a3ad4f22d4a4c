"""Traced variants: every built-in program again at other example shapes (the sharded ones on another mesh
too), each its own record (`mlp-2`, `variant_of: "mlp"`), checked here against JAX itself rather than
against the base program's record. The tests that walk every record walk the base programs (the `corpus`
fixture); `corpus build --check` compares every variant's listings with a fresh trace."""
import json

import pytest

from dumpgym.traced.program import ProgramError, parse_arg, variant
from dumpgym.programs import SLUGS, builtin_program, builtin_variants, corpus_programs, is_builtin
from dumpgym.record.schema import Corpus, ProgramRecord, RecordError
from needs_extras import PLATFORM_MARKERS

# MLIR's element type names for the dtypes the built-in programs return.
MLIR_ELEMENT = {"bfloat16": "bf16", "float32": "f32", "int32": "i32", "int8": "i8", "bool": "i1"}


def _variant_slugs() -> list:
    """Every variant's slug, marked with the extra its platform needs (a Pallas TPU kernel's needs libtpu)."""
    from dumpgym.corpus.builtin import load_builtin

    records = [p for p in load_builtin()["programs"] if "variant_of" in p]
    return [p["slug"] if p.get("platform", "cpu") == "cpu"
            else pytest.param(p["slug"], marks=PLATFORM_MARKERS[p["platform"]]) for p in records]


def _traced_jaxpr(program) -> str:
    """The jaxpr as JAX prints it for the program's arguments: `make_jaxpr`, or a jitted function's own trace."""
    import jax

    function, args = program.function, program.example_args()
    if callable(getattr(function, "trace", None)) and callable(getattr(function, "lower", None)):
        return str(function.trace(*args).jaxpr)
    return str(jax.make_jaxpr(function)(*args))


def test_every_built_in_program_has_a_variant_and_every_mesh_program_one_on_another_mesh(whole_corpus):
    records = {p["slug"]: p for p in whole_corpus["programs"]}
    for slug in SLUGS:
        mine = [p for p in records.values() if p.get("variant_of") == slug and "change" not in p]
        assert mine, f"{slug} has no variant"
        assert all(p["slug"].startswith(f"{slug}-") and is_builtin(p["slug"]) for p in mine)
        assert all(p["args"] != records[slug]["args"] for p in mine), f"a variant of {slug} has the base's arguments"
        if records[slug]["mesh"] is not None:
            assert any(p["mesh"] != records[slug]["mesh"] for p in mine), f"{slug} has no variant on another mesh"


def test_variants_follow_the_base_programs_in_the_corpus_and_name_a_base(whole_corpus):
    slugs = [p["slug"] for p in whole_corpus["programs"]]
    assert tuple(slugs[:len(SLUGS)]) == SLUGS
    assert slugs == [p.slug for p in corpus_programs()]
    assert all(p["variant_of"] in SLUGS for p in whole_corpus["programs"][len(SLUGS):])
    assert Corpus.from_json(whole_corpus).bases == Corpus.from_json(whole_corpus).programs[:len(SLUGS)]


def test_sizes_differ_between_a_program_and_its_variants(whole_corpus):
    """The point of variants: an output shape of the base is not every variant's too (a compile with one change,
    tests/test_compare.py's, may keep the base's shapes)."""
    records = {p["slug"]: p for p in whole_corpus["programs"]}
    for p in (p for p in whole_corpus["programs"] if "variant_of" in p and "change" not in p):
        base = records[p["variant_of"]]
        shapes = [tuple(o["shape"]) for e in p["eqns"] for o in e["outputs"]]
        base_shapes = [tuple(o["shape"]) for e in base["eqns"] for o in e["outputs"]]
        assert shapes != base_shapes, p["slug"]


@pytest.mark.parametrize("slug", _variant_slugs())
def test_a_variant_record_is_what_jax_traces_for_its_arguments(slug, whole_corpus):
    """Its jaxpr is JAX's for the variant's own arguments, its main returns what `jax.eval_shape` says, and
    its mesh is the one JAX traced it on."""
    import jax

    record = next(p for p in whole_corpus["programs"] if p["slug"] == slug)
    program = builtin_program(slug)
    assert program.variant_of == record["variant_of"] and tuple(record["args"]) == program.args
    assert record["jaxpr"] == _traced_jaxpr(program)
    outputs = jax.tree.leaves(jax.eval_shape(program.function, *program.example_args()))
    results = ProgramRecord.from_json(record).lowered.main.results
    assert [r.shape for r in results] == [tuple(o.shape) for o in outputs]
    assert [r.type.rsplit("x", 1)[-1].removeprefix("tensor<").rstrip(">") for r in results] == \
        [MLIR_ELEMENT[str(o.dtype)] for o in outputs]
    if record["mesh"] is not None:
        traced = [e.params["mesh"] for e in jax.make_jaxpr(program.function)(*program.example_args()).eqns
                  if "mesh" in e.params]
        meshes = traced or [s.sharding.mesh for s in program.example_args()]
        assert {dict(m.shape) == record["mesh"] for m in meshes} == {True}


def test_a_variant_says_nothing_of_the_base_programs_shapes(whole_corpus):
    """Its title and lesson name its own arguments; no argument the base has and it lacks appears in them."""
    records = {p["slug"]: p for p in whole_corpus["programs"]}
    for p in (p for p in whole_corpus["programs"] if "variant_of" in p and "change" not in p):
        base = records[p["variant_of"]]
        assert p["lesson"] != base["lesson"] and p["title"] != base["title"]
        for aval in set(base["args"]) - set(p["args"]):
            assert aval not in p["title"] and aval not in p["lesson"], (p["slug"], aval)
        changed = [a for a, b in zip(p["args"], base["args"]) if a != b]
        assert changed[0] in p["title"]
        if p["mesh"] != base["mesh"]:
            assert all(f"{k}={v}" in p["title"] for k, v in p["mesh"].items()), p["title"]
        assert all(str(parse_arg(a)) in p["lesson"] for a in p["args"])


def test_variant_slugs_are_found_by_slug_and_unknown_ones_are_not():
    assert builtin_program("mlp-2") is builtin_variants("mlp")[0]
    assert builtin_program("mlp").variant_of is None
    for slug in ("mlp-9", "nope-2", "mlp-x", "mlp-"):
        with pytest.raises(KeyError):
            builtin_program(slug)
        assert not is_builtin(slug)


def test_a_variant_is_numbered_from_two_and_a_mesh_function_needs_its_mesh():
    sharded = builtin_program("sharded")
    with pytest.raises(ProgramError, match="numbered from 2"):
        variant(builtin_program("mlp"), 1, builtin_program("mlp").args)
    with pytest.raises(ProgramError, match="needs that mesh"):
        variant(sharded, 4, sharded.args, function=lambda x, w: x @ w)


def test_variant_of_round_trips_and_a_bad_one_is_a_record_error(whole_corpus):
    record = next(p for p in whole_corpus["programs"] if "variant_of" in p)
    assert ProgramRecord.from_json(record).to_json() == record
    base = next(p for p in whole_corpus["programs"] if "variant_of" not in p)
    assert "variant_of" not in ProgramRecord.from_json(base).to_json()
    for bad in (record["slug"], "Not A Slug", 3):
        with pytest.raises(RecordError, match="variant_of"):
            ProgramRecord.from_json({**record, "variant_of": bad})


def test_the_summary_counts_programs_and_variants_apart(whole_corpus, corpus):
    from dumpgym.corpus.builtin import summary

    changes = sum("change" in p for p in whole_corpus["programs"])
    variants = len(whole_corpus["programs"]) - len(SLUGS) - changes
    assert summary(whole_corpus).startswith(f"{len(SLUGS)} programs (and {variants} variants at other shapes, "
                                            f"{changes} compiles with one change) · ")
    assert summary(corpus).startswith(f"{len(SLUGS)} programs · ")


@pytest.fixture(scope="module")
def small(whole_corpus):
    """mlp and sharded with their variants: enough to see a variant drawn in drills and kept off the lists."""
    keep = {"mlp", "sharded"}
    return {**whole_corpus, "programs": [p for p in whole_corpus["programs"]
                                         if p["slug"] in keep or p.get("variant_of") in keep]}


def test_variants_are_drawn_in_drills_with_their_listings_but_not_listed_as_programs(small):
    """Their items and listings are there by slug; the corpus section lists base programs alone, each naming its
    variants (the anchor and title a drill's context links to), and the x-ray offers base programs only."""
    from html import escape

    from dumpgym.drills import build_pool
    from dumpgym.site.files import site_files

    pool = build_pool(small)
    variants = [p for p in small["programs"] if "variant_of" in p]
    drawn = {item["program"] for item in pool["items"]}
    assert {p["slug"] for p in variants} <= drawn
    files = site_files(small, pool)
    page = files["index.html"].decode()
    for p in variants:
        assert f'href="#p-{p["slug"]}"' not in page and f'data-program="{p["slug"]}"' not in page
        xray_picker = page.split("data-xray-pick", 1)[1].split("</select>", 1)[0]
        assert f'data-xray-open="{p["slug"]}"' not in page and f'value="{p["slug"]}"' not in xray_picker
        base_card = page.split(f'id="p-{p["variant_of"]}"', 1)[1].split("</article>", 1)[0]
        assert f'<span id="p-{p["slug"]}"><span class="slug">{p["slug"]}</span> <bdi class="title">{escape(p["title"])}</bdi>' \
            in base_card
        listings = json.loads(files[f"data/listings/{p['slug']}.json"])
        assert set(listings) >= {"source", "jaxpr", "stablehlo"}
        for target in p["compiled"]:
            assert f"data/compiled/{target}/{p['slug']}.json" in files
        assert any(path.endswith(f"/{p['slug']}.json") for path in files if path.startswith("data/drills/"))
    for base in ("mlp", "sharded"):
        assert f'href="#p-{base}"' in page
    assert "2 programs" in page


def test_the_corpus_doc_states_the_counts_the_build_prints(whole_corpus):
    from pathlib import Path

    from dumpgym.corpus.builtin import summary

    text = " ".join((Path(__file__).resolve().parents[1] / "docs" / "corpus.md").read_text(encoding="utf-8").split())
    stated = summary(whole_corpus).split(" · ")[0]
    assert f"`{stated}`" in text
