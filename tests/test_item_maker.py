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
from types import SimpleNamespace

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


def test_the_maker_runs_below_the_server_on_the_cpu(tmp_path, monkeypatch):
    """The maker yields both cores to the server and its render workers: its niceness is the server's plus
    `NICENESS` (at most 19), and on Linux it is in the idle scheduling class; the server's are unchanged."""
    import os

    monkeypatch.setenv("DUMPGYM_CACHE_DIR", str(tmp_path / "cache"))  # empty: it has every program's items to make
    server = (os.getpriority(os.PRIO_PROCESS, 0),
              os.sched_getscheduler(0) if hasattr(os, "sched_getscheduler") else None)
    maker = item_maker.ItemMaker(tmp_path / "none")
    try:
        maker.wait([])  # its plan said: it lowered itself before
        assert maker.planned and maker.proc.poll() is None
        assert os.getpriority(os.PRIO_PROCESS, maker.proc.pid) == min(19, server[0] + item_maker.NICENESS)
        if sys.platform.startswith("linux"):
            assert os.sched_getscheduler(maker.proc.pid) == os.SCHED_IDLE
    finally:
        maker.close()
    assert (os.getpriority(os.PRIO_PROCESS, 0),
            os.sched_getscheduler(0) if hasattr(os, "sched_getscheduler") else None) == server


def test_a_stages_items_are_read_with_the_collector_off_and_waited_for_with_it_on(tmp_path, monkeypatch):
    """The objects a stage's swap-in builds (its items, decoded into the pool, and its gym) are built with Python's
    collector off, whose walks over them would free nothing; the wait for the maker before, seconds long while the
    server answers, keeps it on; and it is on again after."""
    import gc

    from dumpgym.site import inputs

    monkeypatch.setenv("DUMPGYM_CACHE_DIR", str(tmp_path / "cache"))
    gym, rest = serve.Site.start(tmp_path / "none")
    seen = []
    kept_pool, rendered = inputs.kept_pool, serve.Site._rendered.__func__
    monkeypatch.setattr(inputs, "kept_pool", lambda *args, **kwargs: seen.append(("read", gc.isenabled()))
                        or kept_pool(*args, **kwargs))
    monkeypatch.setattr(serve.Site, "_rendered", classmethod(
        lambda cls, *args, **kwargs: seen.append(("rendered", gc.isenabled())) or rendered(cls, *args, **kwargs)))
    assert gc.isenabled()
    whole = rest(before=lambda slugs: seen.append(("wait", gc.isenabled())))
    assert seen == [("wait", True), ("read", False), ("rendered", False)] and gc.isenabled()
    assert json.loads(whole.get("/data/drills/pending.json")[2])["pending"] == []


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


def test_an_older_starts_stage_asked_before_a_newer_start_is_never_swapped_in_after_it(tmp_path, monkeypatch):
    """The window the lock closes: an older start's stage finds itself the newest, a newer start is swapped in
    (as the watcher swaps one), and only then would the stage's assignment run. Without the lock the gym before
    the change was served until the next change (a page that never showed a removed program gone)."""
    monkeypatch.setattr(item_maker.ItemMaker, "start", classmethod(lambda cls, corpus_dir=None: None))
    gym = serve.Site.start(tmp_path / "none")[0]
    older, newer = object(), object()
    server = serve.make_server(gym, "127.0.0.1", 0)
    generation = [0]

    def newer_start():  # the watcher's swap of a newer start
        with server.swapping:
            generation[0] += 1
            server.site = newer

    def rest(swap, before):
        swap(older)
        return older

    rivals = []

    def current():  # asked by the older stage; the newer start comes in between the first question and the swap
        answer = generation[0] == 0
        if not rivals:
            rivals.append(threading.Thread(target=newer_start))
            rivals[0].start()
            rivals[0].join(timeout=0.5)
        return answer

    try:
        serve._finish_later(server, rest, current, tmp_path / "none")
        thread = next(t for t in threading.enumerate() if t.name == "dumpgym-drills")
        thread.join(timeout=60)
        for _ in range(100):
            if generation[0]:
                break
            time.sleep(0.05)
        time.sleep(0.2)
        assert generation[0] == 1 and server.site is newer
    finally:
        server.server_close()


def test_the_watcher_tries_a_start_that_failed_again_before_waiting_for_the_next_change(tmp_path, monkeypatch, capsys):
    """A start from a changed folder that fails once (a file read while another process replaced it) is tried
    again at the next look, not dropped till the folder changes again; said once."""
    monkeypatch.setattr(serve, "WATCH_INTERVAL", 0.01)
    states = iter([("a",)] * 1000)
    monkeypatch.setattr(serve, "corpus_state", lambda corpus_dir=None: next(states))
    gym = serve.Site.start(tmp_path / "none")[0]
    server = serve.make_server(gym, "127.0.0.1", 0)
    real_start, calls, made = serve.Site.start, [], []

    def start(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise OSError("a record read while it was replaced")
        made.append(real_start(tmp_path / "none")[0])
        return made[-1], None

    monkeypatch.setattr(serve.Site, "start", start)
    running = set(threading.enumerate())
    try:
        serve._watch_corpus(server, tmp_path / "none", ("before",), [0])
        watcher = next(t for t in threading.enumerate() if t.name == "dumpgym-watch" and t not in running)
        for _ in range(1000):
            if made and server.site is made[0]:
                break
            time.sleep(0.01)
        assert made and server.site is made[0] and len(calls) == 2
    finally:
        server.server_close()
    assert capsys.readouterr().err.count("could not be started") == 1
    # A closed server's watcher ends: left looking, it would start gyms from what the next test makes the folder say.
    watcher.join(timeout=30)
    assert not watcher.is_alive()


def test_an_older_starts_items_are_never_swapped_in_over_a_newer_start_the_watcher_made(tmp_path, monkeypatch,
                                                                                       capsys):
    """Two changes seen by the watcher (an add, then a remove) while the first start's items were still being
    made: the first start's whole gym, ready after the second was swapped in, must not replace it. Its question
    'still the newest?' once read the watcher's loop variable, which the second start had rebound to its own
    generation: the gym with the removed program came back and stayed (a full run's page that never showed a
    removed program gone, serve saying 'every drill item is ready' after 'removed')."""
    monkeypatch.setattr(serve, "WATCH_INTERVAL", 0.01)
    monkeypatch.setattr(item_maker.ItemMaker, "start", classmethod(lambda cls, corpus_dir=None: None))
    states = iter([("add",)] * 20 + [("remove",)] * 100000)
    monkeypatch.setattr(serve, "corpus_state", lambda corpus_dir=None: next(states))
    gym = serve.Site.start(tmp_path / "none")[0]
    server = serve.make_server(gym, "127.0.0.1", 0)
    added, added_whole, removed = (SimpleNamespace(programs=n) for n in (34, 34, 33))
    release = threading.Event()

    def added_rest(swap, before):  # the add's items, made slowly: ready only after the remove
        release.wait(timeout=60)
        return added_whole

    starts = iter([(added, added_rest), (removed, None)])
    monkeypatch.setattr(serve.Site, "start", lambda *args, **kwargs: next(starts))
    try:
        serve._watch_corpus(server, tmp_path / "none", ("before",), [0])
        for _ in range(3000):
            if server.site is removed:
                break
            time.sleep(0.01)
        assert server.site is removed
        release.set()
        thread = next((t for t in threading.enumerate() if t.name == "dumpgym-drills"), None)
        if thread is not None:
            thread.join(timeout=60)
        assert server.site is removed
    finally:
        release.set()
        server.server_close()
    assert "every drill item is ready" not in capsys.readouterr().err


def test_the_watcher_says_what_changed_before_it_waits_for_the_older_maker_to_stop(tmp_path, monkeypatch):
    """The page shows a newer start from its swap on; the older start's maker, below the server on the CPU, can
    take seconds to stop on a busy machine. 'reload the page' was said only after it stopped: a full run's
    serve, stopped once the page showed a program removed, had never said so."""
    monkeypatch.setattr(serve, "WATCH_INTERVAL", 0.01)
    states = iter([("changed",)] * 100000)
    monkeypatch.setattr(serve, "corpus_state", lambda corpus_dir=None: next(states))
    gym = serve.Site.start(tmp_path / "none")[0]
    server = serve.make_server(gym, "127.0.0.1", 0)
    newer = SimpleNamespace(programs=33)
    monkeypatch.setattr(serve.Site, "start", lambda *args, **kwargs: (newer, None))
    said = io.StringIO()
    monkeypatch.setattr(sys, "stderr", said)
    at_stop = []
    monkeypatch.setattr(server.makers, "stop_all", lambda closing=False: at_stop.append(said.getvalue()))
    try:
        serve._watch_corpus(server, tmp_path / "none", ("before",), [0])
        for _ in range(3000):
            if at_stop:
                break
            time.sleep(0.01)
    finally:
        server.server_close()
    assert server.site is newer and at_stop and "reload the page" in at_stop[0]
