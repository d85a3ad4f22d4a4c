"""The `Card` record: one op at one layer, written for someone reading a dump."""
from __future__ import annotations

from dataclasses import dataclass

LAYERS = ("jaxpr", "stablehlo", "hlo")  # hlo: XLA's compiled listings (CPU and TPU)

FAMILIES = (
    "elementwise", "cast", "logic", "reduction", "shape", "creation", "indexing",
    "contraction", "control", "autodiff", "collective", "sharding", "structure",
    "layout", "memory",  # compiled HLO: layouts and tiles; memory spaces and copies between them
    "unknown",  # only for fallback cards
)


@dataclass(frozen=True)
class Card:
    """What one op does, how it looks in a dump, how it is misread, and its twins at the other layer."""

    name: str  # exactly as the dump spells it: `reduce_sum`, `scatter-add`, `stablehlo.reduce`, `copy-start`
    layer: str  # "jaxpr", "stablehlo" or "hlo" (compiled)
    family: str
    what: str
    looks: str
    misread: str
    pairs: tuple[str, ...] = ()  # card names at the other layer; empty when nothing corresponds
    # What people type when they look for this op (`matmul`, `allreduce`, `jax.checkpoint`): the search
    # finds the card, and the same op's cards at the other layers, by these words.
    words: tuple[str, ...] = ()
    # A compiled opcode's card: the StableHLO ops XLA compiles into it (`all-reduce`: `stablehlo.all_reduce`).
    compiled_from: tuple[str, ...] = ()

    def __post_init__(self):
        if self.layer not in LAYERS:
            raise ValueError(f"card {self.name!r}: layer {self.layer!r} is not one of {LAYERS}")
        if self.family not in FAMILIES:
            raise ValueError(f"card {self.name!r}: family {self.family!r} is not one of {FAMILIES}")
        if self.compiled_from and self.layer != "hlo":
            raise ValueError(f"card {self.name!r}: only a compiled opcode's card says what it is compiled from")
