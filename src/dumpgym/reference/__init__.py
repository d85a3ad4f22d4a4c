"""The op reference: one card per jaxpr primitive or StableHLO op, found by the name a dump prints."""
from __future__ import annotations

from dumpgym.reference import (
    arithmetic, casts, contractions, control, distributed, indexing, logic, reductions, shapes,
    structure, transcendental,
)
from dumpgym.reference.card import FAMILIES, LAYERS, Card

__all__ = ["ALIASES", "Card", "FAMILIES", "LAYERS", "card_for", "cards", "fallback_card"]

# Reading order on the reference page: family module by family module, jaxpr before StableHLO.
_MODULES = (
    arithmetic, transcendental, casts, logic, reductions, shapes, indexing, contractions,
    control, distributed, structure,
)
_CARDS = tuple(card for module in _MODULES for card in module.CARDS)
_BY_NAME = {card.name: card for card in _CARDS}

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


def card_for(name: str) -> Card | None:
    """The card for an op name as a dump prints it (aliases and quoted generic forms too), or None."""
    # The generic MLIR form quotes the name: `"stablehlo.all_reduce"(%0) ...`.
    key = name.strip().strip('"')
    return _BY_NAME.get(key) or _BY_NAME.get(ALIASES.get(key, ""))


def fallback_card(name: str) -> Card:
    """An honest minimal card for an op that has no card written yet."""
    if "." in name:
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
