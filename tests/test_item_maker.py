"""The item maker (`serve/item_maker.py`): a process beside the server, not its thread, makes the drill items a
start found not kept, keeps them byte for byte as the server would, says each stage when kept; the server makes
whatever it does not find kept; the maker stops with the server however it stops (Ctrl-C, kill -9), and when a
newer start supersedes its own, leaving no process and no half-written file behind."""
from __future__ import annotations

import io
import json
import sys
import threading
import time
from pathlib import Path

import pytest

from dumpgym.drills._stored import builtin_corpus
from dumpgym.serve import item_maker
from dumpgym.serve import server as serve
from dumpgym.site.inputs import gym_start
from serving import ctrl_c, first_start, gone, item_maker as item_maker_of


def _kept_items(cache: Path) -> dict[str, bytes]:
    """Every file of the built-in programs' kept items under the cache folder `cache`, by name."""
    return {p.name: p.read_bytes() for p in sorted(cache.glob("drills/builtin-*/*"))}


def test_the_maker_keeps_every_items_file_as_the_server_makes_it_and_the_server_makes_what_it_did_not(
        tmp_path, monkeypatch):
    none = tmp_path / "no-added-programs"
    monkeypatch.setenv("DUMPGYM_CACHE_DIR", str(tmp_path / "maker"))
    out = io.StringIO()
    item_maker.make_pending(none, out)  # what the maker's process runs
    slugs = [p.slug for p in builtin_corpus().programs]
    assert [json.loads(line) for line in out.getvalue().splitlines()] == [slugs, slugs]  # its plan, then the stage
    assert gym_start(none).pending == ()  # a start now finds every item kept

    # The server's own making, in another empty cache, its maker stopped before it kept anything.
    monkeypatch.setenv("DUMPGYM_CACHE_DIR", str(tmp_path / "server"))
    gym, rest = serve.Site.start(none)
    maker = item_maker.ItemMaker(none)
    maker.close()
    assert maker.proc.returncode is not None and _kept_items(tmp_path / "server") == {}
    waited = []
    whole = rest(before=lambda stage: waited.append(stage) or maker.wait(stage))
    assert waited == [slugs] and maker.planned == frozenset() and maker.done == set()
    assert json.loads(whole.get("/data/drills/pending.json")[2])["pending"] == []
    made, kept = _kept_items(tmp_path / "server"), _kept_items(tmp_path / "maker")
    assert made.keys() == kept.keys() and len(made) == len(slugs) + 1  # each program's, and the index
    assert all(made[name] == kept[name] for name in made)


def _half_written(tmp_path: Path) -> list[str]:
    """The temporary files of a write cut short, left in the cache's kept items."""
    return [p.name for p in (tmp_path / "cache").glob("drills/*/.*")]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; the parent-death signal is Linux's")
@pytest.mark.parametrize("stop", ["ctrl-c", "kill -9"])
def test_a_server_stopped_leaves_no_item_maker_and_no_half_written_file(tmp_path, stop):
    proc, _, _ = first_start(tmp_path, items_kept=False)
    try:
        maker = item_maker_of(proc.pid)
        assert maker is not None  # making the built-in programs' items
    finally:
        if stop == "kill -9":
            proc.kill()  # the kernel stops the maker: the thread that started it is gone
            proc.wait()
            status, err = 0, "dumpgym: stopped"
        else:
            status, err = ctrl_c(proc)  # the maker ignores it; the server stops it
    assert status == 0 and "dumpgym: stopped" in err and "Traceback" not in err
    assert gone({maker}) and _half_written(tmp_path) == []


def test_a_newer_start_stops_the_maker_of_the_one_before_and_its_gym_is_never_swapped_in(tmp_path, monkeypatch,
                                                                                        capsys):
    monkeypatch.setenv("DUMPGYM_CACHE_DIR", str(tmp_path / "cache"))
    gym, rest = serve.Site.start(tmp_path / "none")
    server = serve.make_server(gym, "127.0.0.1", 0)
    try:
        current = [True]
        serve._finish_later(server, rest, lambda: current[0], tmp_path / "none")
        thread = next(t for t in threading.enumerate() if t.name == "dumpgym-drills")
        for _ in range(600):
            running = list(server.makers._running)
            if running:
                break
            time.sleep(0.1)
        assert running and running[0].proc.poll() is None  # making the built-in programs' items
        current[0] = False  # what a newer start's swap does, then it stops the makers
        server.makers.stop_all()
        thread.join(timeout=60)
        assert not thread.is_alive() and running[0].proc.returncode is not None
        assert server.site is gym and server.makers._running == set()
    finally:
        server.server_close()
    err = capsys.readouterr().err
    assert "making the drill items" in err and "every drill item is ready" not in err and "error" not in err
