"""`dumpgym open` of a dump whose optimised HLO is hundreds of megabytes, beside reading the file.

    python benchmarks/dump_big.py [--megabytes 300] [--runs 3] [--folder DIR] [--form constant|lines|both]
                                  [--before REF]

The issue's bar: a 300 MB optimised HLO opens within 2x the time to read it, in memory proportional to one
module, while other pages keep answering. Two forms of such a file, made once into `--folder` (default a
temporary folder; `DIR/constant-MB`, `DIR/lines-MB`):

- `constant`: the dump of a jitted function that closes over a large table (a model's constants): with
  `--xla_dump_large_constants`, XLA prints the table on one line of its HLO, before and after
  optimisations, and JAX's StableHLO holds it too.
- `lines`: the same function dumped with a small table, its optimised HLO's fused computation repeated,
  renamed, until the file is `--megabytes` (XLA's own lines, only the computation's name changed): millions
  of short lines, as a big model's listing reads.

Each run, alternating, each a fresh process: `cat` of the big optimised HLO (reading it); the line index's
pass alone (`python -m dumpgym.ir.hlo_index FILE`, what `open` runs in a process of its own), beside a fresh
interpreter that only imports it (the part of the pass's time that no file costs); `open` of the
folder, its streamed page (where `open` lands) asked as soon as the URL is printed, then its gym's index
asked every 50 ms (and the streamed page every 0.1 s) until the page says the line index is made; and `open`
of the same folder without the big module (links to the rest), its landing page asked at once: the gym's own
start, which the first window's time is set beside. With `--before REF`, the same `open`s and pass of that
commit (checked out in a temporary worktree) in the same runs.

Printed per form and version, medians over the runs (and the machine's load, which a shared machine's
other work raises): the times and their ratios to `cat` (and the server's
CPU seconds until its first answer, beside the gym alone's: a loaded machine inflates them far less), the
server's peak memory (VmHWM) beside the gym alone's, the pass's own (as the page says it), and the slowest
answer of the gym while the pass ran (none asked where the pass ended before the URL: it starts before the
gym is made).
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _timing import PYTHON, ROOT, serving_open, worktrees  # noqa: E402

MAKE = """
import numpy as np, jax, jax.numpy as jnp
table = np.random.default_rng(0).standard_normal(({n},)).astype(np.float32)
@jax.jit
def lookup(i, x):
    return jnp.take(jnp.asarray(table), i) * x + jnp.sin(x)
lookup(jnp.arange(8), jnp.ones(8)).block_until_ready()
"""
MADE = "The line index is being made"


def make(folder: Path, megabytes: int, n: int | None = None) -> None:
    if folder.is_dir() and any(folder.iterdir()):
        return
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "JAX_DUMP_IR_TO": str(folder), "JAX_DUMP_IR_MODES": "jaxpr,stablehlo",
           "XLA_FLAGS": f"--xla_dump_to={folder} --xla_dump_large_constants", "PYTHONPATH": str(ROOT / "src")}
    n = megabytes * 1_000_000 // 13 if n is None else n  # about 13 bytes a printed float
    subprocess.run([PYTHON, "-c", MAKE.format(n=n)], check=True, env=env)


def make_lines(folder: Path, megabytes: int) -> None:
    """The dump with a small table, its optimised HLO's fused computation repeated (renamed `.rN`) before the
    ENTRY until the file is `megabytes`."""
    if folder.is_dir() and any(folder.iterdir()):
        return
    real = folder.with_name(folder.name + "-real")
    make(real, 0, n=1000)
    shutil.copytree(real, folder)
    path = next(folder.glob("module_*.jit_lookup.cpu_after_optimizations.txt"))
    text = path.read_text()
    entry = text.index("\nENTRY ") + 1
    fused = text.index("\n%fused_computation ") + 1
    head, body, tail = text[:fused], text[fused:entry], text[entry:]
    with path.open("w") as f:
        f.write(head)
        k = 0
        while f.tell() < megabytes * 1_000_000:
            f.write(body.replace("%fused_computation ", f"%fused_computation.r{k} ", 1))
            k += 1
        f.write(tail)


def _peak(pid: int) -> int:
    """A process's peak resident memory (VmHWM), in bytes."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(r for r in status.splitlines() if r.startswith("VmHWM:")).split()[1]) * 1024


def _cpu(pid: int) -> float:
    """A process's CPU seconds so far (user and system, its own: not its render workers')."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _fetch(url: str) -> tuple[float, str]:
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as r:
        body = r.read().decode("utf-8")
    return time.perf_counter() - t, body


def _timed(argv: list[str], env=None) -> dict:
    """{"wall", "cpu"}: seconds of one run of `argv`, by the clock and of CPU (user and system: what the load
    of a shared machine inflates far less)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall": wall, "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)}


def streamed_once(folder: Path, corpus: Path, env: dict) -> dict:
    """`open` started, its streamed page asked at once: seconds to the first window (from starting `open`), the
    gym's slowest answer while the line index is made, when it is made, the pass's seconds, peaks of memory."""
    began = time.perf_counter()
    with serving_open(folder, corpus, env) as (proc, line, took):
        page_url = line.split(" at ", 1)[1].split()[0]
        if "/big/" not in page_url:
            raise SystemExit(f"open did not land on a streamed page: {line!r}")
        gym = page_url.split("big/", 1)[0]
        asked, page = _fetch(page_url)
        first, first_cpu = time.perf_counter() - began, _cpu(proc.pid)
        if "data-listing" not in page:
            raise SystemExit("the streamed page showed no window")
        slowest, probes, asked_page = 0.0, 0, time.perf_counter()
        while MADE in page:  # the gym asked every 50 ms, the streamed page every 0.1 s
            slowest = max(slowest, _fetch(gym)[0])
            probes += 1
            time.sleep(0.05)
            if time.perf_counter() - asked_page >= 0.1:
                asked_page = time.perf_counter()
                _, page = _fetch(page_url)
        indexed = time.perf_counter() - began
        _, windowed = _fetch(page_url + "?line=2")
        seconds = re.search(r"in ([\d.]+) s (?:\(([\d.]+) s of CPU\) )?in a process of its own", page)
        pass_peak = re.search(r"whose memory peaked at ([\d,.]+) MB", page)
        return {"url": took, "first window": first, "server cpu": first_cpu, "its answer": asked, "indexed": indexed,
                "pass": float(seconds.group(1)) if seconds else float("nan"),
                "pass cpu": float(seconds.group(2)) if seconds and seconds.group(2) else float("nan"),
                "slowest gym answer": slowest, "gym probes": probes, "server peak": _peak(proc.pid),
                "pass peak": float(pass_peak.group(1).replace(",", "")) * 1e6 if pass_peak else float("nan"),
                "window ok": "data-listing" in windowed}


def base_once(folder: Path, corpus: Path, env: dict) -> dict:
    """`open` of the folder without the big module: seconds until its landing page is answered, peak memory."""
    began = time.perf_counter()
    with serving_open(folder, corpus, env) as (proc, line, took):
        _fetch(line.split(" at ", 1)[1].split()[0])
        return {"landed": time.perf_counter() - began, "server cpu": _cpu(proc.pid), "url": took,
                "server peak": _peak(proc.pid)}


def _without(folder: Path, biggest: Path, into: Path) -> Path:
    """The folder's files but the big module's (links), in `into`."""
    into.mkdir(exist_ok=True)
    stem = ".".join(biggest.name.split(".")[:2])  # module_0006.jit_lookup
    for p in folder.iterdir():
        if p.is_file() and not p.name.startswith(stem) and "lookup" not in p.name and not (into / p.name).exists():
            (into / p.name).symlink_to(p)
    return into


def _med(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def _all(rows: list[dict], key: str, fmt: str = ".2f") -> str:
    return ", ".join(format(r[key], fmt) for r in rows)


def bench_form(form: str, folder: Path, work: Path, versions: dict[str, Path], runs: int) -> None:
    hlo = next(folder.glob("module_*.jit_lookup.cpu_after_optimizations.txt"))
    with hlo.open("rb") as f:
        lines = sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 24), b""))
    print(f"\n== {form}: {folder}; the optimised HLO {hlo.stat().st_size / 1e6:.0f} MB, {lines:,} lines")
    small = _without(folder, hlo, work / f"without-{form}")
    cats: list[dict] = []
    rows = {name: {"streamed": [], "base": [], "pass": [], "start": []} for name in versions}
    loads = [os.getloadavg()[0]]
    for run in range(runs):
        cats.append(_timed(["cat", str(hlo)]))
        for k, (name, src) in enumerate(versions.items()):
            env = {**os.environ, "PYTHONPATH": str(src)}
            corpus = work / f"corpus-{k}"
            rows[name]["start"].append(_timed([PYTHON, "-c", "import dumpgym.ir.hlo_index"], env))
            rows[name]["pass"].append(_timed([PYTHON, "-m", "dumpgym.ir.hlo_index", str(hlo)], env))
            rows[name]["streamed"].append(streamed_once(folder, corpus, env))
            rows[name]["base"].append(base_once(small, corpus, env))
        loads.append(os.getloadavg()[0])
    cat, cat_cpu = _med(cats, "wall"), _med(cats, "cpu")
    print(f"the machine's load (1-minute average) at the start and after each run: {', '.join(f'{x:.1f}' for x in loads)}")
    print(f"cat of the optimised HLO: median {cat:.3f} s ({_all(cats, 'wall', '.3f')}), CPU {cat_cpu:.3f} s")
    for name, r in rows.items():
        s, b, p = r["streamed"], r["base"], r["pass"]
        first, landed, asked = _med(s, "first window"), _med(b, "landed"), _med(s, "its answer")
        print(f"-- {name}")
        print(f"  the line index's pass alone (a fresh process, from its start): median {_med(p, 'wall'):.2f} s "
              f"({_all(p, 'wall')}), {_med(p, 'wall') / cat:.1f}x the cat; CPU {_med(p, 'cpu'):.2f} s "
              f"({_all(p, 'cpu')}), {_med(p, 'cpu') / cat_cpu:.1f}x the cat's")
        st = r["start"]
        print(f"  of which the interpreter's start and the pass's imports (`python -c 'import dumpgym.ir.hlo_index'`): "
              f"median {_med(st, 'wall'):.2f} s ({_all(st, 'wall')}), CPU {_med(st, 'cpu'):.2f} s; the pass without "
              f"them {_med(p, 'wall') - _med(st, 'wall'):.2f} s, {(_med(p, 'wall') - _med(st, 'wall')) / cat:.1f}x the cat")
        print(f"  open until the big module's first window is answered: median {first:.2f} s ({_all(s, 'first window')}); "
              f"the same folder without the big module until its page is answered: median {landed:.2f} s "
              f"({_all(b, 'landed')}); the difference {first - landed:+.2f} s, {(first - landed) / cat:+.1f}x the cat")
        cpu, base_cpu = _med(s, "server cpu"), _med(b, "server cpu")
        print(f"  the server's CPU until then: median {cpu:.2f} s ({_all(s, 'server cpu')}) beside the gym alone's "
              f"{base_cpu:.2f} s ({_all(b, 'server cpu')}); the difference {cpu - base_cpu:+.2f} s, "
              f"{(cpu - base_cpu) / cat_cpu:+.1f}x the cat's CPU")
        print(f"  the first window's answer once asked: median {asked:.3f} s ({_all(s, 'its answer', '.3f')}), "
              f"{asked / cat:.1f}x the cat")
        print(f"  during open, the pass took {_med(s, 'pass'):.2f} s as the page says it ({_all(s, 'pass')}), "
              f"{_med(s, 'pass cpu'):.2f} s of CPU ({_all(s, 'pass cpu')}); the line "
              f"index was made {_med(s, 'indexed'):.2f} s after starting open (the URL at {_med(s, 'url'):.2f} s)")
        probes = [x["gym probes"] for x in s]
        print(f"  while the pass ran after the URL, the gym's index was asked {', '.join(map(str, probes))} times; its "
              f"slowest answer {_all(s, 'slowest gym answer', '.3f')} s" if any(probes) else
              "  the pass ended before the URL was printed in every run: no page was asked while it ran")
        print(f"  peak memory: the server {_med(s, 'server peak') / 1e6:.0f} MB, the gym alone {_med(b, 'server peak') / 1e6:.0f} MB "
              f"({(_med(s, 'server peak') - _med(b, 'server peak')) / 1e6:+.0f} MB); the pass's process "
              f"{_med(s, 'pass peak') / 1e6:.0f} MB; a window by offsets answered: {all(x['window ok'] for x in s)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--folder", type=Path, default=None, help="where the dumps are kept (made if absent)")
    parser.add_argument("--form", choices=("constant", "lines", "both"), default="both")
    parser.add_argument("--before", help="a commit whose open and pass to time beside this checkout's")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dump-big-"))
    try:
        kept = args.folder or work
        with worktrees([args.before] if args.before else []) as trees:
            versions = {"this checkout": ROOT / "src", **{f"before ({ref})": tree / "src" for ref, tree in trees.items()}}
            for form in (("constant", "lines") if args.form == "both" else (args.form,)):
                folder = kept / f"{form}-{args.megabytes}"
                (make_lines if form == "lines" else make)(folder, args.megabytes)
                bench_form(form, folder, work, versions, args.runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
