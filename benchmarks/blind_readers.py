"""The blind readers played: every strategy of `blind_strategies.py` and `blind_classifier.py` (which fill
`blind_items.STRATEGIES`) on a kind's items, each credited as the page would credit its pick."""
from __future__ import annotations

import blind_classifier  # noqa: F401 (fills STRATEGIES)
import blind_strategies  # noqa: F401 (fills STRATEGIES)
from blind_items import BAR, STRATEGIES, Seen, chance, credits, mean, score, seen_items, steps  # noqa: F401
from dumpgym.drills import answer as forms


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
