"""The committed listings are byte-identical to what inspect and JAX produce for each entry."""
import inspect

import jax
import pytest

from dumpgym.traced.facts import dtype_name
from dumpgym.jax_internals import no_traceback_locations
from dumpgym.traced.program import load_entry, parse_arg
from dumpgym.programs import SLUGS
from jax_reference import jaxpr_of, jit_of
from needs_extras import builtin_slugs


def test_corpus_has_every_built_in_program_in_the_gym_order(corpus):
    assert [p["slug"] for p in corpus["programs"]] == list(SLUGS)
    assert corpus["schema"] == "dumpgym.corpus/2"
    assert corpus["jax_version"] == jax.__version__ == "0.10.2"


@pytest.mark.parametrize("slug", builtin_slugs())
def test_listings_are_what_jax_prints(slug, by_slug, programs):
    record = by_slug[slug]
    function = load_entry(record["entry"])
    args = programs[slug].example_args()
    assert [str(parse_arg(a)) for a in record["args"]] == record["args"]
    assert [f"{dtype_name(a.dtype)}{list(a.shape)}" for a in args] == [
        f"{parse_arg(a).dtype}{list(parse_arg(a).shape)}" for a in record["args"]
    ]
    assert record["source"] == inspect.getsource(function)
    assert record["jaxpr"] == str(jaxpr_of(function, args))
    if any(e["primitive"] == "pallas_call" for e in record["eqns"]):
        # A Mosaic kernel's serialized body would hold this machine's file paths: lowered with
        # source locations off, after dropping any cached lowering made with them on.
        jax.clear_caches()
        with no_traceback_locations():
            assert record["stablehlo"] == jit_of(function).lower(*args).as_text()
        assert "/" + "src/dumpgym" not in record["stablehlo"]
    else:
        assert record["stablehlo"] == jit_of(function).lower(*args).as_text()
