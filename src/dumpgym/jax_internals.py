"""The one door to JAX's internals: every private JAX access of dumpgym, each with why no public API serves.

A JAX upgrade that moves one of these breaks it here and nowhere else. Everything else reaches
JAX through public modules (`jax`, `jax.extend.core`, `jax.interpreters.mlir`, `jaxlib.mlir`).
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator


def print_with_source_map(closed_jaxpr) -> tuple[str, list[list[tuple[int, int, Any]]]]:
    """`str(closed_jaxpr)` and the printer's source map: for each output line, (start, end, traceback) segments.

    Why private: `str()` prints the same text but throws away the source map, and the source map is
    how we learn which lines each equation occupies without parsing the text.
    """
    from jax._src import core

    source_map: list[list[tuple[int, int, Any]]] = []
    text = core.pp_toplevel_jaxpr(closed_jaxpr).format(source_map=source_map)
    return text, source_map


def lower_with_jaxpr(traced, closed_jaxpr):
    """Lower `closed_jaxpr` in place of `traced`'s own jaxpr, with everything else jit decided (shardings, donation…).

    Why private: `jax.stages.Traced` has no public way to swap its jaxpr, and re-tracing the user's
    function would give new equation objects, losing the tags we put on the old ones.
    """
    from jax._src import stages

    twin = stages.Traced(
        traced._meta_tys_flat, {**traced._params, "jaxpr": closed_jaxpr},
        traced._in_tree, traced.out_tree, traced._consts,
    )
    return twin.lower()


@contextlib.contextmanager
def no_traceback_locations() -> Iterator[None]:
    """Lower with source-file locations off, for this block only.

    Why private: the public `jax.config.update("jax_traceback_in_locations_limit", 0)` changes the
    setting for the whole process, including the user's own code running beside us (a notebook).
    """
    from jax._src import config

    with config.traceback_in_locations_limit(0):
        yield
