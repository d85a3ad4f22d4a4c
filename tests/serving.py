"""`dumpgym serve` as a process of its own, and the processes it runs beside it (render workers, an item
maker), read from Linux's /proc: for the tests that stop a server and look at what it leaves behind."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from dumpgym.drills._stored import cache_dir

ROOT = Path(__file__).resolve().parents[1]
MAKER = b"dumpgym.serve.item_maker"  # in an item maker's command line (`serve/item_maker.py`), a fresh Python


def first_start(tmp_path: Path, items_kept: bool = True) -> tuple[subprocess.Popen, str, dict]:
    """`dumpgym serve` with no site file kept (with `items_kept`, this session's drill items linked in, so none
    are made; else none kept either, so an item maker makes them), in a session of its own, Ctrl-C not
    ignored; with its URL and environment."""
    cache = tmp_path / "cache"
    cache.mkdir()
    if items_kept and (cache_dir() / "drills").is_dir():
        (cache / "drills").symlink_to(cache_dir() / "drills", target_is_directory=True)
    env = {**os.environ, "DUMPGYM_CACHE_DIR": str(cache), "PYTHONUNBUFFERED": "1"}
    # `dumpgym serve`, with Ctrl-C handled even where this test runs with SIGINT ignored (which a child inherits).
    code = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
            "from dumpgym.cli import main; sys.exit(main(sys.argv[1:]))")
    argv = [sys.executable, "-c", code, "serve", "--port", "0", "--corpus", str(tmp_path / "none")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env,
                            start_new_session=True)
    line = proc.stdout.readline()
    assert line.startswith("dumpgym: the gym is at http://127.0.0.1:"), line + proc.stderr.read()
    return proc, line.split(" at ", 1)[1].split()[0], env


def _children(pid: int) -> dict[int, bytes]:
    """The processes whose parent is `pid`, with their command lines."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found[int(entry.name)] = (entry / "cmdline").read_bytes()
            except OSError:
                continue
    return found


def render_workers(pid: int) -> set[int]:
    """The render workers of the server `pid`: its children but an item maker."""
    return {child for child, cmdline in _children(pid).items() if MAKER not in cmdline}


def item_maker(pid: int, within: float = 60) -> int | None:
    """The pid of the item maker the server `pid` runs, waiting up to `within` seconds for it to start."""
    for _ in range(int(within / 0.1)):
        makers = [child for child, cmdline in _children(pid).items() if MAKER in cmdline]
        if makers:
            return makers[0]
        time.sleep(0.1)
    return None


def gone(pids: set[int], within: float = 60) -> bool:
    """Whether every process of `pids` has exited (or is a zombie nobody reaps) within `within` seconds."""
    for _ in range(int(within / 0.1)):
        alive = set()
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                alive.add(pid)
        if not alive:
            return True
        time.sleep(0.1)
    return False



def ctrl_c(proc: subprocess.Popen) -> tuple[int | None, str]:
    """Stop a server of `first_start` as a terminal's Ctrl-C does (SIGINT to its whole session: the server and
    what it runs at once): its exit status (None if it had not stopped within a minute, then killed) and
    what it said on stderr."""
    os.killpg(proc.pid, signal.SIGINT)
    try:
        status = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        status = None
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    return status, proc.stderr.read()
