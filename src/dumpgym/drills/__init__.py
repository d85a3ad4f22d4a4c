"""Stage: drills. A registry of drill kinds, each a function from one corpus program to items.

A kind is a module in this package that decorates a function with `@drill("name")`;
every public module here is imported on first use, so adding a kind is adding a file.
Modules whose names start with `_` are helpers and register nothing.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Callable

SCHEMA = "dumpgym.drills/1"

DrillFn = Callable[[dict], list]
_kinds: dict[str, DrillFn] = {}


def drill(name: str) -> Callable[[DrillFn], DrillFn]:
    """Register `fn(program) -> list[item dict]` as the drill kind `name`."""
    def register(fn: DrillFn) -> DrillFn:
        if _kinds.get(name, fn) is not fn:
            raise ValueError(f"drill kind {name!r} is registered twice")
        _kinds[name] = fn
        return fn
    return register


def kinds() -> dict[str, DrillFn]:
    """Every registered drill kind by name, after importing each kind module of this package."""
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")
    return dict(sorted(_kinds.items()))


def items_for(program: dict) -> list[dict]:
    """Every drill item of one corpus program, kind by kind, each stamped with `drill` and `program`."""
    out = []
    for name, make in kinds().items():
        for item in make(program):
            out.append({"drill": name, "program": program["slug"], **item})
    return out


def build_pool(corpus: dict) -> dict:
    """The `dumpgym.drills/1` item pool over every program of a `dumpgym.corpus/1` dict."""
    return {"schema": SCHEMA, "items": [item for p in corpus["programs"] for item in items_for(p)]}
