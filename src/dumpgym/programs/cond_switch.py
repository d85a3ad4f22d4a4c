"""Branches chosen at run time: gradient clipping by lax.cond and an activation by lax.switch."""
import jax
import jax.numpy as jnp

from dumpgym.traced.program import Program, variant


def clip_and_activate(g, x, which):
    norm = jnp.sqrt(jnp.sum(g * g))
    g = jax.lax.cond(norm > 1.0, lambda g: g / norm, lambda g: g, g)
    y = jax.lax.switch(which, [jax.nn.relu, jnp.tanh, jax.nn.sigmoid], x @ g)
    return g, y


PROGRAM = Program(
    slug="cond-switch",
    title="lax.cond and lax.switch",
    lesson=("Both branch calls print as cond: lax.cond's boolean predicate is first made an int32 index by "
            "convert_element_type, and its branches print false first; lax.switch clamps its index into range "
            "before picking one of its three branches. StableHLO writes each as a case with one region per "
            "branch, so only the chosen branch runs."),
    function=clip_and_activate,
    args=("f32[32,32]", "f32[8,32]", "i32[]"),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("f32[24,24]", "f32[5,24]", "i32[]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 200
