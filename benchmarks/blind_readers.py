"""Blind readers: strategies that answer drill items without reading the listing, and how well they do.

A blind reader sees what the page shows before the listing is read: the question, and for a `choice`
the options; for a `line` or `lines` item, which rows the first context block has and each row's
operation name (no meaning); for `axes`, the shape's dims; for `typed`, the question only. Each
strategy answers every item of one form of one drill kind at once, so that the habits it learns (the
usual answer of a step) are counted on the kind's other programs only: leave one program out, since a
learner meets a program's siblings together. A strategy that cannot answer an item returns None and is
credited that item's chance, as a reader who falls back on a guess.

`STRATEGIES[form][name]` holds them (a table: one entry adds one). `score_kind` plays them all on one
kind's items and gives, weighted by item `weight` (how often the page asks it: static/sample.js draws
in proportion to it) and unweighted, chance, every strategy's accuracy and the best one. Used by
benchmarks/choices_only.py (the table) and tests/test_drills_readable.py (the bar).
"""
from __future__ import annotations

import difflib
import functools
import math
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Callable

from dumpgym.drills import answer as forms

BAR = 0.10  # the bar of "Drills that must be read": every kind within 10 points of chance


@dataclass(frozen=True)
class Seen:
    """What a blind reader sees of one item, and the item's answer (for grading only)."""

    kind: str
    step: str | None
    program: str
    weight: float
    question: str
    answer: dict
    rows: tuple[str, ...] = ()  # the first context block's rows, for `line` and `lines` items

    @property
    def form(self) -> str:
        return self.answer["form"]


def seen_items(pool: dict, records: dict) -> list[Seen]:
    """The pool's items as blind readers see them; `records` maps a slug to its `ProgramRecord`, read only
    to show a line item's rows (an item whose program is missing is left out)."""
    from dumpgym.drills.item import resolve

    out = []
    for item in pool["items"]:
        rows: tuple[str, ...] = ()
        if item["answer"]["form"] in ("line", "lines"):
            record = records.get(item["program"])
            if record is None:
                continue
            rows = tuple(resolve(item["context"][:1], record)[0].split("\n"))
        out.append(Seen(item["drill"], item.get("step"), item["program"], float(item.get("weight", 1.0)),
                        item["question"], item["answer"], rows))
    return out


# --- what a blind reader can see without reading ----------------------------------------------------

def tokens(text: str) -> set[str]:
    """The words of a text, lowercased."""
    return set(re.findall(r"\w+", text.lower()))


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def number_of(text: str) -> float | None:
    """An option's number: the element count of an aval or shape, else the first number in it."""
    for read in (forms.read_aval, forms.read_shape):
        got = read(text)
        if got is not None:
            return float(math.prod(int(d) for d in re.findall(r"\d+", got[got.index("["):])))
    match = re.search(r"\d+(?:\.\d+)?", text)
    return float(match[0]) if match else None


_TYPE = re.compile(r"\s*(?:\((?:[^()]|\([^()]*\))*\)|(?:pred|token|bf16|[fsuic]\d+\w*)\[[^\]]*\](?:\{[^}]*\})?)\s*")
_OP = re.compile(r'"?([A-Za-z_][\w.\-]*)')


def op_name(row: str) -> str | None:
    """The operation a row names, as a blind reader spots it: the first word after ` = ` (after the
    result's type, in compiled HLO); None for a row without ` = `."""
    if " = " not in row:
        return None
    rest = row.split(" = ", 1)[1]
    typed = _TYPE.match(rest)
    match = _OP.match(rest[typed.end():] if typed else rest)
    return match[1] if match else None


def candidates(item: Seen) -> list[int]:
    """The rows (from 1) a blind reader would tap: those holding ` = `, or every non-blank row if none do."""
    rows = [n for n, row in enumerate(item.rows, start=1) if " = " in row]
    return rows or [n for n, row in enumerate(item.rows, start=1) if row.strip()]


def masked(text: str) -> str:
    """A text with its numbers masked: what stays the same across programs (`%x.# (line #)`)."""
    return re.sub(r"\d+", "#", text)


def chance(item: Seen) -> float:
    """A guesser's chance on one item: one option of n, one candidate row (or a non-empty set of them),
    one set of axes of 2^rank; 0 for a typed value."""
    a = item.answer
    if item.form == "choice":
        return 1 / len(a["options"])
    if item.form == "line":
        rows = candidates(item)
        right = len(set(rows) & set(a["accepted"]))
        return (right or 1) / max(1, len(rows))
    if item.form == "lines":
        return 1 / max(1, 2 ** len(candidates(item)) - 1)
    if item.form == "axes":
        return 1 / 2 ** len(a["dims"])
    return 0.0


# --- the table of strategies ------------------------------------------------------------------------

Strategy = Callable[[list[Seen]], list]
STRATEGIES: dict[str, dict[str, Strategy]] = defaultdict(dict)


def strategy(form: str, name: str) -> Callable[[Strategy], Strategy]:
    """Register `fn(items) -> picks` (one response per item, or None) as a blind reader of `form`."""
    def register(fn: Strategy) -> Strategy:
        STRATEGIES[form][name] = fn
        return fn
    return register


def per_item(form: str, name: str):
    """Register a strategy that answers each item on its own (`fn(item) -> pick`)."""
    def register(fn: Callable[[Seen], object]) -> Callable:
        strategy(form, name)(lambda items: [fn(i) for i in items])
        return fn
    return register


def left_out(items: list[Seen], key: Callable[[Seen], object], values: Callable[[Seen], list]) -> list[Counter]:
    """For each item, a weighted count of `values` over the items alike in `key` of the other programs."""
    total: dict = defaultdict(Counter)
    own: dict = defaultdict(Counter)
    for item in items:
        mass = item.weight + 1e-6  # a weight-0 item still counts a little, to break ties
        for v in values(item):
            total[key(item)][v] += mass
            own[(key(item), item.program)][v] += mass
    out = []
    for item in items:
        counts = total[key(item)].copy()
        counts.subtract(own[(key(item), item.program)])
        # what is left of the item's own program is rounding, not a count: drop it, or it leaks the answer
        out.append(Counter({v: n for v, n in counts.items() if n > 1e-9}))
    return out


def step_key(item: Seen):
    return (item.kind, item.step)


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


@strategy("choice", "classifier")
def _classifier(items: list[Seen]) -> list:
    from blind_classifier import play_left_out

    return play_left_out(items)


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


def op_counts(items: list[Seen]) -> tuple[list[Counter], list[Counter]]:
    """Left out per program: how often each operation was right for the step, and how often it was a candidate."""
    right = left_out(items, step_key, lambda i: [_ops(i).get(n) for n in _right_rows(i)])
    shown = left_out(items, step_key, lambda i: list(_ops(i).values()))
    return right, shown


def _usual_op(rate: bool, last: bool):
    def play(items: list[Seen]) -> list:
        out = []
        for item, right, shown in zip(items, *op_counts(items)):
            ops = _ops(item)
            rows = list(ops)[::-1] if last else list(ops)
            score = {n: right[ops[n]] / shown[ops[n]] if rate and shown[ops[n]] else right[ops[n]] for n in rows}
            out.append(max(rows, key=lambda n: score[n]) if rows and max(score.values()) else None)
        return out
    return play


strategy("line", "usual-op")(_usual_op(rate=False, last=False))
strategy("line", "usual-op-last")(_usual_op(rate=False, last=True))
strategy("line", "usual-op-rate")(_usual_op(rate=True, last=False))


@strategy("line", "usual-row")
def _usual_row(items: list[Seen]) -> list:
    counts = left_out(items, step_key, lambda i: [i.answer["line"]])
    return [max(candidates(i), key=lambda n, c=c: c[n]) if candidates(i) and c else None
            for i, c in zip(items, counts)]


per_item("lines", "every-row")(lambda i: candidates(i) or None)
per_item("lines", "first-row")(lambda i: candidates(i)[:1] or None)
per_item("lines", "last-row")(lambda i: candidates(i)[-1:] or None)
per_item("lines", "ops-named-in-question")(lambda i: named_in_question(i) or None)


@strategy("lines", "usual-ops")
def _usual_ops(items: list[Seen]) -> list:
    out = []
    for item, right, shown in zip(items, *op_counts(items)):
        picked = [n for n, op in _ops(item).items() if shown[op] and right[op] / shown[op] >= 0.5]
        out.append(picked or None)
    return out


@strategy("lines", "first-k-usual")
def _first_k(items: list[Seen]) -> list:
    sizes = left_out(items, step_key, lambda i: [len(i.answer["lines"])])
    return [candidates(i)[:c.most_common(1)[0][0]] if c and candidates(i) else None for i, c in zip(items, sizes)]


# --- playing and scoring ------------------------------------------------------------------------------

def credits(item: Seen, check, pick) -> float:
    """What one pick earns: 1 right, 0 wrong, the item's chance when the strategy had no answer."""
    if pick is None:
        return chance(item)
    return 1.0 if check.check(pick).right else 0.0


def play(items: list[Seen]) -> dict[str, list[float]]:
    """Every strategy of the items' forms on one kind's items: per strategy `form:name`, each item's credit
    (an item of another form is credited its chance: that strategy does not answer it)."""
    checks = [forms.from_json(i.answer) for i in items]
    out: dict[str, list[float]] = {}
    for form in sorted({i.form for i in items}):
        mine = [k for k, i in enumerate(items) if i.form == form]
        for name, fn in STRATEGIES[form].items():
            picks = fn([items[k] for k in mine])
            got = [chance(i) for i in items]
            for k, pick in zip(mine, picks):
                got[k] = credits(items[k], checks[k], pick)
            out[f"{form}:{name}"] = got
    return out


def mean(values, weights=None) -> float:
    """The mean of `values`, weighted when `weights` are given and not all zero."""
    values = list(values)
    if weights is not None and sum(weights) > 0:
        return sum(v * w for v, w in zip(values, weights)) / sum(weights)
    return sum(values) / len(values) if values else 0.0


@dataclass(frozen=True)
class Score:
    """One kind's (or step's) blind reading, weighted by item weight or not."""

    items: int
    programs: int
    chance: float
    best: str
    accuracy: float
    accuracies: dict

    @property
    def over(self) -> float:
        """Points over chance (a fraction: 0.1 is ten points)."""
        return self.accuracy - self.chance

    @property
    def ten_in_a_row(self) -> float:
        return self.accuracy ** 10


def score(items: list[Seen], credit: dict[str, list[float]], weighted: bool) -> Score:
    """Chance and the best blind reader on `items` (and the credits `play` gave them): for a kind of several
    forms, the best strategy of each form, played together."""
    weights = [i.weight for i in items] if weighted else None
    accuracies = {name: mean(c, weights) for name, c in credit.items()}
    best_of = {}
    for name, acc in accuracies.items():
        form = name.split(":")[0]
        if form not in best_of or acc > accuracies[best_of[form]]:
            best_of[form] = name
    combined = [credit[best_of[i.form]][k] for k, i in enumerate(items)]
    return Score(len(items), len({i.program for i in items}), mean(map(chance, items), weights),
                 " + ".join(best_of[f] for f in sorted(best_of)), mean(combined, weights), accuracies)


def score_kind(items: list[Seen]) -> dict[str, Score]:
    """One kind's blind reading, `weighted` and `unweighted`."""
    credit = play(items)
    return {"weighted": score(items, credit, True), "unweighted": score(items, credit, False)}


def steps(items: list[Seen], credit: dict[str, list[float]]):
    """Each step of a kind, in order: the step, its items, and their credits (sliced from `play`'s)."""
    where: dict = defaultdict(list)
    for k, item in enumerate(items):
        where[item.step].append(k)
    for step, ks in sorted(where.items(), key=lambda s: str(s[0])):
        yield step, [items[k] for k in ks], {name: [c[k] for k in ks] for name, c in credit.items()}
