"""Shared fixtures: the committed corpus (read as JSON) and the built-in programs (imported)."""
import json

import pytest

import dumpgym  # noqa: F401  (sets XLA_FLAGS for eight CPU devices before JAX starts)
from dumpgym.corpus import BUILTIN_PATH


@pytest.fixture(scope="session")
def corpus():
    """The committed built-in corpus, exactly as `dumpgym export` prints it."""
    return json.loads(BUILTIN_PATH.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def programs():
    """The built-in `Program`s by slug."""
    from dumpgym.programs import builtin_programs

    return {p.slug: p for p in builtin_programs()}


@pytest.fixture(scope="session")
def fresh_corpus(programs):
    """The built-in programs traced, lowered and compiled now, once per session (as `corpus build` does)."""
    from dumpgym.corpus import build_corpus

    return build_corpus(programs.values()).to_json()


@pytest.fixture(scope="session")
def by_slug(corpus):
    """Corpus program records by slug."""
    return {p["slug"]: p for p in corpus["programs"]}
