"""`dumpgym add --hlo cpu` of the 12-layer GPT train step (whole process) against JAX alone tracing, lowering
and compiling it in one process: the issue's bar is a ratio of at most 1.5.

Run: .venv/bin/python benchmarks/gpt_add.py [--runs N]
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from _timing import PYTHON, compare  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

JAX_ONLY = f"""
import sys; sys.path.insert(0, {HERE!r})
import dumpgym, jax
from gpt_train_step import gpt_train_step, make
traced = jax.jit(gpt_train_step).trace(*make())
str(traced.jaxpr)
lowered = traced.lower()
lowered.as_text()
lowered.compile().as_text()
"""

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    folder = tempfile.mkdtemp()
    runs = iter(range(1000))
    add = lambda: [PYTHON, "-m", "dumpgym", "add", f"{HERE}/gpt_train_step.py:gpt_train_step",  # noqa: E731
                   "--args-from", f"{HERE}/gpt_train_step.py:make", "--hlo", "cpu",
                   "--corpus", os.path.join(folder, str(next(runs)))]
    compare("dumpgym add --hlo cpu (GPT train step)", add, "JAX trace + lower + compile",
            [PYTHON, "-c", JAX_ONLY], runs=parser.parse_args().runs)
