"""Stage: drills. A registry of drill kinds, each a function from one typed program record to items.

A kind is a module in this package that decorates a function with
`@drill("name", number=..., title=..., aim=...)`; every public module here is imported on first
use, so adding a kind is adding a file. Modules whose names start with `_` are helpers and
register nothing; `item.py` is the item type every kind returns. The pool is assembled here, program
by program: `kept_pool` reads each program's items where they were kept (`_stored.py`, `kept_parts`) and
makes only the missing ones, each record parsed then and once; `build_pool` does the same for a corpus dict. A
kind's per-program weight cap is declared with it (`per_program=4, cap_by=("step",)`) and applied
here, in `items_for`, and nowhere else. A kind declared
with `partners=True` (`diff`) is called with a second argument, the records the program forms a pair
with (its compile with one change, or the program it is that change of: `mlp` and `mlp-f32`), and asks
nothing of a program without one; it is still a pure function of records (the built-in corpus's, which
the kept items' key covers).
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field, replace
from typing import Callable

from dumpgym.drills.item import SCHEMA, Item
from dumpgym.record.schema import ProgramRecord

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
    per_program: float | None = None  # a group of one program's items shares at most this much weight
    cap_by: tuple[str, ...] = ()  # the item fields that make a group (none: the program's whole share)
    program_cap: float | None = None  # and then all of one program's items together at most this much
    partners: bool = False  # called as make(program, partners): the records it forms a change pair with

    def capped(self, items: list[Item]) -> list[float]:
        """Each item's weight under the cap: its own weight times min(1, per_program / its group's size, or its
        group's summed weight where that is more: a step weighed up by its answers' spread stays under the
        cap too), all scaled so the program's sum stays under `program_cap`, rounded to three places."""
        groups: dict[tuple, list[float]] = {}
        for item in items:
            key = tuple(getattr(item, name) for name in self.cap_by)
            count, mass = groups.get(key, [0, 0.0])
            groups[key] = [count + 1, mass + item.weight]
        weights = [item.weight * (min(1.0, self.per_program / max(groups[tuple(getattr(item, n) for n in self.cap_by)]))
                                  if self.per_program is not None else 1.0) for item in items]
        total = sum(weights)
        scale = min(1.0, self.program_cap / total) if self.program_cap is not None and total else 1.0
        return [round(w * scale, 3) for w in weights]

    def to_json(self) -> dict:
        """The kind as the pool's `kinds` list writes it."""
        return {"name": self.name, "number": self.number, "title": self.title, "aim": self.aim}


_kinds: dict[str, DrillKind] = {}


def drill(name: str, *, number: str, title: str, aim: str, per_program: float | None = None,
          cap_by: tuple[str, ...] = (), program_cap: float | None = None,
          partners: bool = False) -> Callable[[DrillFn], DrillFn]:
    """Register `fn(program) -> list[Item]` as the drill kind `name`, shown as GYM·`number` `title`, with
    its per-program weight cap (`per_program` shared by each group of items alike in `cap_by`); with
    `partners`, `fn(program, partners)`, given the records the program forms a change pair with."""
    if not (len(number) == 2 and number.isascii() and number.isdigit()) or number == XRAY_SECTION:
        raise ValueError(f"drill kind {name!r}: number {number!r} is not two digits, or is the x-ray's")

    def register(fn: DrillFn) -> DrillFn:
        known = _kinds.get(name)
        if known is not None and known.make is not fn:
            raise ValueError(f"drill kind {name!r} is registered twice")
        taken = [k.name for k in _kinds.values() if k.number == number and k.name != name]
        if taken:
            raise ValueError(f"drill kind {name!r}: number {number} is already {taken[0]!r}'s")
        _kinds[name] = DrillKind(name, number, title, aim, fn, per_program, tuple(cap_by), program_cap, partners)
        return fn
    return register


def kinds() -> dict[str, DrillKind]:
    """Every registered drill kind by name, after importing each kind module of this package."""
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")
    return dict(sorted(_kinds.items()))


@dataclass(frozen=True)
class Skipped:
    """A drill kind that failed on one program, and why: that kind asks nothing of that program."""

    drill: str
    program: str
    why: str

    def line(self) -> str:
        """What the CLI and the page say of it, in one line."""
        return f"drill kind {self.drill!r} failed on program {self.program!r} ({self.why}); it asks nothing of it"

    def to_json(self) -> dict:
        """As the pool's `skipped` list writes it."""
        return {"drill": self.drill, "program": self.program, "why": self.why}


def items_for(program: ProgramRecord, skipped: list[Skipped] | None = None,
              partners: tuple[ProgramRecord, ...] = ()) -> list[Item]:
    """Every drill item of one program, kind by kind, each stamped with `drill` and `program` and weighted
    under its kind's cap; a kind that gives two different questions one card is refused.

    With `skipped`, a kind that raises on this program (an unusual dtype, a record it cannot read) is
    left out and noted there, and the other kinds still give their items; without it, the error raises.
    `partners` are the records `program` forms a change pair with, for the kinds that compare two compiles."""
    out = []
    for name, kind in kinds().items():
        if kind.partners and not partners:
            continue
        try:
            out += _kind_items(name, kind, program, partners)
        except Exception as error:
            if skipped is None:
                raise
            why = f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]}"
            skipped.append(Skipped(name, program.slug, why[:300]))
    return out


def _kind_items(name: str, kind: DrillKind, program: ProgramRecord, partners: tuple = ()) -> list[Item]:
    """One kind's items of one program, stamped and weighted; refused if two different questions share a card."""
    out = []
    made = list(kind.make(program, partners) if kind.partners else kind.make(program))
    for item in made:
        if not isinstance(item, Item):
            raise ValueError(f"drill kind {name!r} made {type(item).__name__}, not a drill Item")
    cards: dict[tuple, Item] = {}
    for item, weight in zip(made, kind.capped(made)):
        if item.primitive is None and item.eqn is not None:  # what the mastery map tallies by
            item = replace(item, primitive=program.eqns[item.eqn].primitive)
        item = item.stamped(name, program.slug, weight)
        twin = cards.setdefault(item.card, item)
        if twin is not item and not _same_question(twin, item):
            raise ValueError(f"drill kind {name!r} gives two different questions the card {item.card_key!r}")
        out.append(item)
    return out


def _same_question(a: Item, b: Item) -> bool:
    """Whether two items of one card can ask one question: alike but for the layer that spells it."""
    return (a.step, a.skill) == (b.step, b.skill) and a.layer != b.layer


def _partners(programs: list[dict]) -> Callable[[str], tuple[ProgramRecord, ...]]:
    """slug -> the records that program forms a change pair with (`change`, `variant_of`), read when asked."""
    by_slug = {p["slug"]: (i, p) for i, p in enumerate(programs)}
    pairs: dict[str, list[str]] = {}
    for p in programs:
        if "change" in p and p.get("variant_of") in by_slug:
            pairs.setdefault(p["slug"], []).append(p["variant_of"])
            pairs.setdefault(p["variant_of"], []).append(p["slug"])
    read: dict[str, ProgramRecord] = {}

    def of(slug: str) -> tuple[ProgramRecord, ...]:
        for other in pairs.get(slug, ()):
            if other not in read:
                i, p = by_slug[other]
                read[other] = ProgramRecord.from_json(p, f"programs[{i}]")
        return tuple(read[other] for other in pairs.get(slug, ()))
    return of


def build_pool(corpus: dict, warn: Callable[[str], None] | None = None, stored=None) -> dict:
    """The `dumpgym.drills/2` item pool over every program of a corpus dict.

    A kind that fails on one program costs that kind on that program only: it is listed in the pool's
    `skipped` (the page says so) and told to `warn` in one line; nothing else is lost. With `stored`
    (`_stored.StoredItems` of the user's corpus folder), an added program's items are read from beside
    its record when they were made from this record (by its canonical JSON) by this code, and kept there
    when made. `dumpgym drills`, `serve` and `build` read the programs' files instead (`kept_pool`)."""
    from dumpgym.drills._stored import Kept, record_digest

    parts: list[Kept] = []
    partners = _partners(corpus["programs"])
    for i, program in enumerate(corpus["programs"]):
        store = stored if program.get("added") else None
        key = record_digest(program) if store is not None else ""
        kept = store.read(program["slug"], key) if store is not None else None
        if kept is None:
            kept = _made(ProgramRecord.from_json(program, f"programs[{i}]"), partners(program["slug"]))
            if store is not None:
                store.write(program["slug"], key, kept)
        parts.append(kept)
    return pool_of(parts, warn)


def _made(record: ProgramRecord, partners: tuple[ProgramRecord, ...] = ()):
    """What is kept of one program's items, made now (`partners`: the records it forms a change pair with)."""
    from dumpgym.drills._stored import Kept

    failed: list[Skipped] = []
    items = [item.to_json() for item in items_for(record, failed, partners)]
    return Kept.of(items, [s.to_json() for s in failed])


def kept_parts(sources) -> list:
    """Each program's kept items (`_stored.Kept`) where this code made them from these bytes, else None:
    nothing is made and no record parsed (`serve` answers with these while it makes the rest)."""
    return [source.store.read(source.slug, source.digest) if source.store is not None else None
            for source in sources]


def kept_pool(sources, warn: Callable[[str], None] | None = None, parts: list | None = None) -> list:
    """Each program's kept items (`_stored.Kept`), read where this code made them from these bytes, else
    made (parsing the record then, once) and kept. `sources` are `_stored.ProgramSource`s; one whose
    record turns out damaged is skipped with a line to `warn` (raised without it). `parts`: what
    `kept_parts(sources)` read already (its Nones are made)."""
    from dumpgym.drills._decision_why import builtin_asked, builtin_spread
    from dumpgym.drills._spread import builtin_answers
    from dumpgym.drills._stored import BuiltinStore, builtin_corpus
    from dumpgym.errors import CorpusFolderError

    out = []
    for source, kept in zip(sources, kept_parts(sources) if parts is None else parts):
        if kept is None:
            try:
                record = source.record()
            except CorpusFolderError as e:
                if warn is None:
                    raise
                warn(f"skipping {source.slug}: {e}")
                continue
            kept = _made(record, () if source.added else _builtin_partners(record))
            if source.store is not None:
                kept = source.store.write(source.slug, source.digest, kept)
        out.append(kept)
    store = next((s.store for s in sources if isinstance(s.store, BuiltinStore)), None)
    if store is not None and store.index() is None:  # the first start of this code: keep what lists the built-ins
        kinds()  # every kind module registers its steps' spreads on import
        store.write_index([p.slug for p in builtin_corpus().programs], builtin_spread(), builtin_asked(),
                          builtin_answers())
    return out


def _builtin_partners(record: ProgramRecord) -> tuple[ProgramRecord, ...]:
    """The built-in records a built-in program forms a change pair with, in corpus order (an added program
    forms none: `dumpgym add` makes no change pairs)."""
    from dumpgym.drills._stored import builtin_corpus

    return tuple(p for p in builtin_corpus().programs
                 if (p.change and p.variant_of == record.slug) or (record.change and p.slug == record.variant_of))


class Pool(dict):
    """A pool as `pool_of` gives it, holding the kept parts it was read from (`parts`), so that
    `printed_pool` copies their kept text rather than packing every item again. A copy of it is a plain
    dict: printed all the same, by packing."""

    __slots__ = ("parts",)


def pool_of(parts: list, warn: Callable[[str], None] | None = None, together: list[dict] = ()) -> dict:
    """The `dumpgym.drills/2` pool of the programs' kept items, in order; each skipped kind told to `warn`;
    `together`: the steps whose items are asked with other programs' (`asked_together`)."""
    items = [item for kept in parts for item in kept.items()]
    skipped = [s for kept in parts for s in kept.skipped]
    pool = Pool(schema=SCHEMA, kinds=_kinds_of(parts), items=items)
    pool.parts = list(parts)
    if skipped:  # left out when empty: a pool with nothing skipped prints as before
        pool["skipped"] = skipped
    if together:  # likewise
        pool["together"] = list(together)
    tell_skipped(parts, warn)
    return pool


def write_pool(parts: list, out, warn: Callable[[str], None] | None = None, together: list[dict] = ()) -> None:
    """Write the pool of the programs' kept items to the binary stream `out` as `dumpgym drills` prints it:
    packed (`_packed.write`; `read_pool` gives back what `pool_of(parts, together=together)` gives), copying
    each program's kept items and decoding only their tables (a big model's items cost what reading them costs)."""
    from dumpgym.drills import _packed

    skipped = [s for kept in parts for s in kept.skipped]
    texts = [text for text in (kept.encoded() for kept in parts) if len(text)]
    _packed.write({"schema": SCHEMA, "kinds": _kinds_of(parts)}, texts, skipped, out, together)
    tell_skipped(parts, warn)


def asked_together(parts: list, others: Callable[[], list]) -> tuple[list, list[dict]]:
    """What a few programs' items (`parts`, kept) are asked with when drilled without the rest of the corpus:
    for each step their choice items cannot even out alone (`_together.together`), a few items of the same
    step from `others()` (the other programs' kept parts, read only when some step needs them), reweighted,
    as kept parts one per program; and the pool's `together` list, one entry per such step saying why."""
    from dumpgym.drills._stored import Kept
    from dumpgym.drills._together import blind, together

    mine = [item for kept in parts for item in kept.items()]
    steps: dict[tuple, list[dict]] = {}
    for item in mine:
        steps.setdefault((item["drill"], item.get("step")), []).append(item)
    if not any((b := blind(items)) is not None and b.lopsided for items in steps.values()):
        return [], []
    asked = together(mine, [item for kept in others() for item in kept.items()])
    by_program: dict[str, list[dict]] = {}
    for step in asked:
        for item in step.partners:
            by_program.setdefault(item["program"], []).append(item)
    return [Kept.of(items, []) for items in by_program.values()], [step.to_json() for step in asked]


def printed_pool(pool: dict) -> bytes:
    """The bytes `dumpgym drills` prints of `pool` (packed, with its closing newline): the page's
    `drills.json`. A pool from `pool_of` is printed by copying its parts' kept text; any other is packed."""
    import io

    from dumpgym.drills import _packed
    from dumpgym.drills._stored import Kept

    out = io.BytesIO()
    parts = getattr(pool, "parts", None)
    if parts is not None:
        write_pool(parts, out)
    else:
        by_program: dict[str, list[dict]] = {}
        for item in pool["items"]:
            by_program.setdefault(item["program"], []).append(item)
        texts = [Kept.of(items, []).encoded() for items in by_program.values()]
        _packed.write({"schema": pool["schema"], "kinds": pool["kinds"]}, texts, pool.get("skipped", []), out)
    return out.getvalue() + b"\n"


def read_pool(printed: dict) -> dict:
    """The pool (`schema`, `kinds`, `items`, `skipped`) from the parsed JSON `dumpgym drills` printed."""
    from dumpgym.drills import _packed

    return _packed.read(printed)


def _kinds_of(parts: list) -> list[dict]:
    present = {name for kept in parts for name in kept.kinds}
    return [k.to_json() for k in sorted((k for k in kinds().values() if k.name in present), key=lambda k: k.number)]


def tell_skipped(parts: list, warn: Callable[[str], None] | None) -> None:
    """Tell `warn` of each kind skipped on a program of these kept items, in one line each."""
    for s in (s for kept in parts for s in kept.skipped):
        if warn is not None:
            warn(Skipped(**s).line())
