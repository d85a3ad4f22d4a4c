"""Time `dumpgym corpus build` (both compiled layers) against JAX alone compiling for the same TPU topology.

The TPU floor imports JAX, asks libtpu for the v5e topologies the corpus uses (2x2; 2x4 for the two
mesh programs), then lowers and compiles each program once for it, as `jax.jit(f).lower(*args).compile()`
would on that TPU. The build traces, lowers and compiles each program twice per target (tagged and
plain) for the CPU and the TPU; `--no-hlo` (no compiled layer) and the CPU floor are shown for scale.
Needs the tpu extra (pip install 'dumpgym[tpu]').

Run: .venv/bin/python benchmarks/tpu_compile.py
"""
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from _timing import PYTHON, time_process  # noqa: E402

FLOOR = """
import dumpgym  # sets XLA_FLAGS, as the build does
from dumpgym.record.targets import quiet_libtpu
quiet_libtpu()
import jax
from dumpgym.programs import builtin_programs
from dumpgym.traced.devices import topology_devices
for p in builtin_programs():
    args = p.example_args()
    lowered = jax.jit(p.function).lower(*args)
    {compile}
"""
# The TPU floor: unsharded programs on the topology's first chip; the two shard_map programs are
# compiled on the CPU mesh they name (a TPU mesh needs the program rebuilt, as tests/test_target.py does).
TPU_COMPILE = """if p.mesh is None:
        with jax.default_device(topology_devices("v5e:2x2")[0]):
            jax.jit(p.function).lower(*args).compile().as_text()
    else:
        lowered.compile().as_text()"""

if __name__ == "__main__":
    out = os.path.join(tempfile.mkdtemp(), "corpus.json")
    commands = {
        "dumpgym corpus build (CPU + TPU layers)": [PYTHON, "-m", "dumpgym", "corpus", "build", "--out", out],
        "dumpgym corpus build --no-hlo": [PYTHON, "-m", "dumpgym", "corpus", "build", "--no-hlo", "--out", out],
        "floor: lower + compile for TPU v5e": [PYTHON, "-c", FLOOR.format(compile=TPU_COMPILE)],
        "floor: lower + compile for CPU": [PYTHON, "-c", FLOOR.format(compile="lowered.compile().as_text()")],
    }
    env = {**os.environ, "TPU_SKIP_MDS_QUERY": "1", "TPU_ACCELERATOR_TYPE": "v5litepod-4",
           "TPU_WORKER_HOSTNAMES": "localhost", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}  # what quiet_libtpu sets
    times = {name: [] for name in commands}
    for _ in range(3):
        for name, argv in commands.items():
            times[name].append(time_process(argv, env))
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    tpu_floor = medians["floor: lower + compile for TPU v5e"]
    cpu_floor = medians["floor: lower + compile for CPU"]
    for name, m in medians.items():
        print(f"{name:45s} median {m:6.2f}s  ({m / tpu_floor:4.2f}x the TPU floor, {m / cpu_floor:4.2f}x the CPU floor)")
