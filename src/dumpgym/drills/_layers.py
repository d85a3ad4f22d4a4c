"""Which compiled layers a kind reads, how an item names its layer, and a listing's lines read once."""
from __future__ import annotations

import functools

def layer_seed(target: str) -> str:
    """The part of an item's option shuffle that names its compiled layer: its compile target id."""
    return target


@functools.lru_cache(maxsize=8)
def text_lines(text: str) -> list[str]:
    """A listing's lines, split once however many equations of a big program ask for theirs."""
    return text.splitlines()
