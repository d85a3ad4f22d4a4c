"""A 24-layer unrolled transformer block stack (about 1,930 equations), for benchmarks and large-program tests."""
import jax
import jax.numpy as jnp

LAYERS, SEQ, DIM, HEADS, HIDDEN = 24, 32, 64, 4, 128


def _layernorm(x, g):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * g


def _block(x, p):
    h = _layernorm(x, p["ln1"])
    q, k, v = jnp.split(h @ p["qkv"], 3, axis=-1)
    split = lambda t: t.reshape(SEQ, HEADS, DIM // HEADS).transpose(1, 0, 2)
    q, k, v = split(q), split(k), split(v)
    scores = jnp.einsum("hqd,hkd->hqk", q, k) / jnp.sqrt(DIM // HEADS).astype(x.dtype)
    mask = jnp.tril(jnp.ones((SEQ, SEQ), dtype=bool))
    scores = jnp.where(mask, scores, -jnp.inf)
    attn = jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(scores, axis=-1), v)
    x = x + attn.transpose(1, 0, 2).reshape(SEQ, DIM) @ p["out"]
    h = _layernorm(x, p["ln2"])
    return x + jax.nn.gelu(h @ p["up"]) @ p["down"]


def transformer_stack(x, ln1, qkv, out, ln2, up, down):
    for i in range(LAYERS):
        x = _block(x, {"ln1": ln1[i], "qkv": qkv[i], "out": out[i], "ln2": ln2[i], "up": up[i], "down": down[i]})
    return x


ARGS = (
    f"f32[{SEQ},{DIM}]", f"f32[{LAYERS},{DIM}]", f"f32[{LAYERS},{DIM},{3 * DIM}]", f"f32[{LAYERS},{DIM},{DIM}]",
    f"f32[{LAYERS},{DIM}]", f"f32[{LAYERS},{DIM},{HIDDEN}]", f"f32[{LAYERS},{HIDDEN},{DIM}]",
)


def deep_stack(x, ln1, qkv, out, ln2, up, down):
    """The same blocks, as many as the parameters' leading axis holds: one function for stacks of any depth."""
    for i in range(ln1.shape[0]):
        x = _block(x, {"ln1": ln1[i], "qkv": qkv[i], "out": out[i], "ln2": ln2[i], "up": up[i], "down": down[i]})
    return x


def args_for(layers: int) -> tuple[str, ...]:
    """The argument specs of a stack of `layers` blocks."""
    return tuple(a.replace(f"[{LAYERS},", f"[{layers},") for a in ARGS)
