"""Programs unlike the corpus, added through `dumpgym add` in the tests."""
import jax
import jax.numpy as jnp
from jax import lax


def scan_rnn(x, w):
    def step(h, row):
        h = jnp.tanh(h @ w + row)
        return h, h
    return lax.scan(step, jnp.zeros(w.shape[1], x.dtype), x)


def while_halving(x):
    return lax.while_loop(lambda v: jnp.max(v) > 1.0, lambda v: v / 2, x)


def cond_branch(p, x):
    return lax.cond(p > 0, lambda v: jnp.sin(v), lambda v: jnp.cos(v) * 2, x)


@jax.custom_vjp
def clipped(x):
    return jnp.clip(x, -1, 1)


clipped.defvjp(lambda x: (clipped(x), x), lambda x, g: (jnp.where(jnp.abs(x) < 1, g, 0.0),))


def custom_vjp_grad(x):
    return jax.grad(lambda v: jnp.sum(clipped(v) ** 2))(x)


def vmapped_dot(a, b):
    return jax.vmap(jnp.dot)(a, b)


def conv2d(img, kernel):
    return lax.conv_general_dilated(img, kernel, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def gather_rows(table, idx):
    return table[idx] + table[idx[::-1], 1:2]


def sort_and_topk(x):
    values, indices = lax.top_k(x, 3)
    return jnp.sort(x, axis=-1), values, indices


def raises_while_tracing(x):
    return x @ x  # a rank-1 matmul with a mismatched spec raises in JAX


def stack_of_identical_layers(x, w):
    for _ in range(6):
        x = jax.nn.relu(x @ w)
    return x


def documented_scale(x):
    """Scale each row by its own maximum,
    so that every row peaks at one.

    The rest of this docstring is not the card's: only its first paragraph is.
    """
    return x / jnp.max(x, axis=-1, keepdims=True)
