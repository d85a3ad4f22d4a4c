"""Where a few programs' items of a step cannot be read alone, the items of other programs they are asked with.

A step's weights (`_decision_why.question_weights`) and places (`_evenly.places`) even its answers out over the
built-in pool, and within one program as far as the program's answers go. A program whose every item of a step
has one answer is past them: every transpose of an MLP's train step is a matmul's gradient, and drilled alone
(the page's "only your programs", `dumpgym drills SLUG`) the reader who picks that answer, or taps its place,
is right every time. So where the selected programs' choice items of a step give a blind reader more than
`RATIO` times chance, they are asked together with a few items of the same step from the corpus's other
programs, whose right options stand in the places (and, where the step's options are one closed set, are the
answers) the selection leaves light, weighted so that every place is right in the same weight (`together`).
The selection's own items keep their weights, and a pool of the whole corpus needs none: one program's
drill costs its own items and a handful of others'.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

# A selection's step is asked with other programs' items when a blind reader beats chance by more than this factor.
RATIO = 1.1
# At most this many other programs' items stand for each place the selection leaves light.
MOST = 3
# The candidates weighed for a place: this many, taken evenly through the other programs' items of the step.
SAMPLE = 48
# And when the places are filled and a blind reader still beats chance, at most this many more items.
REFINE = 4


@dataclass(frozen=True)
class Blind:
    """The best blind reader of a set of choice items: its weighted accuracy, chance's, and what it does."""

    accuracy: float
    chance: float
    does: str

    @property
    def lopsided(self) -> bool:
        """Whether it beats chance by more than `RATIO`."""
        return self.accuracy > RATIO * self.chance + 1e-9


def _choices(items: Iterable[dict]) -> list[dict]:
    return [i for i in items if i["answer"]["form"] == "choice" and i.get("weight", 1.0) > 0]


def blind(items: list[dict]) -> Blind | None:
    """The best of the readers who see only the options: one who always picks the same option text (the
    step's usual answer), one who always taps the same place (the last, where there are fewer) or the last
    one, one who picks the longest or the shortest
    option (the first or the last of those as long); None when the items weigh nothing."""
    items = merged(items)
    total = sum(i.get("weight", 1.0) for i in items)
    if not total:
        return None
    chance = sum(i.get("weight", 1.0) / len(i["answer"]["options"]) for i in items) / total
    best = Blind(0.0, chance, "")
    for text in sorted({_right(i) for i in items}):
        got = sum(i.get("weight", 1.0) * (_right(i) == text if text in i["answer"]["options"]
                                          else 1 / len(i["answer"]["options"])) for i in items) / total
        if got > best.accuracy:
            best = Blind(got, chance, f"\u201c{text}\u201d is the answer")
    for place in (*range(max(len(i["answer"]["options"]) for i in items)), -1):  # of fewer, the last; or the last
        got = sum(i.get("weight", 1.0) for i in items
                  if i["answer"]["index"] == (min(place, len(i["answer"]["options"]) - 1) if place >= 0
                                              else len(i["answer"]["options"]) - 1)) / total
        if got > best.accuracy:
            best = Blind(got, chance, f"option {place + 1} is right" if place >= 0 else "the last option is right")
    for name, pick in (("the longest option is right", max), ("the shortest option is right", min)):
        for ties in (0, -1):
            got = sum(i.get("weight", 1.0) * _by_length(i, pick, ties) for i in items) / total
            if got > best.accuracy:
                best = Blind(got, chance, name)
    return best


def merged(items: Iterable[dict]) -> list[dict]:
    """The choice items with weight, those alike to a blind reader (the same options, right in the same place)
    merged into one of their summed weight: what `blind` reads, and a deep program's hundreds in a few."""
    out: dict[tuple, dict] = {}
    for i in _choices(items):
        key = (tuple(i["answer"]["options"]), i["answer"]["index"])
        if key in out:
            out[key]["weight"] += i.get("weight", 1.0)
        else:
            out[key] = {"answer": {"form": "choice", "options": list(key[0]), "index": key[1]},
                        "weight": i.get("weight", 1.0)}
    return list(out.values())


def _by_length(item: dict, pick, ties: int) -> bool:
    """Whether a reader who picks the option of `pick`'s length (of several as long, the first or the last:
    `ties` 0 or -1) is right on an item."""
    lengths = [len(o) for o in item["answer"]["options"]]
    return [k for k, n in enumerate(lengths) if n == pick(lengths)][ties] == item["answer"]["index"]


def _right(item: dict) -> str:
    return item["answer"]["options"][item["answer"]["index"]]


@dataclass(frozen=True)
class Together:
    """A step of the selection asked with other programs' items: which, why in one line, and with how many."""

    drill: str
    step: str | None
    why: str
    partners: tuple[dict, ...]

    def to_json(self) -> dict:
        """As the pool's `together` list writes it."""
        return {"drill": self.drill, "step": self.step, "why": self.why, "with": len(self.partners)}


def together(selected: list[dict], others: list[dict]) -> list[Together]:
    """For each step (drill kind and step) whose choice items in `selected` give a blind reader more than
    RATIO times chance, the items of `others` it is asked with, copied with the weights that even its places
    out (the selection's heaviest place sets the weight each other place is brought up to), and why in one
    line. Items are `dumpgym.drills/2` items as `read_pool` gives them; `others` are other programs'."""
    steps: dict[tuple, list[dict]] = {}
    for item in _choices(selected):
        steps.setdefault((item["drill"], item.get("step")), []).append(item)
    pools: dict[tuple, list[dict]] = {}
    for item in _choices(others):
        if (item["drill"], item.get("step")) in steps:
            pools.setdefault((item["drill"], item.get("step")), []).append(item)
    out = []
    for (drill, step), mine in steps.items():
        alone = blind(mine)
        if alone is None or not alone.lopsided:
            continue
        pool = pools.get((drill, step), [])
        partners = [p for width in sorted({len(i["answer"]["options"]) for i in mine})
                    for p in _partners([i for i in mine if len(i["answer"]["options"]) == width], pool)]
        partners = tuple(partners + _refined(mine, partners, pool))
        if partners:
            out.append(Together(drill, step, _why(drill, step, mine, alone, partners), partners))
    return out


def _partners(mine: list[dict], pool: list[dict]) -> list[dict]:
    """Other programs' items that bring every place of `mine` (items of one number of options) up to its
    heaviest: for each lighter place, up to MOST items right in that place, of as many programs and asking
    as many questions (a question asked word for word twice is a habit to learn), sharing its shortfall,
    each the one that leaves the blind readers of `mine` and those chosen so far the least (`blind`: so
    that the options' lengths tell no more than their places). Where `mine` offer one set of
    options in one order (a closed step: the options are its answers), items offering the same come first,
    then items whose answer is that place's option, then any right in that place, of any number of options;
    otherwise items right in that place of as many options."""
    width = len(mine[0]["answer"]["options"])
    load = [sum(i.get("weight", 1.0) for i in mine if i["answer"]["index"] == p) for p in range(width)]
    closed = {tuple(i["answer"]["options"]) for i in mine}
    options = next(iter(closed)) if len(closed) == 1 else None
    out: list[dict] = []
    for place in range(width):
        short = max(load) - load[place]
        placed = [i for i in pool if i["answer"]["index"] == place
                  and (options is not None or len(i["answer"]["options"]) == width)]
        fits = [i for i in placed if options is not None and tuple(i["answer"]["options"]) == options]
        if not fits and options is not None:
            fits = [i for i in pool if _right(i) == options[place]]
        fits = _sample(fits or placed)
        if short <= 0 or not fits:
            continue
        count = min(MOST, len(fits))
        weight = round(short / count, 3)
        taken = {i["question"] for i in (*mine, *out)}
        for _ in range(count):
            base = merged([*mine, *out])
            best = min((k for k in range(len(fits)) if fits[k] is not None), key=lambda k: (
                fits[k]["program"] in taken or fits[k]["question"] in taken,
                blind([*base, {**fits[k], "weight": weight}]).accuracy, k))
            taken.update((fits[best]["program"], fits[best]["question"]))
            out.append({**fits[best], "weight": weight})
            fits[best] = None
    return out


def _refined(mine: list[dict], chosen: list[dict], pool: list[dict]) -> list[dict]:
    """More items of `pool` while the blind readers of `mine` and `chosen` still beat chance by RATIO, at most
    REFINE, each the item and weight (an eighth, a quarter or a half of `mine`'s) that lowers the best
    reader's edge most: where the places could only be filled from items of another number of options (a
    dump's transposes offer two answers, the corpus's four), those items' own other places want filling."""
    mass = sum(i.get("weight", 1.0) for i in mine)
    out: list[dict] = []
    fits = _sample([i for i in pool if i not in chosen])
    for _ in range(REFINE):
        now = blind([*mine, *chosen, *out])
        if now is None or not now.lopsided:
            break
        taken = {i["question"] for i in (*mine, *chosen, *out)}
        tries = [{**i, "weight": round(mass * share, 3)} for i in fits if i["question"] not in taken
                 for share in (0.125, 0.25, 0.5)]
        base = merged([*mine, *chosen, *out])
        edge = lambda i: (b := blind([*base, i])).accuracy / b.chance  # noqa: E731
        best = min(tries, key=edge, default=None)
        if best is None or edge(best) >= now.accuracy / now.chance:
            break
        out.append(best)
    return out


def _sample(items: list[dict]) -> list[dict]:
    """At most SAMPLE of `items`, taken evenly through the list (so not all from the corpus's first programs)."""
    if len(items) <= SAMPLE:
        return list(items)
    return [items[k * len(items) // SAMPLE] for k in range(SAMPLE)]


def _why(drill: str, step: str | None, mine: list[dict], alone: Blind, partners: tuple[dict, ...]) -> str:
    """One line: what a blind reader of the selection alone does, and what it is asked with."""
    what = f"{drill} {step}" if step else drill
    share = "every time" if alone.accuracy > 0.999 else f"{alone.accuracy:.0%} of the time against chance's {alone.chance:.0%}"
    programs = len({p["program"] for p in partners})
    return (f"{what}: alone, {alone.does} {share} ({_count(len(mine), 'item')}); asked with "
            f"{_count(len(partners), 'item')} of {_count(programs, 'other program')} whose answers are the others")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def each_alone(items: list[dict], slugs: Iterable[str]) -> dict[str, list[Together]]:
    """Each of `slugs` drilled alone (the page's "only your programs" draws each by itself, then its items by
    weight): the steps of its items asked with the other programs' (`together`), for those that have any."""
    by: dict[str, list[dict]] = {}
    for item in items:
        by.setdefault(item["program"], []).append(item)
    out = {}
    for slug in slugs:
        found = together(by.get(slug, []), [i for other, mine in by.items() if other != slug for i in mine])
        if found:
            out[slug] = found
    return out
