"""Programs as users write them, dumped by the tests of drills from a dump (`tests/test_dump_drills.py`): a
recurrent net's train step over a `lax.scan`, a fit that runs a `lax.while_loop` with a `lax.cond` inside,
an MLP whose blocks are `jax.checkpoint`ed under `jax.grad`, a short scan over a small carry, and a
transformer block's train step with a hand-written Adam. Arguments are flat arrays (the dump's module takes them
so), as aval strings."""
import jax
import jax.numpy as jnp
from jax import lax


def rnn_train_step(wx, wh, b, wo, xs, ys):
    """One SGD step of a tanh RNN over a sequence (lax.scan), mean squared error on every step's output."""
    params = {"wx": wx, "wh": wh, "b": b, "wo": wo}

    def loss(p):
        def cell(h, x):
            h = jnp.tanh(x @ p["wx"] + h @ p["wh"] + p["b"])
            return h, h @ p["wo"]
        h0 = jnp.zeros((xs.shape[1], p["wh"].shape[0]), xs.dtype)
        _, out = lax.scan(cell, h0, xs)
        return jnp.mean((out - ys) ** 2)

    value, grads = jax.value_and_grad(loss)(params)
    new = jax.tree.map(lambda p, g: p - 0.01 * g, params, grads)
    return value, new["wx"], new["wh"], new["b"], new["wo"]


def fit_while(x, y, w):
    """Gradient descent on a linear model until the loss is small or 100 steps ran (lax.while_loop); a lax.cond
    halves the step where the loss rose."""
    def loss(w):
        return jnp.mean((x @ w - y) ** 2)

    def keep_going(state):
        i, _w, value, _lr = state
        return (i < 100) & (value > 1e-4)

    def step(state):
        i, w, value, lr = state
        new_value, g = jax.value_and_grad(loss)(w)
        lr = lax.cond(new_value > value, lambda r: r * 0.5, lambda r: r, lr)
        return i + 1, w - lr * g, new_value, lr

    i, w, value, _lr = lax.while_loop(keep_going, step, (0, w, jnp.inf, 0.1))
    return w, value, i


def remat_mlp_step(w1, b1, w2, b2, w3, b3, x, y):
    """One SGD step of a 3-layer GELU MLP whose blocks are recomputed in the backward pass (jax.checkpoint)."""
    @jax.checkpoint
    def block(w, b, h):
        return jax.nn.gelu(h @ w + b)

    def loss(params):
        h = x
        for w, b in params[:-1]:
            h = block(w, b, h)
        w, b = params[-1]
        return jnp.mean((h @ w + b - y) ** 2)

    params = [(w1, b1), (w2, b2), (w3, b3)]
    grads = jax.grad(loss)(params)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)


def _layer_norm(x, scale):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + 1e-5) * scale


def _block(params, x):
    scale, wqkv, wo, w1, w2 = params
    batch, seq, d = x.shape
    heads = 4
    h = _layer_norm(x, scale).astype(jnp.bfloat16)
    q, k, v = jnp.split(h @ wqkv.astype(jnp.bfloat16), 3, axis=-1)
    q, k, v = (t.reshape(batch, seq, heads, d // heads) for t in (q, k, v))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / (d // heads) ** 0.5
    mask = jnp.tril(jnp.ones((seq, seq), bool))
    attn = jax.nn.softmax(jnp.where(mask, logits, -1e9), axis=-1).astype(jnp.bfloat16)
    out = jnp.einsum("bhqk,bkhd->bqhd", attn, v).reshape(batch, seq, d)
    x = x + (out @ wo.astype(jnp.bfloat16)).astype(jnp.float32)
    h = _layer_norm(x, scale).astype(jnp.bfloat16)
    return x + (jax.nn.gelu(h @ w1.astype(jnp.bfloat16)) @ w2.astype(jnp.bfloat16)).astype(jnp.float32)


def transformer_train_step(scale, wqkv, wo, w1, w2, m_scale, m_wqkv, m_wo, m_w1, m_w2,
                           v_scale, v_wqkv, v_wo, v_w1, v_w2, x, y, count):
    """One step of a transformer block (causal attention, GELU MLP, bf16 matmuls) with a hand-written Adam."""
    params = (scale, wqkv, wo, w1, w2)

    def loss(params):
        return jnp.mean((_block(params, x) - y) ** 2)

    value, grads = jax.value_and_grad(loss)(params)
    count = count + 1
    m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, (m_scale, m_wqkv, m_wo, m_w1, m_w2), grads)
    v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, (v_scale, v_wqkv, v_wo, v_w1, v_w2), grads)
    fix1, fix2 = 1 - 0.9 ** count, 1 - 0.999 ** count
    new = jax.tree.map(lambda p, m, v: p - 1e-3 * (m / fix1) / (jnp.sqrt(v / fix2) + 1e-8), params, m, v)
    return value, new, m, v, count


def small_scan(h, xs):
    """A short scan over a small carry, as a user's RNN cell: XLA's CPU compiler runs such a loop inside a `call`
    of its own (`xla_cpu_small_call`), so the while's first state is that computation's parameter."""
    def cell(h, x):
        h = jnp.tanh(h + x)
        return h, h.sum()
    return lax.scan(cell, h, xs)


_WEIGHTS = ("f32[128]", "f32[128,384]", "f32[128,128]", "f32[128,512]", "f32[512,128]")
# name -> (module:function, aval strings), as `dump_programs.PROGRAMS`.
PROGRAMS = {
    "rnn_train_step": ("dump_drill_programs:rnn_train_step",
                       ("f32[8,16]", "f32[16,16]", "f32[16]", "f32[16,4]", "f32[10,2,8]", "f32[10,2,4]")),
    "fit_while": ("dump_drill_programs:fit_while", ("f32[32,8]", "f32[32]", "f32[8]")),
    "remat_mlp_step": ("dump_drill_programs:remat_mlp_step",
                       ("f32[32,64]", "f32[64]", "f32[64,64]", "f32[64]", "f32[64,8]", "f32[8]", "f32[4,32]",
                        "f32[4,8]")),
    "small_scan": ("dump_drill_programs:small_scan", ("f32[8]", "f32[5,8]")),
    "transformer_train_step": ("dump_drill_programs:transformer_train_step",
                               (*_WEIGHTS * 3, "f32[8,64,128]", "f32[8,64,128]", "f32[]")),
}


def load(name: str):
    """The `Program` of one of these programs."""
    from dump_programs import load as load_program

    return load_program(name, PROGRAMS)


def jax_equations(name: str) -> list:
    """Every equation of the jaxpr JAX traces of the program here, sub-jaxprs' too."""
    import jax

    from dumpgym.jax_internals import jaxprs_in_params

    program = load(name)
    closed = jax.jit(program.function).trace(*program.example_args()).jaxpr
    out, work = [], [closed.jaxpr]
    while work:
        jaxpr = work.pop()
        jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
        for eqn in jaxpr.eqns:
            out.append(eqn)
            work.extend(jaxprs_in_params(eqn.params))
    return out


def added_pool(folder, corpus, names) -> tuple[dict, dict]:
    """`add --dump FOLDER --module M --corpus C` for each program, then `dumpgym drills --corpus C --unpacked`: the
    pool it prints, and the records added by program name."""
    import json
    import subprocess
    import sys

    from dumpgym import cli
    from dumpgym.record.schema import ProgramRecord

    for name in names:
        assert cli.main(["add", "--dump", str(folder), "--module", f"jit_{name}", "--corpus", str(corpus)]) == 0
    run = subprocess.run([sys.executable, "-m", "dumpgym", "drills", "--corpus", str(corpus), "--unpacked"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    records = {name: ProgramRecord.from_json(json.loads((corpus / f"dump-jit-{name.replace('_', '-')}.json")
                                                        .read_text())) for name in names}
    return json.loads(run.stdout), records
