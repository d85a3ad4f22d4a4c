"""A compiled `while` for the loops drill: its counter's start, step and bound as recorded, and the miscounts.

The compile stage read each counter through XLA's graph (`ir/hlo_facts.py`, `CompiledLayer.while_counters`);
here it is only counted and misread.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from dumpgym.record.schema import CompiledLayer

@dataclass(frozen=True)
class Counter:
    """A compiled while's loop counter: its tuple slot, start, step and bound, and the lines that say so."""

    name: str  # the while instruction
    line: int
    slot: int  # the counter's index in the loop state tuple
    init: int
    step: int
    direction: str  # the compare, written counter-first: LT means `counter < limit` keeps looping
    limit: int
    exact: bool  # False when the condition also stops the loop on something else (an `and` of tests)
    start: tuple[int, ...]  # the lines that set the counter's first value, and the while's own line
    condition: tuple[int, int]  # the condition computation's first and last line
    update: tuple[int, ...]  # the body's lines that move the counter and return it

    def runs(self, direction: str | None = None, init: int | None = None, step: int | None = None) -> int | None:
        """How many times the body runs (at most, when not `exact`); arguments replace what was read (misreadings)."""
        return trip_count(self.init if init is None else init, self.step if step is None else step,
                          direction or self.direction, self.limit)


def trip_count(init: int, step: int, direction: str, limit: int) -> int | None:
    """Runs of `for (i = init; i <direction> limit; i += step)`, or None when it never ends or is not a count."""
    if step == 0:
        return None
    if direction in ("LT", "LE"):
        end = limit if direction == "LT" else limit + 1
        return max(0, math.ceil((end - init) / step)) if step > 0 else (0 if init >= end else None)
    if direction in ("GT", "GE"):
        end = limit if direction == "GT" else limit - 1
        return max(0, math.ceil((init - end) / -step)) if step < 0 else (0 if init <= end else None)
    if direction == "NE" and (limit - init) % step == 0 and (limit - init) // step >= 0:
        return (limit - init) // step
    return None


_OTHER_BOUND = {"LT": "LE", "LE": "LT", "GT": "GE", "GE": "GT"}
_SYMBOL = {"LT": "<", "LE": "<=", "GT": ">", "GE": ">=", "NE": "!="}


def runs_text(n: int, exact: bool) -> str:
    """A count of runs as an option: `4 times`, or `at most 7 times` for a loop another test can end early."""
    return f"{n} times" if exact else f"at most {n} times"


def trip_misreadings(c: Counter) -> list[tuple[int, str, str]]:
    """(runs, rule, reason) for the ways of miscounting a compiled while, in this loop's terms."""
    n, counter = c.runs(), f"the counter (state slot {c.slot})"
    found = []
    if c.direction in _OTHER_BOUND:
        other = _OTHER_BOUND[c.direction]
        found.append((c.runs(direction=other), "inclusive-bound" if other in ("LE", "GE") else "exclusive-bound",
                      f"read direction={c.direction} as {other}: {counter} {_SYMBOL[other]} {c.limit}"))
    found.append((n + 1, "counted-checks", "counted the condition's tests: the condition runs once more than the "
                                           "body, and its last test fails and ends the loop"))
    if c.init != 0:
        found.append((c.runs(init=0), "ignored-start", f"assumed {counter} starts at 0; the loop's first state "
                                                       f"sets it to {c.init}"))
    if abs(c.step) != 1:
        found.append((c.runs(step=1 if c.step > 0 else -1), "ignored-step",
                      f"assumed {counter} moves by 1 each run; the body adds {c.step}"))
    if n >= 1:
        last = c.init + (n - 1) * c.step
        found.append((last, "last-counter-value", f"took the counter's value in the last run, {last}, for the count; "
                                                  f"it starts at {c.init}"))
    found.append((c.limit, "bound-as-count", f"took the constant {c.limit} the condition compares with for the count; "
                                             f"the counter starts at {c.init} and moves by {c.step}"))
    return [(v, rule, reason) for v, rule, reason in found if v is not None and v >= 0]


def counters(hlo: CompiledLayer) -> list[Counter]:
    """The recorded counter of each compiled while, in text order (none in a record without the compiled facts);
    a counter whose reading counts other than XLA's own count of the loop (`known`, where its line states one)
    is left out."""
    name = {i.line: i.name for i in hlo.instructions}
    spans = {c.name: c.lines for c in hlo.computations}
    read = [Counter(name[w.line], w.line, w.slot, w.init, w.step, w.direction, w.limit, w.exact, w.start,
                    spans[w.condition], w.update) for w in hlo.while_counters]
    return [c for c, w in zip(read, hlo.while_counters) if w.known is None or not c.exact or c.runs() == w.known]
