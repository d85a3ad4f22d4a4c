"""The blind readers themselves, registered by form into `blind_items.STRATEGIES`: each answers every
item of one form of one drill kind, from what a blind reader sees (see blind_items.py), or None where
it has no answer.
"""
from __future__ import annotations

import difflib
import functools
import re
import statistics
from collections import Counter
from typing import Callable

from blind_items import (Seen, candidates, jaccard, left_out, masked, number_of, op_name, per_item, step_key,
                           strategy, tokens)
from dumpgym.drills import answer as forms


def _argbest(n: int, score: Callable[[int], float]) -> int:
    """The index of the highest score; the first such on a tie."""
    return max(range(n), key=lambda k: (score(k), -k))


# choice ----------------------------------------------------------------------------------------------

def _options(item: Seen) -> list[str]:
    return item.answer["options"]


for _k in range(6):
    per_item("choice", f"position-{_k}")(lambda i, k=_k: min(k, len(_options(i)) - 1))
per_item("choice", "position-last")(lambda i: len(_options(i)) - 1)
per_item("choice", "longest")(lambda i: _argbest(len(_options(i)), lambda k: len(_options(i)[k])))
per_item("choice", "shortest")(lambda i: _argbest(len(_options(i)), lambda k: -len(_options(i)[k])))


def alikeness(options: list[str], chars: bool = False) -> list[float]:
    """Each option's mean similarity to the others (shared words, or shared characters)."""
    return list(_alikeness(tuple(options), chars))


@functools.lru_cache(maxsize=None)  # several strategies and the classifier ask it of the same options
def _alikeness(options: tuple[str, ...], chars: bool) -> tuple[float, ...]:
    if chars:
        def alike(a, b):
            return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()
    else:
        words = [tokens(o) for o in options]
        by_text = dict(zip(options, words))

        def alike(a, b):
            return jaccard(by_text[a], by_text[b])
    n = len(options)
    return tuple(sum(alike(options[k], options[j]) for j in range(n) if j != k) / max(1, n - 1) for k in range(n))


for _chars, _suffix in ((False, ""), (True, "-chars")):
    per_item("choice", "most-alike" + _suffix)(
        lambda i, c=_chars: _argbest(len(_options(i)), alikeness(_options(i), c).__getitem__))
    per_item("choice", "odd-one-out" + _suffix)(
        lambda i, c=_chars: _argbest(len(_options(i)), lambda k, s=alikeness(_options(i), c): -s[k]))


def question_overlap(item: Seen) -> list[float]:
    """How many of each option's words the question holds (and, to break ties, their share)."""
    asked = tokens(item.question)
    return [len(tokens(o) & asked) + jaccard(tokens(o), asked) / 2 for o in _options(item)]


per_item("choice", "question-overlap")(lambda i: _argbest(len(_options(i)), question_overlap(i).__getitem__))
per_item("choice", "question-disjoint")(
    lambda i: _argbest(len(_options(i)), lambda k, s=question_overlap(i): -s[k]))


def _numeric(pick: Callable[[list[float]], float]):
    def play(item: Seen):
        values = [number_of(o) for o in _options(item)]
        if None in values or len(set(values)) < len(values):
            return None
        target = pick(values)
        return min(range(len(values)), key=lambda k: (abs(values[k] - target), k))
    return play


per_item("choice", "numeric-max")(_numeric(max))
per_item("choice", "numeric-min")(_numeric(min))
per_item("choice", "numeric-median")(_numeric(statistics.median_low))


def _usual(text: Callable[[str], str]):
    def play(items: list[Seen]) -> list:
        counts = left_out(items, step_key, lambda i: [text(_options(i)[i.answer["index"]])])
        return [_argbest(len(_options(i)), lambda k, c=c, i=i: c[text(_options(i)[k])]) if c else None
                for i, c in zip(items, counts)]
    return play


strategy("choice", "usual-answer")(_usual(lambda o: o))
strategy("choice", "usual-pattern")(_usual(masked))


@strategy("choice", "usual-answer-to-question")
def _usual_to_question(items: list[Seen]) -> list:
    """The option most often right for the same question, word for word, in the other programs: a reader
    who remembers that "lhs axis 1" is usually contracted, without reading this item's dims."""
    counts = left_out(items, lambda i: (i.kind, i.step, i.question), lambda i: [_options(i)[i.answer["index"]]])
    return [_argbest(len(_options(i)), lambda k, c=c, i=i: c[_options(i)[k]]) if c else None
            for i, c in zip(items, counts)]


@strategy("choice", "usual-answer-for-question")
def _usual_for_question(items: list[Seen]) -> list:
    """The answer most often right for questions worded alike (numbers masked): a step asked of two layers
    ("line # of the jaxpr", "... of the StableHLO") may favour another answer in each."""
    counts = left_out(items, lambda i: (i.kind, i.step, masked(i.question)),
                      lambda i: [_options(i)[i.answer["index"]]])
    return [_argbest(len(_options(i)), lambda k, c=c, i=i: c[_options(i)[k]]) if c else None
            for i, c in zip(items, counts)]


# typed -----------------------------------------------------------------------------------------------

_IN_QUESTION = {
    "aval": r"[A-Za-z][A-Za-z0-9_]*\[[\d,\s]*\]",
    "shape": r"\[[\d,\s]*\]|\(\d+(?:,\s*\d+)*,?\)",
    "dtype": r"\b\w+\b",
    "int": r"(?<![\w.])\d[\d,_]*(?![\w.])",
    "tile": r"T?(?:\(\d+(?:,\s*\d+)*\))+",
}


def typed_in_question(item: Seen) -> list[str]:
    """Every value of the item's spelling written out in its question, in order, as the form reads it."""
    read, _ = forms.SPELLINGS[item.answer["spelling"]]
    found = (read(m) for m in re.findall(_IN_QUESTION[item.answer["spelling"]], item.question))
    return [v for v in found if v is not None]


def _copied(pick: Callable[[list[str]], str]):
    return lambda item: (pick(found) if (found := typed_in_question(item)) else None)


def _as_number(value: str) -> float:
    return number_of(value) or 0.0


per_item("typed", "question-first")(_copied(lambda vs: vs[0]))
per_item("typed", "question-last")(_copied(lambda vs: vs[-1]))
per_item("typed", "question-largest")(_copied(lambda vs: max(vs, key=_as_number)))
per_item("typed", "question-smallest")(_copied(lambda vs: min(vs, key=_as_number)))


@strategy("typed", "usual-value")
def _usual_value(items: list[Seen]) -> list:
    counts = left_out(items, lambda i: (i.kind, i.step, i.answer["spelling"]), lambda i: [i.answer["value"]])
    return [c.most_common(1)[0][0] if c else None for c in counts]


# axes ------------------------------------------------------------------------------------------------

def _dims(item: Seen) -> list[int]:
    return item.answer["dims"]


per_item("axes", "last-axis")(lambda i: [len(_dims(i)) - 1] if _dims(i) else [])
per_item("axes", "first-axis")(lambda i: [0] if _dims(i) else [])
per_item("axes", "no-axes")(lambda i: [])
per_item("axes", "every-axis")(lambda i: list(range(len(_dims(i)))))
per_item("axes", "all-but-last")(lambda i: list(range(len(_dims(i)) - 1)))
per_item("axes", "largest-dims")(lambda i: [a for a, d in enumerate(_dims(i)) if d == max(_dims(i))])
per_item("axes", "smallest-dims")(lambda i: [a for a, d in enumerate(_dims(i)) if d == min(_dims(i))])
per_item("axes", "sizes-in-question")(
    lambda i: [a for a, d in enumerate(_dims(i)) if str(d) in re.findall(r"\d+", i.question)])


def _usual_axes(relative: bool):
    def key(i: Seen):
        return (i.kind, i.step) if relative else (i.kind, i.step, len(_dims(i)))

    def spelled(i: Seen, axes) -> str:
        return forms.axes_key([a - len(_dims(i)) for a in axes] if relative else axes)

    def play(items: list[Seen]) -> list:
        counts = left_out(items, key, lambda i: [spelled(i, i.answer["axes"])])
        out = []
        for item, c in zip(items, counts):
            fits = [(n, k) for k, n in c.items() if all(
                -len(_dims(item)) <= int(a) < (0 if relative else len(_dims(item))) for a in k.split(",") if a)]
            if not fits:
                out.append(None)
                continue
            best = max(fits)[1]
            out.append([int(a) % len(_dims(item)) for a in best.split(",") if a])
        return out
    return play


strategy("axes", "usual-axes")(_usual_axes(relative=False))
strategy("axes", "usual-axes-from-end")(_usual_axes(relative=True))


# line and lines ---------------------------------------------------------------------------------------

def _ops(item: Seen) -> dict[int, str | None]:
    return {n: op_name(item.rows[n - 1]) for n in candidates(item)}


def _right_rows(item: Seen) -> list[int]:
    return item.answer["accepted"] if item.form == "line" else item.answer["lines"]


def named_in_question(item: Seen) -> list[int]:
    """Candidate rows whose operation shares a word with the question (`broadcast_in_dim`: `broadcast`)."""
    asked = tokens(item.question)
    return [n for n, op in _ops(item).items() if op and set(re.split(r"[_.\-]", op.lower())) & asked]


per_item("line", "first-row")(lambda i: candidates(i)[0] if candidates(i) else None)
per_item("line", "last-row")(lambda i: candidates(i)[-1] if candidates(i) else None)
per_item("line", "middle-row")(lambda i: candidates(i)[len(candidates(i)) // 2] if candidates(i) else None)
per_item("line", "op-named-in-question")(lambda i: (named_in_question(i) or [None])[0])


def op_counts(items: list[Seen], ops=_ops) -> tuple[list[Counter], list[Counter]]:
    """Left out per program: how often each operation (as `ops` names the rows') was right for the step, and
    how often it was a candidate."""
    right = left_out(items, step_key, lambda i: [ops(i).get(n) for n in _right_rows(i)])
    shown = left_out(items, step_key, lambda i: list(ops(i).values()))
    return right, shown


def _usual_op(rate: bool, last: bool, named=_ops):
    def play(items: list[Seen]) -> list:
        out = []
        for item, right, shown in zip(items, *op_counts(items, named)):
            ops = named(item)
            rows = list(ops)[::-1] if last else list(ops)
            score = {n: right[ops[n]] / shown[ops[n]] if rate and shown[ops[n]] else right[ops[n]] for n in rows}
            out.append(max(rows, key=lambda n: score[n]) if rows and max(score.values()) else None)
        return out
    return play


strategy("line", "usual-op")(_usual_op(rate=False, last=False))
strategy("line", "usual-op-last")(_usual_op(rate=False, last=True))
strategy("line", "usual-op-rate")(_usual_op(rate=True, last=False))


# What a reader sees in a compiled row's own name: XLA names many instructions for what they hold
# (`%gemm_fusion_dot.2`, `%loop_reduce_fusion`, `%copy-start.3`), so the name without its number is a tell
# of its own, beside the opcode.
_NAME = re.compile(r"%([\w.\-]+)\s*=")


def _name(row: str) -> str:
    """A compiled row's instruction name without its number: `gemm_fusion_dot` of `%gemm_fusion_dot.2 = ...`."""
    m = _NAME.search(row)
    return re.sub(r"[.\d]+$", "", m[1]) if m else ""


def _names(item: Seen) -> dict[int, str | None]:
    return {n: op and f"{op}/{_name(item.rows[n - 1])}" for n, op in _ops(item).items()}


strategy("line", "usual-name")(_usual_op(rate=False, last=False, named=_names))
strategy("line", "usual-name-rate")(_usual_op(rate=True, last=False, named=_names))


@strategy("line", "usual-row")
def _usual_row(items: list[Seen]) -> list:
    counts = left_out(items, step_key, lambda i: [i.answer["line"]])
    return [max(candidates(i), key=lambda n, c=c: c[n]) if candidates(i) and c else None
            for i, c in zip(items, counts)]


per_item("lines", "every-row")(lambda i: candidates(i) or None)
per_item("lines", "first-row")(lambda i: candidates(i)[:1] or None)
per_item("lines", "last-row")(lambda i: candidates(i)[-1:] or None)
per_item("lines", "ops-named-in-question")(lambda i: named_in_question(i) or None)


# What a reader who knows compiled HLO's row attributes sees beside the opcode: a fusion's `kind=` (on a
# TPU, `kOutput` is the fusion built around a convolution) and a custom call's target; nothing of the
# shapes, the layouts or the fused bodies.
_KIND = re.compile(r'\bkind=(\w+)|custom_call_target="([^"]+)"')


def _ops_and_kinds(item: Seen) -> dict[int, str | None]:
    return {n: op and "/".join([op, *("".join(m) for m in _KIND.findall(item.rows[n - 1]))])
            for n, op in _ops(item).items()}


def _usual_ops_of(ops):
    def play(items: list[Seen]) -> list:
        out = []
        for item, right, shown in zip(items, *op_counts(items, ops)):
            picked = [n for n, op in ops(item).items() if shown[op] and right[op] / shown[op] >= 0.5]
            out.append(picked or None)
        return out
    return play


strategy("lines", "usual-ops")(_usual_ops_of(_ops))
strategy("lines", "usual-ops-and-kinds")(_usual_ops_of(_ops_and_kinds))
strategy("lines", "usual-names")(_usual_ops_of(_names))


@strategy("lines", "first-k-usual")
def _first_k(items: list[Seen]) -> list:
    sizes = left_out(items, step_key, lambda i: [len(i.answer["lines"])])
    return [candidates(i)[:c.most_common(1)[0][0]] if c and candidates(i) else None for i, c in zip(items, sizes)]
