"""A 12-layer GPT train step, unrolled, as users write one (about 6,700 equations): embeddings, rotary
causal attention with a normed query and key, a gated MLP with biases, cross-entropy, `jax.value_and_grad` and an Adam update. For the benchmarks of a user's
real-size model (issue "Real programs at real size"): `dumpgym add` of it, its drills, serving it."""
import jax
import jax.numpy as jnp

LAYERS, SEQ, DIM, HEADS, HIDDEN, VOCAB = 12, 64, 128, 4, 512, 512


def _layernorm(x, g):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * g


def _rope(t):
    half = t.shape[-1] // 2
    freq = 1.0 / (10000.0 ** (jnp.arange(half, dtype=jnp.float32) / half))
    angle = jnp.arange(SEQ, dtype=jnp.float32)[:, None] * freq[None, :]
    cos, sin = jnp.cos(angle)[None], jnp.sin(angle)[None]
    a, b = t[..., :half], t[..., half:]
    return jnp.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def _block(x, p):
    h = _layernorm(x, p["ln1"])
    q, k, v = jnp.split(h @ p["qkv"] + p["qkv_b"], 3, axis=-1)
    split = lambda t: t.reshape(SEQ, HEADS, DIM // HEADS).transpose(1, 0, 2)  # noqa: E731
    q, k, v = split(q), split(k), split(v)
    q, k = _rope(_layernorm(q, p["qn"])), _rope(_layernorm(k, p["kn"]))
    scores = jnp.einsum("hqd,hkd->hqk", q, k) / jnp.sqrt(DIM // HEADS).astype(x.dtype)
    scores = jnp.where(jnp.tril(jnp.ones((SEQ, SEQ), dtype=bool)), scores, -jnp.inf)
    attn = jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(scores, axis=-1), v)
    x = x + attn.transpose(1, 0, 2).reshape(SEQ, DIM) @ p["out"] + p["out_b"]
    h = _layernorm(x, p["ln2"])
    # a z-loss-like stabiliser on the residual stream, as some training code keeps
    x = x - 1e-4 * jnp.mean(x, axis=-1, keepdims=True)
    return x + (jax.nn.silu(h @ p["gate"] + p["gate_b"]) * (h @ p["up"] + p["up_b"])) @ p["down"]


def _loss(params, tokens, targets):
    x = params["embed"][tokens]
    for layer in params["layers"]:
        x = _block(x, layer)
    logits = _layernorm(x, params["lnf"]) @ params["embed"].T
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), targets[:, None], axis=-1))


def gpt_train_step(params, opt, tokens, targets):
    """One Adam step: the updated parameters and optimizer state, and the loss."""
    loss, grads = jax.value_and_grad(_loss)(params, tokens, targets)
    step = opt["step"] + 1
    m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, opt["m"], grads)
    v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, opt["v"], grads)
    fix1, fix2 = 1 - 0.9 ** step, 1 - 0.999 ** step
    params = jax.tree.map(lambda p, m, v: p - 1e-3 * (m / fix1) / (jnp.sqrt(v / fix2) + 1e-8), params, m, v)
    return params, {"step": step, "m": m, "v": v}, loss


def make():
    """The example arguments, as `dumpgym add --args-from benchmarks/gpt_train_step.py:make` takes them."""
    f32 = lambda *s: jax.ShapeDtypeStruct(s, jnp.float32)  # noqa: E731
    layer = {"ln1": f32(DIM), "qkv": f32(DIM, 3 * DIM), "qn": f32(DIM // HEADS), "kn": f32(DIM // HEADS),
             "qkv_b": f32(3 * DIM), "out": f32(DIM, DIM), "out_b": f32(DIM), "ln2": f32(DIM), "gate": f32(DIM, HIDDEN), "gate_b": f32(HIDDEN), "up": f32(DIM, HIDDEN),
             "up_b": f32(HIDDEN), "down": f32(HIDDEN, DIM)}
    params = {"embed": f32(VOCAB, DIM), "lnf": f32(DIM), "layers": [dict(layer) for _ in range(LAYERS)]}
    opt = {"step": jax.ShapeDtypeStruct((), jnp.int32), "m": params, "v": params}
    tokens = jax.ShapeDtypeStruct((SEQ,), jnp.int32)
    return params, opt, tokens, tokens
