"""Reading a compiled `while` for the loops drill: its counter's start, step and bound, and the miscounts.

The compiled text is parsed by XLA itself (`jaxlib`'s `hlo_module_from_text`), and the graph is
walked through its bindings: operands, opcodes, instruction names. The bindings do not expose an
instruction's attributes, so four things are read from the instruction's own printed form
(`HloInstruction.to_string()`), as `hlo.py` does: a while's `condition=`/`body=`, a constant's value,
a get-tuple-element's `index=` and a compare's `direction=`. Which instruction is a computation's
ROOT is read from the compiled text, as `hlo.py` does too.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

from dumpgym.drills._tpu import Listing, definition

# Instructions that pass a value through unchanged: the counter is read through them.
_PASS = frozenset({"copy", "bitcast", "convert", "reshape"})
_FLIP = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "EQ": "EQ", "NE": "NE"}


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


def _opcode(ins) -> str:
    return str(ins.opcode).removeprefix("HloOpcode.k").lower()


def _attribute(ins, name: str) -> str | None:
    found = re.search(rf"\b{name}=%?([\w.\-]+)", ins.to_string())
    return found.group(1) if found else None


def _through(ins):
    """The instruction a value comes from, looking through copies, bitcasts and converts."""
    while _opcode(ins) in _PASS:
        ins = ins.operands()[0]
    return ins


def _constant(ins) -> int | None:
    ins = _through(ins)
    if _opcode(ins) != "constant":
        return None
    value = re.search(r" constant\((-?\d+)\)", ins.to_string())
    return int(value.group(1)) if value else None


def _slot(ins) -> int | None:
    """The tuple index a value reads off the computation's parameter, or None."""
    ins = _through(ins)
    if _opcode(ins) != "gettupleelement" or _opcode(ins.operands()[0]) != "parameter":
        return None
    return int(_attribute(ins, "index"))


@functools.lru_cache(maxsize=8)
def _module(text: str):
    from jaxlib import xla_client  # XLA's own HLO parser and graph bindings

    return xla_client.hlo.hlo_module_from_text(text)


def _chain(ins) -> list:
    """`ins` and every instruction `_through` passes on the way to its source, source last."""
    out = [ins]
    while _opcode(out[-1]) in _PASS:
        out.append(out[-1].operands()[0])
    return out


class CompiledLoops:
    """Every compiled while of one HLO listing whose counter can be read: start, step and bound."""

    def __init__(self, listing: Listing):
        self.listing = listing
        defined = (definition(text, n) for n, text in enumerate(listing.lines, start=1))
        self.line = {d.name: d.line for d in defined if d}
        from dumpgym.jax_internals import JaxVersionError, require_hlo_bindings

        try:
            require_hlo_bindings()
        except JaxVersionError:  # an older jaxlib binds no instructions: no compiled loop is read
            self.computations, self.whiles = {}, []
            return
        module = _module(listing.hlo.text)
        self.computations = {c.name: c for c in module.computations()}
        self.whiles = [i for c in module.computations() for i in c.instructions() if _opcode(i) == "while"]

    def root(self, computation: str):
        """The ROOT instruction of a computation, as the compiled text marks it."""
        first, last = self.listing.computations[computation]
        for text in self.listing.lines[first - 1:last]:
            found = re.match(r"\s*ROOT %([\w.\-]+) = ", text)
            if found:
                return next(i for i in self.computations[computation].instructions() if i.name == found.group(1))
        raise ValueError(f"computation {computation} has no ROOT")

    def counters(self) -> list[Counter]:
        """The readable counter of each while, in text order (a while whose counter is not read is left out)."""
        found = (self.counter(w) for w in self.whiles)
        return sorted((c for c in found if c is not None), key=lambda c: c.line)

    def counter(self, loop) -> Counter | None:
        """The counter of one while: a condition test `slot <op> constant`, a constant start and a constant step."""
        start = loop.operands()[0]
        if _opcode(start) != "tuple":
            return None
        condition, body = _attribute(loop, "condition"), _attribute(loop, "body")
        tests = self._tests(self.root(condition))
        for test in tests:
            read = self._compare(test)
            if read is None:
                continue
            slot, direction, limit = read
            init, step = _constant(start.operands()[slot]), self._step(body, slot)
            if init is None or step is None:
                continue
            first = [loop, start, *_chain(start.operands()[slot])]
            return Counter(loop.name, self.line[loop.name], slot, init, step, direction, limit,
                           exact=len(tests) == 1, start=self._lines(first),
                           condition=self.listing.computations[condition],
                           update=self._lines(self._step_chain(body, slot)))
        return None

    def _lines(self, instructions) -> tuple[int, ...]:
        """The printed lines of these instructions, in text order."""
        return tuple(sorted({self.line[i.name] for i in instructions if i.name in self.line}))

    def _tests(self, root) -> list:
        """The tests a condition's ROOT joins with `and` (itself, when it is one test)."""
        root = _through(root)
        if _opcode(root) != "and":
            return [root]
        return [t for operand in root.operands() for t in self._tests(operand)]

    @staticmethod
    def _compare(test) -> tuple[int, str, int] | None:
        """(slot, direction counter-first, limit) for a compare of a state slot with a constant."""
        if _opcode(test) != "compare":
            return None
        a, b = test.operands()
        direction = _attribute(test, "direction")
        if _slot(a) is not None and _constant(b) is not None:
            return _slot(a), direction, _constant(b)
        if _slot(b) is not None and _constant(a) is not None:
            return _slot(b), _FLIP[direction], _constant(a)
        return None

    def _step_chain(self, body: str, slot: int) -> list:
        """The body's update of a slot: the ROOT tuple, the add or subtract, its counter read and its constant."""
        root = self.root(body)
        if _opcode(root) != "tuple":
            return []
        update = _chain(root.operands()[slot])
        if _opcode(update[-1]) not in ("add", "subtract"):
            return []
        return [root, *update, *(i for operand in update[-1].operands() for i in _chain(operand))]

    def _step(self, body: str, slot: int) -> int | None:
        """What the body adds to the counter each run, or None when it is not `slot + constant`."""
        chain = self._step_chain(body, slot)
        if not chain:
            return None
        update = _through(chain[1])
        a, b = update.operands()
        sign = -1 if _opcode(update) == "subtract" else 1
        if _slot(a) == slot and _constant(b) is not None:
            return sign * _constant(b)
        if sign == 1 and _slot(b) == slot and _constant(a) is not None:
            return _constant(a)
        return None
