"""A process beside the server that makes the drill items a start found not kept, and keeps them.

Making the built-in programs' items is seconds of pure-Python work (about 7 s of CPU), which in a thread of
the server held its one GIL beside every answer: the event loop, giving the lock up at each socket call,
waited for the thread to give it back, and a cold p99 went from 250 ms to 430–830 ms under load. So `serve` starts a fresh Python for it (not a fork: the server runs threads by then, and a fork copies
only one of them, with whatever locks the others held). It reads the same folders as the server
(`inputs.load_sources`), makes the items not kept, the built-in programs' first and then each added
program's, keeps each program's where a start keeps them (`drills/_stored.py`: written whole or not at all)
and says on its standard output, in one JSON line, each stage's slugs when they are kept. The server's
thread waits on that pipe holding no lock, then reads them back as it reads items an earlier start kept:
any it does not find kept (a cache that refuses writes, a record changed in between, a maker that died) it
makes itself, as it always has. Records held in memory only (`dumpgym open`'s dump modules) have nowhere to
be kept: the server's thread makes their items.

The maker runs below the server on the CPU (`background`): the answers and the render workers' files come
first. It ignores Ctrl-C (the server's to handle), is stopped by the server when it stops or when a newer
start supersedes its own, and is stopped by the kernel when the server's thread that started it ends, however
it ends (Linux's parent-death signal).
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding this dumpgym package: the maker imports it
# The maker's program: this dumpgym first on its path, so that it makes items with the server's own code (the
# kept items' key covers the code: a maker of other code would keep items the server never reads).
_CODE = "import sys; sys.path.insert(0, sys.argv[1]); from dumpgym.serve.item_maker import main; main(sys.argv[2:])"
_STOP_WAIT = 5.0  # seconds a maker asked to stop has to remove the file it was writing
# The maker's niceness above the server's (and, on Linux, the idle scheduling class: a core only when nothing else
# wants one). Its seconds of making wait while the server and its render workers answer: its share of the two
# cores beside them, at the server's priority, tripled a cold start's p99 under load (docs/site.md).
NICENESS = 19


class Superseded(Exception):
    """Raised where a start's items are waited for, once a newer start has been swapped in: its stages are
    not served, and its making stops."""


class ItemMaker:
    """The maker process of one start's items, and what it has said so far (read by one thread, `wait`)."""

    def __init__(self, corpus_dir=None):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CODE, _ROOT, "" if corpus_dir is None else os.fspath(corpus_dir), str(os.getpid())],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.planned: frozenset[str] | None = None  # the slugs it makes, said first
        self.done: set[str] = set()
        self._lock = threading.Lock()

    @classmethod
    def start(cls, corpus_dir=None) -> "ItemMaker | None":
        """A maker of the items not kept of the programs under `corpus_dir` (and the built-in ones), or None
        where no process can be started (the server's thread makes them, as without one)."""
        if not sys.executable:  # an embedding Python that cannot name itself
            return None
        try:
            return cls(corpus_dir)
        except OSError:
            return None

    def wait(self, slugs) -> None:
        """Return once the maker has kept the items of those of `slugs` it makes, or has ended (then the
        server makes what it finds missing). Holds no lock while it waits: the pipe's read releases the GIL."""
        if self.planned is None:
            self.planned = frozenset(self._said() or ())
        want = set(slugs) & self.planned
        while not want <= self.done:
            said = self._said()
            if said is None:
                return
            self.done.update(said)

    def _said(self) -> list[str] | None:
        """The slugs of the maker's next line, or None at its end (exited, killed, or a line it never wrote)."""
        try:
            line = self.proc.stdout.readline()
            said = json.loads(line) if line else None
        except (OSError, ValueError):
            return None
        return said if isinstance(said, list) and all(isinstance(s, str) for s in said) else None

    def close(self) -> None:
        """Stop the maker, if it still runs (it removes the file it was writing), and wait for it."""
        with self._lock:
            if self.proc.poll() is None:
                with contextlib.suppress(OSError):
                    self.proc.terminate()
                try:
                    self.proc.wait(_STOP_WAIT)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            with contextlib.suppress(OSError):
                self.proc.stdout.close()


class Makers:
    """The item makers a server runs (one; two for a moment when a newer start supersedes one's), so that
    stopping the server, or a newer start, stops them."""

    def __init__(self):
        self._running: set[ItemMaker] = set()
        self._closed = False
        self._lock = threading.Lock()

    def started(self, maker: ItemMaker | None) -> ItemMaker | None:
        """`maker`, now counted as running; stopped at once (and None) if the server has stopped."""
        if maker is None:
            return None
        with self._lock:
            if not self._closed:
                self._running.add(maker)
                return maker
        maker.close()
        return None

    def stop(self, maker: ItemMaker | None) -> None:
        """Stop `maker` (None: nothing) and forget it."""
        if maker is not None:
            maker.close()
            with self._lock:
                self._running.discard(maker)

    def stop_all(self, closing: bool = False) -> None:
        """Stop every maker running; with `closing`, every maker started from now on too."""
        with self._lock:
            running, self._running = list(self._running), set()
            self._closed = self._closed or closing
        for maker in running:
            maker.close()


def main(argv: list[str]) -> None:
    """The maker's run: `argv` is the folder of added programs ("" for the default) and the server's pid."""
    from dumpgym.serve.render_pool import die_with

    background()  # before its first line: a server that read it finds the maker yielding to it
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole terminal's group: the server stops us
    signal.signal(signal.SIGTERM, _stop)  # stopped mid-write: the file being written is removed (`write_atomic`)
    die_with(int(argv[1]))
    make_pending(argv[0] or None, sys.stdout)


def background() -> None:
    """Give this process (the maker) the CPU only where the server and its render workers leave it: `NICENESS`
    added to its niceness, and on Linux the idle scheduling class, whose process runs on a core only when no other
    wants it (a niceness alone still takes a share when the processes are spread over the cores)."""
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_IDLE"):
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def make_pending(corpus_dir, out) -> None:
    """Make and keep the items not kept of the built-in programs and those under `corpus_dir`, the built-in
    ones first and then each added one, writing to `out` the slugs it will make, then each stage's when kept.
    Silent otherwise: the server, which read the same folders, says what is damaged or skipped."""
    from dumpgym.drills import kept_parts, kept_pool
    from dumpgym.gcpause import collector_paused
    from dumpgym.site.inputs import load_sources

    def quiet(line: str) -> None:
        pass

    sources = load_sources(corpus_dir, quiet)
    todo = [source for source, kept in zip(sources, kept_parts(sources)) if kept is None]
    stages = [[s for s in todo if not s.added]] + [[s] for s in todo if s.added]
    say = lambda slugs: (out.write(json.dumps(slugs) + "\n"), out.flush())  # noqa: E731
    say([s.slug for s in todo])
    for stage in (stage for stage in stages if stage):
        # The records parsed and the items made are kept till the stage ends: the collector's walks over them
        # would free nothing (a sixth of the making's CPU, for about 60 MB more at the peak).
        with collector_paused():
            kept_pool(stage, quiet, parts=[None] * len(stage))
        say([s.slug for s in stage])


def _stop(signum, frame):
    raise SystemExit(0)
