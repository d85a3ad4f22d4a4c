"""Which compiled layers a kind reads, and how an item names its layer."""
from __future__ import annotations

# The name each built-in compile target's layer had in items' option shuffles before targets were a
# registry (`choice_item`'s seed): kept, so that the rename moved no option of any item.
_SEED_NAMES = {"cpu": "hlo", "tpu": "hlo_tpu", "gpu": "hlo_gpu"}


def layer_seed(target: str) -> str:
    """The part of an item's option shuffle that names its compiled layer (`target`, a compile target id)."""
    return _SEED_NAMES.get(target, target)
