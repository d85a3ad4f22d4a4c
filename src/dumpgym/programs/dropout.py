"""Dropout on a hidden layer, drawing its mask from a typed PRNG key."""
import jax
import jax.numpy as jnp

from dumpgym.traced.program import Program, variant


def dropout_layer(x, w, key):
    h = jax.nn.relu(x @ w)
    keep = jax.random.bernoulli(key, 0.9, h.shape)
    return jnp.where(keep, h / 0.9, 0.0)


PROGRAM = Program(
    slug="dropout",
    title="dropout with a typed key",
    lesson=("The key is a typed argument, key<fry>[]. bernoulli calls uniform, whose random_bits draws u32 bits "
            "from it; shift_right_logical keeps the top 23, an or with the bits of 1.0 and bitcast_convert_type "
            "make a float in [1, 2), and sub brings it to [0, 1). In StableHLO the key is its data, "
            "tensor<2xui32>, pinned by an sdy.sharding_constraint that no equation emits (the one op line the "
            "x-ray leaves unlinked), and random_bits is a private threefry2x32 function, rolled into a while loop "
            "on CPU."),
    function=dropout_layer,
    args=("f32[8,32]", "f32[32,32]", "key<fry>[]"),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("f32[6,40]", "f32[40,24]", "key<fry>[]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 250
