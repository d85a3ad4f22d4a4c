"""Time `dumpgym corpus build` (whole process) against JAX-only floors over the same built-in programs.

Floor A imports JAX, traces each program once (`jax.jit(f).trace`) and lowers it (the work behind the
jaxpr and StableHLO layers). Floor B also compiles it with XLA for each target the build compiles it for
(`record/targets.py`: `builtin_targets`; a TPU or GPU without one, its meshes and shardings moved onto
the topology's devices and lowered again for it, as no compile for it can do without): the work behind
the compiled layers. The build compiles each program once per target (the tags ride in its ops'
locations), so floor B is its nearest;
`--no-hlo` (everything but the compiled layer) is compared with floor A, and the build on one
process (`--jobs 1`) with the default, one worker process per core.

Run: .venv/bin/python benchmarks/corpus_build.py [--runs 5]

Wall-clock and CPU seconds (of the process and its workers) are reported, each with its ratios: on a
shared machine the wall clock measures the load as much as the build.
"""
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from _timing import PYTHON, time_process_cpu  # noqa: E402

FLOOR = """
import types
import dumpgym  # only sets XLA_FLAGS, as the build does
import jax
from jax.extend import core as jex
from dumpgym.programs import builtin_programs
from dumpgym.record.targets import builtin_targets
from dumpgym.compiled.layer import devices_needed
from dumpgym.jax_internals import lower_with_jaxpr
from dumpgym.traced.devices import retarget, topology_devices
from dumpgym.traced.trace import map_jaxpr_eqns

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

for p in builtin_programs():
    args = p.example_args()
    traced = jax.jit(p.function).trace(*args)
    str(traced.jaxpr)
    lowered = traced.lower()
    lowered.as_text()
    for entry in builtin_targets(p.platform) if {compile} else ():
        target = entry.target
        compiled = lowered.compile() if target.platform == "cpu" and p.platform == "cpu" else on(traced, args, target)
        compiled.as_text()
"""

if __name__ == "__main__":
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 5
    out = os.path.join(tempfile.mkdtemp(), "corpus.json")
    commands = {
        "dumpgym corpus build": [PYTHON, "-m", "dumpgym", "corpus", "build", "--out", out],
        "dumpgym corpus build --jobs 1": [PYTHON, "-m", "dumpgym", "corpus", "build", "--jobs", "1", "--out", out],
        "dumpgym corpus build --no-hlo": [PYTHON, "-m", "dumpgym", "corpus", "build", "--no-hlo", "--out", out],
        "floor A: trace + lower": [PYTHON, "-c", FLOOR.format(compile=False)],
        "floor B: trace + lower + compile per target": [PYTHON, "-c", FLOOR.format(compile=True)],
    }
    times = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            times[name].append(time_process_cpu(argv))
    for clock, k in (("wall", 0), ("CPU", 1)):
        medians = {name: statistics.median(t[k] for t in ts) for name, ts in times.items()}
        for name, ts in times.items():
            print(f"{name}: {clock} median {medians[name]:.3f}s ({', '.join(f'{t[k]:.3f}' for t in ts)})")
        build = medians["dumpgym corpus build"]
        no_hlo = medians["dumpgym corpus build --no-hlo"]
        floor_a, floor_b = medians["floor A: trace + lower"], medians["floor B: trace + lower + compile per target"]
        print(f"{clock} ratio build / build --jobs 1: {build / medians['dumpgym corpus build --jobs 1']:.2f}")
        print(f"{clock} ratio build --no-hlo / floor A (trace + lower): {no_hlo / floor_a:.2f}")
        print(f"{clock} ratio build / floor A (trace + lower): {build / floor_a:.2f}")
        print(f"{clock} ratio build / floor B (trace + lower + compile per target): {build / floor_b:.2f}")
        print(f"{clock} ratio build --jobs 1 / floor B: {medians['dumpgym corpus build --jobs 1'] / floor_b:.2f}")
