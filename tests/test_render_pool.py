"""The render workers of a first start (`serve/render_pool.py`): forked processes, not the server, make the kept
files, byte for byte as the server would, each before it is asked for; a file asked for goes first; the
workers stop with the server however it stops (Ctrl-C, kill -9), and leave no process behind.

Forking needs a process with one thread, which pytest's is not guaranteed to be: each test forks in a
process of its own (`python -c`, or `dumpgym serve`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import urllib.request
from pathlib import Path

import pytest

from dumpgym.serve import render_pool

from dumpgym.serve import server as serve

from dumpgym.site import files as site
from dumpgym.site.inputs import gym_start
from serving import ctrl_c, first_start as _first_start, gone as _gone, render_workers as _children

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render workers are forked on Linux only")


def _script(body: str, tmp_path: Path, *args: str) -> dict:
    """Run `body` in a fresh Python (one thread: it may fork) with `args`, and return the JSON it prints last."""
    code = textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "DUMPGYM_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


_SITE = """
    import json, os, signal, sys, time
    from pathlib import Path
    from dumpgym.site import kept as kept_files
    from dumpgym.serve import render_pool
    from dumpgym.serve import server as serve
    from dumpgym.site import files as site

    kept_files.corpus_digest = lambda corpus, digests=None: "0" * 16  # a site of two files, no corpus to digest
    def made():  # what a render says of where it ran, padded past the size the server compresses
        return json.dumps({"pid": os.getpid(), "pad": "x" * 2000}).encode()
    kept = kept_files.KeptFiles(None, root=Path(sys.argv[1]) if len(sys.argv) > 1 else None)
    files = site.SiteFiles({"a.json": made, "b.json": made, "static/c.js": made}, kept, frozenset({"a.json", "b.json"}))
    gym = serve.Site(files)
"""


def test_a_kept_file_is_made_in_a_worker_process_and_read_by_the_server_as_made(tmp_path):
    got = _script(_SITE + """
    pool = render_pool.RenderPool.fork(gym)
    asked = pool.render("a.json").result(120)
    waited = time.monotonic() + 120  # b.json is made unasked, after a.json: wait for it (a slow machine), then stop
    while kept.read("b.json") is None and time.monotonic() < waited:
        time.sleep(0.05)
    pool.close()
    made = json.loads(kept.read("a.json"))["pid"]
    status, headers, body = gym.get("/a.json", accept_gzip=True)
    print(json.dumps({"server": os.getpid(), "workers": pool.pids, "made": made, "asked": asked,
                      "gzip": headers.get("Content-Encoding"), "b": kept.read("b.json") is not None,
                      "static": kept.read("static/c.js") is None, "alive": [p.is_alive() for p, _ in pool._workers]}))
    """, tmp_path)
    assert got["asked"] is True and got["made"] != got["server"] and got["made"] in got["workers"]
    assert got["gzip"] == "gzip" and got["b"]  # b.json made too, unasked; its compressed bytes read from disk
    assert got["static"] and got["alive"] == [False] * render_pool.PROCESSES  # only the kept files; all stopped


def test_a_worker_forked_while_the_server_holds_its_collector_off_collects_its_garbage(tmp_path):
    got = _script(_SITE + """
    import gc
    files._makers["a.json"] = lambda: json.dumps({"collects": gc.isenabled(), "pad": "x" * 2000}).encode()
    gc.disable()  # as `serve` forks them: while it makes the gym's objects
    pool = render_pool.RenderPool.fork(gym)
    gc.enable()
    asked = pool.render("a.json").result(120)
    pool.close()
    print(json.dumps({"asked": asked, "collects": json.loads(kept.read("a.json"))["collects"]}))
    """, tmp_path)
    assert got["asked"] is True and got["collects"] is True


def test_a_cache_that_refuses_writes_leaves_the_making_to_the_server(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    got = _script(_SITE + """
    pool = render_pool.RenderPool.fork(gym)
    asked = [pool.render(p).result(120) for p in ("a.json", "b.json")]
    pool.close()
    print(json.dumps({"asked": asked, "server": os.getpid(), "made": json.loads(gym.get("/a.json")[2])["pid"]}))
    """, tmp_path, str(blocked))
    assert got["asked"] == [False, False] and got["made"] == got["server"]


def test_workers_killed_leave_no_request_waiting(tmp_path):
    got = _script(_SITE + """
    for path in ("a.json", "b.json"):  # each worker held in a render when it is killed
        files._makers[path] = lambda: time.sleep(10) or made()
    pool = render_pool.RenderPool.fork(gym)
    time.sleep(1)
    for proc, _ in pool._workers:
        os.kill(proc.pid, signal.SIGKILL)
    asked = pool.render("a.json").result(120)  # before: it waited for a worker that was gone, forever
    pool.close()
    print(json.dumps({"asked": asked, "server": os.getpid(), "made": json.loads(gym.get("/a.json")[2])["pid"]}))
    """, tmp_path)
    assert got["asked"] is False and got["made"] == got["server"]


def test_a_process_running_threads_forks_no_workers():
    release = threading.Event()
    thread = threading.Thread(target=release.wait, daemon=True)
    thread.start()
    try:
        assert not render_pool.forkable()
        assert render_pool.RenderPool.fork(serve.Site(site.SiteFiles({"a.json": lambda: b"{}"}))) is None
    finally:
        release.set()
        thread.join()


def test_the_page_order_puts_each_program_before_the_next_and_the_whole_corpus_last():
    paths = ["corpus.json", "data/cost/cpu/mlp.json", "data/listings/scan.json", "data/compiled/cpu/mlp.json",
             "data/programs/mlp.json", "data/listings/mlp.json", "data/reference.json"]
    assert render_pool.page_order(paths, ["mlp", "scan"]) == [
        "data/reference.json", "data/listings/mlp.json", "data/programs/mlp.json", "data/compiled/cpu/mlp.json",
        "data/cost/cpu/mlp.json", "data/listings/scan.json", "corpus.json"]
    # The user's own programs first, as the page lists them: after an add, theirs are the files left to make.
    assert render_pool.page_order(paths, ["mlp", "scan"], mine={"scan"}) == [
        "data/reference.json", "data/listings/scan.json", "data/listings/mlp.json", "data/programs/mlp.json",
        "data/compiled/cpu/mlp.json", "data/cost/cpu/mlp.json", "corpus.json"]


def test_ctrl_c_stops_the_server_and_its_render_workers(tmp_path):
    proc, url, _ = _first_start(tmp_path)
    try:
        workers = _children(proc.pid)
        assert len(workers) == render_pool.PROCESSES  # nothing kept: they are rendering
        with urllib.request.urlopen(url + "data/listings/mlp.json", timeout=60) as r:
            assert r.status == 200
    finally:
        status, err = ctrl_c(proc)  # to the server and its workers at once
    assert status == 0 and "dumpgym: stopped" in err
    assert _gone(workers)


def test_a_killed_server_leaves_no_render_worker(tmp_path):
    proc, _, _ = _first_start(tmp_path)
    try:
        workers = _children(proc.pid)
        assert len(workers) == render_pool.PROCESSES
    finally:
        proc.kill()
        proc.wait()
    assert _gone(workers)  # the kernel stops them (parent-death signal), or they read the end of their pipe


def test_a_first_start_keeps_every_file_unasked_as_a_fresh_render_makes_it(tmp_path, monkeypatch):
    proc, url, env = _first_start(tmp_path)
    try:
        workers = _children(proc.pid)
        assert workers
        # Asked for at once: its worker makes it first, and the server reads it from disk.
        with urllib.request.urlopen(url + "data/compiled/cpu/mlp.json", timeout=60) as r:
            asked = r.read()
        assert _gone(workers, within=600)  # the workers stop when every kept file is made
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    monkeypatch.setenv("DUMPGYM_CACHE_DIR", env["DUMPGYM_CACHE_DIR"])
    gym, _ = serve.Site.start(tmp_path / "none")
    files = gym.files
    assert files.keep and all(gym.kept_whole(p) for p in files.keep)
    start = gym_start(tmp_path / "none")
    fresh = site.site_files(start.corpus, start.pool)  # made here and now, nothing read from disk
    sample = [p for p in sorted(files.keep) if p.count("/") < 2 or p.rsplit("/", 1)[1] in ("mlp.json", "scan.json")]
    assert {"listings", "compiled", "cost", "programs"} <= {p.split("/")[1] for p in sample if p.startswith("data/")}
    for path in sample:
        assert files.kept.read(path) == fresh[path], path
        assert files.kept.read(path + ".gz") in (None, site.gzipped(fresh[path])), path
    assert asked == fresh["data/compiled/cpu/mlp.json"]
