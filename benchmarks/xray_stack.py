"""Cost of the x-ray on a 24-layer transformer stack, relative to JAX's own trace + lower (whole processes).

Run: .venv/bin/python benchmarks/xray_stack.py   (target: ratio <= 1.5)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _timing import PYTHON, compare  # noqa: E402

SETUP = """
import sys; sys.path.insert(0, {here!r})
import dumpgym, jax
from dumpgym.traced.program import parse_arg
from transformer_stack import transformer_stack, ARGS
args = [jax.ShapeDtypeStruct(a.shape, jax.numpy.dtype(a.dtype)) for a in map(parse_arg, ARGS)]
""".format(here=os.path.dirname(os.path.abspath(__file__)))

XRAY = SETUP + """
from dumpgym.traced.trace import trace
from dumpgym.traced.facts import build_facts
from dumpgym.traced.xray import build_xray
t = trace(transformer_stack, args)
f = build_facts(t)
x = build_xray(t, f)
print(len(f.eqns), x.stats)
"""

JAX_ONLY = SETUP + """
traced = jax.jit(transformer_stack).trace(*args)
str(traced.jaxpr)
traced.lower().as_text()
"""

if __name__ == "__main__":
    import subprocess

    print(subprocess.run([PYTHON, "-c", XRAY], capture_output=True, text=True, check=True).stdout.strip())
    compare("trace + facts + x-ray", [PYTHON, "-c", XRAY], "JAX trace + lower", [PYTHON, "-c", JAX_ONLY])
