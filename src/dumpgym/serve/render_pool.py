"""Worker processes that make a served gym's kept files (`site/kept.py`) beside the server, on other cores.

The first start ever (after an install, an upgrade or an add) has every listing, compiled layer, cost,
change and program file to render: seconds of pure-Python work which, in the server's threads, queues on
its one GIL with every answer (a cold p99 of 600 to 800 ms under load). So `serve` forks `PROCESSES`
workers before it runs any thread (fork copies only the thread that calls it), each holding the gym as
the server rendered it. From the moment the URL is printed they make every kept file, in the order the
page asks for them (a file a request waits for goes first), and write it and its compressed bytes to the
cache folder, where the server reads it as it reads a file an earlier start kept: only a path and a yes
or no travel between the processes, and the server holds in memory only what is asked for. The files
are byte for byte what the server would have made: the workers run its own code on its own records.
When every file is kept, the workers exit; a kept case's workers find them all at once, reading only
each file's first line.

Linux only (fork, and the parent-death signal that stops a worker whose server was killed). Elsewhere, in
a process already running threads, or when the cache refuses a write, the server renders in its threads
as before (`GymServer`).
"""
from __future__ import annotations

import contextlib
import gc
import os
import queue
import signal
import sys
import threading
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field

PROCESSES = 2  # this machine's cores; more contend with the server for them
_ASKED, _AHEAD = 0, 1  # priorities: a file a request waits for, then the rest in the page's order
# The page's order: what the x-ray shows of a program first, the costs and changes after; the whole corpus
# (`dumpgym export`'s 13 MB, which the page never reads) last.
_KINDS = ("reference.json", "listings", "programs", "compiled", "cost", "change")


@dataclass(eq=False)
class _Job:
    path: str
    future: Future = field(default_factory=Future)
    claimed: bool = False


def forkable() -> bool:
    """Whether render workers can be forked here: Linux, and no thread but this one (fork copies one thread,
    so a lock another holds would stay held forever in the child)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork") and threading.active_count() == 1


def page_order(paths, slugs: list[str], mine=frozenset()) -> list[str]:
    """`paths` (site files) in the order the page asks for them: the reference, then program by program in
    the corpus's order (`slugs`), the user's own (`mine`) first as the page lists them, its listings, record,
    compiled layers, costs and changes; the rest after."""
    place = {slug: i for i, slug in enumerate([s for s in slugs if s in mine] + [s for s in slugs if s not in mine])}

    def rank(path: str):
        parts = path.split("/")
        kind = parts[1] if parts[0] == "data" else parts[0]
        stem = parts[-1].removesuffix(".json")
        return (place.get(stem, len(place)) if kind != "reference.json" else -1,
                _KINDS.index(kind) if kind in _KINDS else len(_KINDS), path)
    return sorted(paths, key=rank)


class RenderPool:
    """`PROCESSES` forked workers that keep the kept files of one site (`site.SiteFiles`'s `keep`), each file
    made once, those asked for first (`render`), every other ahead of its asking (`page_order`)."""

    def __init__(self, site, count: int = PROCESSES, close=()):
        import multiprocessing

        files = site.files
        self.kept = files.kept
        self._lock = threading.Lock()
        self._queue: queue.PriorityQueue = queue.PriorityQueue()
        self._jobs: dict[str, _Job] = {}
        self._order = 0
        self._left = 0  # jobs not yet answered
        self._closed = False
        context = multiprocessing.get_context("fork")
        gc.freeze()  # the gym's objects out of the collector's sight: a worker's collections copy none of their pages
        try:
            self._workers, ours = [], []
            for i in range(count):
                mine, theirs = context.Pipe()
                ours.append(mine)  # a worker closes the server's ends (its own, the others'): each sees end of file
                proc = context.Process(target=_work, args=(theirs, site, os.getpid(), [*close, *ours]),
                                       name=f"dumpgym-render-{i}", daemon=True)
                proc.start()
                theirs.close()
                self._workers.append((proc, mine))
        finally:
            gc.unfreeze()
        self._alive = len(self._workers)
        self.pids = tuple(proc.pid for proc, _ in self._workers)
        for proc, conn in self._workers:
            threading.Thread(target=self._dispatch, args=(proc, conn), name="dumpgym-render-dispatch",
                             daemon=True).start()
        slugs = [p.split("/")[-1][:-5] for p in files if p.startswith("data/programs/")]
        # The user's own programs first (and `open` lands on one): theirs are the files a first start after an add
        # or an `open` has to make, the others' being kept by program (`site/kept.py`).
        for path in page_order(files.keep, slugs, self.kept.added()):
            self._submit(path, _AHEAD)

    @classmethod
    def fork(cls, site, close=()) -> "RenderPool | None":
        """A pool for `site`'s kept files, or None where none can be forked (`forkable`) or nothing is kept."""
        if site.files.kept is None or not site.files.keep or not forkable():
            return None
        try:
            return cls(site, close=close)
        except OSError:  # no fork to be had (out of memory or processes): the threads render, as without workers
            return None

    def serves(self, site, path: str) -> bool:
        """Whether this pool makes the file at `path` of `site` (a site swapped in on the same records, too):
        not once it is done (every file kept, or the cache refusing them), when the server reads or makes it."""
        return not self._closed and site.files.kept is self.kept and path in site.files.keep

    def render(self, path: str) -> Future:
        """A future that is done when the file at `path` is kept (True), or will not be (False: make it here)."""
        return self._submit(path, _ASKED)

    def _submit(self, path: str, priority: int) -> Future:
        with self._lock:
            job = self._jobs.get(path)
            if job is None or job.future.cancelled():
                job = self._jobs[path] = _Job(path)
                self._left += 1
            if self._closed:
                _settle(job.future, False)
            elif not job.claimed:  # asked again, at a higher priority: the first entry taken wins, the other is skipped
                self._order += 1
                self._queue.put((priority, self._order, job))
            return job.future

    def _dispatch(self, proc, conn) -> None:
        """Hand one job at a time to one worker and settle its future with the answer, until closed."""
        try:
            while True:
                _, _, job = self._queue.get()
                if job is None:
                    return
                with self._lock:
                    if job.claimed or job.future.done():
                        continue
                    job.claimed = True
                try:
                    conn.send(job.path)
                    kept = conn.recv()
                except (OSError, EOFError):  # the worker is gone (killed): the others, or the server, make the rest
                    with self._lock:
                        job.claimed = False
                        self._order += 1
                        self._queue.put((_ASKED, self._order, job))
                    return
                self._answered(job, kept)
        finally:
            with contextlib.suppress(OSError):
                conn.close()
            proc.join(5)
            with self._lock:
                self._alive -= 1
                last = self._alive == 0
            if last:  # nobody left to make what is queued: the server makes it
                self._close_jobs()

    def _answered(self, job: _Job, kept: bool | str) -> None:
        """Settle `job` with a worker's answer: True (kept), False (the cache refused it) or why the render failed."""
        _settle(job.future, kept is True)
        with self._lock:
            self._left -= 1
            done = self._left == 0
        if kept is False:  # a cache that refuses writes: the server makes every file itself, as it always has
            self._close_jobs()
        elif done:  # every file kept: the workers' memory is given back (a file asked for later is read here)
            with self._lock:
                self._closed = True
            self._stop_workers()

    def _close_jobs(self) -> None:
        with self._lock:
            self._closed = True
            jobs = [job for job in self._jobs.values() if not job.claimed]
        for job in jobs:
            _settle(job.future, False)
        self._stop_workers()

    def _stop_workers(self) -> None:
        for _ in self._workers:
            self._queue.put((-1, 0, None))  # before any job: each dispatcher ends and its worker reads end of file

    def close(self) -> None:
        """Stop the workers (a worker mid-render stops at once, removing the file it was writing) and wait for them."""
        self._close_jobs()
        for proc, _ in self._workers:
            if proc.is_alive():
                proc.terminate()
        for proc, _ in self._workers:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join(5)


def _settle(future: Future, value: bool) -> None:
    try:
        future.set_result(value)
    except InvalidStateError:  # settled already, or cancelled by a waiter's loop closing
        pass


def _work(conn, site, parent: int, close) -> None:
    """A worker's loop: keep each file asked for (`keep`) and answer whether it is kept; end at end of file."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's to handle: it stops the workers
    signal.signal(signal.SIGTERM, _stop)  # stopped mid-write: the file being written is removed (`write_atomic`)
    die_with(parent)
    # Forked while the server held its collector off (it makes the gym's objects so): a worker renders file after
    # file, and its garbage's cycles are collected as ever (the gym's objects, frozen before the fork, are not walked).
    gc.enable()
    for held in close:  # the server's listening socket (a worker must not keep the port bound), its pipe ends
        held.close()
    while True:
        try:
            path = conn.recv()
        except (EOFError, OSError):
            return
        try:
            kept = keep(site, path)
        except Exception as e:  # the server makes it again, and says what fails as it always has
            kept = f"{type(e).__name__}: {e}"
        try:
            conn.send(kept)
        except OSError:
            return


def keep(site, path: str) -> bool:
    """Make the site file at `path`, and its compressed bytes where `site` would send them, and keep both on
    disk, unless both are kept already; hold neither in memory. Whether they are kept now."""
    if not site.kept_whole(path):
        site.get("/" + path, accept_gzip=True)  # the server's own code: the same bytes, compressed when due
        site.files.forget(path)
    return site.kept_whole(path)


def _stop(signum, frame):
    raise SystemExit(0)


def die_with(parent: int) -> None:
    """Have the kernel stop this process (a render worker, an item maker) when the server's thread that started
    it ends, however the server dies (kill -9 too); at once if the server `parent` is gone already."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # it died before the signal was asked for
        os._exit(0)
