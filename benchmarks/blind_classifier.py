"""A learned blind reader of `choice` items: a choice model over option features, trained on the kind's
other programs (whole programs held out, in at most ten folds) and asked to pick the likeliest option.

An option's features are what a reader sees without reading the listing: its place, its length's rank,
how like the other options it is (in words and in characters), how many words it shares with the
question, its number's rank among the options' numbers, and its words and word pairs (numbers masked,
hashed into a fixed number of slots with a stable hash). The model is a conditional logit (a softmax over
one item's options), fitted by gradient descent with a little L2, each item weighted by its `weight`.
numpy only, and einsum rather than BLAS, whose threads spin for ages on a busy shared machine.
"""
from __future__ import annotations

import re
import zlib

import numpy as np

from blind_items import Seen, masked, number_of, strategy
from blind_strategies import alikeness, question_overlap

SLOTS = 256  # hashed word and word-pair features
FOLDS = 10  # held-out groups of programs
WIDTH = 6  # places one-hot encoded (later ones share the last)


def _rank(values: list[float]) -> list[float]:
    """Each value's rank among them, 0 (smallest) to 1 (largest); ties share the lowest rank."""
    n = len(values)
    return [sum(v < x for v in values) / max(1, n - 1) for x in values]


def features(item: Seen) -> np.ndarray:
    """One row of features per option of a `choice` item."""
    options = item.answer["options"]
    n = len(options)
    lengths = [float(len(o)) for o in options]
    alike, alike_chars = alikeness(options), alikeness(options, chars=True)
    overlap = question_overlap(item)
    numbers = [number_of(o) for o in options]
    numeric = None not in numbers
    columns = [_rank(lengths), [float(x == max(lengths)) for x in lengths], [float(x == min(lengths)) for x in lengths],
               _rank(alike), [float(x == max(alike)) for x in alike], [float(x == min(alike)) for x in alike],
               _rank(alike_chars), _rank(overlap), [float(x == max(overlap)) for x in overlap],
               _rank(numbers) if numeric else [0.0] * n,
               [float(numeric and x == max(numbers)) for x in numbers],
               [float(numeric and x == min(numbers)) for x in numbers]]
    fixed = np.array(columns, dtype=np.float64).T
    place = np.zeros((n, WIDTH))
    place[np.arange(n), np.minimum(np.arange(n), WIDTH - 1)] = 1.0
    words = np.zeros((n, SLOTS))
    for k, option in enumerate(options):
        seq = re.findall(r"\w+|[^\w\s]", masked(option).lower())
        for gram in seq + [a + " " + b for a, b in zip(seq, seq[1:])]:
            words[k, zlib.crc32(gram.encode()) % SLOTS] = 1.0
    return np.hstack([fixed, place, words])


def _stack(items: list[Seen]) -> tuple[np.ndarray, np.ndarray]:
    """Items' option features padded to one width, and the mask of real options."""
    rows = [features(i) for i in items]
    width = max(len(r) for r in rows)
    x = np.zeros((len(rows), width, rows[0].shape[1]))
    mask = np.zeros((len(rows), width), dtype=bool)
    for k, r in enumerate(rows):
        x[k, :len(r)] = r
        mask[k, :len(r)] = True
    return x, mask


def _scores(x: np.ndarray, mask: np.ndarray, theta: np.ndarray) -> np.ndarray:
    s = np.einsum("iof,f->io", x, theta)
    return np.where(mask, s, -np.inf)


def fit(x: np.ndarray, mask: np.ndarray, right: np.ndarray, weight: np.ndarray,
        steps: int = 200, rate: float = 1.0, l2: float = 1e-3) -> np.ndarray:
    """The weights of a conditional logit: maximise the weighted log-likelihood of the right options
    (less `l2` times their squared norm), by gradient descent."""
    theta = np.zeros(x.shape[2])
    chosen = np.zeros(mask.shape)
    chosen[np.arange(len(right)), right] = 1.0
    w = (weight / weight.sum())[:, None]
    for _ in range(steps):
        s = _scores(x, mask, theta)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        # the gradient of the negative log-likelihood: over every option, w (p - chosen) x
        theta -= rate * (np.einsum("io,iof->f", w * (p - chosen), x) + l2 * theta)
    return theta


def play_left_out(items: list[Seen], folds: int = FOLDS) -> list:
    """For every item, the option a model trained without its program scores highest (None where no
    other program is left to learn from). Programs are held out in at most `folds` groups of whole
    programs (one each when there are fewer), so no model ever saw the program it answers."""
    if not items:
        return []
    x, mask = _stack(items)
    right = np.array([i.answer["index"] for i in items])
    weight = np.array([i.weight for i in items]) + 1e-6
    slugs = sorted({i.program for i in items})
    group = {slug: k % folds for k, slug in enumerate(slugs)}
    held = np.array([group[i.program] for i in items])
    picks: list = [None] * len(items)
    for fold in sorted(set(held)):
        train, test = held != fold, held == fold
        if not train.any():
            continue
        theta = fit(x[train], mask[train], right[train], weight[train])
        for k, s in zip(np.flatnonzero(test), _scores(x[test], mask[test], theta)):
            picks[k] = int(np.argmax(s))
    return picks


@strategy("choice", "classifier")
def _classifier(items: list[Seen]) -> list:
    return play_left_out(items)
