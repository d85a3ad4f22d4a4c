"""A mixture-of-experts train step as users write one (two layers of top-2 routing, the chosen experts' weights
gathered per token, their outputs summed back with `segment_sum`, SGD mapped over the parameters' pytree), dumped
compiled for a TPU v5e (libtpu, no chip), its links judged by its named-scope twin (a `jax.named_scope` per
layer and per leaf: the same compile apart from metadata). Each layer's two backward matmuls of one einsum share
a name stack and line; XLA rewrites both into broadcasts, multiplies and reductions and keeps one broadcast of
the cotangent for the two: that broadcast flows into both matmuls' results, which no one op reaches, while the
next layer's matmul, upstream of both, reaches more."""
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from dump_programs import _scoped, _unscoped, dump_script
from dumpgym.dumps.xray import xray_module
from test_dump_twins import _one_compile, _users_module, _wrong_by_twin

EXPERTS, TOP, DIM, TOKENS, HIDDEN, LAYERS = 4, 2, 16, 12, 32, 2


def _moe_step(params, x, scope):
    def loss(params):
        h = x
        for i, p in enumerate(params):
            def layer(h=h, p=p):
                gates, experts = jax.lax.top_k(jax.nn.softmax(h @ p["router"]), TOP)
                token, chosen = jnp.repeat(jnp.arange(TOKENS), TOP), experts.reshape(-1)
                a = jax.nn.gelu(jnp.einsum("td,tdh->th", h[token], p["w1"][chosen]))
                out = jnp.einsum("th,thd->td", a, p["w2"][chosen]) * gates.reshape(-1, 1)
                return h + jax.ops.segment_sum(out, token, num_segments=TOKENS)
            h = scope(f"layer{i}", layer)
        return (h ** 2).mean()

    def leaf(path):
        return "leaf" + "".join(f"_{getattr(k, 'key', getattr(k, 'idx', k))}" for k in path)

    value, grads = jax.value_and_grad(loss)(params)
    with_path = jax.tree_util.tree_map_with_path
    return with_path(lambda k, p, g: scope(leaf(k), lambda: p - 0.01 * g), params, grads), value


def moe_step(params, x):
    return _moe_step(params, x, _unscoped)


def moe_step_twin(params, x):
    return _moe_step(params, x, _scoped)


def moe_args() -> tuple:
    f32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)  # noqa: E731
    layer = {"router": f32(DIM, EXPERTS), "w1": f32(EXPERTS, DIM, HIDDEN), "w2": f32(EXPERTS, HIDDEN, DIM)}
    return [dict(layer) for _ in range(LAYERS)], f32(TOKENS, DIM)


_SCRIPT = r'''
import sys
sys.path.insert(0, {here!r})
import dumpgym  # quiets libtpu before JAX starts
import jax
from dump_programs import compile_for
from test_dump_twins_moe import {function}, moe_args

compile_for("tpu", jax.jit({function}), moe_args())
'''


@pytest.mark.needs_tpu
def test_a_moe_steps_broadcast_xla_kept_for_two_matmuls_links_as_its_twin_says(tmp_path):
    dumps = []
    for function in ("moe_step", "moe_step_twin"):
        folder = tmp_path / function
        dump_script(_SCRIPT.format(here=str(Path(__file__).parent), function=function), folder, folder)
        dumps.append(_users_module(folder))
    plain, twin = dumps
    assert plain.backend == "tpu" and _one_compile(plain, twin)
    assert "layer1" in twin.text("hlo_after") and "layer1" not in plain.text("hlo_after")
    assert _wrong_by_twin(plain, twin) == []
    print(*xray_module(plain).coverage("hlo_after"))
