"""How a user gets a program's dumps from JAX itself, for the tests to compare ours with."""
import jax


def jit_of(function):
    """`function` as the user lowers it: through its own jit when it is already jitted (its donation and
    shardings with it), else through `jax.jit`."""
    own = callable(getattr(function, "trace", None)) and callable(getattr(function, "lower", None))
    return function if own else jax.jit(function)


def jaxpr_of(function, args):
    """The ClosedJaxpr JAX traces for `function` on `args` (`jax.make_jaxpr`'s, for a function not yet jitted)."""
    return jit_of(function).trace(*args).jaxpr


def with_mesh(function, mesh):
    """`function` as if its module's `MESH` were `mesh`: a built-in program sharded by jit, written
    again over another mesh (a TPU topology's chips) with its source unchanged."""
    import types

    # A program that takes its mesh as a keyword (`mesh=MESH`, so that its variants pass another) has the
    # module's mesh among its defaults: that one is replaced too.
    defaults = tuple(mesh if d is function.__globals__.get("MESH") else d for d in function.__defaults__ or ())
    return types.FunctionType(function.__code__, {**function.__globals__, "MESH": mesh}, function.__name__,
                              defaults or None, function.__closure__)
