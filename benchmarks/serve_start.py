"""How long `dumpgym serve` takes to say where the gym is, at two commits side by side on this machine.

    python benchmarks/serve_start.py [--before 2331e8f] [--after HEAD] [--runs 5] [--corpus DIR [--cold]]

Each commit is checked out in a temporary `git worktree` and served with this checkout's `.venv` (its
`src/` first on PYTHONPATH), runs alternating between the commits. A run times, from starting the
process: the URL line (the page is there), the answer of `GET /`, then GETs of the biggest program's
listings and TPU compile (what the page fetches when the x-ray of that program comes on screen); and
the CPU seconds the process used until then (what the load of a shared machine changes least), and those
it had used when it printed the URL.

Each commit serves a copy of its own, made once: of `--corpus DIR` (a user corpus folder, say one
`dumpgym add` of benchmarks/gpt_train_step.py filled), with a cache folder of its own
(`DUMPGYM_CACHE_DIR`), both warmed by one serve that is not timed, so each commit finds what it kept
itself (the stored items of one commit are stale to the other). With `--cold`, each run serves a fresh
copy without the stored drill items (`SLUG.drills.json`) and an empty cache, as the first serve after
an add (or an upgrade) finds them.
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
ASKED = ("data/listings/train-step.json", "data/compiled/tpu/train-step.json")


class Served:
    """One commit's own corpus copy and cache folder, under `home`."""

    def __init__(self, tree: Path, home: Path, corpus: str | None):
        self.tree, self.home, self.corpus = tree, home, corpus
        self.corpus_dir = self._copy(home / "corpus") if corpus is not None else None
        self.cache = home / "cache"

    def _copy(self, where: Path) -> Path:
        shutil.rmtree(where, ignore_errors=True)
        return Path(shutil.copytree(self.corpus, where))

    def run(self, cold: bool = False) -> tuple[float, float, float, float, float]:
        """(URL line, GET / answered, listings fetched: seconds from the start; CPU seconds until then, and
        until the URL line)."""
        corpus_dir, cache = self.corpus_dir, self.cache
        if cold:
            corpus_dir = self._copy(self.home / "cold") if self.corpus is not None else None
            for stored in corpus_dir.glob("*.drills.json") if corpus_dir else ():
                stored.unlink()
            cache = self.home / "cold-cache"
            shutil.rmtree(cache, ignore_errors=True)
        env = {**os.environ, "PYTHONPATH": str(self.tree / "src"), "DUMPGYM_CACHE_DIR": str(cache)}
        return _timed_serve(self.tree, env, corpus_dir)


def _timed_serve(tree: Path, env: dict, corpus_dir: Path | None) -> tuple[float, float, float, float, float]:
    code = ("try:\n    from dumpgym.serve import server as serve\nexcept ImportError:\n    from dumpgym import serve\n"
            f"serve.serve(port=0, corpus_dir={str(corpus_dir) if corpus_dir else None!r})")
    start = time.perf_counter()
    proc = subprocess.Popen([str(PYTHON), "-c", code],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=tree)
    try:
        line = proc.stdout.readline()
        url_at = time.perf_counter() - start
        url_cpu = _cpu_seconds(proc.pid)
        if " at " not in line:
            sys.exit(f"{tree.name}: serve printed {line!r}")
        url = line.split(" at ", 1)[1].split()[0]
        with urllib.request.urlopen(url, timeout=120) as r:
            r.read()
        page_at = time.perf_counter() - start
        for path in ASKED:
            with urllib.request.urlopen(url + path, timeout=120) as r:
                r.read()
        done = time.perf_counter() - start
    finally:
        proc.terminate()
    # The server idles once it has answered: the CPU it used by its end is what answering took.
    _, _, usage = os.wait4(proc.pid, 0)
    return url_at, page_at, done, usage.ru_utime + usage.ru_stime, url_cpu


def _cpu_seconds(pid: int) -> float:
    """The CPU seconds process `pid` has used so far (Linux's /proc; NaN elsewhere): what the wall-clock time
    would be on an idle machine, its start being one thread's work."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


LABELS = ("URL", "GET /", "page and one x-ray's files", "CPU s", "CPU s at URL")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="2331e8f")
    parser.add_argument("--after", default="HEAD")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--corpus", help="a user corpus folder to serve (a copy of it, one per commit)")
    parser.add_argument("--cold", action="store_true", help="serve copies without stored drill items, cache empty")
    args = parser.parse_args()
    with worktrees((args.before, args.after)) as trees, tempfile.TemporaryDirectory() as tmp:
        served = {ref: Served(tree, Path(tmp) / ref.replace("/", "_"), args.corpus) for ref, tree in trees.items()}
        if not args.cold:
            for ref, one in served.items():
                print(f"warming {ref}: first serve took {one.run()[1]:.2f} s to answer GET / (not counted)", flush=True)
        runs: dict[str, list[tuple[float, ...]]] = {ref: [] for ref in trees}
        for k in range(args.runs):
            for ref, one in served.items():
                runs[ref].append(one.run(args.cold))
                print(f"run {k + 1} {ref}: " + ", ".join(f"{label} {v:.2f}" for label, v in zip(LABELS, runs[ref][-1])),
                      flush=True)
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    med = {ref: [statistics.median(r[i] for r in rs) for i in range(len(LABELS))] for ref, rs in runs.items()}
    for ref, values in med.items():
        print(f"{ref} (medians): " + ", ".join(f"{label} {v:.2f}" for label, v in zip(LABELS, values)))
    b, a = med[args.before], med[args.after]
    ratios = ", ".join(f"{label} {x / y:.2f}" for label, x, y in zip(LABELS, a, b))
    print(f"ratio {args.after} / {args.before}: {ratios}")


if __name__ == "__main__":
    main()
