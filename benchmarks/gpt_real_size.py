"""A user's model at real size: the 12-layer GPT train step (`gpt_train_step.py`) added beside the built-in
programs, then `dumpgym drills`, `dumpgym serve` and the page's first load, measured.

    python benchmarks/gpt_real_size.py [--runs 3] [--corpus DIR]

Prints, as medians over the runs (issue "Real programs at real size": drills <= 30 s and <= 50 MB, serve
answers within 5 s, the first page load fetches <= 5 MB before the first question), each with the CPU
seconds it took (what the load of a shared machine changes least) and the load average:
- `dumpgym drills`: seconds, peak memory and bytes printed, cold (no stored items: the first run after
  `add`, with an empty cache folder, as after an upgrade) and warm (every program's items kept,
  `drills/_stored.py`), and, side by side, the same command on the built-in corpus alone;
- `dumpgym serve`: seconds from starting the process to the answer of `GET /`, warm, and cold (no items kept: it
  answers with a note and makes them after), with the seconds until every item is ready;
- the page in Debian's chromium: bytes fetched until the first question is on screen, and which files.

With `--corpus DIR`, the GPT is not added again: DIR is a corpus folder it was added to (a copy is used).
The cache folder (`DUMPGYM_CACHE_DIR`) is a temporary one of this run's own.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from _timing import PYTHON  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def _child_peak_kb() -> int:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss


def _cpu(usage) -> float:
    return usage.ru_utime + usage.ru_stime


def drills(corpus: str) -> tuple[float, int, float]:
    """Seconds, bytes printed and CPU seconds of one `dumpgym drills --corpus CORPUS`."""
    before = _cpu(resource.getrusage(resource.RUSAGE_CHILDREN))
    start = time.perf_counter()
    out = subprocess.run([PYTHON, "-m", "dumpgym", "drills", "--corpus", corpus], check=True,
                         capture_output=True).stdout
    return time.perf_counter() - start, len(out), _cpu(resource.getrusage(resource.RUSAGE_CHILDREN)) - before


def peak_of(argv: list[str]) -> int:
    """The peak resident memory (KB) of one run of `argv`, by GNU time (children's peaks only ever grow)."""
    if shutil.which("time") is None and not os.path.exists("/usr/bin/time"):
        return -1
    done = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], check=True, capture_output=True, text=True)
    return int(done.stderr.strip().splitlines()[-1])


def serve_answers(corpus: str) -> tuple[float, float]:
    """Seconds from starting `dumpgym serve` to its answer of `GET /`, and the CPU seconds it used (it idles after)."""
    start = time.perf_counter()
    proc = subprocess.Popen([PYTHON, "-m", "dumpgym", "serve", "--port", "0", "--corpus", corpus],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline()
        url = line.split(" at ", 1)[1].split()[0]
        with urllib.request.urlopen(url, timeout=120) as r:
            r.read()
        answered = time.perf_counter() - start
    finally:
        proc.terminate()
    return answered, _cpu(os.wait4(proc.pid, 0)[2])


def serve_cold(corpus: str) -> tuple[float, float, float]:
    """`dumpgym serve` with no drill items kept (`corpus` without them, the cache folder empty): seconds from
    its start to its answer of `GET /`, to the page's note saying the items are ready (`data/drills/pending.json`
    empty), and the CPU seconds it used until then."""
    start = time.perf_counter()
    proc = subprocess.Popen([PYTHON, "-m", "dumpgym", "serve", "--port", "0", "--corpus", corpus],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        url = proc.stdout.readline().split(" at ", 1)[1].split()[0]
        with urllib.request.urlopen(url, timeout=120) as r:
            if b"data-drills-pending" not in r.read():
                sys.exit("serve_cold: the page does not say that items are being made: were some kept?")
        answered = time.perf_counter() - start
        while True:
            with urllib.request.urlopen(url + "data/drills/pending.json", timeout=120) as r:
                if not json.loads(r.read())["pending"]:
                    break
            time.sleep(0.1)
        ready = time.perf_counter() - start
    finally:
        proc.terminate()
    return answered, ready, _cpu(os.wait4(proc.pid, 0)[2])


def _forget_items(corpus: str, cache: str) -> None:
    """Remove every kept drill item: the added programs' (`SLUG.drills.json`) and the cache folder."""
    for stored in os.listdir(corpus):
        if stored.endswith(".drills.json"):
            os.remove(os.path.join(corpus, stored))
    shutil.rmtree(cache, ignore_errors=True)


FIRST_QUESTION = """() => {
  const all = [performance.getEntriesByType('navigation')[0], ...performance.getEntriesByType('resource')];
  return all.map((e) => [e.name.replace(location.origin, ''), e.transferSize]);
}"""


def first_load(corpus: str) -> tuple[int, list]:
    """Bytes the page fetches until the first question of its first drill is on screen, and the biggest files."""
    from playwright.sync_api import sync_playwright

    proc = subprocess.Popen([PYTHON, "-m", "dumpgym", "serve", "--port", "0", "--corpus", corpus],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        url = proc.stdout.readline().split(" at ", 1)[1].split()[0]
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"),
                                        args=["--headless", "--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(url)
            page.wait_for_selector("section.drill:not([hidden]) p.q", timeout=120_000)
            files = page.evaluate(FIRST_QUESTION)
            browser.close()
        return sum(n for _, n in files), sorted(files, key=lambda f: -f[1])[:5]
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--corpus", help="a corpus folder the GPT was added to (not added again)")
    args = parser.parse_args()
    runs = args.runs
    folder = tempfile.mkdtemp()
    gpt, empty, cache = (os.path.join(folder, name) for name in ("gpt", "empty", "cache"))
    os.makedirs(empty)
    os.environ["DUMPGYM_CACHE_DIR"] = cache  # the commands below inherit it
    if args.corpus:
        shutil.copytree(args.corpus, gpt)
    else:
        start = time.perf_counter()
        subprocess.run([PYTHON, "-m", "dumpgym", "add", f"{HERE}/gpt_train_step.py:gpt_train_step", "--args-from",
                        f"{HERE}/gpt_train_step.py:make", "--hlo", "cpu", "--corpus", gpt], check=True,
                       stdout=subprocess.DEVNULL)
        print(f"add --hlo cpu: {time.perf_counter() - start:.1f} s (benchmarks/gpt_add.py compares it with JAX)")
    cold, warm, builtin = [], [], []
    for _ in range(runs):
        _forget_items(gpt, cache)
        cold.append(drills(gpt))
        warm.append(drills(gpt))
        builtin.append(drills(empty))
    for label, got in (("cold (items made)", cold), ("warm (items read)", warm), ("built-ins alone, warm", builtin)):
        secs, cpu = statistics.median(t for t, _, _ in got), statistics.median(c for _, _, c in got)
        print(f"dumpgym drills, {label}: median {secs:.2f} s ({cpu:.2f} CPU s) over {runs} runs, "
              f"{got[0][1] / 1e6:.1f} MB printed")
    peak = peak_of([PYTHON, "-m", "dumpgym", "drills", "--corpus", gpt])
    print(f"dumpgym drills, warm: peak memory {peak / 1024:.0f} MB")
    served = [serve_answers(gpt) for _ in range(runs)]
    print(f"dumpgym serve, warm, GET / answered after: median {statistics.median(s for s, _ in served):.2f} s, "
          f"{statistics.median(c for _, c in served):.2f} CPU s ({', '.join(f'{s:.2f}' for s, _ in served)})")
    colds = []
    for _ in range(runs):
        _forget_items(gpt, cache)
        colds.append(serve_cold(gpt))
    print(f"dumpgym serve, cold (no items kept), GET / answered after: median "
          f"{statistics.median(a for a, _, _ in colds):.2f} s ({', '.join(f'{a:.2f}' for a, _, _ in colds)}); "
          f"every item ready after: median {statistics.median(r for _, r, _ in colds):.2f} s, "
          f"{statistics.median(c for _, _, c in colds):.2f} CPU s")
    total, biggest = first_load(gpt)
    print(f"first page load, until the first question: {total / 1e6:.2f} MB transferred; biggest: "
          + ", ".join(f"{name} {n / 1e3:.0f} KB" for name, n in biggest))
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
