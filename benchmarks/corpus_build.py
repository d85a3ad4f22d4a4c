"""Time `dumpgym corpus build` (whole process) against JAX-only floors over the same programs.

The floors do JAX's and XLA's own work for every program the build writes (`corpus_programs()`: the
built-in programs and their variants at other shapes and with one change), each staged as the build
stages it (`traced/trace.py`: `staged`; a program under its own `jax.jit` keeps its donation and
shardings), and nothing of ours:

- floor A, what the texts of `--no-hlo` need: trace (`.trace`), the jaxpr printed, one lowering and
  its StableHLO text.
- floor B, what the compiled layers add: for each target the build compiles a program for
  (`record/targets.py`: `builtin_targets`), XLA's compile and its text. This CPU compiles floor A's
  lowering; a TPU or GPU without one needs a lowering of its own, every mesh and sharding moved onto
  the topology's devices (as no compile for it can do without), under its first chip.

Not counted, as ours: the build's second lowering of each program and target (a tagged copy whose
locations name each equation, which the x-ray and the compiled layer's attribution read; the texts
do not need it), the facts, the x-ray, the attribution and the write. `--no-hlo` (everything but the
compiled layers) is compared with floor A, the build with floor B, and the build on one process
(`--jobs 1`) with the default, one worker process per core.

Run: .venv/bin/python benchmarks/corpus_build.py [--runs 3] [--before REF]

With `--before REF`, the build at that commit too (checked out in a temporary `git worktree`, its
`src/` first on PYTHONPATH), each run alternating with this checkout's, the floors the same for both.
Wall-clock and CPU seconds (of the process and its workers) are reported as medians, each with its
ratios: on a shared machine the wall clock measures the load as much as the build.
"""
import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from _timing import PYTHON, ROOT, time_process_cpu, worktrees  # noqa: E402

SRC = str(ROOT / "src")

FLOOR = """
import types
import dumpgym  # only sets XLA_FLAGS, as the build does
import jax
from jax.extend import core as jex
from dumpgym.programs import corpus_programs
from dumpgym.record.targets import builtin_targets
from dumpgym.compiled.layer import devices_needed
from dumpgym.jax_internals import lower_with_jaxpr
from dumpgym.traced.devices import retarget, topology_devices
from dumpgym.traced.trace import map_jaxpr_eqns, staged

def on(traced, args, target):
    # JAX's lowering and compile of the traced jaxpr for a TPU or GPU without one: every mesh and sharding
    # moved onto the topology's devices (as the build must), lowered once, compiled.
    eqns = []
    def seen(eqn, params):
        eqns.append(eqn)
        return eqn.replace(params=params)
    map_jaxpr_eqns(traced.jaxpr.jaxpr, seen)
    devices = topology_devices(target.topology_for(devices_needed(
        types.SimpleNamespace(args=args, jax_traced=traced, tagged_eqns=eqns))))
    memo = {{}}
    move = lambda value: retarget(value, devices, memo)
    closed = jex.ClosedJaxpr(map_jaxpr_eqns(traced.jaxpr.jaxpr, lambda eqn, params: eqn.replace(
        params={{k: move(v) for k, v in params.items()}})), traced.jaxpr.consts)
    with jax.default_device(devices[0]):
        return lower_with_jaxpr(traced, closed, move).compile()

for p in corpus_programs():
    args = p.example_args()
    traced = staged(p.function, tuple(args))  # as the build stages it: jax.jit's, or the program's own jit
    str(traced.jaxpr)
    lowered = traced.lower()
    lowered.as_text()
    for entry in builtin_targets(p.platform) if {compile} else ():
        target = entry.target
        compiled = lowered.compile() if target.platform == "cpu" and p.platform == "cpu" else on(traced, args, target)
        compiled.as_text()
"""

FLOOR_A, FLOOR_B = "floor A: trace + lower", "floor B: trace + lower + compile per target"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", help="a commit whose build to time beside this checkout's")
    args = parser.parse_args()
    out = os.path.join(tempfile.mkdtemp(), "corpus.json")

    def builds(label, src):
        base = [PYTHON, "-m", "dumpgym", "corpus", "build"]
        return {f"dumpgym corpus build{label}": (base + ["--out", out], src),
                f"dumpgym corpus build --jobs 1{label}": (base + ["--jobs", "1", "--out", out], src),
                f"dumpgym corpus build --no-hlo{label}": (base + ["--no-hlo", "--out", out], src)}

    with worktrees([args.before] if args.before else []) as trees:
        commands = {FLOOR_A: ([PYTHON, "-c", FLOOR.format(compile=False)], SRC),
                    FLOOR_B: ([PYTHON, "-c", FLOOR.format(compile=True)], SRC),
                    **builds("", SRC)}
        for ref, tree in trees.items():
            commands.update(builds(f" ({ref})", str(tree / "src")))
        times = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, (argv, src) in commands.items():
                times[name].append(time_process_cpu(argv, {**os.environ, "PYTHONPATH": src}))
    for clock, k in (("wall", 0), ("CPU", 1)):
        medians = {name: statistics.median(t[k] for t in ts) for name, ts in times.items()}
        for name, ts in times.items():
            print(f"{name}: {clock} median {medians[name]:.3f}s ({', '.join(f'{t[k]:.3f}' for t in ts)})")
        floor_a, floor_b = medians[FLOOR_A], medians[FLOOR_B]
        for label in [""] + [f" ({ref})" for ref in trees]:
            build, one = medians[f"dumpgym corpus build{label}"], medians[f"dumpgym corpus build --jobs 1{label}"]
            no_hlo = medians[f"dumpgym corpus build --no-hlo{label}"]
            which = label.strip() or "this checkout"
            print(f"{clock} ratios, {which}: build / build --jobs 1 {build / one:.2f}; "
                  f"build --no-hlo / floor A {no_hlo / floor_a:.2f}; build / floor B {build / floor_b:.2f}; "
                  f"build --jobs 1 / floor B {one / floor_b:.2f}")


if __name__ == "__main__":
    main()
