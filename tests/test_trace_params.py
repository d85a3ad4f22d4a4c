"""Equations whose params hold jaxprs survive the copy the x-ray tags: each container is rebuilt with its
own type (a namedtuple stays that namedtuple), and the program traces, lowers and links as JAX has it."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import core as jex

import dumpgym
from dumpgym.traced.program import partition
from dumpgym.traced.trace import map_jaxpr_eqns, trace


@jax.custom_vjp
def _clip_grad(x):
    return x


_clip_grad.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -1.0, 1.0),))


@jax.custom_jvp
def _soft(x):
    return jnp.log1p(jnp.exp(x))


_soft.defjvp(lambda primals, tangents: (_soft(primals[0]), tangents[0] * jax.nn.sigmoid(primals[0])))


def _pallas_add(x, y):
    from jax.experimental import pallas as pl

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x, y)


@functools.cache
def _mesh():
    return jax.make_mesh((8,), ("x",), devices=jax.devices()[:8])


def _sharded_sum(x):
    spec = jax.sharding.PartitionSpec("x")
    return jax.shard_map(lambda b: jax.lax.psum(b.sum(), "x"), mesh=_mesh(), in_specs=spec,
                         out_specs=jax.sharding.PartitionSpec())(x)


def _sharded_arg():
    sharding = jax.sharding.NamedSharding(_mesh(), jax.sharding.PartitionSpec("x"))
    return jax.ShapeDtypeStruct((64,), jnp.float32, sharding=sharding)


F32 = functools.partial(jax.ShapeDtypeStruct, dtype=jnp.float32)
# (primitive whose params hold a jaxpr, a program that binds it, its example arguments)
CASES = {
    "custom_linear_solve": (lambda a, b: jnp.linalg.solve(a, b), (F32((4, 4)), F32((4,)))),
    "custom_vjp_call": (lambda x: _clip_grad(x) * 2.0, (F32((8,)),)),
    "custom_jvp_call": (lambda x: _soft(x).sum(), (F32((8,)),)),
    "cond": (lambda p, x: jax.lax.cond(p, jnp.sin, jnp.cos, x), (jax.ShapeDtypeStruct((), jnp.bool_), F32((8,)))),
    "while": (lambda x: jax.lax.while_loop(lambda c: c.sum() < 100.0, lambda c: c * 2.0, x), (F32((8,)),)),
    "scan": (lambda xs: jax.lax.scan(lambda c, x: (c + x, c), 0.0, xs), (F32((6,)),)),
    "jit": (lambda x: jax.jit(jnp.tanh)(x) + 1.0, (F32((8,)),)),
    "remat2": (lambda x: jax.checkpoint(lambda y: jnp.sin(y) * y)(x), (F32((8,)),)),
    "pallas_call": (_pallas_add, (F32((8, 128)), F32((8, 128)))),
    "shard_map": (_sharded_sum, None),  # its argument is sharded over a mesh: made when asked for
}


def _case(primitive):
    function, args = CASES[primitive]
    return function, (_sharded_arg(),) if args is None else args


def _primitives(jaxpr) -> set[str]:
    out = set()
    for eqn in jaxpr.eqns:
        out.add(eqn.primitive.name)
        for sub in jex.jaxprs_in_params(eqn.params):
            out |= _primitives(sub)
    return out


def _same_shapes(a, b, where: str) -> None:
    """`b` is a copy of parameter `a`: the same types all the way down to the jaxprs."""
    assert type(a) is type(b), (where, type(a), type(b))
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for k, (x, y) in enumerate(zip(a, b)):
            _same_shapes(x, y, f"{where}[{k}]")


def _walk_pairs(original, copy):
    for e, c in zip(original.eqns, copy.eqns):
        yield e, c
        for sub_e, sub_c in zip(jex.jaxprs_in_params(e.params), jex.jaxprs_in_params(c.params)):
            yield from _walk_pairs(sub_e, sub_c)


@pytest.mark.parametrize("primitive", sorted(CASES))
def test_a_copied_equation_keeps_its_params_types(primitive):
    function, args = _case(primitive)
    closed = jax.make_jaxpr(function)(*args)
    assert primitive in _primitives(closed.jaxpr)  # the case binds what it names
    copy = map_jaxpr_eqns(closed.jaxpr, lambda eqn, params: eqn.replace(params=params))
    pairs = list(_walk_pairs(closed.jaxpr, copy))
    assert pairs
    for e, c in pairs:
        assert e.params.keys() == c.params.keys()
        for k in e.params:
            _same_shapes(e.params[k], c.params[k], f"{e.primitive.name}.{k}")


@pytest.mark.parametrize("primitive", sorted(CASES))
def test_the_x_ray_takes_every_program_that_jax_takes(primitive):
    function, args = _case(primitive)
    view = dumpgym.xray(function, *args)
    assert view.jaxpr == str(jax.make_jaxpr(function)(*args))
    assert view.stablehlo == jax.jit(function).lower(*args).as_text()
    assert view.stats.mapped_equations > 0


def test_a_linear_solve_traces_and_solves_as_jax_does():
    """The case the namedtuple broke: `jnp.linalg.solve`, whose `jaxprs` param is `_LinearSolveTuple`."""
    a = np.array([[3.0, 1.0], [1.0, 2.0]], np.float32)
    b = np.array([9.0, 8.0], np.float32)
    closed = jax.make_jaxpr(jnp.linalg.solve)(a, b)
    copy = jex.ClosedJaxpr(map_jaxpr_eqns(closed.jaxpr, lambda eqn, params: eqn.replace(params=params)), closed.consts)
    (out,) = jax.core.eval_jaxpr(copy.jaxpr, copy.consts, a, b)
    np.testing.assert_allclose(out, np.linalg.solve(a, b), rtol=1e-5)


def test_an_equinox_step_that_returns_its_model_gets_in():
    """The canonical Equinox train step returns the updated model, whose activation functions are leaves JAX
    cannot return; under `eqx.filter_jit` they are static. The x-ray is Equinox's own lowering: it returns
    Equinox's marker, then the model's arrays and the loss."""
    eqx = pytest.importorskip("equinox")

    model = eqx.nn.MLP(8, 4, 16, 2, key=jax.random.key(0))
    x, y = jnp.zeros((32, 8)), jnp.zeros((32, 4))

    @eqx.filter_jit
    def train_step(model, x, y):
        def loss_fn(m):
            return jnp.mean((jax.vmap(m)(x) - y) ** 2)

        loss, grads = eqx.filter_value_and_grad(loss_fn)(model)
        model = eqx.apply_updates(model, jax.tree.map(lambda g: -0.1 * g, grads))
        return model, loss

    train_step.lower(model, x, y).compile()  # what JAX (through Equinox) takes
    view = dumpgym.xray(train_step, model, x, y)
    assert view.stats.mapped_equations > 0
    # What Equinox says the step returns, its arrays in order: what the traced program must return.
    shapes = eqx.filter_eval_shape(train_step, model, x, y)
    expected = [(s.shape, s.dtype) for s in jax.tree.leaves(shapes) if isinstance(s, jax.ShapeDtypeStruct)]
    partitioned = partition(train_step, (model, x, y))
    traced = trace(partitioned.function, partitioned.structs)
    assert traced.stablehlo == train_step.lower(model, x, y).as_text()
    marker, *returned = [(a.shape, a.dtype) for a in traced.closed_jaxpr.out_avals]
    assert marker == ((), jnp.int32) and returned == expected
    assert len(expected) == 2 * len(model.layers) + 1  # each layer's weight and bias, then the loss


def test_a_jitted_step_on_pytrees_is_shown_as_its_own_lower_prints_it(tmp_path):
    """A function already under jax.jit, called on a dict of parameters: traced by its own jit, so its
    listings are what `step.trace(...)` and `step.lower(...)` print, with no jit of dumpgym's around it."""
    @jax.jit
    def step(params, x):
        return jnp.tanh(x @ params["w"] + params["b"])

    params = {"w": F32((8, 16)), "b": F32((16,))}
    x = F32((4, 8))
    view = dumpgym.xray(step, params, x)
    assert view.jaxpr == str(step.trace(params, x).jaxpr)
    assert view.stablehlo == step.lower(params, x).as_text()
    record = dumpgym.add(step, params, x, slug="step", corpus=tmp_path / "c")
    assert record.args == ("f32[16]", "f32[8,16]", "f32[4,8]")  # the leaves, in jax.tree order
    assert record.jaxpr == view.jaxpr
