"""A compiled `while` for the loops drill: its counter's start, step and bound as recorded, and the miscounts.

The compile stage read each counter through XLA's graph (`ir/hlo_facts.py`, `CompiledLayer.while_counters`);
here it is only counted and misread.
"""
from __future__ import annotations

import math
import re
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
    """The recorded counter of each compiled while, in text order (none in a record without the compiled facts)."""
    name = {i.line: i.name for i in hlo.instructions}
    spans = {c.name: c.lines for c in hlo.computations}
    return [Counter(name[w.line], w.line, w.slot, w.init, w.step, w.direction, w.limit, w.exact, w.start,
                    spans[w.condition], w.update) for w in hlo.while_counters]


# XLA's own analysis of a while, as its line's backend_config prints it (`"known_trip_count":{"n":"5"}`, ...).
_KNOWN = {"n": re.compile(r'"known_trip_count":\{"n":"(-?\d+)"\}'),
          "init_step": re.compile(r'"known_init_step":\{"init":"(-?\d+)","step":"(-?\d+)"\}'),
          "slot": re.compile(r'"known_induction_variable":\{"tuple_index":"(\d+)"\}')}
_CONSTANT = re.compile(r"\bconstant\((-?\d+)\)")
_DIRECTION = re.compile(r"\bdirection=(LT|LE|GT|GE|NE)\b")
_FLIPPED = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "NE": "NE"}


def stated_counters(hlo: CompiledLayer) -> list[Counter]:
    """The counter of each compiled while that XLA's graph reading (`counters`) leaves out but whose line states
    XLA's own analysis of it (a CPU compile runs the loop inside a called computation, so its start is a
    parameter there): the trip count, start, step and state slot its backend_config prints, and the compare
    and bound its condition prints, kept only where they count the runs XLA states. The lines shown are the
    dump's: the start chased back through tuples and calls to its constant, the condition, the body's update."""
    read = {c.line for c in counters(hlo)}
    lines = hlo.text.splitlines()
    at = {i.line: i for i in hlo.instructions}
    spans = {c.name: c for c in hlo.computations}
    out = []
    for loop in (i for i in hlo.instructions if i.opcode == "while" and i.line not in read):
        text = lines[loop.line - 1]
        found = {k: pattern.search(text) for k, pattern in _KNOWN.items()}
        if None in found.values() or len(loop.control) != 2 or not all(c in spans for c in loop.control):
            continue
        n, (init, step), slot = int(found["n"][1]), map(int, found["init_step"].groups()), int(found["slot"][1])
        condition, body = (spans[c] for c in loop.control)
        bound = _bound(hlo, lines, at, condition.name, init, step, n)
        start = _start(hlo, lines, at, loop, slot, init)
        update = _update(lines, at, body, slot)
        if bound is None or start is None or update is None:
            continue
        direction, limit = bound
        out.append(Counter(loop.name, loop.line, slot, init, step, direction, limit, True, start,
                           condition.lines, update))
    return sorted(out, key=lambda c: c.line)


def _bound(hlo: CompiledLayer, lines: list[str], at: dict, condition: str, init: int, step: int, n: int
           ) -> tuple[str, int] | None:
    """(direction, bound) of the one compare in a condition (or in what it calls), written counter-first, where one
    of its constants counts `n` runs from `init` by `step`; None unless exactly one reading does."""
    names, stack = [], [condition]
    while stack:
        name = stack.pop()
        if name not in names:
            names.append(name)
            stack += [c for i in hlo.instructions if i.computation == name for c in (*i.calls, *i.to_apply)]
    held = [i for i in hlo.instructions if i.computation in names]
    compares = [i for i in held if i.opcode == "compare"]
    if len(compares) != 1:
        return None
    direction = _DIRECTION.search(lines[compares[0].line - 1])
    constants = {int(m[1]) for i in held if i.opcode == "constant" for m in [_CONSTANT.search(lines[i.line - 1])] if m}
    if direction is None:
        return None
    readings = {(d, limit) for limit in constants for d in {direction[1], _FLIPPED[direction[1]]}
                if trip_count(init, step, d, limit) == n}
    return readings.pop() if len(readings) == 1 else None


def _start(hlo: CompiledLayer, lines: list[str], at: dict, loop, slot: int, init: int) -> tuple[int, ...] | None:
    """The lines that give the counter its first value, and the while's own: from the while's operand through
    tuples (their `slot` operand), copies and calls (a parameter of the called computation is the call's operand) to
    the constant `init`; None where the chain ends anywhere else."""
    chain, line = [loop.line], loop.operands[0] if loop.operands else None
    for _ in range(16):
        ins = at.get(line)
        if ins is None:
            return None
        chain.append(ins.line)
        if ins.opcode == "tuple" and slot < len(ins.operands):
            line = ins.operands[slot]
        elif ins.opcode == "parameter" and ins.parameter is not None:
            callers = [i for i in hlo.instructions if i.opcode == "call" and ins.computation in (*i.calls, *i.to_apply)]
            if len(callers) != 1 or ins.parameter >= len(callers[0].operands):
                return None
            chain.append(callers[0].line)
            line = callers[0].operands[ins.parameter]
        elif ins.opcode == "copy" and len(ins.operands) == 1:
            line = ins.operands[0]
        elif ins.opcode == "constant":
            value = _CONSTANT.search(lines[ins.line - 1])
            return tuple(sorted(set(chain))) if value is not None and int(value[1]) == init else None
        else:
            return None
    return None


def _update(lines: list[str], at: dict, body, slot: int) -> tuple[int, ...] | None:
    """The body's lines that move the counter: the instruction its ROOT tuple returns in `slot`, what it reads
    in the body (through a copy), and the ROOT; None where the ROOT is no tuple."""
    root = at.get(body.root)
    if root is None or root.opcode != "tuple" or slot >= len(root.operands):
        return None
    moved = at.get(root.operands[slot])
    if moved is None:
        return None
    read = [at[n] for n in moved.operands if n in at and at[n].computation == body.name]
    # a copy of the state's slot, read before the add: the `get-tuple-element` it copies says which slot it is
    read += [at[n] for i in read if i.opcode == "copy" for n in i.operands if n in at]
    return tuple(sorted({*(i.line for i in read), moved.line, root.line}))
