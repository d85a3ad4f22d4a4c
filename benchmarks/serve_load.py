"""Load on `dumpgym serve` against `python -m http.server`, both serving the same built gym.

    python benchmarks/serve_load.py [--requests 2000] [--concurrency 50] [--runs 3]
    python benchmarks/serve_load.py --slow-clients 200
    python benchmarks/serve_load.py --cold [--runs 3] [--before REF ...] [--states STATE ...]

Builds the gym once (`dumpgym build --out DIR`, built-in corpus only), starts `dumpgym serve` and
`python -m http.server --directory DIR` side by side on free ports, and sends each the same
requests from threads with http.client (a new connection per request, as both servers close after
each answer; `Accept-Encoding: gzip`, as browsers send): a fixed mix of pages, data JSON, scripts
and CSS, and 404s, with paths taken from the built folder. Runs alternate between the servers.
Each run prints its errors (refused, reset, timed out or a wrong status), p50 and p99 latency, the
machine's TCP listen overflows during the run and the server's peak thread count; then the ratios
of the medians. Target: 0 errors in every run and p99 under 300 ms for `dumpgym serve`.
Last, a request naming a foreign Host (DNS rebinding) must get 421 and none of the corpus.

With `--cold`, the same fresh starts without slow clients (or with `--slow-clients N`): the issue's bar for
a cold serve (p99 at most 300 ms). With `--slow-clients N`, each server is started fresh with N slow clients beside it, held for the whole run;
`dumpgym serve` three times per run, in the three states a start can find, each in a cache folder
(`DUMPGYM_CACHE_DIR`) of its code's own:
"no items kept" (the first start after an upgrade: an empty cache folder, so the server makes every
program's drill items after printing its URL, `Site.start`, while it answers, and renders every kept
site file once); "nothing kept" (truly cold site files: the drill items kept, made before by `dumpgym
drills`, untimed, and no kept site file, so each listing, layer, cost or change file is rendered and
compressed once, on Linux by the server's two render worker processes, `serve/render_pool.py`, which
start on them all when the URL is printed and take first the file a GET waits for); and "kept" (a
second fresh process on that cache, holding the files the one before made for these same requests:
`site/kept.py`; it renders none, it reads them from disk). The second of settling and the 20 normal
GETs below give a start about 2 s before the load run, so it measures what a browser opening the page
finds. With `--before REF`, each of the three is run for REF too (checked out in a temporary `git
worktree`, on this Python), alternating with this checkout in every run: the old and the new side by
side under the same load. Each row also says the CPU seconds the server used (its own and its
finished children's: render workers, item maker) and the machine's load average. The slow clients:
half send a request head a byte every half second and never finish it, half ask for `corpus.json`
with a 4 KB receive buffer and never read it (each reconnects when the server drops it). With them
holding their connections (a second after they connect), 20 single GETs of `/` one after another (the "normal GET": target under
100 ms), then the 2,000 GETs at concurrency 50 (target: p99 at most 300 ms, 0 errors).

Read p50 with care: http.server's backlog of 5 turns most of the 50 clients away (the listen
overflows; they retry a second later), so the few it admits wait for nobody, while `dumpgym serve`
admits all 50 and they share its throughput. The retries are http.server's p99.
"""
from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import PYTHON, ROOT, worktrees  # noqa: E402

TIMEOUT = 30.0
MIX = {"page": 0.15, "data": 0.40, "static": 0.30, "missing": 0.15}


def request_mix(site_dir: Path, count: int) -> list[tuple[str, int]]:
    """`count` (path, expected status) pairs in a fixed random order, drawn by kind from the built site."""
    files = sorted(p.relative_to(site_dir).as_posix() for p in site_dir.rglob("*") if p.is_file()
                   and not p.name.startswith("."))
    kinds = {
        "page": ["/", "/index.html"],
        "data": ["/" + f for f in files if f.endswith(".json")],
        "static": ["/" + f for f in files if f.startswith("static/")],
        "missing": [f"/nope-{i}.html" for i in range(20)] + ["/static/nope.js", "/data/programs/nope.json"],
    }
    rng = random.Random(0)
    picks = rng.choices(list(MIX), weights=list(MIX.values()), k=count)
    return [(path, 404 if kind == "missing" else 200) for kind in picks for path in [rng.choice(kinds[kind])]]


def fetch(port: int, path: str, host: str | None = None) -> tuple[int, bytes]:
    """(status, body) of one GET on a fresh connection to 127.0.0.1:`port`."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        conn.request("GET", path, headers={"Accept-Encoding": "gzip", **({"Host": host} if host else {})})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


PENDING = "/data/drills/"  # a program's items per kind: 404 while a start still makes that program's items


def load(port: int, requests: list[tuple[str, int]], concurrency: int, pending: list | None = None
         ) -> tuple[list[float], list[str]]:
    """Latencies (seconds) and errors of `requests` sent by `concurrency` threads. With `pending` (a start
    making its items), a drill file answered 404 is no error, as the page never asks one of a program whose
    items it lacks: each such path is added to `pending`."""
    latencies, errors, lock = [], [], threading.Lock()
    todo = iter(requests)

    def worker():
        while True:
            with lock:
                item = next(todo, None)
            if item is None:
                return
            path, expected = item
            start = time.perf_counter()
            try:
                status, _ = fetch(port, path)
                problem = None if status == expected else f"{path}: {status}, expected {expected}"
                if problem and pending is not None and status == 404 and path.startswith(PENDING):
                    problem = None
                    with lock:
                        pending.append(path)
            except OSError as e:
                problem = f"{path}: {type(e).__name__}: {e}"
            elapsed = time.perf_counter() - start
            with lock:
                latencies.append(elapsed)
                if problem:
                    errors.append(problem)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, errors


class SlowClients:
    """`count` connections to 127.0.0.1:`port` held open while the block runs: half trickle a request head a
    byte every half second, half ask for corpus.json and never read it; any the server drops is opened again."""

    def __init__(self, port: int, count: int):
        self.port, self.count, self.reconnects = port, count, 0
        self._stop = threading.Event()
        self._socks: list[socket.socket | None] = [None] * count
        self.connected = threading.Event()

    def _open(self, i: int) -> socket.socket | None:
        try:
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(TIMEOUT)
            sock.connect(("127.0.0.1", self.port))
            if i % 2:
                sock.sendall(b"GET /corpus.json HTTP/1.0\r\nHost: 127.0.0.1\r\nAccept-Encoding: identity\r\n\r\n")
            else:
                sock.sendall(b"GET / HTTP/1.0\r\nX-Slow: ")
            sock.setblocking(False)
            return sock
        except OSError:
            return None

    def _run(self):
        for i in range(self.count):
            self._socks[i] = self._open(i)
        self.connected.set()
        for _ in range(100_000):  # bounded: at most ~14 hours of half-second rounds
            if self._stop.wait(0.5):
                return
            for i, sock in enumerate(self._socks):
                alive = sock is not None
                if alive and i % 2 == 0:
                    try:
                        sock.send(b"y")
                        alive = not _closed(sock)
                    except OSError:
                        alive = False
                elif alive:
                    alive = not _closed(sock, peek=True)
                if not alive:
                    if sock is not None:
                        sock.close()
                    self.reconnects += 1
                    self._socks[i] = self._open(i)

    def __enter__(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self.connected.wait(60)
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        for sock in self._socks:
            if sock is not None:
                sock.close()


def _closed(sock: socket.socket, peek: bool = False) -> bool:
    """Whether the server closed `sock` (without reading what it sent, for a client that never reads)."""
    try:
        return sock.recv(1, socket.MSG_PEEK) == b"" if peek else sock.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


SETTLE = 1.0  # seconds between the slow clients' connecting and the first normal GET


STATES = ("no items kept", "nothing kept", "kept")  # what a `dumpgym serve` start finds, in the order run


def slow_mode(requests, concurrency: int, slow: int, servers: dict, runs: int, cache: Path, codes: dict,
              states: tuple[str, ...] = STATES) -> bool:
    """Each server started fresh, with `slow` slow clients beside it, `runs` times: normal GETs, then the load
    run; `dumpgym serve` of each of `codes` (label: its `src` folder) in each of `states`, alternating."""
    rows = [(f"{code}, {state}", code, state) for code in codes for state in states] + \
           [("python -m http.server", None, None)]
    results: dict[str, list[tuple[float, float, int, float, float]]] = {name: [] for name, _, _ in rows}
    print(f"load average at the start: {_load()}", flush=True)
    for run in range(1, runs + 1):
        order = list(codes) if run % 2 else list(codes)[::-1]  # each code first in every other run
        for code in order:
            env = {**os.environ, "PYTHONPATH": str(codes[code]), "DUMPGYM_CACHE_DIR": str(cache / _folder(code))}
            for state in states:
                _prepare(state, env, servers)
                name = f"{code}, {state}"
                results[name].append(_slow_run(run, name, requests, concurrency, slow, servers["dumpgym serve"], env))
        name = "python -m http.server"
        results[name].append(_slow_run(run, name, requests, concurrency, slow, servers[name], dict(os.environ)))
    print(f"load average at the end: {_load()}")
    ok = True
    width = max(len(name) for name in results)
    for name, got in results.items():
        normal_max, p99, errors = max(r[0] for r in got), statistics.median(r[1] for r in got), sum(r[2] for r in got)
        p50, cpu = statistics.median(r[3] for r in got), statistics.median(r[4] for r in got)
        print(f"{name:{width}} over {runs} runs: median p50 {p50 * 1000:6.1f} ms, p99 {p99 * 1000:7.1f} ms, "
              f"CPU {cpu:5.2f} s; worst normal GET {normal_max * 1000:6.1f} ms, errors {errors}")
        if name != "python -m http.server":
            met = errors == 0 and all(r[1] <= 0.3 for r in got) and normal_max < 0.1
            print(f"  target (normal GET under 100 ms, p99 at most 300 ms in every run, 0 errors): "
                  f"{'met' if met else 'MISSED'}")
            ok = ok and met
    if len(codes) > 1:
        mine, *others = codes
        for other in others:
            for state in states:
                a, b = results[f"{mine}, {state}"], results[f"{other}, {state}"]
                ratio = lambda i: statistics.median(r[i] for r in a) / statistics.median(r[i] for r in b)  # noqa: E731
                print(f"{state}: {mine} / {other}: p50 {ratio(3):.2f}, p99 {ratio(1):.2f}, CPU {ratio(4):.2f}")
    return ok


def _folder(code: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in code)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _prepare(state: str, env: dict, servers: dict) -> None:
    """Leave the cache folder of `env` as a start in `state` finds it ("kept": what the start before kept)."""
    cache = Path(env["DUMPGYM_CACHE_DIR"])
    if state == "no items kept":
        shutil.rmtree(cache, ignore_errors=True)
        return
    # Every drill item kept: made by `dumpgym drills`, untimed, where a start before did not keep them all.
    corpus = servers["dumpgym serve"][0][servers["dumpgym serve"][0].index("--corpus") + 1]
    subprocess.run([PYTHON, "-m", "dumpgym", "drills", "--corpus", corpus], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if state == "nothing kept":  # and no site file
        shutil.rmtree(cache / "site", ignore_errors=True)


READY_WITHIN = 300.0  # seconds a start has to make every item; then it is stopped (its CPU counts what it made)


def _items_ready(port: int, began: float) -> float:
    """Seconds from `began` until the server says no program's items are pending (`data/drills/pending.json`);
    infinity if not within `READY_WITHIN`."""
    while time.perf_counter() - began < READY_WITHIN:
        status, body = fetch(port, "/data/drills/pending.json")
        body = gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body
        if status == 404 or not json.loads(body)["pending"]:  # 404: a swapped-in whole gym has no pending file
            return time.perf_counter() - began
        time.sleep(0.1)
    return float("inf")


def _slow_run(run: int, name: str, requests, concurrency: int, slow: int, argv_and_ready, env):
    """One fresh server with `slow` slow clients: (worst normal GET, p99, errors, p50, CPU seconds) of its load
    run; the CPU is the server's own and that of the children it waited for, until it was stopped."""
    began = time.perf_counter()
    proc, port = start(*argv_and_ready, env=env)
    try:
        with SlowClients(port, slow) as clients:
            time.sleep(SETTLE)  # holding, not connecting: the server has read what they sent
            normal = []
            for _ in range(20):
                began = time.perf_counter()
                status, _ = fetch(port, "/")
                normal.append(time.perf_counter() - began)
                time.sleep(0.05)
            before = listen_overflows()
            pending = [] if name.endswith("no items kept") else None
            with PeakThreads(proc.pid) as threads:
                latencies, errors = load(port, requests, concurrency, pending)
            after = listen_overflows()
            reconnects = clients.reconnects
        ready = _items_ready(port, began) if pending is not None else None
    finally:
        # Ctrl-C's signal: `dumpgym serve` stops its render workers and item maker and waits for them, so their
        # CPU is counted in the server's.
        proc.send_signal(signal.SIGINT)
        _, _, usage = os.wait4(proc.pid, 0)
        proc.returncode = 0
    cpu = usage.ru_utime + usage.ru_stime
    overflows = "?" if before is None or after is None else after - before
    p50, p99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
    making = "" if ready is None else (f"  drill files 404 while made {len(pending)}  every item ready at "
                                       f"{ready:.1f} s from the start")
    print(f"run {run} {name:36} with {slow} slow clients: normal GET / median "
          f"{statistics.median(normal) * 1000:6.1f} ms max {max(normal) * 1000:6.1f} ms; fresh {len(requests):,} GETs: "
          f"errors {len(errors)}  p50 {p50 * 1000:7.1f} ms  p99 {p99 * 1000:7.1f} ms  max {max(latencies) * 1000:7.1f} ms  "
          f"listen overflows {overflows}  peak threads {threads.peak}  slow reconnects {reconnects}  CPU {cpu:.2f} s"
          f"{making}  load {_load()}", flush=True)
    for problem in errors[:3]:
        print(f"    {problem}")
    return max(normal), p99, len(errors), p50, cpu


def listen_overflows() -> int | None:
    """The machine's TcpExt ListenOverflows counter (Linux), or None where it cannot be read."""
    try:
        names, values = [line.split() for line in Path("/proc/net/netstat").read_text().splitlines()[:2]]
        return int(values[names.index("ListenOverflows")])
    except (OSError, ValueError):
        return None


class PeakThreads:
    """The highest thread count a process reaches while the block runs (Linux /proc; None elsewhere)."""

    def __init__(self, pid: int):
        self.status, self.peak, self._stop = Path(f"/proc/{pid}/status"), None, threading.Event()

    def _sample(self):
        while not self._stop.wait(0.01):
            try:
                line = next(ln for ln in self.status.read_text().splitlines() if ln.startswith("Threads:"))
            except (OSError, StopIteration):
                return
            self.peak = max(self.peak or 0, int(line.split()[1]))

    def __enter__(self):
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def start(argv: list[str], ready, env=None) -> tuple[subprocess.Popen, int]:
    """Start a server process and return it with the port read from its first line of output."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**(env or os.environ), "PYTHONUNBUFFERED": "1"})
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"{argv[2]} did not start")
    return proc, ready(line)


def percentile(values: list[float], q: float) -> float:
    """The `q`-quantile of `values` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--slow-clients", type=int, default=0, metavar="N",
                        help="instead: each server fresh (cold), with N slow clients beside it")
    parser.add_argument("--cold", action="store_true", help="instead: each server fresh, as --slow-clients does, "
                        "with the slow clients given by it (none by default)")
    parser.add_argument("--before", metavar="REF", action="append", default=[],
                        help="with --cold or --slow-clients: `dumpgym serve` of this commit too, side by side with "
                        "this checkout's (given again: more commits)")
    parser.add_argument("--states", nargs="+", choices=STATES, default=list(STATES),
                        help="with --cold or --slow-clients: the starts of `dumpgym serve` to run (default: all)")
    args = parser.parse_args(argv)
    with worktrees(args.before) as trees:
        codes = {"this checkout": ROOT / "src", **{ref: tree / "src" for ref, tree in trees.items()}}
        return _main(args, codes)


def _main(args, codes: dict) -> int:

    with tempfile.TemporaryDirectory() as tmp:
        site_dir, no_programs = Path(tmp, "site"), Path(tmp, "added")
        no_programs.mkdir()
        subprocess.run([PYTHON, "-m", "dumpgym", "build", "--out", str(site_dir), "--corpus", str(no_programs)],
                       check=True, stdout=subprocess.DEVNULL)
        requests = request_mix(site_dir, args.requests)
        commands = {
            "dumpgym serve": ([PYTHON, "-m", "dumpgym", "serve", "--port", "0", "--corpus", str(no_programs)],
                              lambda line: int(line.split(" at ", 1)[1].split()[0].rsplit(":", 1)[1].strip("/"))),
            "python -m http.server": ([PYTHON, "-m", "http.server", "0", "--bind", "127.0.0.1",
                                       "--directory", str(site_dir)],
                                      lambda line: int(line.split(" port ")[1].split()[0])),
        }
        if args.slow_clients or args.cold:
            ok = slow_mode(requests, args.concurrency, args.slow_clients, commands, args.runs, Path(tmp, "cache"), codes,
                           tuple(s for s in STATES if s in args.states))
            return 0 if ok else 1
        servers = {name: start(*command) for name, command in commands.items()}
        print(f"{len(requests):,} GETs per run at concurrency {args.concurrency}, "
              f"{sum(1 for _, s in requests if s == 404)} of them 404s, {len({p for p, _ in requests})} distinct paths")
        results = {name: [] for name in servers}
        try:
            for _, port in servers.values():  # warm-up: every distinct path once (dumpgym compresses on first use)
                for path, _ in dict(requests).items():
                    fetch(port, path)
            for run in range(1, args.runs + 1):
                for name, (proc, port) in servers.items():
                    before = listen_overflows()
                    with PeakThreads(proc.pid) as threads:
                        latencies, errors = load(port, requests, args.concurrency)
                    after = listen_overflows()
                    overflows = "?" if before is None or after is None else after - before
                    p50, p99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
                    results[name].append((len(errors), p50, p99))
                    print(f"run {run} {name:22} errors {len(errors):4}  p50 {p50 * 1000:7.1f} ms  "
                          f"p99 {p99 * 1000:7.1f} ms  max {max(latencies) * 1000:7.1f} ms  "
                          f"listen overflows {overflows}  peak threads {threads.peak}")
                    for problem in errors[:3]:
                        print(f"    {problem}")
            port = servers["dumpgym serve"][1]
            status, body = fetch(port, "/corpus.json", host="evil.example")
            leaked = b"programs" in body
            print(f"foreign Host (evil.example) on dumpgym serve: {status}, {len(body)} bytes, "
                  f"corpus data {'LEAKED' if leaked else 'none'}")
        finally:
            for proc, _ in servers.values():
                proc.terminate()
                proc.wait(timeout=10)

    ours, theirs = results["dumpgym serve"], results["python -m http.server"]
    for i, label in ((1, "p50"), (2, "p99")):
        a, b = statistics.median(r[i] for r in ours), statistics.median(r[i] for r in theirs)
        print(f"median {label}: dumpgym serve {a * 1000:.1f} ms, http.server {b * 1000:.1f} ms, "
              f"ratio dumpgym / http.server {a / b:.2f}")
    ok = all(r[0] == 0 for r in ours) and all(r[2] < 0.3 for r in ours) and status == 421 and not leaked
    print(f"target (0 errors, p99 < 300 ms in every run, foreign Host refused): {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
