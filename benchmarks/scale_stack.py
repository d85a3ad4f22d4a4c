"""trace + facts + x-ray against JAX's own trace + lower, in one process, on programs of 2,000-6,000 equations.

Run: .venv/bin/python benchmarks/scale_stack.py [--runs 3] [--layers N ...] [--hlo]   (target: ratio <= 1.5 at
every size; with --hlo, 1.3)

With `--hlo`, the whole record as `dumpgym add --hlo cpu` makes it (the pipeline's `program_record` with the
CPU's compiled layer, and the text of its file) against JAX's own trace, lower and compile (texts printed):
the bar of `add` for programs of 1,000 to 12,000 equations, e.g. `--hlo --layers 12 78 150` (about 1,000,
6,300 and 12,200 equations). The ratio staying flat as the programs grow says the record is built in time
linear in the equations.

The programs are the unrolled transformer stack of `transformer_stack.py` at 26, 52 and 78 layers
(about 2,100, 4,200 and 6,300 equations). Each run builds a new function object, so neither side
reuses a cache of the other's or of an earlier run; the two sides alternate, and the medians are
compared. Each run starts after a full garbage collection, so neither side pays for a collection
the other's objects brought on (unforced, one lands on whichever side runs first in each pair).
`xray_stack.py` and `add_stack.py` measure whole processes.
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dumpgym  # noqa: E402,F401  (eight CPU devices, as the gym runs)
import jax  # noqa: E402

import transformer_stack as ts  # noqa: E402
from dumpgym.traced.xray import build_xray  # noqa: E402
from dumpgym.traced.facts import build_facts  # noqa: E402
from dumpgym.traced.program import parse_arg  # noqa: E402
from dumpgym.traced.trace import trace  # noqa: E402


def stack(layers: int):
    """A fresh function object for an unrolled stack of `layers` blocks, and its example arguments."""
    def transformer_stack(x, ln1, qkv, out, ln2, up, down):
        for i in range(layers):
            x = ts._block(x, {"ln1": ln1[i], "qkv": qkv[i], "out": out[i], "ln2": ln2[i], "up": up[i], "down": down[i]})
        return x

    specs = [s.replace(f"[{ts.LAYERS},", f"[{layers},") for s in ts.ARGS]
    return transformer_stack, [parse_arg(s).to_struct() for s in specs]


def ours(layers: int) -> tuple[float, int]:
    f, args = stack(layers)
    start = time.perf_counter()
    traced = trace(f, args)
    facts = build_facts(traced)
    build_xray(traced, facts)
    return time.perf_counter() - start, len(facts.eqns)


def jax_only(layers: int, hlo: bool = False) -> float:
    f, args = stack(layers)
    start = time.perf_counter()
    traced = jax.jit(f).trace(*args)
    str(traced.jaxpr)
    lowered = traced.lower()
    lowered.as_text()
    if hlo:
        lowered.compile().as_text()
    return time.perf_counter() - start


def whole_record(layers: int) -> tuple[float, int]:
    """The record `dumpgym add --hlo cpu` makes and the text it writes: seconds and equations."""
    from dumpgym.corpus.pipeline import program_record
    from dumpgym.record.targets import CPU
    from dumpgym.record.typedjson import TextAhead
    from dumpgym.traced.program import Program

    f, args = stack(layers)
    start = time.perf_counter()
    program = Program(slug="stack", title="stack", lesson="", function=f, args=(), entry="stack:f",
                      structs=tuple(args))
    ahead = TextAhead()
    record = program_record(program, targets=[CPU], ahead=ahead)
    ahead.text(record)
    return time.perf_counter() - start, len(record.eqns)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--layers", type=int, nargs="*", default=[26, 52, 78])
    parser.add_argument("--hlo", action="store_true", help="the whole record with the CPU's compiled layer, "
                        "against JAX's trace, lower and compile")
    args = parser.parse_args(argv)
    worst, target = 0.0, 1.3 if args.hlo else 1.5
    mine, theirs = ("record with the compiled layer", "JAX trace + lower + compile") if args.hlo else (
        "trace + facts + x-ray", "JAX trace + lower")
    for layers in args.layers:
        ours(2), jax_only(2, args.hlo)  # warm the imports and JAX's own one-time setup
        a, b, eqns = [], [], 0
        for _ in range(args.runs):
            gc.collect()
            t, eqns = whole_record(layers) if args.hlo else ours(layers)
            a.append(t)
            gc.collect()
            b.append(jax_only(layers, args.hlo))
        ratio = statistics.median(a) / statistics.median(b)
        worst = max(worst, ratio)
        print(f"{layers} layers, {eqns:,} equations: {mine} {statistics.median(a):.2f}s, "
              f"{theirs} {statistics.median(b):.2f}s, ratio {ratio:.2f} (medians of {args.runs})", flush=True)
    print(f"target ratio <= {target}: {'met' if worst <= target else 'MISSED'} (worst {worst:.2f})")
    return 0 if worst <= target else 1


if __name__ == "__main__":
    raise SystemExit(main())
