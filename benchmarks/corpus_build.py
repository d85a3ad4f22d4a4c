"""Time `dumpgym corpus build` (whole process) against JAX-only floors over the same built-in programs.

Floor A imports JAX, traces and lowers each program (the work behind the jaxpr and StableHLO
layers). Floor B also compiles each lowering once with XLA (the work behind the compiled layer).
The build compiles each program once per target (the tags ride in its ops' locations), so floor B
is its nearest;
`--no-hlo` (everything but the compiled layer) is compared with floor A, and the build on one
process (`--jobs 1`) with the default, one worker process per core.

Run: .venv/bin/python benchmarks/corpus_build.py [--runs 5]
"""
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from _timing import PYTHON, time_process  # noqa: E402

FLOOR = """
import dumpgym  # only sets XLA_FLAGS, as the build does
import jax
from dumpgym.programs import builtin_programs
for p in builtin_programs():
    args = p.example_args()
    str(jax.make_jaxpr(p.function)(*args))
    lowered = jax.jit(p.function).lower(*args)
    lowered.as_text()
    {compile}
"""

if __name__ == "__main__":
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 5
    out = os.path.join(tempfile.mkdtemp(), "corpus.json")
    commands = {
        "dumpgym corpus build": [PYTHON, "-m", "dumpgym", "corpus", "build", "--out", out],
        "dumpgym corpus build --jobs 1": [PYTHON, "-m", "dumpgym", "corpus", "build", "--jobs", "1", "--out", out],
        "dumpgym corpus build --no-hlo": [PYTHON, "-m", "dumpgym", "corpus", "build", "--no-hlo", "--out", out],
        "floor A: trace + lower": [PYTHON, "-c", FLOOR.format(compile="")],
        "floor B: trace + lower + compile": [PYTHON, "-c", FLOOR.format(compile="lowered.compile().as_text()")],
    }
    times = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            times[name].append(time_process(argv))
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name, t in times.items():
        print(f"{name}: median {medians[name]:.3f}s ({', '.join(f'{x:.3f}' for x in t)})")
    build = medians["dumpgym corpus build"]
    no_hlo = medians["dumpgym corpus build --no-hlo"]
    print(f"ratio build / build --jobs 1: {build / medians['dumpgym corpus build --jobs 1']:.2f}")
    print(f"ratio build --no-hlo / floor A (trace + lower): {no_hlo / medians['floor A: trace + lower']:.2f}")
    print(f"ratio build / floor A (trace + lower): {build / medians['floor A: trace + lower']:.2f}")
    print(f"ratio build / floor B (trace + lower + compile): {build / medians['floor B: trace + lower + compile']:.2f}")
