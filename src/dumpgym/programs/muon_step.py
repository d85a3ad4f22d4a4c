"""A Muon optimiser step: each stacked weight's momentum orthogonalised by five Newton-Schulz iterations."""
import jax
import jax.numpy as jnp

from dumpgym.traced.program import Program, variant


def muon_step(weights, grads, momentum, lr=0.02, beta=0.95):
    def orthogonalise(g):
        a, b, c = 3.4445, -4.7750, 2.0315
        x = g / (jnp.linalg.norm(g) + 1e-7)

        def newton_schulz(_, x):
            s = x @ x.T
            return a * x + (b * s + c * s @ s) @ x

        return jax.lax.fori_loop(0, 5, newton_schulz, x)

    momentum = beta * momentum + grads
    updates = jax.lax.map(orthogonalise, momentum)
    return weights - lr * updates, momentum


PROGRAM = Program(
    slug="muon-step",
    title="Muon optimiser step over stacked weights",
    lesson=("Six weight matrices arrive stacked on a leading axis. lax.map walks the stack (a scan of length 6 "
            "with no carry), and for each matrix a fori_loop with static bounds 0 and 5 runs five Newton-Schulz "
            "iterations: with a trip count known when tracing, fori_loop is traced as a scan of length 5 inside "
            "the map's. StableHLO and the compiled HLO turn both into while loops, one inside the other's body; "
            "the CPU and GPU compiles record their known trip counts, 6 and 5 (the TPU compile does not)."),
    function=muon_step,
    args=("f32[6,32,64]", "f32[6,32,64]", "f32[6,32,64]"),
)


# The same code at other stack depths and matrix shapes, so that trip counts and sizes are read, not remembered.
VARIANTS = (
    variant(PROGRAM, 2, ("f32[8,16,32]", "f32[8,16,32]", "f32[8,16,32]")),
    variant(PROGRAM, 3, ("f32[10,24,40]", "f32[10,24,40]", "f32[10,24,40]")),
    variant(PROGRAM, 4, ("f32[9,32,32]", "f32[9,32,32]", "f32[9,32,32]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 300
