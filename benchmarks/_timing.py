"""Shared helpers for the benchmarks: time whole processes side by side, report medians and ratios."""
from __future__ import annotations

import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def time_process(argv, env=None) -> float:
    """Wall-clock seconds for one run of `argv` (a list, or a function returning one) to exit successfully."""
    return time_process_cpu(argv, env)[0]


def time_process_cpu(argv, env=None) -> tuple[float, float]:
    """(wall-clock, CPU) seconds for one run of `argv` to exit successfully: CPU is user + system time of the
    process and every process it waited for (a build's workers), which the load of a shared machine
    inflates far less than the wall clock."""
    import resource

    argv = argv() if callable(argv) else argv
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def compare(label_a: str, argv_a: list[str], label_b: str, argv_b: list[str], runs: int = 5, env=None) -> float:
    """Run two commands alternately `runs` times each; print medians and return median(a) / median(b)."""
    a, b = [], []
    for _ in range(runs):
        a.append(time_process(argv_a, env))
        b.append(time_process(argv_b, env))
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"{label_a}: median {ma:.3f}s over {runs} runs ({', '.join(f'{t:.3f}' for t in a)})")
    print(f"{label_b}: median {mb:.3f}s over {runs} runs ({', '.join(f'{t:.3f}' for t in b)})")
    print(f"ratio {label_a} / {label_b}: {ma / mb:.2f}")
    return ma / mb


PYTHON = sys.executable


@contextlib.contextmanager
def worktrees(refs):
    """Each commit of `refs` checked out in a temporary `git worktree`, by ref, removed afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        trees = {}
        try:
            for ref in refs:
                trees[ref] = Path(tmp) / ref.replace("/", "_")
                subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(trees[ref]), ref],
                               check=True, capture_output=True)
            yield trees
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                               capture_output=True)


@contextlib.contextmanager
def serving_open(folder, corpus, env=None):
    """`dumpgym open FOLDER` started and read until it prints the gym's URL: yields (its process, the line it
    printed, the seconds that took); stopped on leaving."""
    start = time.perf_counter()
    proc = subprocess.Popen([PYTHON, "-m", "dumpgym", "open", str(folder), "--port", "0", "--corpus", str(corpus)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        line = proc.stdout.readline()
        took = time.perf_counter() - start
        if " at http" not in line:
            raise SystemExit(f"open printed no URL: {line!r}")
        yield proc, line, took
    finally:
        proc.terminate()
        proc.wait()
