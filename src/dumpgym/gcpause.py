"""Python's cyclic garbage collector held off while a stage builds many objects and frees few."""
from __future__ import annotations

import contextlib
import functools
import gc


@contextlib.contextmanager
def collector_paused(collect: bool = True):
    """Hold Python's cyclic garbage collector off for a block that builds many objects and frees few.

    The collector runs after every few hundred new objects, and every so often walks the whole heap,
    JAX's included. The stages build copies of a jaxpr, facts and records by the ten thousand and
    keep them all, so those walks free nothing; on programs of thousands of equations they cost as
    much as the stage's own work. The block's survivors are looked at once, by one young-generation
    collection at its end (`collect`).
    """
    if not gc.isenabled():  # someone (the user, or an enclosing block) holds it off already
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        if collect:
            gc.collect(0)


def with_collector_paused(function):
    """`function`, run under `collector_paused()`."""
    @functools.wraps(function)
    def paused(*args, **kwargs):
        with collector_paused():
            return function(*args, **kwargs)
    return paused



def collector_off():
    """Hold Python's cyclic garbage collector off for a whole command that builds one record and exits
    (`dumpgym add`), with no collection at its end: the heap only grows (JAX's modules, the jaxpr, the
    record), so each of the collector's walks, a full one every so often, frees almost nothing, and the
    stages' own pauses (`collector_paused`) then make no young collection either. Cycles it leaves are
    freed when the process ends; turned back on after, for a caller that goes on (a test)."""
    return collector_paused(collect=False)
