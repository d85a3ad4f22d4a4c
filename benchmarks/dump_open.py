"""How long `dumpgym open` takes to list a dump folder of many modules, beside `cat` reading its files.

    python benchmarks/dump_open.py [--modules 500] [--runs 5] [--folder DIR]

Makes (once, into `--folder`, default a temporary folder) a dump of `--modules` distinct jitted
functions on the CPU, each with a jaxpr, StableHLO and XLA's files, as a job run with
`JAX_DUMP_IR_TO` and `--xla_dump_to` writes them. Then times, alternating, two processes: what
`open` reads before it makes any program (read the folder, pair every module's files, list them in order)
and `cat` of every file in the folder to /dev/null. It prints both medians and their ratio; each
module's own page is rendered only when asked for, so it is not part of either. Then the whole command,
as a user meets it: `dumpgym open DIR` (with an empty folder of added programs) until it prints the
gym's URL, the modules' programs it makes before that included (the issue's bar: 5 s), alternating
with `cat` again.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _timing import PYTHON, ROOT, compare, serving_open, time_process  # noqa: E402

MAKE = """
import dumpgym  # quiets libtpu where it is installed without a TPU
import jax, jax.numpy as jnp
for k in range({n}):
    def f(x, w):
        return jnp.tanh(x @ w).sum(axis=0) * k
    f.__name__ = f"f{{k}}"
    jax.jit(f).lower(jax.ShapeDtypeStruct((k + 1, 8), jnp.float32),
                     jax.ShapeDtypeStruct((8, 4), jnp.float32)).compile()
"""
# What `open` reads before it makes a program: the folder read, every module's files paired, listed in the index's
# order (the user's first, biggest first).
LIST = ("import sys; from dumpgym.dumps.folder import read_folder; "
        "folder = read_folder(sys.argv[1]); folder.shown(); "
        "assert sum(1 for m in folder.modules if not m.problem) >= {n}, len(folder.modules)")


def make(folder: Path, n: int) -> None:
    if folder.is_dir() and any(folder.iterdir()):
        return
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "JAX_DUMP_IR_TO": str(folder), "JAX_DUMP_IR_MODES": "jaxpr,stablehlo",
           "XLA_FLAGS": f"--xla_dump_to={folder}"}
    subprocess.run([PYTHON, "-c", MAKE.format(n=n)], check=True, env={**env, "PYTHONPATH": str(ROOT / "src")})


def until_url(folder: Path, corpus: Path, env: dict) -> float:
    """Seconds from starting `dumpgym open FOLDER` to its printing the gym's URL (then it is stopped)."""
    with serving_open(folder, corpus, env) as (_proc, _line, took):
        return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--modules", type=int, default=500)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--folder", type=Path, default=None)
    args = parser.parse_args()
    folder = args.folder or Path(tempfile.mkdtemp(prefix="dump-open-")) / "dump"
    make(folder, args.modules)
    files = [str(p) for p in sorted(folder.iterdir()) if p.is_file()]
    size = sum(os.path.getsize(p) for p in files)
    print(f"{folder}: {len(files)} files, {size / 1e6:.1f} MB, {args.modules} modules")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    compare("dumpgym open (list)", [PYTHON, "-c", LIST.format(n=args.modules), str(folder)],
            "cat", ["sh", "-c", 'cat "$0"/* > /dev/null 2>&1; true', str(folder)], runs=args.runs, env=env)
    corpus = Path(tempfile.mkdtemp(prefix="dump-open-corpus-"))
    opened, cat = [], []
    for _ in range(args.runs):
        opened.append(until_url(folder, corpus, env))
        cat.append(time_process(["sh", "-c", 'cat "$0"/* > /dev/null 2>&1; true', str(folder)], env))
    mo, mc = statistics.median(opened), statistics.median(cat)
    print(f"dumpgym open until its URL: median {mo:.2f}s over {args.runs} runs ({', '.join(f'{t:.2f}' for t in opened)})")
    print(f"cat: median {mc:.3f}s; ratio {mo / mc:.1f}; the bar (5 s): {'met' if mo <= 5 else 'MISSED'}")


if __name__ == "__main__":
    main()
