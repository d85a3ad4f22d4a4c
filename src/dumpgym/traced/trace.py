"""A `Trace`: JAX run on a program, and what it printed kept.

The program is traced once and lowered once. Before lowering, each equation's
name stack is extended with a tag naming it (`dgeqn<k>`, k in walk order), so the
lowered module's locations say which equation emitted each operation. Name stacks
reach only locations, which the plain text does not print, so `Trace.stablehlo` is
exactly what `jax.jit(f).lower(*args).as_text()` prints (the tests compare them).
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from dumpgym.gcpause import collector_paused
from dumpgym.ir.tags import TAG

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


def trace(function: Callable[..., Any], args: Sequence[Any], lowered: Callable[[Trace], None] | None = None) -> Trace:
    """Trace `function` on example arguments: its jaxpr, its StableHLO and a tagged lowering.

    `lowered(trace)`, if given, is called as soon as the tagged lowering is made, before the texts are
    printed, with the trace so far (its texts still empty): a compile it sets going on a thread of its
    own (`compiled.layer.start_compiles`) then runs while they are printed. It must not change the
    tagged lowering, whose text is printed after it."""
    args = tuple(args)
    traced = staged(function, args)
    with collector_paused():
        tagged, tagged_eqns = _lower_tagged(traced)
        out = Trace(function=function, args=args, jax_traced=traced, closed_jaxpr=traced.jaxpr, lowered=tagged,
                    tagged_eqns=tagged_eqns, jaxpr_spans={}, source="", jaxpr="", stablehlo="")
        if lowered is not None:
            lowered(out)
        text, spans = print_with_spans(traced.jaxpr)
    return dataclasses.replace(out, jaxpr_spans=spans, source=source_of(function), jaxpr=text,
                               stablehlo=_plain_text(traced, tagged, tagged_eqns))


def staged(function: Callable[..., Any], args: tuple):
    """`function` traced on `args` by its own staging, as a `jax.stages.Traced`: `jax.jit`'s own `.trace`
    for a function under `jax.jit`; for one under another staging with its own `.lower` (`nnx.jit`,
    `eqx.filter_jit`), the `Traced` that `.lower` lowers; else `jax.jit(function)`'s. So its donation,
    shardings, static arguments and the state its staging threads through (an NNX module's) are its own,
    as `function.lower(*args).as_text()` prints them: wrapped in a second jit they would vanish into an
    inner `jit` equation (an outer jit donates nothing)."""
    import jax

    if own_jit(function):
        return function.trace(*args)
    if has_own_staging(function):
        from dumpgym.jax_internals import traced_by_own_lower

        traced = traced_by_own_lower(function, args, {})
        if traced is None:
            raise TypeError(f"{getattr(function, '__name__', function)}.lower(...) lowered no jax.stages.Traced")
        return traced
    return jax.jit(function).trace(*args)


def own_jit(function) -> bool:
    """Whether `function` is under `jax.jit` itself (it traces and lowers as `jax.stages` say), not under a
    wrapper of another library's (nnx.jit, eqx.filter_jit), whose `.trace` means something else."""
    return (callable(getattr(function, "trace", None)) and callable(getattr(function, "lower", None))
            and type(function).__module__.startswith(("jaxlib", "jax.")))


def has_own_staging(function) -> bool:
    """Whether `function` stages itself: it is under `jax.jit`, or a wrapper with its own `.lower`."""
    return not isinstance(function, type) and callable(getattr(function, "lower", None))


# Primitives whose lowering serializes their own body, source locations included, into the module
# (a Mosaic kernel's bytecode in `backend_config`): the tagged lowering's text would carry our tags.
_SERIALIZED_BODIES = frozenset({"pallas_call"})


def serializes_bodies(eqns) -> bool:
    """Whether one of `eqns` lowers to a body serialized whole into the module, its locations (tags) in it."""
    return any(eqn.primitive.name in _SERIALIZED_BODIES for eqn in eqns)


def _plain_text(traced, tagged, eqns) -> str:
    """The StableHLO text as `jax.jit(f).lower(*args).as_text()` prints it: the tagged lowering's,
    unless a kernel body serialized inside it keeps the tags; then a plain lowering's, with source
    locations off, or the body would hold this machine's file paths."""
    from dumpgym.jax_internals import no_traceback_locations

    if serializes_bodies(eqns):
        with no_traceback_locations():
            return lower_copy(traced).as_text()  # a copy: JAX's caches for the user's function stay untouched
    return tagged.as_text()


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
    from dumpgym.jax_internals import print_with_source_map, with_source_info

    count = [0]

    def mark(eqn, params):
        count[0] += 1
        return with_source_info(eqn, params, traceback=_Marker(count[0] - 1))

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
    from dumpgym.jax_internals import no_traceback_locations, with_source_info

    originals = []

    def retag(eqn, params):
        originals.append(eqn)
        return with_source_info(eqn, params, name=f"{TAG}{len(originals) - 1}")

    # The tag is all the attribution reads: without source files in the locations, they stay
    # short, so lowering builds and the x-ray reads far less (the printed text has no locations).
    with no_traceback_locations():
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
    memo = {} if memo is None else memo
    if id(jaxpr) in memo:
        return memo[id(jaxpr)][1]
    eqns = []
    for eqn in jaxpr.eqns:
        params = eqn.params
        if _holds_jaxpr(params):
            params = {k: _map_param(v, rewrite, memo) for k, v in params.items()}
        else:
            params = params.copy()  # most equations hold no sub-jaxpr: nothing to rewrite inside
        eqns.append(rewrite(eqn, params))
    copy = jaxpr.replace(eqns=eqns)
    memo[id(jaxpr)] = (jaxpr, copy)  # keep the original alive so its id is not reused
    return copy


# Module-level functions, not closures: a closure that calls itself is a reference cycle, which
# would keep the memo, and with it the whole copy, alive until the garbage collector next runs.
def _map_param(value, rewrite, memo):
    """An equation parameter for the copy: each sub-jaxpr it holds copied, once per jaxpr, and every
    container around them rebuilt with its own type (custom_linear_solve's `jaxprs` is a namedtuple
    its rules read by field name; a plain tuple in its place breaks them)."""
    from jax.extend import core as jex

    if isinstance(value, jex.ClosedJaxpr):
        key = ("closed", id(value))
        if key not in memo:
            memo[key] = (value, jex.ClosedJaxpr(map_jaxpr_eqns(value.jaxpr, rewrite, memo), value.consts))
        return memo[key][1]
    if isinstance(value, jex.Jaxpr):
        return map_jaxpr_eqns(value, rewrite, memo)
    if isinstance(value, (tuple, list)) and _holds(value):
        items = [_map_param(v, rewrite, memo) for v in value]
        made = getattr(type(value), "_make", None)  # a namedtuple takes its fields from one iterable
        return made(items) if made is not None else type(value)(items)
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and _holds(value):
        return dataclasses.replace(value, **{f.name: _map_param(getattr(value, f.name), rewrite, memo)
                                             for f in dataclasses.fields(value) if f.init})
    return value


def _holds(value) -> bool:
    """Whether a parameter value holds a sub-jaxpr anywhere inside its tuples, lists and dataclasses."""
    kind = _kind(type(value))
    if kind is _LEAF:
        return False
    if kind is _JAXPR:
        return True
    if kind is _SEQUENCE:
        return any(_holds(v) for v in value)
    return any(_holds(getattr(value, f.name)) for f in dataclasses.fields(value))


# What `_holds` reads in a value, by its type: most params (ints, dtypes, tuples of ints, shardings) are
# told apart once per type, not by three `isinstance` checks per value.
_LEAF, _JAXPR, _SEQUENCE, _DATACLASS = "leaf", "jaxpr", "sequence", "dataclass"


@functools.cache
def _kind(cls: type) -> str:
    if issubclass(cls, jaxpr_types()):
        return _JAXPR
    if issubclass(cls, (tuple, list)):
        return _SEQUENCE
    if dataclasses.is_dataclass(cls) and not issubclass(cls, type):  # an instance of a dataclass, not the class
        return _DATACLASS
    return _LEAF


def _holds_jaxpr(params: dict) -> bool:
    """Whether an equation's parameters hold a sub-jaxpr, anywhere, for `_map_param` to copy."""
    return any(_holds(value) for value in params.values())


@functools.cache
def jaxpr_types() -> tuple[type, type]:
    """`jax.extend.core.Jaxpr` and `ClosedJaxpr`, imported on first use (JAX loads only when a program is traced)."""
    from jax.extend import core as jex

    return (jex.Jaxpr, jex.ClosedJaxpr)


def walk_eqns(closed_jaxpr) -> list:
    """Every equation reachable from the jaxpr, shared sub-jaxprs once, in the order tags number them."""
    out: list = []
    map_jaxpr_eqns(closed_jaxpr.jaxpr, lambda eqn, params: out.append(eqn) or eqn)
    return out


def mesh_of(traced: Trace) -> tuple[dict[str, int] | None, list | None]:
    """The mesh a traced program runs on, as the record writes it (`{"x": 8}`), and each argument's partition
    spec (one entry per axis, `None` where it is whole), for a program whose `Program` names no mesh: the first
    of `stated_meshes`; specs where its arguments' `NamedSharding`s or jit's `in_shardings` name it, else None.
    `(None, None)` for a program on one device."""
    import jax

    mesh = next(stated_meshes(traced), None)
    if mesh is None:
        return None, None
    sizes = _sizes(mesh)
    leaves = [a for a in jax.tree.leaves(traced.args) if hasattr(a, "shape")]  # a jitted function's pytrees too
    specs = _specs_on(sizes, [(len(a.shape), getattr(a, "sharding", None)) for a in leaves])
    if specs is None:
        from dumpgym.jax_internals import jit_shardings

        in_shardings = jit_shardings(traced.jax_traced)[0]
        avals = traced.closed_jaxpr.in_avals
        if len(in_shardings) == len(avals):
            specs = _specs_on(sizes, [(len(a.shape), s) for a, s in zip(avals, in_shardings)])
    return sizes, specs


def _sizes(mesh) -> dict[str, int]:
    return dict(zip(mesh.axis_names, (int(n) for n in mesh.axis_sizes)))


def _specs_on(sizes: dict[str, int], inputs: list) -> list | None:
    """Each input's spec over the mesh of `sizes` (`[]`-padded with None to its rank), given (rank, sharding)
    pairs; None when no input is a `NamedSharding` on that mesh."""
    from jax.sharding import NamedSharding

    on = [isinstance(s, NamedSharding) and _sizes(s.mesh) == sizes for _, s in inputs]
    if not any(on):
        return None
    specs = []
    for (rank, sharding), named in zip(inputs, on):
        spec = list(sharding.spec) if named else []
        specs.append([list(p) if isinstance(p, tuple) else p for p in spec] + [None] * (rank - len(spec)))
    return specs


def stated_meshes(traced: Trace) -> Iterator[Any]:
    """Every mesh of more than one device the program states, first found first: its arguments'
    `NamedSharding`s', jit's `in_shardings` and `out_shardings`', its equations' (a `shard_map`'s mesh, a
    `with_sharding_constraint`'s `NamedSharding`), and the mesh jit was traced under (`jax.set_mesh`) where
    an axis of it is Explicit: over Auto axes alone, a context mesh no sharding names leaves no mark in the
    StableHLO."""
    from jax.sharding import NamedSharding

    import jax

    from dumpgym.jax_internals import jit_shardings

    def mesh(value):
        value = value.mesh if isinstance(value, NamedSharding) else value
        if getattr(value, "axis_names", None) and hasattr(value, "axis_sizes") and value.size > 1:
            return value
        return None

    in_shardings, out_shardings, context = jit_shardings(traced.jax_traced)
    found = [getattr(a, "sharding", None) for a in jax.tree.leaves(traced.args) if hasattr(a, "shape")]
    found += [*in_shardings, *out_shardings]
    found += [one for eqn in traced.tagged_eqns for value in eqn.params.values()
              for one in (value if isinstance(value, (tuple, list)) else (value,))]
    if context is not None and "Explicit" in {getattr(t, "name", str(t)) for t in getattr(context, "axis_types", ())}:
        found.append(context)
    return (m for m in map(mesh, found) if m is not None)


def source_of(function: Callable[..., Any]) -> str:
    """`inspect.getsource(function)`, or an empty string where Python keeps no source."""
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""
