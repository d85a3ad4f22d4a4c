"""One drill item (`dumpgym.drills/2`): its identity, its answer form, and its context as references.

An `Item` is frozen and typed. Its `card` is the kind's own decision of what makes two items the same
question (the scheduler keeps one card per question); its `answer` is one of the registered answer
forms (answer.py `FORMS`: a tagged union, `{"form": "typed", ...}`); its `context` is a list of blocks that
point into the program's listings (`Lines`: which lines of which layer, and how they are cut) or say a
short computed thing in plain text (`Note`). `resolve` turns a context into exactly the blocks of text
the page shows; the page does the same from the listings it fetches (static/context.js), by the same rule.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Mapping, Union

from dumpgym.drills._tpu import short_rows
from dumpgym.drills.answer import FORMS, Answer, AxisSet, Choice, LinePick, LineSet, Misreading, Typed  # noqa: F401
from dumpgym.record.schema import ProgramRecord, valid_target_id

SCHEMA = "dumpgym.drills/2"
MAX_CARD_PART = 120  # characters of one part of a card; a longer one is kept as its digest

# The listings an item can point into, by layer id: the two lowered texts and a dump's HLO before optimisations,
# then each compiled layer by its compile target id (`target.TARGETS`: cpu, tpu, gpu, ..., the keys of `compiled`).
LOWERED = ("jaxpr", "stablehlo", "hlo-before")


def listing_text(program: ProgramRecord, layer: str) -> str | None:
    """The text of one of a program's listings by layer id (`jaxpr`, `stablehlo`, `hlo-before`, or a compile target
    id), or None."""
    if layer == "hlo-before":
        return program.dump.hlo_before if program.dump is not None else None
    if layer in LOWERED:
        return getattr(program, layer)
    compiled = program.compiled.get(layer)
    return compiled.text if compiled is not None else None


# --- answer forms: see answer.py (choice, line, lines, typed, axes) -------------------------------

def choice(made: Mapping) -> Choice:
    """A `Choice` from `_avals.choice_item`'s options, answer, reasons and rules."""
    return Choice(tuple(made["options"]), made["answer"], tuple(made["reasons"]), tuple(made["rules"]))


# --- context blocks ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Note:
    """A short computed block, as plain text: which compile this is, a masked equation, an operands row."""

    text: str

    def to_json(self) -> dict:
        """The block as the pool writes it."""
        return {"text": self.text}


@dataclass(frozen=True)
class Lines:
    """Lines `first`..`last` (1-based, inclusive) of one of the program's listings, shown as they are, or
    each `strip`ped, `cut` (stripped, and without its metadata and other trailing attributes), or
    `numbered` (`' 19  '` before each). With `program`, the lines are of that program's listing instead:
    the other compile of a change (`mlp-f32` beside `mlp`), shown beside the item's own."""

    layer: str
    first: int
    last: int
    cut: bool = False
    strip: bool = False
    numbered: bool = False
    program: str = ""

    def to_json(self) -> dict:
        """The block as the pool writes it: `{"layer", "lines": [first, last]}`, the flags that are set, and
        `program` where it reads another program's listing."""
        flags = {k: True for k in ("cut", "strip", "numbered") if getattr(self, k)}
        return {"layer": self.layer, "lines": [self.first, self.last], **flags,
                **({"program": self.program} if self.program else {})}


Block = Union[Note, Lines]


def resolve(context: list[dict], program: ProgramRecord,
            others: Mapping[str, ProgramRecord] | None = None) -> list[str]:
    """The blocks of text the page shows for an item's JSON `context`, read from the program's listings (and,
    for a block that names another `program`, from that one's, found in `others` by slug)."""
    cache: dict[tuple[str, str], list[str]] = {}
    cuts = {}
    out = []
    for block in context:
        if "text" in block:
            out.append(block["text"])
            continue
        layer, slug = block["layer"], block.get("program", program.slug)
        if (slug, layer) not in cache:
            source = program if slug == program.slug else (others or {}).get(slug)
            if source is None:
                raise ValueError(f"{program.slug}: a context block points into {slug!r}, which is not given")
            text = listing_text(source, layer)
            if text is None:
                raise ValueError(f"{slug}: a context block points into {layer!r}, which it does not have")
            cache[slug, layer] = text.split("\n")
            cuts[slug, layer] = short_rows(source.compiled.get(layer))
        first, last = block["lines"]
        rows = []
        for n in range(first, last + 1):
            row = cache[slug, layer][n - 1]
            if block.get("cut"):
                row = cuts[slug, layer](n, row)
            elif block.get("strip"):
                row = row.strip()
            if block.get("numbered"):
                row = f"{n:>3}  {row}"
            rows.append(row)
        out.append("\n".join(rows))
    return out


# --- the item ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Item:
    """One question: identity (`card`, within its kind and program), layer, answer form and context.

    `card` holds the parts after `drill/program/`; `drill` and `program` are stamped on by the registry
    (`items_for`), which also applies the kind's per-program weight cap to `weight`. `facts` holds what a
    kind says its item is about (a fusion's name, an instruction's line) for readers and tests; the page
    reads none of it.
    """

    question: str
    answer: Answer
    context: tuple[Block, ...]
    card: tuple[str, ...]
    layer: str
    eqn: int | None = None
    step: str | None = None
    skill: str | None = None
    weight: float = 1.0
    primitive: str | None = None
    feedback: str | None = None
    jaxpr_lines: tuple[int, int] | None = None
    facts: Mapping[str, object] = field(default_factory=dict)
    drill: str = ""
    program: str = ""

    def __post_init__(self):
        if self.layer not in LOWERED and not valid_target_id(self.layer or ""):
            raise ValueError(f"drill item layer {self.layer!r} is neither jaxpr, stablehlo, hlo-before nor a compile "
                             "target id")
        parts = [str(p) for p in self.card]
        if not parts or any(not p or "/" in p or any(c.isspace() for c in p) for p in parts):
            raise ValueError(f"drill item card {self.card!r}: parts must be non-empty, without '/' or spaces")
        # The page's progress record keeps a key per card: a very long part (a buffer of a user's program)
        # is kept as a digest of it, so every key stays short.
        parts = [p if len(p) <= MAX_CARD_PART else "sha256:" + hashlib.sha256(p.encode()).hexdigest()[:16]
                 for p in parts]
        object.__setattr__(self, "card", tuple(parts))

    @property
    def card_key(self) -> str:
        """The card as the page's progress record keys it: `drill/program/part/...`."""
        return "/".join((self.drill, self.program, *self.card))

    def to_json(self) -> dict:
        """The item as the pool writes it; optional fields only when set."""
        out = {"drill": self.drill, "program": self.program, "card": self.card_key, "eqn": self.eqn,
               "layer": self.layer}
        for name in ("step", "skill", "primitive"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        out["weight"] = self.weight
        out["question"] = self.question
        out["answer"] = self.answer.to_json()
        out["context"] = [b.to_json() for b in self.context]
        if self.feedback is not None:
            out["feedback"] = self.feedback
        if self.jaxpr_lines is not None:
            out["jaxpr_lines"] = list(self.jaxpr_lines)
        if self.facts:
            out["facts"] = json.loads(json.dumps(dict(self.facts)))
        return out

    def stamped(self, drill: str, program: str, weight: float) -> Item:
        """This item as the registry hands it out: its kind and program named, its capped weight."""
        return replace(self, drill=drill, program=program, weight=weight)


# --- from a kind's draft -------------------------------------------------------------------------

_CHOICE_KEYS = ("options", "answer", "reasons", "rules")
_ITEM_KEYS = ("question", "eqn", "step", "skill", "weight", "primitive", "feedback", "jaxpr_lines")


def from_draft(draft: Mapping, *, card: tuple, layer: str, context: tuple) -> Item:
    """An `Item` from a kind's multiple-choice draft: `question`, `options`/`answer`/`reasons`/`rules` and
    the item fields it has; every other key but `layer` and `shown` is a fact the item is about."""
    kept = {k: draft[k] for k in _ITEM_KEYS if k in draft}
    if "jaxpr_lines" in kept:
        kept["jaxpr_lines"] = tuple(kept["jaxpr_lines"])
    facts = {k: v for k, v in draft.items() if k not in (*_CHOICE_KEYS, *_ITEM_KEYS, "layer", "shown")}
    return Item(answer=choice(draft), card=card, layer=layer, context=context, facts=facts, **kept)


def refer(program: ProgramRecord, layers: str | tuple[str, ...], blocks) -> tuple:
    """Context for text blocks a kind made: each block that is some consecutive lines of one of `layers`'
    listings (as printed, stripped or cut) becomes a reference to them, any other (a note, a masked line)
    stays text. Which copy of a repeated line is named does not matter: both resolve to the same text."""
    found = [_line_index(program, layer) for layer in ((layers,) if isinstance(layers, str) else layers)]
    return tuple(next((ref for ref in (_reference(program, index, block) for index in found) if ref), None)
                 or Note(block) for block in blocks)


def _line_index(program: ProgramRecord, layer: str) -> tuple[str, int, dict]:
    """A layer's id, its number of lines, and the first line number of each line as printed, stripped and cut."""
    text = listing_text(program, layer)
    rows = text.split("\n") if text is not None else []
    cut = short_rows(program.compiled.get(layer))
    where: dict[tuple[str, str], int] = {}
    for n, row in enumerate(rows, start=1):
        for how, shown in (("", row), ("strip", row.strip()), ("cut", cut(n, row))):
            where.setdefault((how, shown), n)
    return layer, len(rows), where


def _reference(program: ProgramRecord, index: tuple[str, int, dict], block: str) -> Lines | None:
    layer, count, where = index
    lines = block.split("\n")
    for how in ("", "strip", "cut"):
        first = where.get((how, lines[0]))
        if first is None or first + len(lines) - 1 > count:
            continue
        ref = Lines(layer, first, first + len(lines) - 1, cut=how == "cut", strip=how == "strip")
        if resolve([ref.to_json()], program) == [block]:
            return ref
    return None
