"""Every staging shown as its own, judged against JAX re-tracing the same function itself: Python scalars
traced as `jax.jit` traces them (static only where the function marks them or reads them as values), NNX
`Rngs` without an output `jax.jit` would not give, every constant owned by the equation that emitted it
(`platform_index` included), and the mesh a function states inside itself."""
import json

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import dumpgym
from dumpgym.traced.facts import build_facts

from xray_oracle import judge


def _judged(record, traced):
    """The record's texts are JAX's own for `traced` (a `jax.stages.Traced`), and every x-ray link right."""
    lowered = traced.lower()
    record = record.to_json()
    assert record["jaxpr"] == str(traced.jaxpr)
    assert record["stablehlo"] == lowered.as_text()
    assert record["args"] == [jax.core.ShapedArray(a.shape, a.dtype).str_short(short_dtypes=True)
                              for a in traced.jaxpr.in_avals]
    problems = judge(record, lowered.compiler_ir("stablehlo"), build_facts(traced.jaxpr).jax_eqns)
    # No op line attributed wrongly; one of no equation (the sharding constraint JAX puts on a typed key
    # argument) is left unattributed, and every other is mapped.
    assert [p for p in problems if not p.endswith("attributed to nothing")] == []
    stats = record["xray_stats"]
    assert stats["mapped_stablehlo_op_lines"] == stats["stablehlo_op_lines"] - len(problems)
    return record


def scaled_grad(w, x, scale):
    return jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w) ** 2) * scale)(w)


def test_a_python_float_is_traced_weak_typed_as_jax_jit_traces_it(tmp_path):
    w, x = jnp.ones((8, 8)), jnp.ones((4, 8))
    record = _judged(dumpgym.add(scaled_grad, w, x, 0.5, corpus=tmp_path), jax.jit(scaled_grad).trace(w, x, 0.5))
    assert record["args"] == ["f32[8,8]", "f32[4,8]", "f32[]"]  # the scale is an input, not a baked constant
    assert "0.5" not in record["jaxpr"]


def test_a_python_scalar_inside_a_pytree_is_traced_too(tmp_path):
    def step(params, x):
        return jnp.tanh(x @ params["w"]) * params["scale"]

    params, x = {"w": jnp.ones((8, 8)), "scale": 2.0}, jnp.ones((4, 8))
    record = _judged(dumpgym.add(step, params, x, corpus=tmp_path), jax.jit(step).trace(params, x))
    assert "f32[]" in record["args"]


def repeat(x, w, k):
    for _ in range(k):
        x = jnp.tanh(x @ w)
    return x


def test_a_scalar_read_as_a_value_is_static_as_static_argnums_makes_it(tmp_path):
    x, w = jnp.ones((4, 8)), jnp.ones((8, 8))
    with pytest.raises(jax.errors.TracerIntegerConversionError):
        jax.jit(repeat).trace(x, w, 3)  # jit cannot trace it: the function reads k as a Python int
    record = _judged(dumpgym.add(repeat, x, w, 3, corpus=tmp_path),
                     jax.jit(repeat, static_argnums=2).trace(x, w, 3))
    assert record["args"] == ["f32[4,8]", "f32[8,8]"]


def test_a_jitted_functions_static_argnums_are_its_own(tmp_path):
    jitted = jax.jit(scaled_grad, static_argnums=2)
    w, x = jnp.ones((8, 8)), jnp.ones((4, 8))
    record = _judged(dumpgym.add(jitted, w, x, 0.5, corpus=tmp_path), jitted.trace(w, x, 0.5))
    assert record["args"] == ["f32[8,8]", "f32[4,8]"]  # static, as its jit says


def test_nnx_rngs_in_a_plain_function_give_no_extra_output(tmp_path):
    nnx = pytest.importorskip("flax.nnx")

    class Noisy(nnx.Module):
        def __init__(self, rngs):
            self.linear = nnx.Linear(8, 8, rngs=rngs)
            self.dropout = nnx.Dropout(0.5, rngs=rngs)

        def __call__(self, x):
            return self.dropout(self.linear(x))

    def forward(model, x):
        return model(x)

    model, x = Noisy(nnx.Rngs(0, dropout=1)), jnp.ones((4, 8))
    reference = jax.jit(forward).trace(model, x)  # JAX's own staging of the plain function
    record = _judged(dumpgym.add(forward, model, x, corpus=tmp_path), reference)
    assert len(reference.jaxpr.out_avals) == 1  # the result only: the advanced rng count is not returned


def test_an_nnx_train_step_under_nnx_jit_is_its_own_lowering(tmp_path):
    pytest.importorskip("flax")
    import model_programs

    step, args = model_programs.gpt_train_step, model_programs.make_gpt_train()
    record = _judged(dumpgym.add(step, *args, corpus=tmp_path), step.trace(*args).traced)
    assert record["stablehlo"] == step.lower(*args).as_text()  # not one more jax.jit around it


def test_an_equinox_mlp_under_filter_jit_is_its_own_lowering(tmp_path):
    eqx = pytest.importorskip("equinox")

    @eqx.filter_jit
    def mlp(model, x, scale):
        return jax.vmap(model)(x) * scale

    model, x = eqx.nn.MLP(16, 4, 32, 2, key=jax.random.key(0)), jnp.ones((8, 16))
    record = dumpgym.add(mlp, model, x, 2.0, slug="my-mlp", corpus=tmp_path).to_json()
    own = mlp.lower(model, x, 2.0)
    assert record["stablehlo"] == own.as_text()
    assert "2.000000e+00" in record["stablehlo"]  # Equinox makes a Python float static: its convention, kept
    assert record["args"] == ["f32[32,16]", "f32[32]", "f32[32,32]", "f32[32]", "f32[4,32]", "f32[4]", "f32[8,16]"]


def kalman_step(cov, obs):
    """A Kalman-style update: a Cholesky factor's log-determinant and a solve (jnp.linalg's diagonal picks a
    per-platform branch with `platform_index`)."""
    chol = jnp.linalg.cholesky(cov)
    return jnp.sum(jnp.log(jnp.diagonal(chol))) + jnp.linalg.solve(cov, obs).sum()


def fft_spectrum(x):
    return jnp.diagonal(jnp.abs(jnp.fft.fft2(x)))


@pytest.mark.parametrize("function, args", [(kalman_step, ((8, 8), (8,))), (fft_spectrum, ((16, 16),))],
                         ids=["cholesky-solve", "fft"])
def test_a_constant_is_owned_by_the_equation_that_emitted_it_platform_index_too(function, args, tmp_path):
    dtype = jnp.complex64 if function is fft_spectrum else jnp.float32
    structs = [jax.ShapeDtypeStruct(shape, dtype) for shape in args]
    traced = jax.jit(function).trace(*structs)
    record = _judged(dumpgym.add(function, *structs, corpus=tmp_path), traced)
    # Independently: the `case` JAX lowers `platform_index`'s cond to reads a constant; that constant's line
    # is platform_index's, as the location JAX wrote for it says (the oracle's first rule checked it above).
    eqns = {e["id"]: e["primitive"] for e in record["eqns"]}
    owners = {}
    for group in record["xray"]:
        for line in group["stablehlo_lines"]:
            owners.setdefault(line, set()).add(eqns[group["eqn"]])
    lines = record["stablehlo"].splitlines()
    # Every constant has an owner, and the oracle (JAX's own locations) finds none of them wrong or unowned.
    constants = [n for n, text in enumerate(lines, 1) if "= stablehlo.constant" in text]
    assert constants and all(owners.get(n) for n in constants)
    assert judge(record, traced.lower().compiler_ir("stablehlo"), build_facts(traced.jaxpr).jax_eqns) == []
    cases = [n for n, text in enumerate(lines, 1) if '"stablehlo.case"(%c' in text]
    assert cases
    for n in cases:
        name = lines[n - 1].split('"stablehlo.case"(')[1].split(")")[0]
        defined = next(m for m in range(n - 1, 0, -1) if lines[m - 1].strip().startswith(f"{name} = stablehlo.constant"))
        assert "platform_index" in owners[defined] and "cond" not in owners[defined]
