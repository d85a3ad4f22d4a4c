"""Where a choice's right option goes, so that over one program no position is the habit that pays.

A fixed shuffle per item (`_avals.order`) leaves it to luck: over a program's few heavy items one place can
hold two thirds of the weight, and a reader who always taps it wins. `places` deals the places out instead:
the heaviest items first, each to the place that is right in the least weight so far, where that ties one
its answer has not had yet, then in an order drawn by a seed (so the deal is stable from run to run).
"""
from __future__ import annotations

from typing import Hashable, Sequence

from dumpgym.drills._avals import order


def places(answers: Sequence[Hashable], weights: Sequence[float], width: int, *seed: object) -> list[int]:
    """The place (0 to `width` - 1) of each item's right option: every place right in about the same share of
    the items' weight, and each answer (`answers[k]`, the right option's text) spread over the places."""
    prefer, load = order(width, *seed), [0.0] * width
    had: dict[Hashable, list[int]] = {}
    out = [0] * len(answers)
    for k in sorted(range(len(answers)), key=lambda k: (-weights[k], k)):
        mine = had.setdefault(answers[k], [0] * width)
        at = min(range(width), key=lambda p: (round(load[p], 6), mine[p], prefer.index(p)))
        load[at] += weights[k]
        mine[at] += 1
        out[k] = at
    return out
