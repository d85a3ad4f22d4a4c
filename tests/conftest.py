"""Shared fixtures: the committed corpus (read as JSON) and the built-in programs (imported).

Both belong to the JAX that traced the corpus (constraints.txt); under any other supported JAX
(scripts/test-compat) the tests that use them are skipped, since the printed dumps differ.
"""
import atexit
import json
import os
import shutil
import tempfile
from importlib.metadata import version

import pytest

import dumpgym  # noqa: F401  (sets XLA_FLAGS for eight CPU devices before JAX starts)
from dumpgym.corpus.builtin import BUILTIN_PATH
from dumpgym.record.targets import quiet_libtpu
from needs_extras import check as check_extras

quiet_libtpu()  # before JAX starts too, here and in the commands tests run (they inherit it)

# The built-in programs' kept drill items (drills/_stored.py) go to a cache folder of this session's own,
# which the commands tests run inherit: no test reads or writes the user's cache.
if "DUMPGYM_CACHE_DIR" not in os.environ:
    os.environ["DUMPGYM_CACHE_DIR"] = tempfile.mkdtemp(prefix="dumpgym-test-cache-")
    atexit.register(shutil.rmtree, os.environ["DUMPGYM_CACHE_DIR"], ignore_errors=True)


def _skip_unless_the_corpus_jax(committed: dict) -> None:
    installed = version("jax")
    if installed != committed["jax_version"]:
        pytest.skip(f"the built-in corpus was traced with JAX {committed['jax_version']}, this is JAX {installed}")


@pytest.fixture(scope="session")
def whole_corpus():
    """The committed built-in corpus, exactly as `dumpgym export` prints it: the programs, then their
    traced variants at other shapes (`variant_of`)."""
    committed = json.loads(BUILTIN_PATH.read_text(encoding="utf-8"))
    _skip_unless_the_corpus_jax(committed)
    return committed


@pytest.fixture(scope="session")
def corpus(whole_corpus):
    """The committed built-in corpus's programs in their own right (`dumpgym.programs.SLUGS`), without the
    variants: the tests that walk every record walk these, and tests/test_variants.py checks the variants
    against JAX on their own."""
    return {**whole_corpus, "programs": [p for p in whole_corpus["programs"] if "variant_of" not in p]}


@pytest.fixture(scope="session")
def variants(whole_corpus):
    """The committed corpus's traced variants (records with `variant_of`), in corpus order."""
    return [p for p in whole_corpus["programs"] if "variant_of" in p]


@pytest.fixture(scope="session")
def programs(corpus):
    """The built-in `Program`s by slug."""
    from dumpgym.programs import builtin_programs

    return {p.slug: p for p in builtin_programs()}


@pytest.fixture(scope="session")
def pool(corpus):
    """The drill pool of the committed corpus, built once per session (no test may change it)."""
    from dumpgym.drills import build_pool

    return build_pool(corpus)


@pytest.fixture(scope="session")
def whole_pool(whole_corpus):
    """The drill pool of the whole committed corpus, its variants' items included, built once per session."""
    from dumpgym.drills import build_pool

    return build_pool(whole_corpus)


@pytest.fixture(scope="session")
def read_pool(corpus, pool):
    """The pool's items as the drill tests read them (`pool_checks.readable`: context resolved, answer
    form's fields beside the item's own), in pool order."""
    from pool_checks import readable_pool

    return readable_pool(pool, corpus)


@pytest.fixture(scope="session")
def by_slug(corpus):
    """Corpus program records by slug."""
    return {p["slug"]: p for p in corpus["programs"]}


@pytest.fixture(scope="session")
def fresh_module():
    """(slug, target) -> (facts re-traced by JAX, XLA's module of a fresh compile for the target), compiled as
    the corpus build compiles (`test_hlo_fresh._fresh`), once each."""
    cache = {}

    def get(slug, target):
        if (slug, target) not in cache:
            from test_hlo_fresh import _fresh

            facts, _layer, made = _fresh(slug, target)
            cache[slug, target] = facts, made.compiled.result().runtime_executable().hlo_modules()[0]
        return cache[slug, target]
    return get


def pytest_runtest_setup(item):
    """Skip `compiled_hlo` tests on a jaxlib without HLO bindings (scripts/test-compat's oldest JAX), and
    `needs_tpu` / `needs_gpu` tests where that extra is missing (failing them under CI instead)."""
    check_extras(item)
    if item.get_closest_marker("compiled_hlo"):
        from dumpgym.jax_internals import JaxVersionError, require_hlo_bindings

        try:
            require_hlo_bindings()
        except JaxVersionError as e:
            pytest.skip(str(e))
