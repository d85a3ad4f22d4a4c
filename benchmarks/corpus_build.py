"""Time `dumpgym corpus build` (whole process) against the JAX-only floor: import, trace and lower the same programs.

Run: .venv/bin/python benchmarks/corpus_build.py   (target: ratio <= 1.3)
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from _timing import PYTHON, compare  # noqa: E402

FLOOR = """
import dumpgym  # only sets XLA_FLAGS, as the build does
import jax
from dumpgym.programs import builtin_programs
for p in builtin_programs():
    args = p.example_args()
    str(jax.make_jaxpr(p.function)(*args))
    jax.jit(p.function).lower(*args).as_text()
"""

if __name__ == "__main__":
    out = os.path.join(tempfile.mkdtemp(), "corpus.json")
    compare(
        "dumpgym corpus build", [PYTHON, "-m", "dumpgym", "corpus", "build", "--out", out],
        "JAX-only floor", [PYTHON, "-c", FLOOR],
    )
