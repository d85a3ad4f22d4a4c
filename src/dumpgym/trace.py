"""Stage one: run JAX on a program and keep what it printed (a `Trace`)."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Sequence


@dataclass(frozen=True)
class Trace:
    """A traced program: JAX's own objects and the exact texts it prints for them."""

    function: Callable[..., Any]
    args: tuple
    closed_jaxpr: Any  # jax.extend.core.ClosedJaxpr
    lowered: Any  # jax.stages.Lowered
    source: str
    jaxpr: str
    stablehlo: str


def trace(function: Callable[..., Any], args: Sequence[Any]) -> Trace:
    """Trace `function` on example arguments: `str(make_jaxpr(f)(*args))` and `jit(f).lower(*args).as_text()`."""
    import jax

    args = tuple(args)
    # One trace serves both layers: jit(f).trace gives the same jaxpr make_jaxpr prints
    # (tests/test_trace.py checks that), and lowering it is what jit(f).lower does.
    traced = jax.jit(function).trace(*args)
    lowered = traced.lower()
    return Trace(
        function=function,
        args=args,
        closed_jaxpr=traced.jaxpr,
        lowered=lowered,
        source=source_of(function),
        jaxpr=str(traced.jaxpr),
        stablehlo=lowered.as_text(),
    )


def source_of(function: Callable[..., Any]) -> str:
    """`inspect.getsource(function)`, or an empty string where Python keeps no source."""
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""
