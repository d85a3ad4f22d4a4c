"""Real model code added with `dumpgym add --args-from` in the tests: Flax NNX and Linen, Equinox, optax.

Each program is a function as its users write it and a `make_*` giving its example arguments.
The models are tiny (two layers, width 32) so that tracing them three ways stays quick.
"""
import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from flax import linen as nn
from flax import nnx

from dumpgym.traced.program import cpu_mesh

D, VOCAB, SEQ, BATCH = 32, 64, 8, 2


# A GPT-ish decoder in Flax NNX: embeddings, two pre-norm blocks with causal attention, a head.
class Block(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.ln1 = nnx.LayerNorm(D, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(num_heads=2, in_features=D, decode=False, rngs=rngs)
        self.ln2 = nnx.LayerNorm(D, rngs=rngs)
        self.up = nnx.Linear(D, 2 * D, rngs=rngs)
        self.down = nnx.Linear(2 * D, D, rngs=rngs)

    def __call__(self, x, mask):
        x = x + self.attn(self.ln1(x), mask=mask)
        return x + self.down(jax.nn.gelu(self.up(self.ln2(x))))


class GPT(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.embed = nnx.Embed(VOCAB, D, rngs=rngs)
        self.blocks = nnx.List([Block(rngs) for _ in range(2)])
        self.ln = nnx.LayerNorm(D, rngs=rngs)
        self.head = nnx.Linear(D, VOCAB, rngs=rngs)

    def __call__(self, tokens):
        x = self.embed(tokens)
        mask = nnx.make_causal_mask(tokens)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.ln(x))


def gpt_forward(model, tokens):
    return model(tokens)


def make_gpt():
    return GPT(nnx.Rngs(0)), jnp.zeros((BATCH, SEQ), jnp.int32)


@nnx.jit
def gpt_train_step(model, optimizer, tokens, targets):
    def loss_fn(model):
        logits = model(tokens)
        # Integer labels, as real training code has them: the loss gathers through two `_take` jits,
        # which MLIR names `_take` and `_take_1`.
        return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


def make_gpt_train():
    model = GPT(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)
    tokens = jnp.zeros((BATCH, SEQ), jnp.int32)
    return model, optimizer, tokens, tokens


# A Linen block, applied to its variable dict, and a train step with an optax optimizer.
class LinenBlock(nn.Module):
    @nn.compact
    def __call__(self, x):
        h = nn.Dense(2 * D)(nn.LayerNorm()(x))
        return x + nn.Dense(D)(nn.gelu(h))


LINEN = LinenBlock()
TX = optax.adam(1e-3)


def linen_block(variables, x):
    return LINEN.apply(variables, x)


def make_linen_block():
    x = jnp.ones((4, D))
    return LINEN.init(jax.random.key(0), x), x


def linen_train_step(params, opt_state, x, y):
    def loss_fn(p):
        return jnp.mean((LINEN.apply({"params": p}, x) - y) ** 2)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = TX.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def make_linen_train():
    x = jnp.ones((4, D))
    params = LINEN.init(jax.random.key(0), x)["params"]
    return params, TX.init(params), x, x


# An Equinox MLP through eqx.filter_jit: its activation functions are static leaves.
@eqx.filter_jit
def eqx_mlp(model, x):
    return jax.vmap(model)(x)


def make_eqx_mlp():
    return eqx.nn.MLP(16, 4, D, 2, key=jax.random.key(0)), jnp.ones((8, 16))


# A pytree MLP: a dict of weights, given as ShapeDtypeStructs (the input sharded over eight devices).
def dict_mlp(params, x):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def make_dict_mlp():
    from jax.sharding import NamedSharding, PartitionSpec

    f32 = jnp.float32
    params = {"w1": jax.ShapeDtypeStruct((16, D), f32), "b1": jax.ShapeDtypeStruct((D,), f32),
              "w2": jax.ShapeDtypeStruct((D, 4), f32), "b2": jax.ShapeDtypeStruct((4,), f32)}
    x = jax.ShapeDtypeStruct((8, 16), f32, sharding=NamedSharding(cpu_mesh(batch=8), PartitionSpec("batch")))
    return params, x


# Dropout with a typed key: Linen (the key passed in, `train` a static keyword) and NNX (the key in Rngs).
class LinenDropout(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool):
        return nn.Dropout(0.5, deterministic=not train)(nn.Dense(D)(x))


LINEN_DROPOUT = LinenDropout()


def linen_dropout(variables, x, key, train):
    return LINEN_DROPOUT.apply(variables, x, train, rngs={"dropout": key})


def make_linen_dropout():
    x = jnp.ones((4, D))
    variables = LINEN_DROPOUT.init(jax.random.key(0), x, False)
    return {"args": (variables, x, jax.random.key(1)), "kwargs": {"train": True}}


class NNXDropout(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.linear = nnx.Linear(D, D, rngs=rngs)
        self.dropout = nnx.Dropout(0.5, rngs=rngs)

    def __call__(self, x):
        return self.dropout(self.linear(x))


def nnx_dropout(model, x):
    return model(x)


def make_nnx_dropout():
    return NNXDropout(nnx.Rngs(0, dropout=jax.random.key(1))), jnp.ones((4, D))


# A static Python argument: the loop runs `k` times while tracing.
def repeat_layer(x, w, k: int):
    for _ in range(k):
        x = jnp.tanh(x @ w)
    return x


def make_repeat_layer():
    return jnp.ones((4, 8)), jnp.ones((8, 8)), 3


# For the errors: a dict where arrays are wanted, too few arguments, MAKE raising or returning a non-tuple.
def make_dict_for_repeat_layer():
    return {"x": jnp.ones((4, 8)), "w": jnp.ones((8, 8))}, jnp.ones((8, 8)), 3


def make_too_few():
    return (jnp.ones((4, 8)),)


def make_raises():
    raise RuntimeError("no weights on disk")


def make_not_a_tuple():
    return jnp.ones((4, 8))


def make_nothing():
    return None
