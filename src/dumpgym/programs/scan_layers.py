"""A stack of transformer layers run by lax.scan over weights stacked on a leading layer axis."""
import jax
import jax.numpy as jnp

from dumpgym.traced.program import Program, variant


def scan_layers(x, w_qkv, w_out, w_up, w_down):
    mask = jnp.tril(jnp.ones((x.shape[0], x.shape[0]), dtype=bool))

    def layer(h, w):
        qkv_w, out_w, up_w, down_w = w
        q, k, v = jnp.split(rms(h) @ qkv_w, 3, axis=-1)
        scores = jnp.where(mask, q @ k.T / jnp.sqrt(q.shape[-1]).astype(q.dtype), -jnp.inf)
        h = h + jax.nn.softmax(scores) @ v @ out_w
        h = h + jax.nn.relu(rms(h) @ up_w) @ down_w
        return h, jnp.mean(h * h)

    def rms(h):
        return h * jax.lax.rsqrt(jnp.mean(h * h, axis=-1, keepdims=True) + 1e-6)

    return jax.lax.scan(layer, x, (w_qkv, w_out, w_up, w_down))


PROGRAM = Program(
    slug="scan-layers",
    title="transformer layers under lax.scan",
    lesson=("lax.scan traces the layer once: one scan equation with length=4, the stacked weights' leading axis, "
            "whose body is a single layer. Its operands come in order consts (the causal mask, built once outside "
            "the loop), then the carry (the residual stream), then the four stacked weights; each step's mean "
            "of h·h comes out stacked as f32[4]. StableHLO turns the scan into a while whose condition compares a "
            "counter with 4 and whose body cuts each layer's weights out with dynamic_slice; the compiled while "
            "on CPU records its known trip count."),
    function=scan_layers,
    args=("f32[16,32]", "f32[4,32,96]", "f32[4,32,32]", "f32[4,32,64]", "f32[4,64,32]"),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("f32[24,40]", "f32[3,40,120]", "f32[3,40,40]", "f32[3,40,80]", "f32[3,80,40]")),
    variant(PROGRAM, 3, ("f32[8,16]", "f32[6,16,48]", "f32[6,16,16]", "f32[6,16,32]", "f32[6,32,16]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 180
