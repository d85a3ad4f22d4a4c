"""How long `dumpgym serve` takes to say where the gym is, at two commits side by side on this machine.

    python benchmarks/serve_start.py [--before 2331e8f] [--after HEAD] [--runs 5] [--corpus DIR [--cold]]

Each commit is checked out in a temporary `git worktree` and served with this checkout's `.venv` (its
`src/` first on PYTHONPATH), runs alternating between the commits. A run times, from starting the
process: the URL line (the page is there), then GETs of `/` and of the biggest program's listings
and TPU compile (what the page fetches when the x-ray of that program comes on screen).

With `--corpus DIR` (a user corpus folder, say one `dumpgym add` of benchmarks/gpt_train_step.py filled),
each run serves a copy of that folder; with `--cold` too, the copy holds no stored drill items
(`SLUG.drills.json`), as the first serve after an add finds it.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _timing import ROOT, worktrees  # noqa: E402

# This checkout's .venv, or (a git worktree has none) the Python running this script.
PYTHON = ROOT / ".venv" / "bin" / "python" if (ROOT / ".venv").is_dir() else Path(sys.executable)
ASKED = ("", "data/listings/train-step.json", "data/compiled/tpu/train-step.json")


def one_run(tree: Path, corpus: str | None = None, cold: bool = False) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    with tempfile.TemporaryDirectory() as tmp:
        corpus_dir = None
        if corpus is not None:
            corpus_dir = shutil.copytree(corpus, Path(tmp) / "corpus")
            for stored in corpus_dir.glob("*.drills.json") if cold else ():
                stored.unlink()
        return _timed_serve(tree, env, corpus_dir)


def _timed_serve(tree: Path, env: dict, corpus_dir: Path | None) -> tuple[float, float]:
    code = f"from dumpgym import serve; serve.serve(port=0, corpus_dir={str(corpus_dir) if corpus_dir else None!r})"
    start = time.perf_counter()
    proc = subprocess.Popen([str(PYTHON), "-c", code],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=tree)
    try:
        line = proc.stdout.readline()
        url_at = time.perf_counter() - start
        if " at " not in line:
            sys.exit(f"{tree.name}: serve printed {line!r}")
        url = line.split(" at ", 1)[1].split()[0]
        for path in ASKED:
            with urllib.request.urlopen(url + path, timeout=60) as r:
                r.read()
        return url_at, time.perf_counter() - start
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="2331e8f")
    parser.add_argument("--after", default="HEAD")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--corpus", help="a user corpus folder to serve (a copy of it, each run)")
    parser.add_argument("--cold", action="store_true", help="serve the copy without its stored drill items")
    args = parser.parse_args()
    with worktrees((args.before, args.after)) as trees:
        runs: dict[str, list[tuple[float, float]]] = {ref: [] for ref in trees}
        for k in range(args.runs):
            for ref, tree in trees.items():
                runs[ref].append(one_run(tree, args.corpus, args.cold))
                print(f"run {k + 1} {ref}: URL after {runs[ref][-1][0]:.2f} s, "
                      f"page and one x-ray's files after {runs[ref][-1][1]:.2f} s", flush=True)
    med = {ref: [statistics.median(r[i] for r in rs) for i in (0, 1)] for ref, rs in runs.items()}
    for ref, (url_at, done) in med.items():
        print(f"{ref}: URL after {url_at:.2f} s, page and one x-ray's files after {done:.2f} s (medians)")
    b, a = med[args.before], med[args.after]
    print(f"ratio {args.after} / {args.before}: URL {a[0] / b[0]:.2f}, page and one x-ray's files {a[1] / b[1]:.2f}")


if __name__ == "__main__":
    main()
