"""A mixture-of-experts train step as users write one (two layers of top-2 routing, the chosen experts' weights
gathered per token, their outputs summed back with `segment_sum`, SGD mapped over the parameters' pytree), dumped
compiled for a TPU v5e (libtpu, no chip), its links judged by its named-scope twin (a `jax.named_scope` per
layer and per leaf: the same compile apart from metadata). Each layer's two backward matmuls of one einsum share
a name stack and line; XLA rewrites both into broadcasts, multiplies and reductions and keeps one broadcast of
the cotangent for the two: that broadcast flows into both matmuls' results, which no one op reaches, while the
next layer's matmul, upstream of both, reaches more."""
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from dump_programs import _scoped, _unscoped, dump_script
from dumpgym.dumps.xray import xray_module
from test_dump_twins import _one_compile, _users_module, _wrong_by_twin

EXPERTS, TOP, DIM, TOKENS, HIDDEN, LAYERS = 4, 2, 16, 12, 32, 2


def _gathered(h, p):
    """A layer that gathers the chosen experts' weights per token and sums their outputs back."""
    gates, experts = jax.lax.top_k(jax.nn.softmax(h @ p["router"]), TOP)
    token, chosen = jnp.repeat(jnp.arange(TOKENS), TOP), experts.reshape(-1)
    a = jax.nn.gelu(jnp.einsum("td,tdh->th", h[token], p["w1"][chosen]))
    out = jnp.einsum("th,thd->td", a, p["w2"][chosen]) * gates.reshape(-1, 1)
    return h + jax.ops.segment_sum(out, token, num_segments=TOKENS)


def _vmapped(h, p):
    """A layer that runs every expert on every token (`jax.vmap` over their weights) and picks the chosen ones."""
    def expert(w, h):
        return jax.nn.gelu(h @ w["w1"]) @ w["w2"]

    gates, chosen = jax.lax.top_k(jax.nn.softmax(h @ p["router"]), TOP)
    outs = jax.vmap(expert, in_axes=(0, None))(p["experts"], h)
    picked = jnp.take_along_axis(outs.transpose(1, 0, 2), chosen[..., None], axis=1)
    return h + (picked * (gates / gates.sum(-1, keepdims=True))[..., None]).sum(1)


def _moe_loss(params, x, scope, routed):
    h = x
    for i, p in enumerate(params):
        h = scope(f"layer{i}", lambda h=h, p=p: routed(h, p))
    return (h ** 2).mean()


def _leaf(path):
    return "leaf" + "".join(f"_{getattr(k, 'key', getattr(k, 'idx', k))}" for k in path)


def _moe_step(params, x, scope, routed=_gathered):
    value, grads = jax.value_and_grad(lambda params: _moe_loss(params, x, scope, routed))(params)
    with_path = jax.tree_util.tree_map_with_path
    return with_path(lambda k, p, g: scope(_leaf(k), lambda: p - 0.01 * g), params, grads), value


def _momentum_moe_step(params, moments, x, scope):
    """The vmapped step with SGD's momentum: each leaf's update reads its moment too."""
    value, grads = jax.value_and_grad(lambda params: _moe_loss(params, x, scope, _vmapped))(params)
    with_path = jax.tree_util.tree_map_with_path
    moments = with_path(lambda k, m, g: scope(_leaf(k), lambda: 0.9 * m + g), moments, grads)
    return with_path(lambda k, p, m: scope(_leaf(k), lambda: p - 0.01 * m), params, moments), moments, value


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


# The same routing written with every expert run on every token (`jax.vmap` over the experts' weights) and the
# chosen ones picked with `take_along_axis`, three layers, compiled for an H100 (the CUDA plugin, no GPU). Its
# GPU compile merges each layer's two matmuls of one input (`h @ router`, `h @ w1` of every expert) into one and
# slices it: the slice of the experts' part is computed from the router's weights too, which its op is not, so
# no op is computed from the same parameters; the next layer's matmul, computed from more, was taken for it
# (30 links its twin contradicted).
def vmapped_moe_step(params, x):
    return _moe_step(params, x, _unscoped, _vmapped)


def vmapped_moe_step_twin(params, x):
    return _moe_step(params, x, _scoped, _vmapped)


def vmapped_moe_args() -> tuple:
    params, x = moe_args()
    return [{"router": p["router"], "experts": {"w1": p["w1"], "w2": p["w2"]}} for p in params + params[:1]], x


def momentum_moe_step(params, moments, x):
    return _momentum_moe_step(params, moments, x, _unscoped)


def momentum_moe_step_twin(params, moments, x):
    return _momentum_moe_step(params, moments, x, _scoped)


def momentum_moe_args() -> tuple:
    params, x = vmapped_moe_args()
    return params, params, x


_GPU_SCRIPT = r'''
import sys
sys.path.insert(0, {here!r})
import dumpgym  # starts JAX's CUDA plugin without a GPU
import jax
from dumpgym.record.targets import GPU
from dumpgym.traced.devices import topology_devices
from test_dump_twins_moe import {function}, {args}

with jax.default_device(topology_devices(GPU.topology_for(1))[0]):
    jax.jit({function}).trace(*{args}()).lower(lowering_platforms=("cuda",)).compile()
'''


def _gpu_twins(tmp_path, function: str, args: str):
    """The user's module of `function` and of its twin, each dumped compiled for an H100 at `args()`."""
    dumps = []
    for name in (function, function + "_twin"):
        folder = tmp_path / name
        dump_script(_GPU_SCRIPT.format(here=str(Path(__file__).parent), function=name, args=args), folder, folder)
        dumps.append(_users_module(folder))
    plain, twin = dumps
    assert plain.backend == "gpu" and _one_compile(plain, twin)
    return plain, twin


@pytest.mark.needs_gpu
def test_a_gpus_merged_matmuls_of_one_input_link_to_their_own_layer_as_the_twin_says(tmp_path):
    plain, twin = _gpu_twins(tmp_path, "vmapped_moe_step", "vmapped_moe_args")
    assert "layer2" in twin.text("hlo_after") and "layer2" not in plain.text("hlo_after")
    # XLA merged the matmuls: a slice of one matmul's result carries an expert matmul's name stack.
    assert any(" slice(" in line and "/vmap()/dot_general" in line for line in twin.text("hlo_after").splitlines())
    assert _wrong_by_twin(plain, twin) == []
    print(*xray_module(plain).coverage("hlo_after"))


@pytest.mark.needs_gpu
def test_a_transpose_xla_fused_into_another_leafs_update_is_not_linked_by_its_shape(tmp_path):
    """XLA fuses a leaf's update with a transpose of its old weight (for the backward pass) into one multi-output
    fusion: the get-tuple-element of the transpose carries the update's metadata and the transpose's shape, which
    is another leaf's, and was linked by that shape to the other leaves' updates (two links its twin
    contradicted)."""
    plain, twin = _gpu_twins(tmp_path, "momentum_moe_step", "momentum_moe_args")
    assert any(re.search(r"get-tuple-element\(%\S+\), index=1, metadata=\{op_name=\"\S+/leaf_\d_experts_w1/sub\"", line)
               for line in twin.text("hlo_after").splitlines())
    assert _wrong_by_twin(plain, twin) == []
