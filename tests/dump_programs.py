"""Programs dumped by the tests of `dumpgym open` and `add --dump`, and the subprocess that dumps them.

A dump is made as a user's run makes one: `JAX_DUMP_IR_TO` and `XLA_FLAGS=--xla_dump_to` set before
JAX starts, in a fresh process that compiles each program (a TPU or GPU program for a topology with
no chip attached). The same functions are re-traced with tagged name stacks in the test process,
which is what the links are checked against.
"""
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp

HERE = Path(__file__).parent


def basic(x, w):
    y = jnp.dot(x, w)
    return jnp.tanh(y).sum(axis=0)


def repeated(x):
    # Three tanh equations on one source line: their name stacks and lines are the same.
    for _ in range(3):
        x = jnp.tanh(x)
    return x * x * x


def _sgd(params, grads):
    return params - 0.1 * grads


sgd = jax.jit(_sgd, donate_argnums=0)  # donation: the dump's module aliases its output to params

# name -> (module:function, aval strings); built-ins by slug as "builtin:SLUG".
PROGRAMS = {
    "basic": ("dump_programs:basic", ("f32[8,16]", "f32[16,4]")),
    "repeated": ("dump_programs:repeated", ("f32[4,4]",)),
    "sgd": ("dump_programs:sgd", ("f32[8]", "f32[8]")),
    "scan_rnn": ("user_programs:scan_rnn", ("f32[5,3]", "f32[3,3]")),
    "cond_branch": ("user_programs:cond_branch", ("f32[]", "f32[4]")),
    "custom_vjp_grad": ("user_programs:custom_vjp_grad", ("f32[6]",)),
    "mlp": ("builtin:mlp", None),
    "layernorm": ("builtin:layernorm", None),
    # Seven levels of slices, adds and pads on one source line: their bounds tell them apart.
    "assoc_scan": ("builtin:scan", None),
    "sharded": ("builtin:sharded", None),
    # Random bits: threefry in private functions, its rounds in a loop's body; a typed key argument.
    "dropout": ("builtin:dropout", None),
    # A partitioned backward pass: XLA combines two all-reduces into one and copies a gathered weight.
    "fsdp_step": ("builtin:fsdp-step", None),
}
# Judged on the CPU only: programs on eight devices (a TPU or GPU dump compiles for one chip), and dropout,
# whose StableHLO lowered for a TPU or GPU is not the CPU re-trace's the links are judged by.
CPU_ONLY = ("sharded", "fsdp_step", "dropout")

_SCRIPT = r'''
import json, sys
sys.path.insert(0, {here!r})
import dumpgym
import jax
from {module} import load
from dumpgym.record.targets import Target
from dumpgym.traced.devices import topology_devices

platform = {platform!r}
for name in {names!r}:
    program = load(name)
    structs = program.example_args()
    function = program.function if hasattr(program.function, "lower") else jax.jit(program.function)
    if platform == "cpu":
        function.lower(*structs).compile()
    else:
        target = Target(platform)
        device = topology_devices(target.topology_for(1))[0]
        with jax.default_device(device):
            structs = [jax.ShapeDtypeStruct(s.shape, s.dtype) for s in structs]
            function.trace(*structs).lower(lowering_platforms=({{"gpu": "cuda"}}.get(platform, platform),)).compile()
'''


def load(name: str, programs: dict | None = None):
    """The `Program` of a dumped program's name (in `programs`, of the same form as PROGRAMS, where given)."""
    import importlib

    from dumpgym.traced.program import Program

    where, args = (programs or PROGRAMS)[name]
    module, _, attr = where.partition(":")
    if module == "builtin":
        return importlib.import_module(f"dumpgym.programs.{attr.replace('-', '_')}").PROGRAM
    function = getattr(importlib.import_module(module), attr)
    return Program(slug=name.replace("_", "-"), title=name, lesson="", function=function, args=args)


def module_name(name: str) -> str:
    """The name XLA gives the dumped module of a program."""
    function = load(name).function
    return "jit_" + getattr(function, "__name__", name)


def make_dump(folder: Path, names, platform: str = "cpu", module: str = "dump_programs",
              jax_modes: str | None = "jaxpr,stablehlo") -> Path:
    """Dump `names` into `folder` from a fresh process, as a run with the dump flags set would (`module`: the
    test module whose `load` gives them). `jax_modes`: JAX's `JAX_DUMP_IR_MODES` beside `XLA_FLAGS` (eight host
    devices); "" sets `JAX_DUMP_IR_TO` alone (JAX's default mode), None only `XLA_FLAGS=--xla_dump_to`, as users
    dump most often."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_DUMP_IR")}
    env.update({"XLA_FLAGS": f"--xla_dump_to={folder}" + (" --xla_force_host_platform_device_count=8"
                                                          if jax_modes else ""),
                "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])})
    if jax_modes is not None:
        env["JAX_DUMP_IR_TO"] = str(folder)
    if jax_modes:
        env["JAX_DUMP_IR_MODES"] = jax_modes
    script = _SCRIPT.format(here=str(HERE), platform=platform, names=list(names), module=module)
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return folder



# A user's script as the tests of odd folders dump it: eager helpers outside `jit` (`jnp.zeros`, a random
# normal, a key split and indexed, a product by a Python float, dtype conversions of one shape), a jitted
# method and lambda, `f` compiled at two shapes beside a function `f_2`, two names
# that are one once cut to a slug's length, and a private function of the user's own.
USER_SCRIPT = r'''
import jax, jax.numpy as jnp

def step(w, x):
    h = jnp.tanh(x @ w)
    return (h * h).sum()

def f(x):
    return jnp.sin(x) * 2

def f_2(x):
    return jnp.cos(x) + 1

def _sgd(p, g):
    return p - 0.1 * g

def long_a(x):
    return x + 1

def long_b(x):
    return x * 3

long_a.__name__ = "a" * 66 + "_one"
long_b.__name__ = "a" * 66 + "_two"

class Model:
    def apply(self, x):
        return jnp.tanh(x) * 2

w = jnp.zeros((16, 8))
k1 = jax.random.split(jax.random.key(1), 3)[1]  # a key split and indexed outside jit: eager slices of keys
x = jax.random.normal(jax.random.key(0), (4, 16))
b = jax.random.normal(k1, (8,)) * 0.02  # an eager multiply, at the user's line
jax.jit(Model().apply)(b); jax.jit(lambda v: v - 1)(b)
g = jax.jit(jax.grad(step))(w, x)
jax.jit(_sgd)(w, g)
jax.jit(f)(jnp.ones(3)); jax.jit(f)(jnp.ones(5)); jax.jit(f_2)(jnp.ones(3))
jax.jit(long_a)(1.0); jax.jit(long_b)(1.0)
jnp.ones((4, 16)).astype(jnp.int32); jnp.ones((4, 16)).astype(jnp.bfloat16)
'''
# The functions of USER_SCRIPT it compiles under `jit` (their modules are the user's; the rest are JAX's own).
USER_MODULES = ("jit_step", "jit__sgd", "jit_f", "jit_f", "jit_f_2", "jit_apply", "jit__lambda",
                "jit_" + "a" * 66 + "_one", "jit_" + "a" * 66 + "_two")


def dump_script(script: str, jax_to: Path | None, xla_to: Path | None, proto: bool = False,
                pass_re: str | None = None) -> None:
    """Run `script` in a fresh process with JAX's dumper writing to `jax_to` and XLA's to `xla_to` (either
    may be None: not dumped), XLA's HLO as protos instead of text where `proto`, and the module after each
    pass whose name `pass_re` matches (`--xla_dump_hlo_pass_re`) where given."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_DUMP_IR_TO", "XLA_FLAGS")}
    if jax_to is not None:
        env.update(JAX_DUMP_IR_TO=str(jax_to), JAX_DUMP_IR_MODES="jaxpr,stablehlo")
    if xla_to is not None:
        env["XLA_FLAGS"] = f"--xla_dump_to={xla_to}" + (" --xla_dump_hlo_as_proto" if proto else "") + (
            f" --xla_dump_hlo_pass_re={pass_re}" if pass_re is not None else "")
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]


# A transformer's train step as users write one: a Python loop calling one `layer` function, two matmuls on one
# line, and an Adam-like update mapped over the parameters' pytree. Its twin is the same step with a
# `jax.named_scope` per layer, per matmul of that line and per parameter leaf: the same compile apart from
# metadata, whose name stacks say which layer's and which leaf's ops each instruction came from.
def _unscoped(_name, f):
    return f()


def _scoped(name, f):
    with jax.named_scope(name):
        return f()


def _layer(p, x, scope):
    q, k = scope("q", lambda: x @ p["wq"]), scope("k", lambda: x @ p["wk"])
    a = jax.nn.softmax(q @ k.T / jnp.sqrt(q.shape[-1]), axis=-1)
    x = x + a @ x
    return x + jax.nn.gelu(x @ p["w1"]) @ p["w2"]


def _train_step(p, m, v, tok, tgt, scope):
    def loss(p):
        x = p["emb"][tok]
        for i, lp in enumerate(p["layers"]):
            x = scope(f"layer{i}", lambda: _layer(lp, x, scope))
        logits = x @ p["emb"].T
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), tgt[:, None], axis=-1))

    def leaf(path):
        return "leaf" + "".join(f"_{getattr(k, 'key', getattr(k, 'idx', k))}" for k in path)

    l, g = jax.value_and_grad(loss)(p)
    with_path = jax.tree_util.tree_map_with_path
    m = with_path(lambda k, m, g: scope(leaf(k), lambda: 0.9 * m + 0.1 * g), m, g)
    v = with_path(lambda k, v, g: scope(leaf(k), lambda: 0.999 * v + 0.001 * g * g), v, g)
    p = with_path(lambda k, p, m, v: scope(leaf(k), lambda: p - 1e-3 * m / (jnp.sqrt(v) + 1e-8)), p, m, v)
    return p, m, v, l


def train_step(p, m, v, tok, tgt):
    return _train_step(p, m, v, tok, tgt, _unscoped)


def train_step_twin(p, m, v, tok, tgt):
    return _train_step(p, m, v, tok, tgt, _scoped)


def train_step_args(layers: int = 2, d: int = 32, vocab: int = 64, tokens: int = 16) -> tuple:
    """`train_step`'s arguments as `jax.ShapeDtypeStruct`s: parameters, two moments of their pytree, tokens."""
    f32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)  # noqa: E731
    p = {"emb": f32(vocab, d), "layers": [{"wq": f32(d, d), "wk": f32(d, d), "w1": f32(d, 4 * d), "w2": f32(4 * d, d)}
                                          for _ in range(layers)]}
    tok = jax.ShapeDtypeStruct((tokens,), jnp.int32)
    return p, p, p, tok, tok


_TRAIN_SCRIPT = r'''
import sys
sys.path.insert(0, {here!r})
import jax
from dump_programs import {function}, train_step_args, compile_for

compile_for({platform!r}, jax.jit({function}), train_step_args(layers={layers}))
'''


def compile_for(platform: str, function, structs) -> None:
    """Compile the jitted `function` at `structs` for `platform`: the CPU here, a TPU through the topology
    libtpu describes, a GPU (an H100) through JAX's CUDA plugin (no chip needed)."""
    if platform == "cpu":
        function.lower(*structs).compile()
        return
    from dumpgym.record.targets import Target
    from dumpgym.traced.devices import topology_devices

    device = topology_devices(Target(platform).topology_for(1))[0]
    with jax.default_device(device):
        function.trace(*structs).lower(lowering_platforms=({"gpu": "cuda"}.get(platform, platform),)).compile()


def dump_train_step(folder: Path, twin: bool = False, layers: int = 2, platform: str = "cpu") -> Path:
    """Dump `train_step` (or its twin) of `layers` layers, compiled for `platform`, into `folder` from a fresh
    process."""
    function = "train_step_twin" if twin else "train_step"
    dump_script(_TRAIN_SCRIPT.format(here=str(HERE), function=function, layers=layers, platform=platform),
                folder, folder)
    return folder


# A GPT's train step as users write one, small: layer norms, a fused qkv matmul split three ways, rotary
# positions, causal attention, a gated MLP, and Adam with bias correction by a step counter (`m / (1 -
# 0.9 ** step)` broadcast for every leaf of one shape: XLA merges those broadcasts into one). Its twin has a
# `jax.named_scope` per layer and per parameter leaf, as `train_step_twin` does, and one for each of two
# expressions that share a source line (the two bias corrections; a layer norm's scaling beside its gain), whose
# ops the plain step's name stacks and lines do not tell apart (their columns do), and one for each of the two
# calls of `_rotary` on one line (`rq`, `rk`), whose ops not even their columns tell apart (what they read does).
_GPT = dict(seq=16, dim=32, heads=2, hidden=64, vocab=64)


def _norm(x, g, scope):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    return scope("scaled", lambda: (x - mean) * jax.lax.rsqrt(jnp.mean((x - mean) ** 2, -1, keepdims=True) + 1e-5)) * g


def _rotary(t):
    half = t.shape[-1] // 2
    angle = jnp.arange(t.shape[-2], dtype=jnp.float32)[:, None] * (1e-2 ** (jnp.arange(half) / half))[None, :]
    a, b = t[..., :half], t[..., half:]
    return jnp.concatenate([a * jnp.cos(angle) - b * jnp.sin(angle), a * jnp.sin(angle) + b * jnp.cos(angle)], -1)


def _gpt_block(x, p, scope):
    seq, dim, heads = _GPT["seq"], _GPT["dim"], _GPT["heads"]
    q, k, v = jnp.split(_norm(x, p["ln1"], scope) @ p["qkv"] + p["qkv_b"], 3, axis=-1)
    q, k, v = (t.reshape(seq, heads, dim // heads).transpose(1, 0, 2) for t in (q, k, v))
    scores = jnp.einsum("hqd,hkd->hqk", scope("rq", lambda: _rotary(q)), scope("rk", lambda: _rotary(k))) / jnp.sqrt(
        dim // heads)
    scores = jnp.where(jnp.tril(jnp.ones((seq, seq), dtype=bool)), scores, -jnp.inf)
    x = x + jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(scores, axis=-1), v).transpose(1, 0, 2).reshape(seq, dim) @ p["out"]
    h = _norm(x, p["ln2"], scope)
    return x + (jax.nn.silu(scope("gate", lambda: h @ p["gate"])) * (scope("up", lambda: h @ p["up"]) + p["up_b"])) @ p["down"]


def _gpt_step(params, opt, tokens, targets, scope):
    def loss(params):
        x = params["embed"][tokens]
        for i, layer in enumerate(params["layers"]):
            x = scope(f"layer{i}", lambda: _gpt_block(x, layer, scope))
        logits = _norm(x, params["lnf"], scope) @ params["embed"].T
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), targets[:, None], axis=-1))

    def leaf(path):
        return "leaf" + "".join(f"_{getattr(k, 'key', getattr(k, 'idx', k))}" for k in path)

    value, grads = jax.value_and_grad(loss)(params)
    step = opt["step"] + 1
    with_path = jax.tree_util.tree_map_with_path
    m = with_path(lambda k, m, g: scope(leaf(k), lambda: 0.9 * m + 0.1 * g), opt["m"], grads)
    v = with_path(lambda k, v, g: scope(leaf(k), lambda: 0.999 * v + 0.001 * g * g), opt["v"], grads)
    fix1, fix2 = scope("fix1", lambda: 1 - 0.9 ** step), scope("fix2", lambda: 1 - 0.999 ** step)
    params = with_path(lambda k, p, m, v: scope(leaf(k), lambda: p - 1e-3 * (m / fix1) / (jnp.sqrt(v / fix2) + 1e-8)),
                       params, m, v)
    return params, {"step": step, "m": m, "v": v}, value


def gpt_step(params, opt, tokens, targets):
    return _gpt_step(params, opt, tokens, targets, _unscoped)


def gpt_step_twin(params, opt, tokens, targets):
    return _gpt_step(params, opt, tokens, targets, _scoped)


def gpt_step_args(layers: int = 4) -> tuple:
    """`gpt_step`'s arguments as `jax.ShapeDtypeStruct`s."""
    f32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)  # noqa: E731
    dim, hidden = _GPT["dim"], _GPT["hidden"]
    layer = {"ln1": f32(dim), "qkv": f32(dim, 3 * dim), "qkv_b": f32(3 * dim), "out": f32(dim, dim), "ln2": f32(dim),
             "gate": f32(dim, hidden), "up": f32(dim, hidden), "up_b": f32(hidden), "down": f32(hidden, dim)}
    params = {"embed": f32(_GPT["vocab"], dim), "lnf": f32(dim), "layers": [dict(layer) for _ in range(layers)]}
    tokens = jax.ShapeDtypeStruct((_GPT["seq"],), jnp.int32)
    return params, {"step": jax.ShapeDtypeStruct((), jnp.int32), "m": params, "v": params}, tokens, tokens


_GPT_SCRIPT = r'''
import sys
sys.path.insert(0, {here!r})
import jax
from dump_programs import {function}, gpt_step_args, compile_for

compile_for({platform!r}, jax.jit({function}), gpt_step_args())
'''


def dump_gpt_step(folder: Path, twin: bool = False, platform: str = "cpu") -> Path:
    """Dump `gpt_step` (or its twin), compiled for `platform`, into `folder` from a fresh process."""
    function = "gpt_step_twin" if twin else "gpt_step"
    dump_script(_GPT_SCRIPT.format(here=str(HERE), function=function, platform=platform), folder, folder)
    return folder
