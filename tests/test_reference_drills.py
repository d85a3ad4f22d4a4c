"""The op reference covers every op a drill item shows: each opcode, StableHLO op and primitive on an
item's screen (its context resolved, over the whole pool the page serves), typed into the page's filter as
printed, finds that op's own card, compiled opcodes included (`transpose`, `dynamic-slice`, `select`,
`reduce-scatter-start`). The ops are read from the shown text by this file's own patterns, not from the
records the drills were made from; the filter is the page's: every folded word in a card's `search`."""
import re
from collections import defaultdict

import pytest

from dumpgym.reference import fold

# `%x.3 = f32[8]{0} transpose(%y), ...`: a compiled line's opcode is the first lower-case word before a
# `(` after ` = ` (a type's tiles `T(8,128)` and spaces `S(1)` are upper case; a tuple type opens bare).
_HLO = re.compile(r" = .*?(?<![\w.%-])([a-z][a-z0-9\-]*)\(")
# `stablehlo.add`, `chlo.top_k`, `func.call`; not an attribute's value (`#sdy.sharding<...>`) or key
# (`{sdy.sharding = ...}`, `{stablehlo.mesh = ...}`).
_SHLO = re.compile(r"(?<![#\w.])((?:stablehlo|chlo|func|sdy)\.[a-z_]+)\b(?!<)(?!\s*=)")
# `c:f32[64,512] = dot_general[`, `d:f32[] = reduce_sum[axes=(0,)] c`, `_:f32[] = ...`.
_JAXPR = re.compile(r"^\s*(?:\d+\s+)?(?:[a-z_]+:\S+\s+)+=\s+([a-z_][a-z0-9_]*)(?=[\s\[]|$)")


def shown_ops(item: dict, blocks: list[str]) -> set[tuple[str, str]]:
    """(layer, op) for each op an item's screen shows: `hlo` for a compiled listing's opcodes."""
    out = set()
    for block, text in zip(item["context"], blocks):
        layer = block.get("layer", item["layer"])
        for line in text.split("\n"):
            if layer in ("cpu", "tpu", "gpu"):
                m = _HLO.search(line)
                if m:
                    out.add(("hlo", m.group(1)))
            elif layer == "stablehlo" or "stablehlo." in line:
                out |= {("stablehlo", m.group(1)) for m in _SHLO.finditer(line)}
            else:
                m = _JAXPR.match(line)
                if m:
                    out.add(("jaxpr", m.group(1)))
    return out


@pytest.fixture(scope="module")
def views(whole_corpus):
    """The cards as the page gets them (`data/reference.json`'s), for the whole corpus."""
    from dumpgym.record.schema import Corpus
    from dumpgym.site.files import _op_cards

    return _op_cards(Corpus.from_json(whole_corpus))[0]


def _own(view: dict, layer: str, op: str) -> bool:
    """Whether a card is this op's: by its name at its layer, or (compiled) by the spelling it is printed as."""
    from dumpgym.reference import ALIASES

    if view["family"] == "unknown":  # `fallback_card`: "no reference card is written yet" is no card
        return False
    if layer == "hlo":
        return (view["layer"] == "hlo" and view["name"] == op) or op in view["hlo"]
    return view["name"] in (op, ALIASES.get(op)) and view["layer"] == layer


def test_the_filter_finds_the_card_of_every_op_an_item_shows(whole_corpus, views):
    from dumpgym.drills import build_pool
    from dumpgym.drills.item import resolve
    from dumpgym.record.schema import ProgramRecord

    pool = build_pool(whole_corpus)
    records = {p["slug"]: ProgramRecord.from_json(p) for p in whole_corpus["programs"]}
    shown: dict[tuple[str, str], str] = {}
    for item in pool["items"]:
        for op in shown_ops(item, resolve(item["context"], records[item["program"]], records)):
            shown.setdefault(op, item["card"])
    layers = defaultdict(set)
    for layer, op in shown:
        layers[layer].add(op)
    # The reader reads every layer, and the opcodes the issue names among the compiled ones.
    assert {"transpose", "dynamic-slice", "slice", "select", "compare", "convert", "fusion"} <= layers["hlo"]
    assert len(layers["stablehlo"]) > 20 and len(layers["jaxpr"]) > 20
    missing = []
    for (layer, op), card in sorted(shown.items()):
        words = fold(op).split()
        found = [v for v in views if all(w in v["search"] for w in words)]
        if not any(_own(v, layer, op) for v in found):
            missing.append((layer, op, card))
    assert not missing, missing


def test_a_stablehlo_card_names_the_opcode_compiled_listings_print_for_it(views):
    """`dynamic-slice` has no compiled card of its own: the StableHLO op's card says a compile prints it so,
    and "compiled dynamic-slice" finds that card."""
    card = next(v for v in views if v["name"] == "stablehlo.dynamic_slice")
    assert card["hlo"] == ["dynamic-slice"]
    found = [v["name"] for v in views if all(w in v["search"] for w in fold("compiled dynamic-slice").split())]
    assert "stablehlo.dynamic_slice" in found
    assert not next(v for v in views if v["name"] == "fusion")["hlo"]  # a compiled card is its own
