"""Which compiled layers a kind reads, how an item names its layer, and a listing's lines read once."""
from __future__ import annotations

import functools

# The name each built-in compile target's layer had in items' option shuffles before targets were a
# registry (`choice_item`'s seed): kept, so that the rename moved no option of any item.
_SEED_NAMES = {"cpu": "hlo", "tpu": "hlo_tpu", "gpu": "hlo_gpu"}


def layer_seed(target: str) -> str:
    """The part of an item's option shuffle that names its compiled layer (`target`, a compile target id)."""
    return _SEED_NAMES.get(target, target)


@functools.lru_cache(maxsize=8)
def text_lines(text: str) -> list[str]:
    """A listing's lines, split once however many equations of a big program ask for theirs."""
    return text.splitlines()
