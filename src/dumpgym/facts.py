"""Stage two: one structured fact per printed equation (`Facts`), read off JAX's objects.

Line spans come from JAX's own pretty-printer: every equation is given a unique
marker as its traceback, and the printer's source map reports which output
lines each marker's document occupied. No dump text is parsed.
"""
from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np


@dataclass(frozen=True)
class Eqn:
    """The facts of one printed equation; `id`s follow print order."""

    id: int
    parent: int | None
    primitive: str
    params: dict
    inputs: list
    outputs: list
    jaxpr_lines: tuple[int, int]


@dataclass(frozen=True)
class Facts:
    """Every printed equation of a jaxpr, and how containers and sub-equations relate."""

    eqns: tuple[Eqn, ...]
    # Equations holding a sub-jaxpr, by the ids of the equations inside it; a shared
    # (hoisted) sub-jaxpr has several callers, its first one in print order is `parent`.
    callers: dict[int, tuple[int, ...]] = field(repr=False)
    # The JAX equation objects by id, for later stages that re-lower them.
    jax_eqns: dict[int, Any] = field(repr=False, compare=False)

    def to_json(self) -> list[dict]:
        """The `eqns` list of the `dumpgym.corpus/1` export."""
        return [
            {**asdict(e), "jaxpr_lines": list(e.jaxpr_lines)}
            for e in self.eqns
        ]

    def descendants(self, eqn_id: int) -> list[int]:
        """Ids of every equation nested (at any depth) inside `eqn_id`, through any of its sub-jaxprs."""
        out, stack, seen = [], [eqn_id], set()
        children = self._children()
        while stack:
            for child in children.get(stack.pop(), ()):
                if child not in seen:
                    seen.add(child)
                    out.append(child)
                    stack.append(child)
        return sorted(out)

    def _children(self) -> dict[int, list[int]]:
        children: dict[int, list[int]] = {}
        for child, parents in self.callers.items():
            for p in parents:
                children.setdefault(p, []).append(child)
        return children


class _Marker:
    """A unique stand-in for an equation's traceback, so the printer's source map names it."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


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


def build_facts(closed_jaxpr) -> Facts:
    """Facts for every equation that `str(closed_jaxpr)` prints, sub-jaxprs included."""
    from jax._src import core

    originals: list[Any] = []

    def mark(eqn, params):
        originals.append(eqn)
        marker = _Marker(len(originals) - 1)
        return eqn.replace(params=params, source_info=eqn.source_info.replace(traceback=marker))

    marked = map_jaxpr_eqns(closed_jaxpr.jaxpr, mark)
    source_map: list[list[tuple[int, int, Any]]] = []
    core.pp_toplevel_jaxpr(marked).format(source_map=source_map)

    spans: dict[int, list[int]] = {}  # marker index -> [first line, last line, first column]
    for line_no, segments in enumerate(source_map, start=1):
        for start_col, _end, marker in segments:
            if isinstance(marker, _Marker):
                span = spans.setdefault(marker.index, [line_no, line_no, start_col])
                span[1] = line_no

    # Ids follow print order: by first line, then column (one-line branches share a line).
    order = sorted(spans, key=lambda i: (spans[i][0], spans[i][2], i))
    id_of = {id(originals[i]): n for n, i in enumerate(order)}
    callers: dict[int, list[int]] = {}
    for n, i in enumerate(order):
        for sub in core.jaxprs_in_params(originals[i].params):
            for inner in sub.eqns:
                if id(inner) in id_of:
                    callers.setdefault(id_of[id(inner)], []).append(n)

    eqns = []
    for n, i in enumerate(order):
        eqn = originals[i]
        parents = callers.get(n)
        eqns.append(Eqn(
            id=n,
            parent=min(parents) if parents else None,
            primitive=eqn.primitive.name,
            params={k: to_json(v) for k, v in sorted(eqn.params.items())},
            inputs=[atom_json(v) for v in eqn.invars],
            outputs=[aval_json(v.aval) for v in eqn.outvars],
            jaxpr_lines=(spans[i][0], spans[i][1]),
        ))
    return Facts(
        eqns=tuple(eqns),
        callers={k: tuple(sorted(set(v))) for k, v in callers.items()},
        jax_eqns={n: originals[i] for n, i in enumerate(order)},
    )


def aval_json(aval) -> dict:
    """`{"shape": [...], "dtype": "<numpy name>"}` for an array aval (`weak_type` when set)."""
    shape = getattr(aval, "shape", None)
    dtype = getattr(aval, "dtype", None)
    if shape is None or dtype is None:
        return {"shape": [], "dtype": str(aval)}
    out = {"shape": [int(d) for d in shape], "dtype": np.dtype(dtype).name}
    if getattr(aval, "weak_type", False):
        out["weak_type"] = True
    return out


def atom_json(atom) -> dict:
    """An equation input: its aval, or `{"literal": ..., "dtype": ...}` for a literal."""
    from jax.extend import core as jex

    if isinstance(atom, jex.Literal):
        return {"literal": _literal_text(atom.val), "dtype": aval_json(atom.aval)["dtype"]}
    return aval_json(atom.aval)


def _literal_text(value) -> str:
    array = np.asarray(value)
    return str(array.item()) if array.ndim == 0 else str(array.tolist())


def to_json(value):
    """A JSON rendering of an equation parameter; sub-jaxprs become a short placeholder."""
    from jax.extend import core as jex

    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if np.isfinite(value) else str(value)
    if isinstance(value, (jex.Jaxpr, jex.ClosedJaxpr)):
        return "<jaxpr>"
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
    if callable(value) and hasattr(value, "__name__"):
        return f"<function {value.__name__}>"
    return str(value)
