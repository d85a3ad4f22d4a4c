"""One training step: a loss, its value and gradient, and an Adam update, with params and state donated."""
from functools import partial

import jax
import jax.numpy as jnp

from dumpgym.traced.program import Program, change, variant


@partial(jax.jit, donate_argnums=(0, 1, 2, 3, 4, 5, 6))
def train_step(w1, w2, m1, m2, v1, v2, count, x, y):
    def loss(w1, w2):
        return jnp.mean((jax.nn.gelu(x @ w1) @ w2 - y) ** 2)

    value, grads = jax.value_and_grad(loss, argnums=(0, 1))(w1, w2)
    count = count + 1
    out = []
    for w, m, v, g in zip((w1, w2), (m1, m2), (v1, v2), grads):
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        m_hat = m / (1 - 0.9 ** count)
        v_hat = v / (1 - 0.999 ** count)
        out.append((w - 1e-3 * m_hat / (jnp.sqrt(v_hat) + 1e-8), m, v))
    (w1, m1, v1), (w2, m2, v2) = out
    return w1, w2, m1, m2, v1, v2, count, value


PROGRAM = Program(
    slug="train-step",
    title="training step with Adam, donated",
    lesson=("The step comes compiled already, with donate_argnums, and is traced as it is, so the jaxpr is the "
            "step's body and donation shows only below it: StableHLO marks each of the seven donated arguments of main "
            "(both weights, their Adam moments, the step count) with tf.aliasing_output, the result that may "
            "reuse its buffer, and the compiled HLO lists the same pairs in input_output_alias. The body holds "
            "the forward, then the backward with its transposes and add_any; the Adam update written in jnp is "
            "mul and add for the moments, pow for the bias corrections, sqrt and div for the step."),
    function=train_step,
    args=("f32[32,64]", "f32[64,16]", "f32[32,64]", "f32[64,16]", "f32[32,64]", "f32[64,16]", "f32[]",
          "f32[16,32]", "f32[16,16]"),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("f32[24,48]", "f32[48,8]", "f32[24,48]", "f32[48,8]", "f32[24,48]", "f32[48,8]", "f32[]",
                         "f32[12,24]", "f32[12,8]")),
    # The same step compiled with one change, set beside this one's compile (`dumpgym diff train-step-undonated`):
    # the function under the decorator, jitted without donate_argnums (its source is the same text).
    change(PROGRAM, "undonated", "donation off", jit={},
           lesson="no argument is donated, so no result may take an argument's buffer"),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 210
