"""CPU time to render every kept file of the gym: what a cold `serve`'s render workers make.

    python benchmarks/render_files.py [--runs 5] [--before REF ...]

On the built-in corpus, a fresh process loads the gym as `serve` does (`site.inputs.gym_start`, untimed) and makes each file
`serve` keeps on disk (`SiteFiles.keep`: every program's record, listings, compiled layers, costs and
changes, `site/kept.py`) and its compressed bytes, in the render workers' order (`render_pool.page_order`),
as `render_pool.keep` makes them (here without writing them). It prints the process's CPU seconds (user + system, which the load of a
shared machine inflates far less than the wall clock) by kind of file, and the compressing apart. With
`--before REF`, REF (checked out in a temporary `git worktree`, on this Python) is run too, alternating
with this checkout in every run, and the ratios of the medians are printed side by side. Each run is a
new process, so no listing is lexed from an earlier run's cache.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import PYTHON, ROOT, worktrees  # noqa: E402

KINDS = ("programs", "listings", "compiled", "cost", "change", "reference", "corpus", "gzip")


def child() -> None:
    """Render every kept file once, in this process; print CPU seconds by kind as one JSON line."""
    import time

    from dumpgym.serve.render_pool import page_order
    from dumpgym.site.files import gzipped, load_inputs, site_files
    from dumpgym.site.inputs import gym_start

    start = gym_start()  # the records as `serve` reads them (corpus.json: the committed file's own bytes)
    corpus, pool = start.corpus, (load_inputs()[1] if start.pending else start.pool)
    keep = site_files(corpus, pool, kept=True).keep  # which files a start keeps; none is read from the cache
    files = site_files(corpus, pool)  # makes each one here, never reading an earlier run's
    slugs = [p.split("/")[-1][:-5] for p in files if p.startswith("data/programs/")]
    spent = dict.fromkeys(KINDS, 0.0)
    count = 0
    for path in page_order(keep, slugs):
        kind = path.split("/")[1] if path.startswith("data/") else path
        kind = kind.removesuffix(".json")
        start = time.process_time()
        body = files[path]
        made = time.process_time()
        gzipped(body)
        spent[kind] += made - start
        spent["gzip"] += time.process_time() - made
        count += 1
    print(json.dumps({"files": count, **spent}))


def run(tree: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    out = subprocess.run([PYTHON, str(Path(__file__).resolve()), "--child"], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--before", metavar="REF", action="append", default=[],
                        help="also run this commit (a temporary git worktree), alternating with this checkout")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child()
        return
    with worktrees(args.before) as trees:
        sides = {"this checkout": ROOT, **{f"{ref}": tree for ref, tree in trees.items()}}
        results: dict[str, list[dict]] = {name: [] for name in sides}
        for i in range(args.runs):
            for name, tree in sides.items():
                results[name].append(run(tree))
                total = sum(results[name][-1][k] for k in KINDS)
                print(f"run {i + 1} {name}: {total:.2f} CPU s, {results[name][-1]['files']} files "
                      f"(load {os.getloadavg()[0]:.1f})", flush=True)
    print(f"\nmedian CPU seconds over {args.runs} runs")
    header = f"{'kind':10s}" + "".join(f"{name:>16s}" for name in sides)
    if len(sides) > 1:
        header += "".join(f"{'ratio ' + name[:10]:>18s}" for name in list(sides)[1:])
    print(header)
    for kind in (*KINDS, "total"):
        med = {name: statistics.median(sum(r[k] for k in KINDS) if kind == "total" else r[kind] for r in rs)
               for name, rs in results.items()}
        row = f"{kind:10s}" + "".join(f"{med[name]:16.3f}" for name in sides)
        mine = med["this checkout"]
        row += "".join(f"{(mine / med[name] if med[name] else float('nan')):18.2f}" for name in list(sides)[1:])
        print(row)
    if len(sides) > 1:
        print("(ratio: this checkout / REF; below 1 is faster)")


if __name__ == "__main__":
    main()
