"""Backpropagation through time: the gradient of a tanh RNN's loss over a lax.scan of 12 steps."""
import jax
import jax.numpy as jnp

from dumpgym.traced.program import Program, variant


def rnn_grads(w_h, w_x, b, h0, xs):
    def loss(w_h, w_x, b):
        def step(h, x):
            h = jnp.tanh(h @ w_h + x @ w_x + b)
            return h, jnp.sum(h * h)

        h, energies = jax.lax.scan(step, h0, xs)
        return jnp.sum(energies) + jnp.sum(h)

    return jax.grad(loss, argnums=(0, 1, 2))(w_h, w_x, b)


PROGRAM = Program(
    slug="rnn-bptt",
    title="backpropagation through time",
    lesson=("A recurrent cell under lax.scan, differentiated: the jaxpr holds two scans of length 12. The "
            "forward one takes the three weights as consts and the hidden state as its one carry; besides each "
            "step's energy it stacks, as extra ys, what the backward pass needs: the step's input state, its tanh "
            "and 1 - tanh. The backward scan has reverse=True and w_h as its one const; it carries the cotangent "
            "of the hidden state and the three running sums of the weight gradients, and reads five xs: the "
            "cotangent of each step's energy (ce:f32[12], all ones), the three stacked "
            "residuals and the inputs. Its dot_generals contract over the batch of 8 to grow those "
            "sums. Compiled, each scan is a while loop that runs 12 times."),
    function=rnn_grads,
    args=("f32[32,32]", "f32[16,32]", "f32[32]", "f32[8,32]", "f32[12,8,16]"),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("f32[24,24]", "f32[12,24]", "f32[24]", "f32[4,24]", "f32[5,4,12]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 270
