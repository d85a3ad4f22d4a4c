"""Gradient accumulation: an MLP's gradients summed over microbatches in a lax.scan, then one SGD step."""
import jax
import jax.numpy as jnp

from dumpgym.traced.program import Program, variant


def accumulated_sgd_step(w1, b1, w2, b2, xs, ys, lr=0.1):
    def loss(params, x, y):
        w1, b1, w2, b2 = params
        h = jax.nn.relu(x @ w1 + b1)
        return jnp.mean((h @ w2 + b2 - y) ** 2)

    params = (w1, b1, w2, b2)

    def microbatch(total, batch):
        x, y = batch
        grads = jax.grad(loss)(params, x, y)
        return jax.tree.map(jnp.add, total, grads), None

    zeros = jax.tree.map(jnp.zeros_like, params)
    total, _ = jax.lax.scan(microbatch, zeros, (xs, ys))
    return jax.tree.map(lambda p, g: p - lr * g / xs.shape[0], params, total)


PROGRAM = Program(
    slug="grad-accum",
    title="gradient accumulation over microbatches",
    lesson=("The batch arrives as 4 microbatches stacked on a leading axis; a lax.scan walks them, each step "
            "taking the gradient of one microbatch's loss and adding it to four running sums, one per parameter. "
            "In the jaxpr the scan's consts are the four parameters (the body reads them, never changes them), "
            "its carries are the four sums (each step's result feeds the next), and its xs are the stacked inputs "
            "and targets, one microbatch per step; its body holds the whole forward and backward pass of one "
            "microbatch. After the loop, one SGD step divides the sums by 4. Compiled, the scan is a while loop "
            "that runs 4 times."),
    function=accumulated_sgd_step,
    args=("f32[32,64]", "f32[64]", "f32[64,16]", "f32[16]", "f32[4,8,32]", "f32[4,8,16]"),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("f32[24,48]", "f32[48]", "f32[48,8]", "f32[8]", "f32[6,4,24]", "f32[6,4,8]")),
    variant(PROGRAM, 3, ("f32[16,32]", "f32[32]", "f32[32,12]", "f32[12]", "f32[3,16,16]", "f32[3,16,12]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 275
