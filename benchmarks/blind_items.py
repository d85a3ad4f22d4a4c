"""Blind readers: strategies that answer drill items without reading the listing, and how well they do.

A blind reader sees what the page shows before the listing is read: the question, and for a `choice`
the options; for a `line` or `lines` item, which rows the first context block has and each row's
operation name (no meaning); for `axes`, the shape's dims; for `typed`, the question only. Each
strategy answers every item of one form of one drill kind at once, so that the habits it learns (the
usual answer of a step) are counted on the kind's other programs only: leave one program out, since a
learner meets a program's siblings together. A strategy that cannot answer an item returns None and is
credited that item's chance, as a reader who falls back on a guess.

`STRATEGIES[form][name]` holds them (a table: one entry adds one), filled by blind_strategies.py and
blind_classifier.py; blind_readers.py `play`s them all on one kind's items. `score` gives, weighted by item `weight` (how often the page
asks it: static/sample.js draws in proportion to it) or unweighted, chance, every strategy's accuracy
and the best one; `steps` cuts a kind's credits by step. Used by benchmarks/choices_only.py (the
table) and tests/test_drills_readable.py (the bar).
"""
from __future__ import annotations

import math
import re
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
    """The pool's items as blind readers see them; `records` maps a slug to its `ProgramRecord`, read to
    show a line item's rows (an item whose program is missing is left out) and to name a traced variant's
    base program as its program: a variant (`mlp-2`) is the same code as its base, so what a strategy
    learns from the base must not count as learnt from another program."""
    from dumpgym.drills.item import resolve

    out = []
    for item in pool["items"]:
        rows: tuple[str, ...] = ()
        if item["answer"]["form"] in ("line", "lines"):
            record = records.get(item["program"])
            if record is None:
                continue
            rows = tuple(resolve(item["context"][:1], record)[0].split("\n"))
        known = records.get(item["program"])
        program = (getattr(known, "variant_of", None) if known is not None else None) or item["program"]
        out.append(Seen(item["drill"], item.get("step"), program, float(item.get("weight", 1.0)),
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


# --- playing and scoring ------------------------------------------------------------------------------

def credits(item: Seen, check, pick) -> float:
    """What one pick earns: 1 right, 0 wrong, the item's chance when the strategy had no answer."""
    if pick is None:
        return chance(item)
    return 1.0 if check.check(pick).right else 0.0


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
    present = {i.form for i in items}
    best_of = {}
    for name, acc in accuracies.items():
        form = name.split(":")[0]
        if form in present and (form not in best_of or acc > accuracies[best_of[form]]):
            best_of[form] = name
    combined = [credit[best_of[i.form]][k] for k, i in enumerate(items)]
    return Score(len(items), len({i.program for i in items}), mean(map(chance, items), weights),
                 " + ".join(best_of[f] for f in sorted(best_of)), mean(combined, weights), accuracies)


def steps(items: list[Seen], credit: dict[str, list[float]]):
    """Each step of a kind, in order: the step, its items, and their credits (sliced from `play`'s)."""
    where: dict = defaultdict(list)
    for k, item in enumerate(items):
        where[item.step].append(k)
    for step, ks in sorted(where.items(), key=lambda s: str(s[0])):
        yield step, [items[k] for k in ks], {name: [c[k] for k in ks] for name, c in credit.items()}
