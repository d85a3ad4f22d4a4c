"""When tracing fails, the error says whose fault it is: JAX alone is asked again. A program JAX refuses gets
JAX's message with its advice and the shardings it was given; one JAX takes is dumpgym's limitation, said so.
`dumpgym.xray` and `dumpgym.add` raise the same one-line ProgramError."""
import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import dumpgym
from dumpgym.traced import trace as trace_module
from dumpgym.traced.program import ProgramError


def _mesh():
    return jax.make_mesh((8,), ("x",), devices=jax.devices()[:8])


def _varying_carry(x):
    """A scan in a shard_map body whose carry starts unvarying and comes back varying over `x`."""
    def body(block):
        total, _ = jax.lax.scan(lambda c, xi: (c + xi, None), jnp.zeros(()), block)
        return total

    return jax.shard_map(body, mesh=_mesh(), in_specs=P("x"), out_specs=P())(x)


def _sharded(shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(_mesh(), P("x")))


def _refused_by_jax(function, *args) -> str:
    with pytest.raises(Exception) as caught:
        jax.jit(function).trace(*args).lower()
    return str(caught.value)


def test_a_program_jax_refuses_keeps_jaxs_advice_and_the_shardings_given(tmp_path):
    jax_says = _refused_by_jax(_varying_carry, _sharded((64,)))
    advice = next(line.strip() for line in jax_says.splitlines() if "pcast" in line)
    for call in (lambda: dumpgym.xray(_varying_carry, _sharded((64,))),
                 lambda: dumpgym.add(_varying_carry, _sharded((64,)), slug="carry", corpus=tmp_path / "c")):
        with pytest.raises(ProgramError) as caught:
            call()
        message = str(caught.value)
        assert "\n" not in message
        assert message.startswith("_varying_carry raised TypeError while tracing: scan body function carry")
        assert advice.split(" See ")[0] in message  # "This might be fixed by applying `jax.lax.pcast(...`"
        assert "given (f32[64] sharded P('x',))" in message
        assert "For simplicity, JAX has removed" not in message
    assert not (tmp_path / "c").exists()  # nothing written


def test_a_failure_of_dumpgyms_own_is_said_to_be_dumpgyms(monkeypatch, tmp_path):
    """JAX traces and lowers the program; dumpgym's tagged lowering fails (made to, here): the line says
    it is dumpgym's limitation and names what to report, not the user's code."""
    def broken(traced):
        raise AttributeError("'tuple' object has no attribute 'solve'")

    monkeypatch.setattr(trace_module, "_lower_tagged", broken)
    solve = lambda a, b: jnp.linalg.solve(a, b)  # noqa: E731
    args = (jax.ShapeDtypeStruct((4, 4), jnp.float32), jax.ShapeDtypeStruct((4,), jnp.float32))
    jax.jit(solve).trace(*args).lower()  # JAX takes it
    for call in (lambda: dumpgym.xray(solve, *args),
                 lambda: dumpgym.add(solve, *args, slug="solve", corpus=tmp_path / "c")):
        with pytest.raises(ProgramError) as caught:
            call()
        message = str(caught.value)
        assert message.startswith("dumpgym could not trace <lambda>, which JAX traces and lowers: AttributeError: "
                                  "'tuple' object has no attribute 'solve'")
        assert "limitation of dumpgym, not of your program" in message
        assert f"JAX {jax.__version__}" in message and "custom_linear_solve" in message
    assert not (tmp_path / "c").exists()
