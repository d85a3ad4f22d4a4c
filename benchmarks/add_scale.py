"""`dumpgym add --hlo cpu` of transformer stacks of about 1,000 to 12,000 equations (whole processes) against JAX
alone tracing, lowering and compiling the same function, side by side in one run: the issue's bar is a ratio of
at most 1.3 at every size, and our own cost per equation flat as the programs grow (linear, not worse).

Run: .venv/bin/python benchmarks/add_scale.py [--runs N] [--layers 12 25 50 100 150] [--before REF]

The programs are `transformer_stack.py`'s `deep_stack` at each depth (about 80 equations a layer: 12 layers
are about 970 equations, 150 about 12,000). For each depth, one run of each command in turn, `--runs` times:

- JAX's own work, the floor: a fresh process that imports JAX (not dumpgym), traces the function with
  `jax.jit(f).trace`, prints its jaxpr, lowers it and prints the StableHLO, compiles it for this CPU and prints
  the compiled HLO: every text `add` shows, made as JAX makes it. Its environment is the one `dumpgym` sets
  for itself on import (eight simulated CPU devices, a TPU or GPU plugin told there is no chip), set by this
  script, so both sides start the same backends and nothing of dumpgym's runs in the floor.
- `dumpgym add --hlo cpu` of that function into a fresh corpus folder (this checkout's, and with `--before REF`
  that commit's too, checked out in a temporary `git worktree`).

Reported per depth: equations and compiled instructions (counted in the record), the medians of CPU seconds (user +
system of the process and its threads: XLA compiles on threads, and a shared machine inflates CPU time far less
than the wall clock) and of wall seconds, the ratio of each add to the floor, and the add's own cost per equation
(its median CPU seconds less the floor's, over the equations): flat across depths means the record is built in time
linear in the equations. (A program whose compiled module grows faster than its equations, as a gradient's can,
costs more per equation on both sides: the record's compiled layer is read in time linear in its instructions.)
Last, a line for each add whose records of one depth are not all byte for byte this checkout's.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dumpgym  # noqa: E402,F401  (sets, in os.environ, what every child process below inherits)
from _timing import PYTHON, time_process_cpu, worktrees  # noqa: E402
from transformer_stack import args_for  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src")
TARGET = 1.3

JAX_ONLY = f"""
import sys; sys.path.insert(0, {HERE!r})
import jax, jax.numpy as jnp
from transformer_stack import deep_stack
args = [jax.ShapeDtypeStruct(tuple(int(d) for d in s[s.index("[") + 1:-1].split(",")), jnp.float32)
        for s in sys.argv[1:]]
traced = jax.jit(deep_stack).trace(*args)
str(traced.jaxpr)
lowered = traced.lower()
lowered.as_text()
lowered.compile().as_text()
"""


def timed(argv: list[str], src: str | None) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of `argv`, with `src` first on PYTHONPATH (None: left out)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return time_process_cpu(argv, env if src is None else {**env, "PYTHONPATH": src})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--layers", type=int, nargs="*", default=[12, 25, 50, 100, 150])
    parser.add_argument("--before", help="a commit whose add to time beside this checkout's")
    args = parser.parse_args(argv)
    fresh = iter(range(10**6))
    worst = 0.0
    with worktrees([args.before] if args.before else []) as trees, tempfile.TemporaryDirectory() as folder:
        sources = {"this checkout": SRC, **{ref: str(tree / "src") for ref, tree in trees.items()}}
        print(f"{'layers':>6} {'equations':>9} {'compiled':>8} {'JAX CPU s':>9} {'JAX wall s':>10} | "
              + " | ".join(f"{label}: CPU s, wall s, ratio CPU, ratio wall, our ms/equation" for label in sources),
              flush=True)
        for layers in args.layers:
            specs = args_for(layers)
            floor: list[tuple[float, float]] = []
            ours: dict[str, list[tuple[float, float]]] = {label: [] for label in sources}
            written: dict[str, list[str]] = {label: [] for label in sources}
            for _ in range(args.runs):
                floor.append(timed([PYTHON, "-c", JAX_ONLY, *specs], None))
                for label, src in sources.items():
                    corpus = os.path.join(folder, str(next(fresh)))  # a fresh folder: the slug never clashes
                    written[label].append(os.path.join(corpus, "deep-stack.json"))
                    ours[label].append(timed([PYTHON, "-m", "dumpgym", "add", f"{HERE}/transformer_stack.py:deep_stack",
                                              *[f"--arg={a}" for a in specs], "--hlo", "cpu", "--corpus", corpus], src))
            record = json.loads(open(written["this checkout"][0], "rb").read())
            eqns, compiled = len(record["eqns"]), len(record["compiled"]["cpu"]["instructions"])
            jax_wall = statistics.median(w for w, _ in floor)
            jax_cpu = statistics.median(c for _, c in floor)
            cells = []
            for label, times in ours.items():
                wall, cpu = statistics.median(w for w, _ in times), statistics.median(c for _, c in times)
                worst = max(worst, cpu / jax_cpu) if label == "this checkout" else worst
                cells.append(f"{cpu:7.2f} {wall:7.2f} {cpu / jax_cpu:5.2f} {wall / jax_wall:5.2f} "
                             f"{1000 * (cpu - jax_cpu) / eqns:6.3f}")
            print(f"{layers:>6} {eqns:>9,} {compiled:>8,} {jax_cpu:>9.2f} {jax_wall:>10.2f} | " + " | ".join(cells),
                  flush=True)
            texts = {label: {open(p, "rb").read() for p in paths} for label, paths in written.items()}
            for label, kinds in texts.items():
                if len(kinds) != 1 or kinds != texts["this checkout"]:
                    print(f"       records of {layers} layers by {label}: NOT all the same as this checkout's",
                          flush=True)
    print(f"medians of {args.runs} run(s); target CPU ratio <= {TARGET}: "
          f"{'met' if worst <= TARGET else 'MISSED'} (worst {worst:.2f}, this checkout)")
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
