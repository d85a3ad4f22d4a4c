"""The test suite's wall time at two or more commits, side by side on this machine.

    python benchmarks/suite_time.py [--before d4eb4d8 [REF ...]] [--after HEAD] [--workers 2 | --as-scripted]
                                    [--runs 1] [--same-tests]

Each commit is checked out in a temporary `git worktree` and run with this checkout's `.venv`
(its `src/` first on PYTHONPATH), the way `scripts/test` runs the suite after installing:

- the check step, `dumpgym corpus build --check` (every built-in program traced, lowered and
  compiled now, compared with the committed corpus);
- pytest over the commit's `tests/`, with `--workers` pytest-xdist workers (0: one process),
  handed out as that commit's scripts/test says (`--dist`), or by xdist's default if it says nothing.
  `--as-scripted` takes the number of workers from each commit's scripts/test too (`-n`; none
  there: one process), and leaves out of the environment what that script unsets (HEAD's unsets
  PYTHONDONTWRITEBYTECODE, so that bytecode and rewritten test modules are cached), so that each
  suite runs as its own test command ran it.

Runs alternate between the commits (before, after, before, after, ...) so that load on a shared
machine falls on all alike. It prints each run, the medians, the number of tests each suite ran, and
for each `before` the ratios after / before of the pytest time and of the check step plus pytest.
The default `before`, d4eb4d8, is the last commit before the typed-record refactor (issue 11).

`--same-tests` runs, at every commit, only the tests whose node ids every commit collects (a suite
that grew is then compared on what it had), and skips the check step.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _timing import ROOT, worktrees  # noqa: E402

PYTHON = ROOT / ".venv" / "bin" / "python"
SUMMARY = re.compile(r"(\d+) (?:passed|failed)")


def timed(argv: list[str], cwd: Path, env: dict, may_fail: bool = False) -> tuple[float, str]:
    """Seconds `argv` took and its output; a failure ends the benchmark unless `may_fail` (a test
    that fails still took its time: the run is timed and its failures printed)."""
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    if done.returncode != 0 and not may_fail:
        sys.exit(f"{' '.join(argv[:4])} failed in {cwd}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return took, done.stdout


def _env(tree: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(tree / "src"), "CI": "true"}


def collected(tree: Path) -> set[str]:
    """The node ids pytest collects at this commit."""
    _, out = timed([str(PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only"], tree, _env(tree))
    return {line for line in out.splitlines() if "::" in line and not line.startswith(" ")}


def _test_command(tree: Path) -> str:
    return (tree / "scripts" / "test").read_text()


def distribution(tree: Path) -> list[str]:
    """How the commit's scripts/test hands tests to the xdist workers (`--dist MODE`), if it says."""
    found = re.search(r"--dist[ =](\w+)", _test_command(tree))
    return ["--dist", found[1]] if found else []


def scripted_unsets(tree: Path) -> list[str]:
    """The environment variables the commit's scripts/test unsets before it runs anything."""
    return re.findall(r"^unset (\w+)", _test_command(tree), re.MULTILINE)


def scripted_workers(tree: Path) -> int:
    """How many xdist workers the commit's scripts/test runs pytest with: its `-n N` (or the default of
    `-n "${PYTEST_WORKERS:-N}"`), 0 where it runs pytest in one process."""
    found = re.search(r'pytest\b.*?-n\s+"?(?:\$\{PYTEST_WORKERS:-)?(\d+)', _test_command(tree))
    return int(found[1]) if found else 0


def one_run(tree: Path, workers: int, only: list[str] | None = None, unset: Sequence[str] = ()) -> dict:
    env = {key: value for key, value in _env(tree).items() if key not in unset}
    check = 0.0
    if only is None:
        check, _ = timed([str(PYTHON), "-m", "dumpgym", "corpus", "build", "--check"], tree, env)
    argv = [str(PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider", *(only or [])]
    if workers:
        argv += ["-n", str(workers), *distribution(tree)]
    suite, out = timed(argv, tree, env, may_fail=True)
    for line in out.splitlines():
        if line.startswith("FAILED"):
            print(f"  {tree.name}: {line}", flush=True)
    counts = [int(n) for n in SUMMARY.findall(out.splitlines()[-1] if out else "")]
    return {"check": check, "pytest": suite, "tests": sum(counts)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", nargs="+", default=["d4eb4d8"], metavar="REF")
    parser.add_argument("--after", default="HEAD")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers for both (0: one process)")
    parser.add_argument("--as-scripted", action="store_true",
                        help="as many workers as each commit's scripts/test runs pytest with, instead of --workers, "
                             "and without the environment variables it unsets")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--same-tests", action="store_true",
                        help="run only the tests every commit has (by node id), without the check step")
    args = parser.parse_args()

    with worktrees((*args.before, args.after)) as trees:
        only = None
        if args.same_tests:
            only = sorted(set.intersection(*(collected(tree) for tree in trees.values())))
            print(f"{len(only)} tests under the same node id at every commit", flush=True)
        runs: dict[str, list[dict]] = {ref: [] for ref in trees}
        for k in range(args.runs):
            for ref, tree in trees.items():
                workers = scripted_workers(tree) if args.as_scripted else args.workers
                r = one_run(tree, workers, only, scripted_unsets(tree) if args.as_scripted else [])
                runs[ref].append(r)
                print(f"run {k + 1} {ref}: {r['tests']} tests; check step {r['check']:.1f} s, "
                      f"pytest {r['pytest']:.1f} s ({workers or 'no'} xdist workers)", flush=True)

    med = {ref: {key: statistics.median(r[key] for r in rs) for key in ("check", "pytest", "tests")}
           for ref, rs in runs.items()}
    for ref, m in med.items():
        print(f"{ref}: {m['tests']:.0f} tests, pytest {m['pytest']:.1f} s "
              f"({1000 * m['pytest'] / m['tests']:.0f} ms a test), check step + pytest {m['check'] + m['pytest']:.1f} s")
    a = med[args.after]
    for before in args.before:
        b = med[before]
        print(f"ratio {args.after} / {before}, pytest: {a['pytest'] / b['pytest']:.2f}; "
              f"check step + pytest: {(a['check'] + a['pytest']) / (b['check'] + b['pytest']):.2f}; "
              f"per test: {(a['pytest'] / a['tests']) / (b['pytest'] / b['tests']):.2f}")


if __name__ == "__main__":
    main()
