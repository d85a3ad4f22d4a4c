"""`dumpgym add` of the 24-layer transformer stack (whole process) against JAX's own trace + lower of it.

Run: .venv/bin/python benchmarks/add_stack.py   (target: ratio <= 1.5)
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from _timing import PYTHON, compare  # noqa: E402
from transformer_stack import ARGS  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

JAX_ONLY = f"""
import sys; sys.path.insert(0, {HERE!r})
import dumpgym, jax
from dumpgym.traced.program import parse_arg
from transformer_stack import transformer_stack, ARGS
args = [jax.ShapeDtypeStruct(a.shape, jax.numpy.dtype(a.dtype)) for a in map(parse_arg, ARGS)]
traced = jax.jit(transformer_stack).trace(*args)
str(traced.jaxpr)
traced.lower().as_text()
"""

if __name__ == "__main__":
    folder = tempfile.mkdtemp()
    add = [PYTHON, "-m", "dumpgym", "add", f"{HERE}/transformer_stack.py:transformer_stack",
           *[f"--arg={a}" for a in ARGS], "--corpus"]
    runs = iter(range(100))
    # each add goes to a fresh folder, so the slug never clashes
    fresh_add = lambda: [*add, os.path.join(folder, str(next(runs)))]  # noqa: E731
    compare("dumpgym add (24-layer stack)", fresh_add, "JAX trace + lower", [PYTHON, "-c", JAX_ONLY])
