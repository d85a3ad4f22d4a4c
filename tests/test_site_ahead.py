"""An added program's page files made by the add itself (`site/ahead.py`): a server started after it reads them and
renders none, byte for byte what it would have made; a program replaced or removed never gets the old files."""
from __future__ import annotations

import dataclasses

import pytest

from dumpgym.corpus.user import remove, store_records
from dumpgym.record.typedjson import TextAhead
from dumpgym.drills._stored import builtin_corpus
from dumpgym.serve import server as serve
from dumpgym.site import ahead
from dumpgym.site import files as site
from dumpgym.site import kept as kept_files


@pytest.fixture
def kept_root(monkeypatch, tmp_path):
    """An empty cache folder for kept site files (the session's may hold files an earlier test kept)."""
    root = tmp_path / "kept"
    monkeypatch.setattr(kept_files, "kept_root", lambda: root)
    return root


def _mine(title: str = "Mine"):
    """A built-in program with a compiled layer, as a user's added program."""
    program = next(p for p in builtin_corpus().programs if p.slug == "mlp")
    assert program.compiled
    return dataclasses.replace(program, slug="mine", title=title, added=False)


def _files_of(gym: serve.Site, slug: str) -> list[str]:
    return [p for p in gym.files if p.startswith("data/") and p.rsplit("/", 1)[1] == f"{slug}.json"
            and not p.startswith(("data/drills/", "data/change/"))]


def _started(folder) -> serve.Site:
    """The gym as `serve` starts it (its kept files named by the bytes each added record was read from)."""
    return serve.Site.start(folder)[0]


def _add(records, folder, replace: bool = False) -> None:
    """What `add --dump` does with the records it made: store them, then make their page files ahead."""
    writer = TextAhead()
    store_records(records, folder, replace=replace, ahead=writer)
    ahead.keep_pages(records, writer)


def _answers(gym: serve.Site, paths) -> dict[str, tuple[bytes, bytes]]:
    return {p: (gym.get("/" + p)[2], gym.get("/" + p, accept_gzip=True)[2]) for p in paths}


def _never_made(monkeypatch) -> None:
    def no_render(*args):
        raise AssertionError("a file the add kept was made again")
    monkeypatch.setattr(site, "_json", no_render)
    monkeypatch.setattr(site, "gzipped", no_render)


def _made_fresh(folder, paths, monkeypatch, tmp_path) -> dict[str, tuple[bytes, bytes]]:
    """The same files made by a server whose cache holds nothing."""
    monkeypatch.undo()
    monkeypatch.setattr(kept_files, "kept_root", lambda: tmp_path / "empty")
    return _answers(_started(folder), paths)


@pytest.mark.parametrize("fork", [True, False])
def test_a_server_after_an_add_reads_the_programs_files_the_add_made_and_renders_none(kept_root, tmp_path,
                                                                                       monkeypatch, fork):
    folder = tmp_path / "added"
    # This test process has JAX loaded, which `add --dump` never has: the fork is asked for, as there.
    monkeypatch.setattr(ahead, "_forkable", lambda: fork)
    forks = []
    real_fork = ahead.os.fork
    monkeypatch.setattr(ahead.os, "fork", lambda: forks.append(1) or real_fork())
    _add([_mine()], folder)
    assert len(forks) == fork
    assert list(kept_root.glob("**/data/listings/mine.json.kept"))
    gym = _started(folder)
    paths = _files_of(gym, "mine")
    assert {p.split("/")[1] for p in paths} == {"programs", "listings", "compiled", "cost"}
    _never_made(monkeypatch)
    kept = _answers(gym, paths)
    assert kept == _made_fresh(folder, paths, monkeypatch, tmp_path)


def test_a_replaced_or_removed_program_never_gets_the_files_made_for_the_one_before(kept_root, tmp_path, monkeypatch):
    folder = tmp_path / "added"
    _add([_mine("Mine")], folder)
    _add([_mine("Mine, again")], folder, replace=True)
    gym = _started(folder)
    paths = _files_of(gym, "mine")
    _never_made(monkeypatch)
    kept = _answers(gym, paths)
    assert b"Mine, again" in kept["data/programs/mine.json"][0]
    assert kept == _made_fresh(folder, paths, monkeypatch, tmp_path)
    remove("mine", folder)
    assert _files_of(_started(folder), "mine") == []


def test_an_add_whose_page_files_cannot_be_kept_is_added_all_the_same(tmp_path, monkeypatch, capsys):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setattr(kept_files, "kept_root", lambda: blocked / "site")
    folder = tmp_path / "added"
    _add([_mine()], folder)
    assert capsys.readouterr().err == ""
    gym = _started(folder)
    assert gym.get("/data/listings/mine.json")[0] == 200
