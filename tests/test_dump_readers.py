"""Every reader of a dump's text reads it in time linear in its size: adversarial texts of growing size
(the shapes that sent the old patterns into exponential or polynomial backtracking: `a:b:c:d` words, runs of
`{ lambda ; a:f32[1]` lines, blank runs, lines of braces) are read 1x and 8x in one run, and the larger must
cost about eight times the smaller (a generous ratio: quadratic work is 64 times, exponential never ends).
What the readers find is checked against what JAX prints and says."""
import time

import jax
import jax.numpy as jnp
import pytest

from dumpgym.ir.memory import _peak
from dumpgym.ir.passes import hlo_text_parts, pass_dump
from dumpgym.ir.parse import function_names, jaxpr_equations, source_tables
from dumpgym.ir.jaxpr_text import jaxpr_eqn_facts
from dumpgym.ir.hlo_graph import definition_lines, reducer_regions as _reducer_regions
from dumpgym.ir.parse import JAXPR_AVAL as _JAXPR_AVAL, jaxpr_inputs as _jaxpr_inputs, jaxpr_results as _jaxpr_results


def _definition_lines(text: str) -> dict[str, int]:
    return definition_lines(text)[0]


def _cost(work, text, runs: int = 5) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.thread_time()
        work(text)
        best = min(best, time.thread_time() - start)
    return best


def _grows_linearly(work, make, n: int) -> None:
    """8x the input costs far less than the 64x a quadratic reader pays (an exponential one never ends). The
    smaller input is grown until it takes 20 ms or more; each size is timed by the best of five, alternating.
    The work is counted in this thread's CPU time, not the wall clock: on a shared, loaded machine the wall
    clock counts the other processes too (it failed here 4 times in 21 at a load of 15)."""
    while _cost(work, make(n), runs=1) < 0.02 and n < 2_000_000:
        n *= 2
    small, large = make(n), make(8 * n)
    assert len(large) >= 7 * len(small)
    small_cost = large_cost = float("inf")
    for _ in range(5):
        small_cost = min(small_cost, _cost(work, small, runs=1))
        large_cost = min(large_cost, _cost(work, large, runs=1))
    ratio = large_cost / max(small_cost, 1e-6)
    assert ratio < 32, f"8x the input cost {ratio:.0f}x the work"


ADVERSARIAL = {
    # Repeated binders before a missing `=`: the old equation pattern tried every split of each word.
    "jaxpr_equations: a:b:c:d words": (jaxpr_equations, lambda n: " ".join(["a:b:c:d"] * n) + "\n", 4000),
    "jaxpr_equations: let runs": (jaxpr_equations, lambda n: "let a:b " * n + "\n", 4000),
    # A jaxpr printed on one line separates its equations by `; `: each is a start, read only to the next.
    "jaxpr_equations: one-line runs": (jaxpr_equations, lambda n: "; a:b" * n + " \n", 4000),
    "jaxpr equations read whole: a:b:c:d words": (jaxpr_eqn_facts, lambda n: "{ lambda ; " + " ".join(["a:b:c:d"] * n), 4000),
    "jaxpr equations read whole: lambda lines": (jaxpr_eqn_facts, lambda n: "{ lambda ; a:f32[1]\n" * n, 4000),
    "jaxpr equations read whole: many equations": (jaxpr_eqn_facts, lambda n: "{ lambda ; a:f32[2]. let\n" + "".join(
        f"  v{i}:f32[2] = dot_general[dimension_numbers=(([0], [0]), ([], []))] a a\n" for i in range(n)) + "  in (a,) }", 1000),
    "jaxpr equations read whole: nested params": (jaxpr_eqn_facts, lambda n: "{ lambda ; a:f32[1]. let b:f32[1] = x[k="
                                                  + "((" * 20 + "1, " * (10 * n) + "))" * 20 + "] a in (b,) }", 2000),
    "jaxpr head: lambda lines": (_jaxpr_inputs, lambda n: "{ lambda ; a:f32[1]\n" * n, 4000),
    "jaxpr avals: one long word": (lambda t: _JAXPR_AVAL.findall(t), lambda n: "a" * (40 * n), 2000),
    "jaxpr results: binder per name": (_jaxpr_results,
                                       lambda n: "".join(f"  v{i}:f32[2] = sin a\n" for i in range(n))
                                       + "  in (" + ", ".join(f"v{i}" for i in range(n)) + ") }", 2000),
    "reducer regions: blank runs": (_reducer_regions, lambda n: "%r = f32[] " + "\n" * (40 * n), 2000),
    "reducer regions: one long line": (_reducer_regions, lambda n: "%r = f32[] " + "reduce(" * (10 * n), 2000),
    "live ranges: a line of braces": (_peak, lambda n: "  Live ranges at 0 (peak):\n    x\n    " + "{" * (40 * n)
                                      + ": 1 bytes (cumulative: 1 bytes)\n", 2000),
    "source tables: long words": (source_tables, lambda n: "StackFrames\n1 " + "a" * (40 * n) + "\n", 2000),
    "function names: long table": (function_names, lambda n: "FunctionNames\n" + "".join(
        f'{i} "f{i}"\n' for i in range(n)), 4000),
    "definition lines": (_definition_lines, lambda n: "  %a = f32[] add(%b, %c)\n" * n, 4000),
    # A per-pass dump's text (`ir/passes.py`): an unclosed tuple shape, an operand list that never closes, `%`s.
    "pass dump: one unclosed line": (hlo_text_parts, lambda n: "%c (p: f32[]) -> f32[] {\n  %a = (" + "(f32[], " * (10 * n)
                                     + "\n}\n", 2000),
    "pass dump: open operands": (hlo_text_parts, lambda n: "%c () -> f32[] {\n  %a = f32[] add(" + "%b, %" * (10 * n)
                                 + "\n}\n", 2000),
    "pass dump: many calls=": (hlo_text_parts, lambda n: "%c () -> f32[] {\n  %a = f32[] fusion(), " + "calls=%" * (10 * n)
                               + "\n}\n", 2000),
    "pass dump: many instructions": (hlo_text_parts, lambda n: "%c () -> f32[] {\n" + "".join(
        f"  %a{i} = f32[] add(%a{i - 1}, %b), metadata={{op_name=\"x\"}}\n" for i in range(n)) + "}\n", 2000),
    "pass file names": (lambda t: [pass_dump(w) for w in t.split()],
                        lambda n: " ".join(["0001." + "x.after_" * 20 + "y.before_z.txt"] * n), 2000),
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_a_dump_text_reader_is_linear_in_its_input(name):
    work, make, n = ADVERSARIAL[name]
    _grows_linearly(work, make, n)


def test_the_equations_read_are_the_ones_jax_printed():
    def f(x, w):
        y = jnp.tanh(x @ w)
        z = jax.lax.cond(y.sum() > 0, jnp.sin, jnp.cos, y)
        return jax.lax.scan(lambda c, v: (c + v, c * v), z[0], z)[1].sum()

    closed = jax.make_jaxpr(f)(jnp.ones((4, 3)), jnp.ones((3, 3)))
    text = str(closed)

    def every(jaxpr):
        for eqn in jaxpr.eqns:
            yield eqn.primitive.name
            for value in eqn.params.values():
                for sub in value if isinstance(value, (tuple, list)) else (value,):
                    if hasattr(sub, "eqns") or hasattr(sub, "consts"):  # a Jaxpr, or a ClosedJaxpr
                        yield from every(getattr(sub, "jaxpr", sub))

    found = [p for _line, p in jaxpr_equations(text)]
    assert sorted(found) == sorted(every(closed.jaxpr))
    # The outermost jaxpr's inputs, as JAX lists them.
    assert [a for _n, *a in _JAXPR_AVAL.findall(_jaxpr_inputs(text))] == \
        [[v.aval.dtype.name.replace("float", "f"), ",".join(map(str, v.aval.shape))] for v in closed.jaxpr.invars]


def test_the_gpu_a_target_config_names_is_read_whole_or_not_at_all():
    from dumpgym.ir.parse import gpu_device_name
    from dumpgym.record.targets import GPU_SPECS

    for spec in GPU_SPECS.glob("*.txtpb"):  # the GPU descriptions XLA is given, which it writes back beside a dump
        text = spec.read_text()
        named = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("device_description_str:")]
        assert len(named) == 1 and gpu_device_name(text) == named[0].strip('"')
    assert gpu_device_name('gpu_device_info {\n  core_count: 132\n}\n') == ""
    assert gpu_device_name('device_description_str: "NVIDIA H100') == ""  # a truncated file names nothing
