"""`Facts`: one structured fact per printed equation, read off JAX's objects.

Line spans come from JAX's own pretty-printer: every equation is given a unique
marker as its traceback, and the printer's source map reports which output
lines each marker's document occupied. No dump text is parsed.
"""
from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dumpgym.record.schema import JAXPR_PLACEHOLDER, Aval, Binder, EqnFact, Literal, Source
from dumpgym.gcpause import with_collector_paused
from dumpgym.traced.trace import jaxpr_types


@dataclass(frozen=True)
class Facts:
    """Every printed equation of a jaxpr, and how containers and sub-equations relate."""

    eqns: tuple[EqnFact, ...]  # ids follow print order
    # Equations holding a sub-jaxpr, by the ids of the equations inside it; a shared
    # (hoisted) sub-jaxpr has several callers, its first one in print order is `parent`.
    callers: dict[int, tuple[int, ...]] = field(repr=False)
    # The JAX equation objects by id, for later stages that re-lower them.
    jax_eqns: dict[int, Any] = field(repr=False, compare=False)
    # The equation id behind each tag the trace stage put on the lowering (None: not printed).
    eqn_of_tag: tuple[int | None, ...] = field(repr=False, default=())
    # Equations whose outputs reach no result of the program (looking through jit boundaries).
    dead: frozenset[int] = field(repr=False, default=frozenset())
    # The top-level jaxpr's arguments as it prints them (`ProgramRecord.arg_binders`).
    arguments: tuple[Binder, ...] = ()

    def to_json(self) -> list[dict]:
        """The `eqns` list of the corpus export."""
        return [e.to_json() for e in self.eqns]

    def descendants(self, eqn_id: int) -> list[int]:
        """Ids of every equation nested (at any depth) inside `eqn_id`, through any of its sub-jaxprs."""
        out, stack, seen = [], [eqn_id], set()
        children = self.children
        while stack:
            for child in children.get(stack.pop(), ()):
                if child not in seen:
                    seen.add(child)
                    out.append(child)
                    stack.append(child)
        return sorted(out)

    @functools.cached_property
    def children(self) -> dict[int, list[int]]:
        """Ids of the equations directly inside each container, by container id."""
        children: dict[int, list[int]] = {}
        for child, parents in self.callers.items():
            for p in parents:
                children.setdefault(p, []).append(child)
        return children


@with_collector_paused
def build_facts(source) -> Facts:
    """Facts for every equation that the jaxpr prints, sub-jaxprs included.

    `source` is a `Trace` (whose printing already recorded the spans) or a bare ClosedJaxpr.
    """
    from dumpgym.jax_internals import jaxprs_in_params, name_stack_of
    from dumpgym.traced.trace import Trace, print_with_spans, walk_eqns

    from dumpgym.ir.jaxpr import read_arguments, read_equation

    if isinstance(source, Trace):
        text, spans, originals, closed = source.jaxpr, source.jaxpr_spans, list(source.tagged_eqns), source.closed_jaxpr
    else:
        (text, spans), originals, closed = print_with_spans(source), walk_eqns(source), source
    lines = text.splitlines()

    # Ids follow print order: by first line, then column (one-line branches share a line).
    order = sorted(spans, key=lambda i: (spans[i][0], spans[i][2], i))
    id_of = {id(originals[i]): n for n, i in enumerate(order)}
    jax_eqns = {n: originals[i] for n, i in enumerate(order)}
    subs = {n: tuple(jaxprs_in_params(eqn.params)) for n, eqn in jax_eqns.items()}
    callers: dict[int, list[int]] = {}
    for n, inside in subs.items():
        for sub in inside:
            for inner in sub.eqns:
                if id(inner) in id_of:
                    callers.setdefault(id_of[id(inner)], []).append(n)

    eqns = []
    avals = _AvalFacts()
    source_of = _sources(closed.jaxpr, subs.values(), jax_eqns)
    for n, i in enumerate(order):
        eqn = originals[i]
        parents = callers.get(n)
        printed = read_equation(lines, spans[i], eqn.primitive.name, len(eqn.outvars), len(eqn.invars))
        eqns.append(EqnFact(
            id=n,
            parent=min(parents) if parents else None,
            primitive=eqn.primitive.name,
            params={k: to_json(v) for k, v in sorted(eqn.params.items())},
            inputs=tuple(map(avals.atom, eqn.invars)),
            outputs=tuple(avals.of(v.aval) for v in eqn.outvars),
            jaxpr_lines=(spans[i][0], spans[i][1]),
            sources=tuple(source_of.get(id(v)) for v in eqn.invars),
            name_stack=name_stack_of(eqn),
            binders=printed.binders,
            operand_names=printed.operand_names,
            bodies=printed.bodies,
            partition_specs=_partition_specs(eqn.params),
            printed_params=printed.printed_params,
            body_binders=printed.body_binders,
            printed_end=printed.printed_end,
        ))
    return Facts(
        eqns=tuple(eqns),
        callers={k: tuple(sorted(set(v))) for k, v in callers.items()},
        jax_eqns=jax_eqns,
        eqn_of_tag=tuple(id_of.get(id(eqn)) for eqn in originals),
        dead=frozenset(jax_eqns) - live_eqns(jax_eqns, closed.jaxpr.outvars, subs),
        arguments=read_arguments(lines),
    )


def _partition_specs(params: dict) -> dict[str, tuple]:
    """The params that are tuples of PartitionSpecs, each spec as per-axis mesh axis names (None where a
    spec holds something else)."""
    from jax.sharding import PartitionSpec

    def spec(p) -> tuple | None:
        out = []
        for entry in p:
            if entry is None:
                out.append(None)
            elif isinstance(entry, str):
                out.append((entry,))
            elif isinstance(entry, tuple) and entry and all(isinstance(n, str) for n in entry):
                out.append(entry)
            else:
                return None
        return tuple(out)

    return {k: tuple(spec(p) for p in v) for k, v in sorted(params.items())
            if isinstance(v, tuple) and v and all(isinstance(p, PartitionSpec) for p in v)}


def _sources(top, subs, jax_eqns: dict[int, Any]) -> dict[int, Source]:
    """Where each variable comes from, by `id`: the equation and output that bind it, or its binder's
    position in the jaxpr that declares it (constvars first). Variables are never shared between jaxprs."""
    out: dict[int, Source] = {}
    for jaxpr in (top, *(sub for inside in subs for sub in inside)):
        jaxpr = getattr(jaxpr, "jaxpr", jaxpr)  # a ClosedJaxpr's own
        for k, v in enumerate((*jaxpr.constvars, *jaxpr.invars)):
            out[id(v)] = Source(None, k)
    for n, eqn in jax_eqns.items():
        for k, v in enumerate(eqn.outvars):
            out[id(v)] = Source(n, k)
    return out


class _AvalFacts:
    """The facts of one jaxpr's avals and equation inputs, each aval's made once (JAX shares aval objects widely)."""

    def __init__(self):
        from jax.extend import core as jex

        self._literal = jex.Literal
        self._facts: dict = {}

    def of(self, aval) -> Aval:
        """`aval_fact(aval)`, made once per aval."""
        try:
            return self._facts[aval]
        except KeyError:
            fact = self._facts[aval] = aval_fact(aval)
            return fact
        except TypeError:  # an aval that does not hash
            return aval_fact(aval)

    def atom(self, atom) -> Aval | Literal:
        """An equation input: its aval, or the literal's printed value and dtype."""
        if isinstance(atom, self._literal):
            return Literal(_literal_text(atom.val), self.of(atom.aval).dtype)
        return self.of(atom.aval)


# Containers whose sub-jaxpr's results are, one for one, the equation's own: a result of the
# sub-jaxpr matters only if the matching result outside does.
_PASS_THROUGH = frozenset({"pjit", "jit", "closed_call", "core_call", "remat", "checkpoint", "custom_jvp_call"})


def live_eqns(jax_eqns: dict[int, Any], results, subs: dict[int, tuple] | None = None) -> frozenset[int]:
    """Ids of the equations whose outputs reach `results`, or that have effects, through any depth.

    Through a pass-through container (a `jit`), liveness follows values one for one both ways: a
    result used outside needs only the matching result inside, and an input is needed outside only
    when something live inside reads it. So, as when JAX's DCE prunes jit's unused inputs and
    outputs before lowering, whatever feeds only an unused result of a `jit` is dead too.
    `subs`, if given, holds each equation's sub-jaxprs (`jaxprs_in_params`) by id.
    """
    from jax.extend import core as jex

    from dumpgym.jax_internals import jaxprs_in_params

    if subs is None:
        subs = {n: tuple(jaxprs_in_params(eqn.params)) for n, eqn in jax_eqns.items()}
    producer = {id(v): (n, k) for n, eqn in jax_eqns.items() for k, v in enumerate(eqn.outvars)}
    passes: dict[int, Any] = {}  # container id -> its one sub-jaxpr, matched to it result for result
    outside: dict[int, list] = {}  # id of a pass-through sub-jaxpr's input -> the inputs given to it outside
    for n, eqn in jax_eqns.items():
        inside = subs[n]
        if (len(inside) == 1 and eqn.primitive.name in _PASS_THROUGH
                and len(inside[0].outvars) == len(eqn.outvars) and len(inside[0].invars) == len(eqn.invars)):
            passes[n] = inside[0]
            for inner, outer in zip(inside[0].invars, eqn.invars):
                outside.setdefault(id(inner), []).append(outer)
    live: set[int] = set()
    seen: set[int] = set()
    stack = list(results)

    def need(n: int, k: int | None) -> None:
        eqn = jax_eqns[n]
        sub = passes.get(n)
        if sub is not None and k is not None:
            stack.append(sub.outvars[k])
        if n in live:
            return
        live.add(n)
        if sub is None:
            stack.extend(eqn.invars)
            stack.extend(v for inner in subs[n] for v in inner.outvars)

    for n, eqn in jax_eqns.items():
        if eqn.effects:  # a jit's effects are its inner equations': those are needed on their own
            need(n, None)
    while stack:
        var = stack.pop()
        if isinstance(var, jex.Literal) or id(var) in seen:
            continue
        seen.add(id(var))
        if id(var) in producer:
            need(*producer[id(var)])
        stack.extend(outside.get(id(var), ()))
    return frozenset(live)


def aval_fact(aval) -> Aval:
    """An array aval as the record holds it: global shape, dtype name, weak type when set."""
    shape = getattr(aval, "shape", None)
    dtype = getattr(aval, "dtype", None)
    if shape is None or dtype is None:
        return Aval((), str(aval))
    return Aval(tuple(map(int, shape)), dtype_name(dtype), bool(getattr(aval, "weak_type", False)))


@functools.lru_cache(maxsize=None)  # a handful of dtypes, asked for on every aval
def dtype_name(dtype) -> str:
    """The record's name for a dtype: numpy's (`bfloat16`), or an extended dtype's as JAX prints it (`key<fry>`)."""
    import jax

    if jax.dtypes.issubdtype(dtype, jax.dtypes.extended):
        return str(dtype)  # what the jaxpr prints (JAX's `short_dtype_name`): numpy has no name for it
    return np.dtype(dtype).name


def _literal_text(value) -> str:
    array = np.asarray(value)
    return str(array.item()) if array.ndim == 0 else str(array.tolist())


def to_json(value):
    """A JSON rendering of an equation parameter; sub-jaxprs become a short placeholder."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if np.isfinite(value) else str(value)
    if isinstance(value, tuple) and type(value).__str__ is not tuple.__str__:
        return str(value)  # a named tuple that prints itself, as the jaxpr shows it: random_wrap's impl=fry
    if isinstance(value, (tuple, list)):
        return [to_json(v) for v in value]
    if isinstance(value, (np.integer, np.bool_)):
        return value.item()
    if isinstance(value, np.floating):
        return to_json(float(value))
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return np.dtype(value).name
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        # Written as it prints, but its members sorted: a set prints in hash order, which differs by process.
        members = ", ".join(sorted(map(repr, value)))
        return f"{type(value).__name__}({{{members}}})" if value else f"{type(value).__name__}()"
    if isinstance(value, jaxpr_types()):
        return JAXPR_PLACEHOLDER
    if callable(value) and hasattr(value, "__name__"):
        return f"<function {value.__name__}>"
    return str(value)
