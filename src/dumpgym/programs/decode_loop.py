"""Greedy decoding in a lax.while_loop that stops at an end token or a full buffer."""
import jax
import jax.numpy as jnp

from dumpgym.traced.program import Program, variant

END = 0


def greedy_decode(prompt, embed, w_hidden, w_vocab):
    tokens = jnp.zeros(8, jnp.int32).at[0].set(prompt)

    def running(state):
        step, tokens, _ = state
        return (step < tokens.shape[0]) & (tokens[step - 1] != END)

    def next_token(state):
        step, tokens, h = state
        h = jnp.tanh(embed[tokens[step - 1]] + h @ w_hidden)
        token = jnp.argmax(h @ w_vocab).astype(jnp.int32)
        return step + 1, tokens.at[step].set(token), h

    h0 = jnp.zeros(embed.shape[1], embed.dtype)
    _, tokens, _ = jax.lax.while_loop(running, next_token, (1, tokens, h0))
    return tokens


PROGRAM = Program(
    slug="decode-loop",
    title="greedy decoding in a while_loop",
    lesson=("lax.while_loop has no trip count: the loop's equation carries a cond_jaxpr (is the buffer full, was "
            "the last token the end token) and a body_jaxpr (embed the last token, one recurrent step, argmax "
            "over the vocabulary, write the new token). With a scalar index the embedding row is a dynamic_slice, "
            "not a gather; writing the token is a scatter. StableHLO gives the loop two regions, the condition "
            "and the body."),
    function=greedy_decode,
    args=("i32[]", "f32[64,32]", "f32[32,32]", "f32[32,64]"),
)


# The same code traced at other example shapes, so that sizes are read, not remembered (`mlp-2`, ...).
VARIANTS = (
    variant(PROGRAM, 2, ("i32[]", "f32[100,24]", "f32[24,24]", "f32[24,100]")),
)

# Where the gym shows this program among the built-ins, lowest first.
ORDER = 190
