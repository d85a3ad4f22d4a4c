"""`dumpgym open` of a dump whose optimised HLO is hundreds of megabytes, beside reading its files.

    python benchmarks/dump_big.py [--megabytes 300] [--runs 3] [--folder DIR] [--form constant|lines]

Makes (once, into `--folder`, default a temporary folder) the dump of a jitted function that closes over
a large table (a model's constants): with `--xla_dump_large_constants`, XLA prints the table in its HLO,
before and after optimisations, and JAX's StableHLO holds it too. Then, each run a fresh process,
alternating: reading every file of the folder in Python (`Path.read_bytes`, what reading the dump costs
at the least), `cat` of the big optimised HLO alone, and `dumpgym open FOLDER` until it prints the gym's URL,
with its peak memory then (VmHWM). Then, each run: `open` started and the big module's streamed page asked as
soon as the URL is printed (where `open` lands): the seconds from starting `open` to its first window
answered, beside `cat`; while the module's line index is made (in a process of its own), the gym's index
asked every 50 ms (and the streamed page every second), its slowest answer said; when the index is made, the seconds it took, the server's
peak memory and the indexing process's (as the page says it). The issue's bars: opened within 2x the time to
read it, in memory proportional to one module, other pages answering meanwhile.

`--form lines`: the big optimised HLO made of millions of short lines instead (a big model's listing): the
same function dumped with a small table, its fused computation repeated, renamed, until the file is
`--megabytes` (XLA's own lines, only the computation's name changed); its line index takes seconds to make,
and the gym is asked meanwhile.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, os.path.dirname(__file__))
from _timing import PYTHON, ROOT, serving_open  # noqa: E402

MAKE = """
import numpy as np, jax, jax.numpy as jnp
table = np.random.default_rng(0).standard_normal(({n},)).astype(np.float32)
@jax.jit
def lookup(i, x):
    return jnp.take(jnp.asarray(table), i) * x + jnp.sin(x)
lookup(jnp.arange(8), jnp.ones(8)).block_until_ready()
"""
READ = "import sys; from pathlib import Path; [p.read_bytes() for p in Path(sys.argv[1]).iterdir() if p.is_file()]"


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


def _fetch(url: str) -> tuple[float, str]:
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as r:
        body = r.read().decode("utf-8")
    return time.perf_counter() - t, body


def streamed_once(folder: Path, corpus: Path, env: dict) -> dict:
    """`open` started, its streamed page asked at once: seconds to the first window (from starting `open`),
    the gym's slowest answer while the line index is made, the index's seconds, and peaks of memory."""
    began = time.perf_counter()
    with serving_open(folder, corpus, env) as (proc, line, took):
        page_url = line.split(" at ", 1)[1].split()[0]
        if "/big/" not in page_url:
            raise SystemExit(f"open did not land on a streamed page: {line!r}")
        gym = page_url.split("big/", 1)[0]
        asked, page = _fetch(page_url)
        first = time.perf_counter() - began
        if "data-listing" not in page:
            raise SystemExit("the streamed page showed no window")
        slowest, probes, asked_page = 0.0, 0, time.perf_counter()
        while "The line index is being made" in page:  # the gym asked every 50 ms, the streamed page every second
            slowest = max(slowest, _fetch(gym)[0])
            probes += 1
            time.sleep(0.05)
            if time.perf_counter() - asked_page >= 1:
                asked_page = time.perf_counter()
                _, page = _fetch(page_url)
        indexed = time.perf_counter() - began
        _, windowed = _fetch(page_url + "?line=2")
        pass_peak = re.search(r"whose memory peaked at ([\d,.]+) MB", page)
        return {"url": took, "first window": first, "its answer": asked, "indexed": indexed, "slowest gym answer": slowest,
                "gym probes": probes, "server peak": _peak(proc.pid),
                "index process peak": float(pass_peak.group(1).replace(",", "")) * 1e6 if pass_peak else 0.0,
                "window ok": "data-listing" in windowed}


def open_once(folder: Path, corpus: Path, env: dict, probe: bool = False) -> tuple[float, int, dict]:
    """Seconds until `open` prints its URL, its peak resident memory then (bytes), and with `probe`, the
    seconds the big module's page and the index took when asked at once."""
    with serving_open(folder, corpus, env) as (proc, line, took):
        status = Path(f"/proc/{proc.pid}/status").read_text()
        peak = int(next(r for r in status.splitlines() if r.startswith("VmHWM:")).split()[1]) * 1024
        asked = {}
        if probe:
            parts = urlsplit(line.split(" at ", 1)[1].split()[0])
            url = f"{parts.scheme}://{parts.netloc}/"  # it prints the page to open first (`?xray=...#xray`)

            def get(name, path):
                t = time.perf_counter()
                with urllib.request.urlopen(url + path, timeout=600) as r:
                    r.read()
                asked[name] = time.perf_counter() - t
            threads = [threading.Thread(target=get, args=a) for a in
                       (("its old page (redirected to its streamed page)", "dump/jit-lookup.html"), ("the gym's index", ""))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        return took, peak, asked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--folder", type=Path, default=None)
    parser.add_argument("--form", choices=("constant", "lines"), default="constant")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dump-big-"))
    folder = args.folder or work / "dump"
    (make_lines if args.form == "lines" else make)(folder, args.megabytes)
    files = [p for p in folder.iterdir() if p.is_file()]
    biggest = max(files, key=lambda p: p.stat().st_size)
    print(f"{folder}: {len(files)} files, {sum(p.stat().st_size for p in files) / 1e6:.0f} MB; the biggest "
          f"{biggest.name}, {biggest.stat().st_size / 1e6:.0f} MB")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    # The same folder without the big module's files (links to the rest): what `open` costs without it.
    small = work / "without-the-big-module"
    small.mkdir(exist_ok=True)
    stem = ".".join(biggest.name.split(".")[:2])  # module_0006.jit_lookup
    for p in files:
        if not p.name.startswith(stem) and "lookup" not in p.name and not (small / p.name).exists():
            (small / p.name).symlink_to(p)
    reads, opens, peaks, bases, base_peaks, cats, streams = [], [], [], [], [], [], []
    hlo = next(folder.glob("module_*.jit_lookup.cpu_after_optimizations.txt"))
    for _ in range(args.runs):
        start = time.perf_counter()
        subprocess.run([PYTHON, "-c", READ, str(folder)], check=True, env=env)
        reads.append(time.perf_counter() - start)
        start = time.perf_counter()
        subprocess.run(["cat", str(hlo)], check=True, stdout=subprocess.DEVNULL)
        cats.append(time.perf_counter() - start)
        streams.append(streamed_once(folder, work / "corpus", env))
        took, peak, _ = open_once(folder, work / "corpus", env)
        opens.append(took)
        peaks.append(peak)
        took, peak, _ = open_once(small, work / "corpus", env)
        bases.append(took)
        base_peaks.append(peak)
    mr, mo, mb = statistics.median(reads), statistics.median(opens), statistics.median(bases)
    print(f"reading every file in Python: median {mr:.2f} s ({', '.join(f'{t:.2f}' for t in reads)})")
    print(f"dumpgym open until its URL: median {mo:.2f} s ({', '.join(f'{t:.2f}' for t in opens)}); "
          f"{mo / mr:.1f}x the read; peak memory {statistics.median(peaks) / 1e6:.0f} MB "
          f"(the biggest file is {biggest.stat().st_size / 1e6:.0f} MB)")
    print(f"dumpgym open of the folder without the big module: median {mb:.2f} s, peak memory "
          f"{statistics.median(base_peaks) / 1e6:.0f} MB; the big module adds {mo - mb:.2f} s, {(mo - mb) / mr:.1f}x the read")
    _, _, asked = open_once(folder, work / "corpus", env, probe=True)
    print("asked at once: " + "; ".join(f"{name} {t:.2f} s" for name, t in asked.items()))
    mc = statistics.median(cats)
    median = {key: statistics.median(s[key] for s in streams) for key in streams[0] if key != "window ok"}
    print(f"cat of the optimised HLO ({hlo.stat().st_size / 1e6:.0f} MB): median {mc:.2f} s "
          f"({', '.join(f'{t:.2f}' for t in cats)})")
    print(f"open until the streamed page's first window is answered: median {median['first window']:.2f} s "
          f"({', '.join(format(s['first window'], '.2f') for s in streams)}), {median['first window'] / mc:.1f}x the cat, "
          f"{median['first window'] / mr:.1f}x reading every file; of it, until the URL: {median['url']:.2f} s, "
          f"the window's answer once asked: {median['its answer']:.2f} s ({median['its answer'] / mc:.1f}x the cat); "
          f"beyond open of the folder without the big module: {median['first window'] - mb:.2f} s, "
          f"{(median['first window'] - mb) / mc:.1f}x the cat")
    print(f"the line index made {median['indexed']:.2f} s after starting open; meanwhile the gym's index was asked "
          f"{median['gym probes']:.0f} times, its slowest answer {median['slowest gym answer']:.3f} s "
          f"(median of the runs' slowest: {', '.join(format(s['slowest gym answer'], '.3f') for s in streams)})")
    print(f"peak memory: the server {median['server peak'] / 1e6:.0f} MB, the indexing process "
          f"{median['index process peak'] / 1e6:.0f} MB; a window by offsets answered: "
          f"{all(s['window ok'] for s in streams)}")


if __name__ == "__main__":
    main()
