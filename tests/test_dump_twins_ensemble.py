"""An ensemble's train step as users write one (`jax.vmap` over four MLPs, a Python loop over their layers, SGD
with momentum mapped over the parameters' pytree), dumped compiled for a TPU v5e (libtpu, no chip) and an H100
(the CUDA plugin, no GPU), its links judged by its named-scope twin (a `jax.named_scope` per layer and per leaf:
the same compile apart from metadata). Every layer's matmul has one name stack and line; the last layer's has
one output column, and XLA turns its backward matmuls into broadcasts, multiplies and reductions (on a TPU,
fused beside the other layers' matmuls), and on a GPU transposes the first layer's result, all with the
matmuls' metadata and the shape of another layer's matmul."""
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from dump_programs import _scoped, _unscoped, dump_script
from test_dump_twins import _one_compile, _users_module, _wrong_by_twin
from dumpgym.dumps.xray import xray_module

SIZES = ((8, 16), (16, 16), (16, 1))
MEMBERS, BATCH = 4, 32


def _ensemble_step(params, mom, x, y, scope):
    def loss(p):
        h = x
        for i, (w, b) in enumerate(p):
            h = scope(f"layer{i}", lambda: jnp.tanh(h @ w + b))
        return jnp.mean((h - y) ** 2)

    def leaf(path):
        return "leaf" + "".join(f"_{getattr(k, 'idx', k)}" for k in path)

    def one(p, m):
        l, g = jax.value_and_grad(loss)(p)
        with_path = jax.tree_util.tree_map_with_path
        m = with_path(lambda k, m, g: scope(leaf(k), lambda: 0.9 * m + g), m, g)
        p = with_path(lambda k, p, m: scope(leaf(k), lambda: p - 0.05 * m), p, m)
        return p, m, l

    return jax.vmap(one)(params, mom)


def ensemble_step(params, mom, x, y):
    return _ensemble_step(params, mom, x, y, _unscoped)


def ensemble_step_twin(params, mom, x, y):
    return _ensemble_step(params, mom, x, y, _scoped)


def ensemble_args() -> tuple:
    f32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)  # noqa: E731
    params = [(f32(MEMBERS, *s), f32(MEMBERS, s[1])) for s in SIZES]
    return params, params, f32(BATCH, SIZES[0][0]), f32(BATCH, SIZES[-1][1])


_SCRIPT = r'''
import sys
sys.path.insert(0, {here!r})
import dumpgym  # quiets libtpu and starts the CUDA plugin before JAX starts
import jax
from dumpgym.record.targets import Target
from dumpgym.traced.devices import topology_devices
from test_dump_twins_ensemble import {function}, ensemble_args

with jax.default_device(topology_devices(Target({platform!r}).topology_for(1))[0]):
    jax.jit({function}).trace(*ensemble_args()).lower(lowering_platforms=({lowering!r},)).compile()
'''


@pytest.mark.parametrize("platform", [pytest.param("tpu", marks=pytest.mark.needs_tpu),
                                      pytest.param("gpu", marks=pytest.mark.needs_gpu)])
def test_an_ensembles_step_compiled_for_a_tpu_or_gpu_links_as_its_twin_says(platform, tmp_path):
    dumps = []
    for function in ("ensemble_step", "ensemble_step_twin"):
        folder = tmp_path / function
        dump_script(_SCRIPT.format(here=str(Path(__file__).parent), function=function, platform=platform,
                                   lowering={"gpu": "cuda"}.get(platform, platform)), folder, folder)
        dumps.append(_users_module(folder))
    plain, twin = dumps
    assert plain.backend == platform and _one_compile(plain, twin)
    assert "layer2" in twin.text("hlo_after") and "layer2" not in plain.text("hlo_after")
    assert _wrong_by_twin(plain, twin) == []
    exact, grouped, named = xray_module(plain).coverage("hlo_after")
    print(exact, grouped, named)
    assert exact >= 0.8 * named, (exact, grouped, named)
