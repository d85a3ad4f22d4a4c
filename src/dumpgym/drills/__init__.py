"""Stage: drills. A registry of drill kinds, each a function from one typed program record to items.

A kind is a module in this package that decorates a function with
`@drill("name", number=..., title=..., aim=...)`; every public module here is imported on first
use, so adding a kind is adding a file. Modules whose names start with `_` are helpers and
register nothing. The corpus dict is read into `ProgramRecord`s once, in `build_pool`.
"""
from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass, field
from typing import Callable

from dumpgym.record import ProgramRecord

SCHEMA = "dumpgym.drills/1"
# Section 04 of the gym floor is the x-ray, which is not a drill kind: the drills number around it.
XRAY_SECTION = "04"

DrillFn = Callable[[ProgramRecord], list]


@dataclass(frozen=True)
class DrillKind:
    """A registered drill kind: its name, its number and title on the page, what it trains, and its function."""

    name: str
    number: str
    title: str
    aim: str
    make: DrillFn | None = field(default=None, repr=False, compare=False)  # None: named by a pool, not registered

    def to_json(self) -> dict:
        """The kind as the pool's `kinds` list writes it."""
        return {"name": self.name, "number": self.number, "title": self.title, "aim": self.aim}


_kinds: dict[str, DrillKind] = {}


def drill(name: str, *, number: str, title: str, aim: str) -> Callable[[DrillFn], DrillFn]:
    """Register `fn(program) -> list[item dict]` as the drill kind `name`, shown as GYM·`number` `title`."""
    if not re.fullmatch(r"\d\d", number) or number == XRAY_SECTION:
        raise ValueError(f"drill kind {name!r}: number {number!r} is not two digits, or is the x-ray's")

    def register(fn: DrillFn) -> DrillFn:
        known = _kinds.get(name)
        if known is not None and known.make is not fn:
            raise ValueError(f"drill kind {name!r} is registered twice")
        taken = [k.name for k in _kinds.values() if k.number == number and k.name != name]
        if taken:
            raise ValueError(f"drill kind {name!r}: number {number} is already {taken[0]!r}'s")
        _kinds[name] = DrillKind(name, number, title, aim, fn)
        return fn
    return register


def kinds() -> dict[str, DrillKind]:
    """Every registered drill kind by name, after importing each kind module of this package."""
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")
    return dict(sorted(_kinds.items()))


def items_for(program: ProgramRecord) -> list[dict]:
    """Every drill item of one program, kind by kind, each stamped with `drill` and `program`."""
    out = []
    for name, kind in kinds().items():
        for item in kind.make(program):
            if not isinstance(item.get("shown"), list):  # the page renders `shown` and nothing else
                raise ValueError(f"drill kind {name!r} made an item without 'shown' (a list of strings)")
            out.append({"drill": name, "program": program.slug, **item})
            out[-1].setdefault("weight", 1)
            if isinstance(item.get("eqn"), int):  # what the mastery map tallies by, beside drill and skill
                out[-1].setdefault("primitive", program.eqns[item["eqn"]].primitive)
    return out


def build_pool(corpus: dict) -> dict:
    """The `dumpgym.drills/1` item pool over every program of a `dumpgym.corpus/1` dict."""
    programs = [ProgramRecord.from_json(p, f"programs[{i}]") for i, p in enumerate(corpus["programs"])]
    items = [item for p in programs for item in items_for(p)]
    present = {item["drill"] for item in items}
    listed = sorted((k for k in kinds().values() if k.name in present), key=lambda k: k.number)
    return {"schema": SCHEMA, "kinds": [k.to_json() for k in listed], "items": items}
