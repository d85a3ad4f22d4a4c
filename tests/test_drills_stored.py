"""Each program's drill items are made once and kept (an added program's beside its record, the built-in
programs' in the cache folder) and made again only when the record, the code or the built-in corpus
changes: `drills`, `serve` and `build` read a big model's items instead of building them, and parse no
record whose items are kept."""
import dataclasses
import io
import json
import os
import stat

import jax
import jax.numpy as jnp
import pytest

import dumpgym
from dumpgym import cli, drills
from dumpgym.serve import server as serve
from dumpgym.record import typedjson
from dumpgym.drills import _packed, _stored, build_pool, kept_pool, pool_of, read_pool, write_pool
from dumpgym.site.files import load_inputs
from dumpgym.site.inputs import gym_inputs, gym_start, load_sources
from dumpgym.corpus.user import load_corpus


def _mlp(x, w1, w2):
    return jnp.tanh(x @ w1) @ w2


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One cache folder for this module's tests: the built-in items are made in it once."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(autouse=True)
def _cache_dir(cache, monkeypatch):
    monkeypatch.setenv(_stored.CACHE_ENV, str(cache))


@pytest.fixture(scope="module")
def added(tmp_path_factory):
    f32 = lambda *s: jax.ShapeDtypeStruct(s, jnp.float32)  # noqa: E731
    folder = tmp_path_factory.mktemp("added") / "c"
    dumpgym.add(_mlp, f32(8, 16), f32(16, 32), f32(32, 4), slug="mine", corpus=folder, compiled=True)
    return folder


@pytest.fixture
def folder(added, tmp_path):
    """A fresh copy of the user corpus holding `mine`, with no items kept beside it."""
    import shutil

    return shutil.copytree(added, tmp_path / "c")


@pytest.fixture
def made(monkeypatch):
    """The slugs `items_for` makes items of, in order (the count of makings, never a time)."""
    slugs = []
    real = drills.items_for
    monkeypatch.setattr(drills, "items_for", lambda p, *rest: slugs.append(p.slug) or real(p, *rest))
    return slugs


@pytest.fixture
def parsed(monkeypatch):
    """The typed records parsed from JSON, by type name (a `Corpus` is the built-in corpus, read whole)."""
    names = []
    real = typedjson._build
    monkeypatch.setattr(typedjson, "_build", lambda tp, value, path: names.append(tp.__name__) or real(tp, value, path))
    _stored.builtin_corpus.cache_clear()  # as a new process starts
    yield names
    _stored.builtin_corpus.cache_clear()


def _mine(pool):
    return [i for i in pool["items"] if i["program"] == "mine"]


def _source(slug, folder=None):
    return next(s for s in load_sources(folder) if s.slug == slug)


def test_a_second_start_makes_nothing_and_parses_no_kept_record(folder, made, parsed):
    first = gym_inputs(folder)[1]
    assert "mine" in made and (folder / "mine.drills.json").exists()
    made.clear()
    _stored.builtin_corpus.cache_clear()
    parsed.clear()
    assert cli.main(["drills", "--corpus", str(folder)]) == 0  # what `dumpgym drills` prints, warm
    assert made == [] and parsed == []  # every built-in's items and mine read as kept; no record parsed
    gym = serve.Site.build(folder)  # a second `dumpgym serve`
    assert made == [] and gym.get("/")[0] == 200 and read_pool(json.loads(gym.get("/drills.json")[2])) == first
    # The page needs the records: the built-in corpus read once, the added record once, nothing twice.
    assert parsed.count("Corpus") == 1 and parsed.count("ProgramRecord") == 1
    assert gym.programs == len(_stored.builtin_corpus().bases) + 1


def _same(a: dict, b: dict) -> bool:
    """Equal, and laid out alike key for key when dumped (the page and the tests read items in key order)."""
    return a == b and json.dumps(a, ensure_ascii=False) == json.dumps(b, ensure_ascii=False)


def test_what_drills_prints_reads_back_as_the_pool_made_with_nothing_kept(folder, capsys):
    gym_inputs(folder)  # keeps every program's items
    capsys.readouterr()
    assert cli.main(["drills", "--corpus", str(folder)]) == 0
    printed = capsys.readouterr().out
    fresh = build_pool(load_corpus(folder))  # every item made now, nothing read
    assert printed.endswith("}\n") and _same(drills.read_pool(json.loads(printed)), fresh)


@pytest.mark.parametrize("slugs", [["mine"], ["mlp", "mine"], []])
def test_write_pool_prints_what_reads_back_as_the_pool(folder, slugs, layouts_skipped):
    sources = [s for s in load_sources(folder) if s.slug in slugs] if slugs else []
    parts = kept_pool(sources) + layouts_skipped
    out = io.BytesIO()
    write_pool(parts, out)
    assert _same(drills.read_pool(json.loads(out.getvalue())), pool_of(parts))
    made = [_stored.Kept.of(kept.items(), list(kept.skipped)) for kept in parts]  # the same items, not read
    again = io.BytesIO()
    write_pool(made, again)
    assert again.getvalue() == out.getvalue()


@pytest.fixture
def layouts_skipped():
    """A kept program whose layouts kind failed: the pool then has a `skipped` list."""
    return [_stored.Kept.of([], [{"drill": "layouts", "program": "odd", "why": "ZeroDivisionError: by zero"}])]


def test_a_changed_record_makes_its_items_again_and_no_other(folder, made):
    sources = load_sources(folder)
    kept_pool(sources)
    path = folder / "mine.json"
    record = json.loads(path.read_text())
    record["title"] = "renamed"  # items quote no title, but a changed record is a changed record
    path.write_text(json.dumps(record))
    made.clear()
    kept_pool(load_sources(folder))
    assert made == ["mine"]


def test_another_version_or_code_makes_them_again(folder, made, monkeypatch):
    mine, mlp = _source("mine", folder), _source("mlp")
    kept_pool([mine, mlp])
    made.clear()
    kept_pool([_source("mine", folder), _source("mlp")])
    assert made == []
    package = _stored._ROOT / "__init__.py"  # where dumpgym's __version__ is
    real = type(package).read_bytes
    line = f'__version__ = "{dumpgym.__version__}"'.encode()
    assert line in real(package)
    monkeypatch.setattr(type(package), "read_bytes", lambda self: real(self).replace(line, b'__version__ = "99.0"')
                        if self == package else real(self))
    _stored.code_digest.cache_clear()
    try:
        kept_pool([_source("mine", folder), _source("mlp")])
    finally:
        _stored.code_digest.cache_clear()
    assert made == ["mine", "mlp"]  # the built-in one from another cache folder: that version's own


def test_a_changed_built_in_corpus_makes_every_items_again(monkeypatch):
    before = _stored.code_digest()
    monkeypatch.setattr(_stored, "builtin_bytes", lambda: b'{"changed": true}')
    _stored.code_digest.cache_clear()
    try:
        assert _stored.code_digest() != before  # the decisions' weights count the built-in corpus's answers
    finally:
        _stored.code_digest.cache_clear()


def test_a_stale_file_is_never_read(folder, made):
    kept_pool([_source("mine", folder)])
    path = folder / "mine.drills.json"
    head, body = path.read_bytes().split(b"\n", 1)
    meta = json.loads(head)
    items = _packed.kept_items(body)
    items[0]["question"] = "a question of another release"
    forged = _packed.kept_text(items)
    import hashlib

    meta.update(code="0" * 16, bytes=len(forged), sha256=hashlib.sha256(forged).hexdigest())
    path.write_bytes(json.dumps(meta).encode() + b"\n" + forged)  # whole and sound, but of other code
    made.clear()
    (kept,) = kept_pool([_source("mine", folder)])
    assert made == ["mine"] and "a question of another release" not in json.dumps(kept.items())


@pytest.mark.parametrize("damage", [
    lambda data: data[: len(data) // 2],  # cut short by a full disk or a kill
    lambda data: data.replace(b'"items"', b'"itemz"', 1),  # edited
    lambda data: b"{not json",
])
def test_a_broken_file_is_said_in_one_line_and_made_again(folder, made, damage):
    kept_pool([_source("mine", folder)])
    path = folder / "mine.drills.json"
    path.write_bytes(damage(path.read_bytes()))
    warned = []
    made.clear()
    (kept,) = kept_pool([s for s in load_sources(folder, warned.append) if s.slug == "mine"])
    assert made == ["mine"] and len(warned) == 1 and str(path) in warned[0] and "\n" not in warned[0]
    again = _stored.StoredItems(folder).read("mine", _source("mine", folder).digest)
    assert again is not None and again.items() == kept.items()  # rewritten whole


def test_a_broken_built_in_file_is_made_again_too(made, capsys):
    kept_pool([_source("mlp")])
    store = _stored.builtin_store()
    store.path("mlp").write_bytes(b"garbage")
    made.clear()
    kept_pool([_source("mlp")])
    assert made == ["mlp"]
    assert capsys.readouterr().err.count("ignoring the damaged drill items file") == 1


def test_kept_items_equal_freshly_made_ones(folder):
    first = pool_of(kept_pool(load_sources(folder)))  # keeps
    second = pool_of(kept_pool(load_sources(folder)))  # reads
    assert second == first == build_pool(load_corpus(folder))  # made with nothing kept


def test_the_built_in_index_keeps_the_decisions_spread(made):
    from dumpgym.drills._decision_why import count_asked, count_spread
    from dumpgym.drills._spread import count_answers

    kept_pool([_source("mlp")])
    index = _stored.builtin_store().index()
    assert index["slugs"] == [p.slug for p in _stored.builtin_corpus().programs]
    spread = count_spread(_stored.builtin_corpus().programs)  # counted afresh over the typed records
    assert {(step, key): n for step, key, n in index["spread"]} == spread
    # and the typed and tapped steps' spread (drills/_spread.py)
    answers = count_answers(_stored.builtin_corpus().programs)
    assert {(step, key): n for step, key, n in index["answers"]} == answers
    asked = count_asked(_stored.builtin_corpus().programs)
    assert {(step, key, layer, line): n for step, key, layer, line, n in index["asked"]} == asked


def test_build_pool_keeps_added_items_by_the_records_json(folder, made):
    _, first = load_inputs(folder)
    assert made.count("mine") == 1 and (folder / "mine.drills.json").exists()
    _, second = load_inputs(folder)
    assert made.count("mine") == 1 and second == first


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through a read-only mode")
def test_a_read_only_folder_still_gives_the_items(folder):
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        pool = pool_of(kept_pool(load_sources(folder)))
    finally:
        folder.chmod(stat.S_IRWXU)
    assert _mine(pool) and not (folder / "mine.drills.json").exists()


def test_remove_takes_the_items_with_the_record(folder):
    from dumpgym.corpus import user as usercorpus

    kept_pool(load_sources(folder))
    assert (folder / "mine.drills.json").exists()
    usercorpus.remove("mine", folder)
    assert not (folder / "mine.drills.json").exists() and not (folder / "mine.json").exists()


def test_the_code_digest_covers_every_module_the_drills_import():
    from test_imports import PACKAGE, python_graph

    graph = python_graph()
    seen, todo = set(), [m for m in graph if m == "dumpgym.drills" or m.startswith("dumpgym.drills.")]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += graph[module] if module != "dumpgym" else []  # the package: read for its __version__ alone
    hashed = {"dumpgym." + name[:-3].replace("/", ".") for name in _stored.CODE} | {m for m in seen if m.startswith("dumpgym.drills")}
    outside = {m for m in seen - hashed if m != "dumpgym"}
    assert not outside, f"the drills import {sorted(outside)}, which _stored.CODE does not hash"
    assert all((PACKAGE / name).is_file() for name in _stored.CODE)


def test_the_built_in_corpus_digested_is_the_one_the_gym_reads():
    from dumpgym.corpus.builtin import BUILTIN_PATH

    assert _stored.BUILTIN == BUILTIN_PATH and _stored.builtin_bytes() == BUILTIN_PATH.read_bytes()


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    """A cache folder of this test's own, empty: no built-in items kept (as after an upgrade)."""
    monkeypatch.setenv(_stored.CACHE_ENV, str(tmp_path / "empty-cache"))


def test_a_start_with_nothing_kept_makes_nothing_until_the_whole_pool_is_asked(folder, made, empty_cache):
    start = gym_start(folder)
    slugs = [p.slug for p in start.corpus.programs]
    assert made == [] and start.pending == tuple(slugs) and slugs[-1] == "mine"
    assert start.pool["items"] == [] and start.pool["kinds"] == [] and not list(folder.glob("*.drills.json"))
    stages = []
    whole = start.whole_pool(lambda pool, pending: stages.append((pool, pending)))
    # The built-in programs' items first, handed over before mine are made; then mine.
    assert made == slugs and [pending for _, pending in stages] == [("mine",)]
    built_in = stages[0][0]
    assert {i["program"] for i in built_in["items"]} == set(slugs[:-1]) and _mine(whole)
    assert whole == gym_inputs(folder)[1] and made == slugs  # kept: the second read makes nothing
    assert whole["items"][:len(built_in["items"])] == built_in["items"]  # in corpus order, as the whole pool


def test_a_start_with_everything_kept_has_nothing_pending(folder, made):
    first = gym_inputs(folder)[1]
    made.clear()
    start = gym_start(folder)
    assert start.pending == () and made == [] and start.pool == first and start.whole_pool() is start.pool


def test_a_kind_that_fails_on_a_program_made_late_is_told_once(folder, monkeypatch):
    gym_inputs(folder)  # the built-ins' items kept
    (folder / "mine.drills.json").unlink()
    kind = drills.kinds()["shapes"]

    def fails_on_mine(program):
        if program.slug == "mine":
            raise ZeroDivisionError("by zero")
        return kind.make(program)
    monkeypatch.setitem(drills._kinds, "shapes", dataclasses.replace(kind, make=fails_on_mine))
    told = []
    start = gym_start(folder, told.append)
    assert start.pending == ("mine",) and told == []
    whole = start.whole_pool()
    assert told == ["drill kind 'shapes' failed on program 'mine' (ZeroDivisionError: by zero); it asks nothing of it"]
    assert whole["skipped"] == [{"drill": "shapes", "program": "mine", "why": "ZeroDivisionError: by zero"}]
    assert _mine(whole) and not [i for i in _mine(whole) if i["drill"] == "shapes"]
    told.clear()
    assert gym_start(folder, told.append).pool == whole and len(told) == 1  # read as kept, and told again, once


def test_corpus_json_copies_the_built_in_part_and_encodes_only_the_added_programs(folder, monkeypatch):
    from dumpgym.site import files as site
    from dumpgym.site.inputs import gym_inputs

    corpus, pool = gym_inputs(folder)
    assert [p.slug for p in corpus.programs if p.added] == ["mine"]
    import contextlib

    with contextlib.redirect_stdout(io.TextIOWrapper(io.BytesIO(), encoding="utf-8")) as out:
        assert cli.main(["export", "--corpus", str(folder)]) == 0
        out.flush()
        whole = out.buffer.getvalue()  # what `dumpgym export` prints of this corpus
    encoded = []
    real = site._json
    monkeypatch.setattr(site, "_json", lambda obj, indent=None: encoded.append(indent) or real(obj, indent))
    files = site.site_files(corpus, pool)
    assert files["corpus.json"] == whole
    assert encoded == []  # the built-in part copied from the committed file, not encoded again
    # A corpus read from JSON holds other objects than the built-in corpus's: encoded whole, the same bytes.
    assert site.site_files(corpus.to_json(), pool)["corpus.json"] == whole and encoded == [1]
