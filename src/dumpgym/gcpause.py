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
        if collect:
            gc.enable()
            gc.collect(0)
        else:
            _enable_aged()


def _enable_aged() -> None:
    """Turn the collector back on with what was made while it was off counted as old. Its young count
    went on growing all the while, so plain `gc.enable()` would have the next allocation walk every object
    made since (millions after an add) for nothing; `gc.freeze()` moves them all out of its reach and
    zeroes that count, `gc.unfreeze()` puts them in the oldest generation, for its next full walk.
    Objects someone else froze are left frozen: then the collector is only turned back on."""
    if gc.get_freeze_count():
        gc.enable()
        return
    gc.freeze()
    gc.enable()
    gc.unfreeze()


_keeping = False  # inside `kept_alive()`, where this process froze nothing before


@contextlib.contextmanager
def kept_alive():
    """A block (a corpus build) that keeps what it builds to its end, for `keep_alive_now` to take out of the
    collector's walks; at its end all of it is given back (`gc.unfreeze()`, into the oldest generation), so a
    caller that goes on (a test, a notebook) finds the collector as it was. Where something else froze objects
    first, nothing is frozen within: unfreezing ours would unfreeze theirs."""
    global _keeping
    if _keeping or gc.get_freeze_count():
        yield
        return
    _keeping = True
    try:
        yield
    finally:
        _keeping = False
        gc.unfreeze()


def keeping_to_exit() -> None:
    """For a process that builds for a corpus build and then ends (a build's worker): `keep_alive_now` freezes
    from here on, and nothing is given back."""
    global _keeping
    _keeping = True


def keep_alive_now() -> None:
    """Inside `kept_alive()`: take every object alive now out of the collector's walks (`gc.freeze()`), whose
    full collections would otherwise walk what the block keeps (a corpus build's records, read by the hundred
    thousand from its workers) again and again to free nothing. Garbage made after is collected as before;
    garbage of a cycle alive now waits for the block's end. Outside such a block, nothing."""
    if _keeping:
        gc.freeze()


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
    freed when the process ends; turned back on after, for a caller that goes on (a test), with what
    was made counted as old (`_enable_aged`): no walk of it all at the next allocation."""
    return collector_paused(collect=False)
