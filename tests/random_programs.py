"""Programs that draw randomness: a typed PRNG key as an argument, and raw uint32 key data wrapped inside."""
import jax
import jax.numpy as jnp


def dropout(x, key):
    keep = jax.random.bernoulli(key, 0.9, x.shape)
    return jnp.where(keep, x / 0.9, 0)


def dropout_raw(x, key_data):
    return dropout(x, jax.random.wrap_key_data(key_data))


def split_key(key):
    new, sub = jax.random.split(key)
    return new, jax.random.normal(sub, (4,))


def typed_key(impl: str = "threefry2x32"):
    """The dtype of `jax.random.key(0, impl=impl)`, from JAX itself."""
    return jax.eval_shape(lambda: jax.random.key(0, impl=impl)).dtype
