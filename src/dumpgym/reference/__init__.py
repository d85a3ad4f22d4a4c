"""The op reference: one card per jaxpr primitive or StableHLO op, found by the name a dump prints."""
from __future__ import annotations

import re

from dumpgym.reference import (
    arithmetic, casts, compiled, contractions, control, distributed, indexing, logic, reductions, shapes,
    structure, training, transcendental,
)
from dumpgym.reference.card import FAMILIES, LAYERS, Card

__all__ = ["ALIASES", "Card", "FAMILIES", "LAYERS", "card_for", "cards", "compiled_as", "fallback_card", "fold", "same_op", "search",
           "search_text"]

# Reading order on the reference page: family module by family module, jaxpr before StableHLO.
_MODULES = (
    arithmetic, transcendental, casts, logic, reductions, shapes, indexing, contractions,
    control, distributed, structure, training,
    compiled,  # compiled HLO last: its notation reads after the layers it is compiled from
)
_CARDS = tuple(card for module in _MODULES for card in module.CARDS)
# A compiled-HLO card may share its name with a jaxpr one (`copy`, `while`): a bare name finds the
# jaxpr or StableHLO card first, `layer="hlo"` the compiled one.
_BY_LAYER = {layer: {card.name: card for card in _CARDS if card.layer == layer} for layer in LAYERS}
_BY_NAME = {**_BY_LAYER["hlo"], **_BY_LAYER["jaxpr"], **_BY_LAYER["stablehlo"]}

# Names a reader meets or types that belong to another card: the pretty printer drops the `func.`
# of `func.call` at top level, older JAX printed `pjit` and `psum2`, and users know remat2 by its
# API names. expand_dims is not a primitive; it traces to broadcast_in_dim.
ALIASES = {
    "call": "func.call",
    "pjit": "jit",
    "psum2": "psum",
    "remat": "remat2",
    "checkpoint": "remat2",
    "expand_dims": "broadcast_in_dim",
}


def cards() -> list[Card]:
    """Every card, jaxpr and StableHLO, in reading order."""
    return list(_CARDS)


def card_for(name: str, layer: str | None = None) -> Card | None:
    """The card for an op name as a dump prints it (aliases and quoted generic forms too), or None;
    `layer` ("hlo" for a compiled listing) looks in that layer only."""
    # The generic MLIR form quotes the name: `"stablehlo.all_reduce"(%0) ...`.
    key = name.strip().strip('"')
    table = _BY_NAME if layer is None else _BY_LAYER[layer]
    found = table.get(key) or table.get(ALIASES.get(key, ""))
    if found is None and layer == "hlo":
        # HLO and StableHLO share their ops' names (`exponential`, `dynamic-slice`): a compiled opcode with
        # no card of its own is read from the StableHLO op it was compiled from.
        found = _BY_LAYER["stablehlo"].get("stablehlo." + key.replace("-", "_"))
    return found


def fallback_card(name: str, layer: str | None = None) -> Card:
    """An honest minimal card for an op that has no card written yet (`layer` "hlo": a compiled opcode)."""
    if layer == "hlo":
        layer, where = "hlo", "the shapes with their layouts on its line and the instructions it takes"
    elif "." in name:
        layer, where = "stablehlo", "the attributes after it and the tensor types in its signature"
    else:
        layer, where = "jaxpr", "the params in its brackets and the avals of its invars and outvars"
    return Card(
        name=name,
        layer=layer,
        family="unknown",
        what=f"No reference card is written for `{name}` yet, so dumpgym cannot say what it does.",
        looks=f"Read {where}; those are facts from the dump itself.",
        misread=(
            "The usual mistake is guessing its meaning from the name alone; check the JAX or StableHLO"
            " documentation before trusting a reading."
        ),
    )


# Which compiled opcodes' cards each StableHLO op is compiled into, by the StableHLO op's name.
_COMPILED_AS: dict[str, list[Card]] = {}
for _card in _BY_LAYER["hlo"].values():
    for _name in _card.compiled_from:
        _COMPILED_AS.setdefault(_name, []).append(_card)


def compiled_as(card: Card) -> list[Card]:
    """The cards of the opcodes XLA compiles a StableHLO op into (`stablehlo.all_reduce`: `all-reduce`, ...)."""
    return list(_COMPILED_AS.get(card.name, [])) if card.layer == "stablehlo" else []


def _at_other_layer(card: Card) -> list[Card]:
    return [twin for twin in (card_for(name) for name in card.pairs) if twin is not None and twin.layer != card.layer]


def same_op(card: Card) -> list[Card]:
    """The cards of the same op at the other layers: a primitive's StableHLO op and the opcodes XLA compiles
    that into, a StableHLO op's primitives and opcodes, an opcode's StableHLO ops and their primitives."""
    if card.layer == "hlo":
        stablehlo = [_BY_LAYER["stablehlo"][name] for name in card.compiled_from]
        found = stablehlo + [twin for s in stablehlo for twin in _at_other_layer(s)]
    elif card.layer == "stablehlo":
        found = _at_other_layer(card) + compiled_as(card)
    else:
        stablehlo = _at_other_layer(card)
        found = stablehlo + [h for s in stablehlo for h in compiled_as(s)]
    return list({id(c): c for c in found if c is not card}.values())


def fold(text: str) -> str:
    """Text as the op search compares it: lower case, hyphens and underscores dropped, so `all-reduce`,
    `all_reduce` and `allreduce` are one word."""
    return re.sub(r"[-_]", "", text.lower())


_ALIASES_OF: dict[str, list[str]] = {}
for _alias, _name in ALIASES.items():
    _ALIASES_OF.setdefault(_name, []).append(_alias)


def search_text(card: Card) -> str:
    """What the op search matches a card by, folded: its name, layer, family and description (`what`), the
    words people use for it, and the names and words of the same op's cards at the other layers."""
    def called(c: Card) -> list[str]:
        return [c.name, *c.words, *_ALIASES_OF.get(c.name, [])]
    parts = [*called(card), card.layer, card.family, card.what]
    for twin in same_op(card):
        parts += called(twin)
    return fold(" ".join(parts))


def search(query: str, among: list[Card] | None = None) -> list[Card]:
    """The cards the page's op search shows for `query`: those whose `search_text` holds every
    whitespace-separated word of it, folded (all of them for an empty query)."""
    words = fold(query).split()
    return [c for c in (cards() if among is None else among) if all(w in search_text(c) for w in words)]
