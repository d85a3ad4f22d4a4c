"""Shared helpers for the benchmarks: time whole processes side by side, report medians and ratios."""
from __future__ import annotations

import statistics
import subprocess
import sys
import time


def time_process(argv, env=None) -> float:
    """Wall-clock seconds for one run of `argv` (a list, or a function returning one) to exit successfully."""
    argv = argv() if callable(argv) else argv
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


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
