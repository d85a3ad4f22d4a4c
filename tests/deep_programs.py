"""Deep programs as users write them, many layers of one width: each step of a drill asks them dozens of
questions of a few kinds, so a habit of the item builders (an answer's place, one answer's share) shows."""
import jax
import jax.numpy as jnp


def _norm(x):
    m = x.mean(-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5)


def deep_norm_mlp(x, *ws):
    """The gradient of a stack of normalised residual layers."""
    def loss(ws):
        h = x
        for w in ws:
            h = h + jnp.tanh(_norm(h) @ w)
        return jnp.sum(h * h)
    return jax.grad(loss)(ws)


def deep_attention(x, *ws):
    """The gradient of a stack of two-head self-attention layers on x[2,8,32], one [32,32] weight each, its
    output projection the weight's `.T`."""
    def loss(ws):
        h = x
        for w in ws:
            q = (h @ w).reshape(2, 8, 2, 16).transpose(0, 2, 1, 3)
            s = jax.nn.softmax(q @ q.transpose(0, 1, 3, 2), axis=-1)
            h = h + (s @ q).transpose(0, 2, 1, 3).reshape(2, 8, 32) @ w.T
        return jnp.sum(h)
    return jax.grad(loss)(ws)


def deep_batched_attention(x, *ws):
    """The gradient of a stack of one-head attention layers on x[4,16,32] whose scores and mix are einsums:
    batched dots `btd,bsd->bts` and `bts,bsd->btd`, the batch axis first and most free axes at their own
    number in the output."""
    def loss(ws):
        h = x
        for w in ws:
            q = h @ w
            s = jax.nn.softmax(jnp.einsum("btd,bsd->bts", q, h), axis=-1)
            h = h + jnp.einsum("bts,bsd->btd", s, q)
        return jnp.sum(h)
    return jax.grad(loss)(ws)


def deep_mlp_step(ws, x, y):
    """One SGD step of an MLP of many layers, as a user writes it: every transpose its gradient makes is a
    matmul's, so drilled alone its transposes have one answer."""
    def loss(ws):
        h = x
        for w in ws[:-1]:
            h = jax.nn.relu(h @ w)
        return jnp.mean((h @ ws[-1] - y) ** 2)
    grads = jax.grad(loss)(ws)
    return [w - 0.01 * g for w, g in zip(ws, grads)]


def add_deep_mlp_step(folder, layers: int = 6, slug: str = "deep-mlp"):
    """Add `deep_mlp_step` of `layers` [64,64] weights on a [32,64] batch to the corpus folder, as
    `dumpgym.add` adds it; returns its record."""
    import dumpgym

    ws = [jax.ShapeDtypeStruct((64, 64), jnp.float32) for _ in range(layers)]
    batch = jax.ShapeDtypeStruct((32, 64), jnp.float32)
    return dumpgym.add(deep_mlp_step, ws, batch, batch, slug=slug, corpus=folder)
