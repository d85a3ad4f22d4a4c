"""`dumpgym open` of a dump whose optimised HLO is hundreds of megabytes, beside reading its files.

    python benchmarks/dump_big.py [--megabytes 300] [--runs 3] [--folder DIR]

Makes (once, into `--folder`, default a temporary folder) the dump of a jitted function that closes over
a large table (a model's constants): with `--xla_dump_large_constants`, XLA prints the table in its HLO,
before and after optimisations, and JAX's StableHLO holds it too. Then, each run a fresh process,
alternating: reading every file of the folder in Python (`Path.read_bytes`, what reading the dump costs
at the least), and `dumpgym open FOLDER` until it prints the gym's URL, with its peak memory then
(VmHWM). Last, with `open` serving: the big module's old page and the gym's index asked at once, each
timed. The issue's bars: opened within 2x the time to read it, in memory proportional to one module,
other pages answering meanwhile.
"""
from __future__ import annotations

import argparse
import os
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


def make(folder: Path, megabytes: int) -> None:
    if folder.is_dir() and any(folder.iterdir()):
        return
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "JAX_DUMP_IR_TO": str(folder), "JAX_DUMP_IR_MODES": "jaxpr,stablehlo",
           "XLA_FLAGS": f"--xla_dump_to={folder} --xla_dump_large_constants", "PYTHONPATH": str(ROOT / "src")}
    n = megabytes * 1_000_000 // 13  # about 13 bytes a printed float
    subprocess.run([PYTHON, "-c", MAKE.format(n=n)], check=True, env=env)


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
                       (("its old page (redirected to the gym)", "dump/jit-lookup.html"), ("the gym's index", ""))]
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
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dump-big-"))
    folder = args.folder or work / "dump"
    make(folder, args.megabytes)
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
    reads, opens, peaks, bases = [], [], [], []
    for _ in range(args.runs):
        start = time.perf_counter()
        subprocess.run([PYTHON, "-c", READ, str(folder)], check=True, env=env)
        reads.append(time.perf_counter() - start)
        took, peak, _ = open_once(folder, work / "corpus", env)
        opens.append(took)
        peaks.append(peak)
        bases.append(open_once(small, work / "corpus", env)[0])
    mr, mo, mb = statistics.median(reads), statistics.median(opens), statistics.median(bases)
    print(f"reading every file in Python: median {mr:.2f} s ({', '.join(f'{t:.2f}' for t in reads)})")
    print(f"dumpgym open until its URL: median {mo:.2f} s ({', '.join(f'{t:.2f}' for t in opens)}); "
          f"{mo / mr:.1f}x the read; peak memory {statistics.median(peaks) / 1e6:.0f} MB "
          f"(the biggest file is {biggest.stat().st_size / 1e6:.0f} MB)")
    print(f"dumpgym open of the folder without the big module: median {mb:.2f} s; the big module adds "
          f"{mo - mb:.2f} s, {(mo - mb) / mr:.1f}x the read")
    _, _, asked = open_once(folder, work / "corpus", env, probe=True)
    print("asked at once: " + "; ".join(f"{name} {t:.2f} s" for name, t in asked.items()))


if __name__ == "__main__":
    main()
