"""How many built-in programs give each answer of a step, and the weight that keeps a usual answer from paying.

A blind reader who types the value a step most often has in other programs (`16` products per output
element, a padded shape of `[16,128]`), or taps the mesh axis their collectives most often run over, is
right as often as that answer's share of the step's weight. One program's alike items sharing one
weight does not stop it: the habit is learnt across programs, and many small models share their sizes.
A step registered here (`answer_step`, with the function that lists the answers its items give in one
program, unweighted) weighs each item by `spread_weight`: the step's typical spread (the mean number of
built-in programs, traced variants counted, that give one of its answers) over the number that give
this item's answer, so that over the built-in pool each answer is right in about the same weight and a
step keeps about the weight it had. An answer no built-in program gives (an added program's own sizes)
weighs as if one did.

A step's spread is counted once per process over the built-in corpus by its own function, or read from
the built-in store's index, where `kept_pool` keeps every step's beside the decisions' spread. It
imports no kind: each kind module registers its steps when `drills.kinds()` imports it.
"""
from __future__ import annotations

import functools
from typing import Callable, Iterable

from dumpgym.record.schema import ProgramRecord

AnswersFn = Callable[[ProgramRecord], Iterable[str]]

# "kind/step" -> the answers (as keys: a typed value, or a set of axes as `axes_key` spells it) that one
# program's items of that step give.
answer_steps: dict[str, AnswersFn] = {}


def answer_step(name: str) -> Callable[[AnswersFn], AnswersFn]:
    """Register `answers(program)` as the answers a step (`kind/step`) asks of one program, for its spread."""
    def register(fn: AnswersFn) -> AnswersFn:
        answer_steps[name] = fn
        return fn
    return register


def count_answers(programs, steps=None) -> dict[tuple[str, str], int]:
    """(kind/step, answer) -> how many of `programs` (typed records) give that answer, for `steps` (by default
    every registered one). A kind that fails on a program asks nothing of it (the pool skips it), so it
    counts nothing there either."""
    spread: dict[tuple[str, str], int] = {}
    for program in programs:
        for step in sorted(answer_steps if steps is None else steps):
            try:
                given = set(answer_steps[step](program))
            except Exception:  # the pool lists that kind as skipped on this program
                continue
            for key in given:
                spread[step, key] = spread.get((step, key), 0) + 1
    return spread


@functools.cache
def step_spread(step: str) -> dict[str, int]:
    """answer -> how many built-in programs give it, for one registered step: kept in the built-in store's
    index, else counted over the built-in records, once per process."""
    from dumpgym.drills._stored import builtin_corpus, builtin_store

    index = builtin_store().index()
    if index is not None and isinstance(index.get("answers"), list):
        return {key: n for s, key, n in index["answers"] if s == step}
    return {key: n for (_, key), n in count_answers(builtin_corpus().programs, [step]).items()}


def builtin_answers() -> dict[tuple[str, str], int]:
    """(kind/step, answer) -> how many built-in programs give it, for every registered step (every kind
    module's, once `drills.kinds()` has imported them)."""
    return {(step, key): n for step in sorted(answer_steps) for key, n in step_spread(step).items()}


@functools.cache
def _typical(step: str) -> float:
    counts = list(step_spread(step).values())
    return sum(counts) / len(counts) if counts else 1.0


def spread_weight(step: str, key: str) -> float:
    """The factor an item of `step` (`kind/step`) whose answer is `key` is weighted by: the step's typical
    spread over the number of built-in programs giving `key` (at least one)."""
    return _typical(step) / max(1, step_spread(step).get(key, 0))
