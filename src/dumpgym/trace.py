"""Stage one: run JAX on a program and keep what it printed (a `Trace`).

The program is traced once and lowered once. Before lowering, each equation's
name stack is extended with a tag naming it (`dgeqn<k>`, k in walk order), so the
lowered module's locations say which equation emitted each operation. Name stacks
reach only locations, which the plain text does not print, so `Trace.stablehlo` is
exactly what `jax.jit(f).lower(*args).as_text()` prints (the tests compare them).
"""
from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

TAG = "dgeqn"
_TAG_RE = re.compile(TAG + r"(\d+)")


def innermost_tag(text: str) -> int | None:
    """The number of the last (innermost) tag in a location or an op_name, if it holds one."""
    found = _TAG_RE.findall(text)  # our own marker, searched only in text we asked JAX or XLA to carry
    return int(found[-1]) if found else None


@dataclass(frozen=True)
class Trace:
    """A traced program: JAX's own objects and the exact texts it prints for them."""

    function: Callable[..., Any]
    args: tuple
    jax_traced: Any  # the jax.stages.Traced, kept so later stages can lower it again (compiled HLO)
    closed_jaxpr: Any  # jax.extend.core.ClosedJaxpr, as jit traced it
    lowered: Any  # jax.stages.Lowered of the tagged copy; its locations carry the tags
    tagged_eqns: tuple  # the original JAX equation behind each tag number
    jaxpr_spans: dict  # tag number -> (first line, last line, first column) where the printer put it
    source: str
    jaxpr: str
    stablehlo: str


def trace(function: Callable[..., Any], args: Sequence[Any]) -> Trace:
    """Trace `function` on example arguments: its jaxpr, its StableHLO and a tagged lowering."""
    import jax

    args = tuple(args)
    traced = jax.jit(function).trace(*args)
    lowered, tagged_eqns = _lower_tagged(traced)
    text, spans = print_with_spans(traced.jaxpr)
    return Trace(
        function=function,
        args=args,
        jax_traced=traced,
        closed_jaxpr=traced.jaxpr,
        lowered=lowered,
        tagged_eqns=tagged_eqns,
        jaxpr_spans=spans,
        source=source_of(function),
        jaxpr=text,
        stablehlo=lowered.as_text(),
    )


class _Marker:
    """A unique stand-in for an equation's traceback, so the printer's source map names it."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


def print_with_spans(closed_jaxpr) -> tuple[str, dict[int, tuple[int, int, int]]]:
    """`str(closed_jaxpr)`, and where JAX's printer put each equation (numbered in walk order).

    Each equation gets a unique marker as its traceback; the printer's source map then
    reports, for every output line, which markers' documents it holds.
    """
    from dumpgym.jax_internals import print_with_source_map

    count = [0]

    def mark(eqn, params):
        count[0] += 1
        return eqn.replace(params=params, source_info=eqn.source_info.replace(traceback=_Marker(count[0] - 1)))

    marked = map_jaxpr_eqns(closed_jaxpr.jaxpr, mark)
    text, source_map = print_with_source_map(marked)
    spans: dict[int, list[int]] = {}
    for line_no, segments in enumerate(source_map, start=1):
        for start_col, _end, marker in segments:
            if isinstance(marker, _Marker):
                span = spans.setdefault(marker.index, [line_no, line_no, start_col])
                span[1] = line_no
    return text, {k: tuple(v) for k, v in spans.items()}


def _lower_tagged(traced):
    """Lower a tagged copy of `traced`'s jaxpr; returns the Lowered and the equation behind each tag."""
    originals = []

    def retag(eqn, params):
        originals.append(eqn)
        info = eqn.source_info
        # The tag is all the attribution reads; without the traceback, locations stay short.
        tagged = info.replace(name_stack=info.name_stack.extend(f"{TAG}{len(originals) - 1}"), traceback=None)
        return eqn.replace(params=params, source_info=tagged)

    return lower_copy(traced, retag), tuple(originals)


def lower_copy(traced, rewrite=None):
    """Lower a copy of `traced`'s jaxpr (each equation passed through `rewrite`) with jit's own parameters.

    Without `rewrite`, the copy is the same program. The copy is a new object at every level, so
    JAX's caches for the user's function stay untouched by how the copy is lowered.
    """
    from jax.extend import core as jex

    from dumpgym.jax_internals import lower_with_jaxpr

    if rewrite is None:
        def rewrite(eqn, params):
            return eqn.replace(params=params)

    closed = traced.jaxpr
    return lower_with_jaxpr(traced, jex.ClosedJaxpr(map_jaxpr_eqns(closed.jaxpr, rewrite), closed.consts))


def map_jaxpr_eqns(jaxpr, rewrite: Callable[[Any, dict], Any], memo: dict | None = None):
    """Copy `jaxpr`, rewriting each equation (sub-jaxprs first) with `rewrite(eqn, new_params)`.

    Shared sub-jaxprs stay shared in the copy, so JAX prints and lowers them once, as it does the original.
    """
    from jax.extend import core as jex

    memo = {} if memo is None else memo
    if id(jaxpr) in memo:
        return memo[id(jaxpr)][1]

    def sub(value):
        if isinstance(value, jex.ClosedJaxpr):
            key = ("closed", id(value))
            if key not in memo:
                memo[key] = (value, jex.ClosedJaxpr(map_jaxpr_eqns(value.jaxpr, rewrite, memo), value.consts))
            return memo[key][1]
        if isinstance(value, jex.Jaxpr):
            return map_jaxpr_eqns(value, rewrite, memo)
        if isinstance(value, tuple) and value and all(isinstance(v, (jex.Jaxpr, jex.ClosedJaxpr)) for v in value):
            return tuple(sub(v) for v in value)
        return value

    eqns = [rewrite(eqn, {k: sub(v) for k, v in eqn.params.items()}) for eqn in jaxpr.eqns]
    copy = jaxpr.replace(eqns=eqns)
    memo[id(jaxpr)] = (jaxpr, copy)  # keep the original alive so its id is not reused
    return copy



def walk_eqns(closed_jaxpr) -> list:
    """Every equation reachable from the jaxpr, shared sub-jaxprs once, in the order tags number them."""
    out: list = []
    map_jaxpr_eqns(closed_jaxpr.jaxpr, lambda eqn, params: out.append(eqn) or eqn)
    return out


def source_of(function: Callable[..., Any]) -> str:
    """`inspect.getsource(function)`, or an empty string where Python keeps no source."""
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""
