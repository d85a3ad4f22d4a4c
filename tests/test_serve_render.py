"""The server's first-request renders: one render per file however many ask for it at once, a ready file
never waiting behind one, and rendered files kept on disk (`site/kept.py`) exactly as a fresh render makes them."""
from __future__ import annotations

import contextlib
import dataclasses
import http.client
import json
import os
import threading

import pytest

from dumpgym.site import kept as kept_files

from dumpgym.serve import server as serve

from dumpgym.site import files as site
from dumpgym.drills import read_pool
from dumpgym.drills._stored import builtin_corpus
from dumpgym.record.schema import Corpus


def _request(srv, path: str, gzip: bool = False, timeout: float = 10) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(*srv.server_address[:2], timeout=timeout)
    try:
        conn.request("GET", path, headers={"Accept-Encoding": "gzip" if gzip else "identity"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _serving(gym: serve.Site):
    srv = serve.make_server(gym, "127.0.0.1", 0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    return srv, thread


def _stop(srv, thread) -> None:
    srv.shutdown()
    srv.server_close()
    thread.join(timeout=10)


@contextlib.contextmanager
def _held(srv, thread, release: threading.Event, paths: list[str]):
    """Requests of `paths` sent at once, each from its own thread, their answers gathered as they come;
    on leaving, `release` is set (the renders held on it finish), the requests are waited for and the
    server stopped."""
    answers: list[tuple[int, bytes]] = []
    waiting = [threading.Thread(target=lambda p=p: answers.append(_request(srv, p, timeout=60))) for p in paths]
    try:
        for t in waiting:
            t.start()
        yield answers
    finally:
        release.set()
        for t in waiting:
            t.join(60)
        _stop(srv, thread)


class _CountingSite(serve.Site):
    """A site that counts the requests the loop has seen (`ready`) and the renders it ran (`get` off the loop)."""

    def __init__(self, files):
        super().__init__(files)
        self.asked: dict[str, int] = {}
        self.rendered: dict[str, int] = {}
        self.seen = threading.Condition()

    def ready(self, target, accept_gzip=False):
        with self.seen:
            self.asked[target] = self.asked.get(target, 0) + 1
            self.seen.notify_all()
        return super().ready(target, accept_gzip)

    def get(self, target, accept_gzip=False):
        if threading.current_thread() is not threading.main_thread():
            with self.seen:
                self.rendered[target] = self.rendered.get(target, 0) + 1
        return super().get(target, accept_gzip)


def test_fifty_first_requests_of_one_file_render_it_once_and_hold_no_other_file():
    release, made = threading.Event(), []

    def slow() -> bytes:
        made.append("slow")
        release.wait(60)
        return b'{"slow": true}'

    files = site.SiteFiles({"slow.json": slow, "other.json": lambda: b'{"other": true}'})
    gym = _CountingSite(files)
    srv, thread = _serving(gym)
    with _held(srv, thread, release, ["/slow.json"] * 50) as answers:
        with gym.seen:  # every one of the 50 has reached the server and waits for the render
            assert gym.seen.wait_for(lambda: gym.asked.get("/slow.json", 0) == 50, timeout=60)
        # Before: each of the 50 took a worker (blocked on the file's lock) and this waited behind them all.
        assert _request(srv, "/other.json") == (200, b'{"other": true}')
        assert not answers
    assert answers == [(200, b'{"slow": true}')] * 50
    assert made == ["slow"] and gym.rendered["/slow.json"] == 1


def test_the_whole_corpus_files_being_made_hold_no_program_file():
    release, started = threading.Event(), threading.Event()

    def whole() -> bytes:
        started.set()
        release.wait(60)
        return b"{}"

    files = site.SiteFiles({"corpus.json": whole, "drills.json": whole, "data/listings/mlp.json": lambda: b'{"a": 1}',
                            "static/app.js": lambda: b"export {};"})
    gym = _CountingSite(files)
    srv, thread = _serving(gym)
    with _held(srv, thread, release, ["/corpus.json", "/drills.json"]) as answers:
        with gym.seen:
            assert gym.seen.wait_for(lambda: gym.asked.get("/drills.json") and gym.asked.get("/corpus.json"), timeout=60)
        assert started.wait(60)
        # Before: the two took both workers, and a program's listing waited until they were made.
        assert _request(srv, "/data/listings/mlp.json") == (200, b'{"a": 1}')
        assert _request(srv, "/static/app.js") == (200, b"export {};")
        assert not answers
    assert answers == [(200, b"{}")] * 2


def test_a_site_swapped_in_never_gets_the_render_in_flight_of_the_one_before():
    release, started = threading.Event(), threading.Event()

    def old() -> bytes:
        started.set()
        release.wait(60)
        return b'"old"'

    srv, thread = _serving(serve.Site(site.SiteFiles({"x.json": old})))
    with _held(srv, thread, release, ["/x.json"]) as answers:
        assert started.wait(60)
        srv.site = serve.Site(site.SiteFiles({"x.json": lambda: b'"new"'}))  # as `serve` swaps a whole gym in
        assert _request(srv, "/x.json") == (200, b'"new"')
    assert answers == [(200, b'"old"')]


def test_a_made_file_is_ready_under_any_of_its_names_and_a_small_one_needs_no_compressing():
    files = site.SiteFiles({"index.html": lambda: b"<!doctype html>" + b"x" * 2000, "a.json": lambda: b"{}"})
    gym = serve.Site(files)
    assert not gym.ready("/") and not gym.ready("/index.html")
    gym.get("/index.html")
    assert gym.ready("/") and gym.ready("/index.html?x=1") and not gym.ready("/", accept_gzip=True)
    gym.get("/", accept_gzip=True)
    assert gym.ready("/index.html", accept_gzip=True)
    gym.get("/a.json")
    assert gym.ready("/a.json", accept_gzip=True)  # under 1 KB: served as it is, nothing to compress


@pytest.fixture
def kept_root(monkeypatch, tmp_path):
    """An empty cache folder for kept site files (the session's may hold files an earlier test kept)."""
    root = tmp_path / "kept"
    monkeypatch.setattr(kept_files, "kept_root", lambda: root)
    return root


def _answers(gym: serve.Site, paths) -> dict[str, tuple[bytes, bytes]]:
    return {p: (gym.get("/" + p)[2], gym.get("/" + p, accept_gzip=True)[2]) for p in paths}


def _sample(files) -> list[str]:
    """The kept files of the top level and of two programs (their records, listings, layers, costs, changes)."""
    return [p for p in files if p.endswith(".json") and not _of_the_pool(p)
            and (p.count("/") == 0 or p.startswith("data/reference") or p.rsplit("/", 1)[1] in ("mlp.json", "mlp-f32.json"))]


def _of_the_pool(path: str) -> bool:
    return path == "drills.json" or path.startswith("data/drills/")


def test_a_server_started_again_renders_no_json_file_and_answers_each_as_the_first_made_it(kept_root, tmp_path,
                                                                                          monkeypatch):
    first = serve.Site.build(tmp_path / "added")
    paths = _sample(first.files)
    kinds = {p.split("/")[1] for p in paths if p.startswith("data/")}
    assert {"listings", "compiled", "cost", "change", "programs", "reference.json"} <= kinds
    made = _answers(first, paths)

    def no_render(*args):
        raise AssertionError("a kept file was made again")

    again = serve.Site.build(tmp_path / "added")  # renders and compresses the page (not kept) up front
    monkeypatch.setattr(site, "_json", no_render)
    monkeypatch.setattr(site, "gzipped", no_render)
    assert _answers(again, paths) == made
    assert not any(again.files.made(p) for p in again.files if p.endswith(".json") and p not in paths)


def test_a_broken_kept_file_is_said_in_one_line_and_made_again(kept_root, tmp_path, capsys):
    first = serve.Site.build(tmp_path / "added")
    body = first.get("/data/listings/mlp.json")[2]
    [kept] = kept_root.glob("**/data/listings/mlp.json.kept")
    kept.write_bytes(kept.read_bytes()[:-10])
    capsys.readouterr()
    assert serve.Site.build(tmp_path / "added").get("/data/listings/mlp.json")[2] == body
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "damaged kept site file" in err and "cut short" in err and str(kept) in err
    assert serve.Site.build(tmp_path / "added").get("/data/listings/mlp.json")[2] == body  # kept whole again
    assert capsys.readouterr().err == ""


def test_files_kept_for_other_records_or_other_code_are_never_read(kept_root, monkeypatch, capsys):
    corpus = builtin_corpus()
    kept = kept_files.KeptFiles(corpus)
    kept.write("data/a.json", b'{"a": 1}')
    assert kept_files.KeptFiles(corpus).read("data/a.json") == b'{"a": 1}'
    first = corpus.programs[0]
    retitled = Corpus(corpus.schema, corpus.jax_version,
                      (dataclasses.replace(first, title=first.title + "!"), *corpus.programs[1:]))
    other = kept_files.KeptFiles(retitled)
    assert other.key != kept.key and other.read("data/a.json") is None
    # A file copied into another site's folder names the site it was made for: refused, and said.
    copied = other.folder / "data" / "a.json.kept"
    copied.parent.mkdir(parents=True)
    copied.write_bytes((kept.folder / "data" / "a.json.kept").read_bytes())
    assert other.read("data/a.json") is None and "damaged kept site file" in capsys.readouterr().err
    monkeypatch.setattr(kept_files, "render_digest", lambda: "0" * 16)  # other code
    assert kept_files.KeptFiles(corpus).read("data/a.json") is None


def test_a_programs_files_are_kept_by_its_record_so_an_add_renders_no_other_programs_again(kept_root, capsys):
    corpus = builtin_corpus()
    first = corpus.programs[0]
    kept = kept_files.KeptFiles(corpus)
    kept.write(f"data/listings/{first.slug}.json", b'{"listing": 1}')
    kept.write(f"data/cost/cpu/{first.slug}.json.gz", b"gz")
    kept.write("data/reference.json", b'{"cards": 1}')
    mine = dataclasses.replace(first, slug="mine", added=True)
    added = Corpus(corpus.schema, corpus.jax_version, (*corpus.programs, mine))
    after = kept_files.KeptFiles(added, digests={"mine": "d" * 32})
    assert after.key != kept.key
    # The program's own files are read back beside another program; a file of the whole site is not.
    assert after.read(f"data/listings/{first.slug}.json") == b'{"listing": 1}'
    assert after.read(f"data/cost/cpu/{first.slug}.json.gz") == b"gz"
    assert after.read("data/reference.json") is None
    # A record that changed is another program: its files are made again, never read.
    retitled = dataclasses.replace(first, title=first.title + "!")
    changed = kept_files.KeptFiles(Corpus(corpus.schema, corpus.jax_version, (retitled, *corpus.programs[1:])))
    assert changed.read(f"data/listings/{first.slug}.json") is None
    # An added program is named by the digest of the bytes its record was read from.
    after.write("data/programs/mine.json", b'{"mine": 1}')
    assert kept_files.KeptFiles(added, digests={"mine": "d" * 32}).read("data/programs/mine.json") == b'{"mine": 1}'
    assert kept_files.KeptFiles(added, digests={"mine": "e" * 32}).read("data/programs/mine.json") is None
    assert capsys.readouterr().err == ""


def test_a_cache_that_cannot_be_written_costs_only_the_making(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    kept = kept_files.KeptFiles(builtin_corpus(), root=blocked)
    files = site.SiteFiles({"a.json": lambda: b"{}"}, kept, frozenset({"a.json"}))
    assert files["a.json"] == b"{}" and kept.read("a.json") is None


def test_only_the_newest_kept_sites_of_other_keys_stay(kept_root):
    for i in range(5):
        old = kept_root / f"{i:016x}-{'0' * 16}"
        old.mkdir(parents=True)
        os.utime(old, (1000 + i, 1000 + i))
    (kept_root / "not-a-site").mkdir()
    kept = kept_files.KeptFiles(builtin_corpus())
    kept.write("a.json", b"{}")
    left = sorted(p.name for p in kept_root.iterdir())
    assert left == sorted([kept.key, "not-a-site", *(f"{i:016x}-{'0' * 16}" for i in (3, 4))])


def test_the_pool_files_are_made_from_the_pool_given_never_kept(kept_root, corpus, pool):
    fewer = {**pool, "items": [item for item in pool["items"] if item["program"] == "mlp"]}
    for drills in (pool, fewer, pool):
        files = site.site_files(corpus, drills, kept=True)
        assert read_pool(json.loads(files["drills.json"])) == drills
        assert json.loads(files["data/drills/shapes/mlp.json"])["items"] == [
            item for item in drills["items"] if item["drill"] == "shapes" and item["program"] == "mlp"]
        assert ("data/drills/shapes/attention.json" in files) == (drills is pool)
        files.gzipped("drills.json")
        files["corpus.json"]
    kept = [f.relative_to(kept_root).as_posix().split("/", 1)[1] for f in kept_root.rglob("*.kept")]
    assert kept == ["corpus.json.kept"]


class _WorkerPool:
    """A stand-in for `render_pool.RenderPool`: its `render` keeps the file as a worker process would, in a
    thread of its own, and says so through the future the server waits on."""

    def __init__(self, kept, body: bytes):
        self.kept, self.body, self.asked = kept, body, []

    def serves(self, gym, path):
        return gym.files.kept is self.kept and path in gym.files.keep

    def render(self, path):
        from concurrent.futures import Future

        self.asked.append(path)
        done = Future()
        threading.Thread(target=lambda: done.set_result(self.kept.write(path, self.body))).start()
        return done

    def close(self):
        pass


def test_a_file_a_render_worker_keeps_is_read_back_and_never_made_by_the_server(kept_root, monkeypatch):
    monkeypatch.setattr(kept_files, "corpus_digest", lambda corpus, digests=None: "0" * 16)
    kept = kept_files.KeptFiles(None)

    def made_here() -> bytes:
        raise AssertionError("the server made a file its render workers keep")

    files = site.SiteFiles({"data/a.json": made_here, "other.json": lambda: b'{"here": 1}'}, kept,
                           frozenset({"data/a.json"}))
    srv, thread = _serving(serve.Site(files))
    srv.renderers = pool = _WorkerPool(kept, b'{"kept by": "a worker"}')
    try:
        assert _request(srv, "/data/a.json") == (200, b'{"kept by": "a worker"}')
        assert _request(srv, "/other.json") == (200, b'{"here": 1}')  # not a kept file: the server makes it
    finally:
        _stop(srv, thread)
    assert pool.asked == ["data/a.json"]
