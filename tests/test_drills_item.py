"""The typed drill item (`dumpgym.drills/2`): each kind's card identity, answer forms, context as references
into the listings (never copies), the per-program weight cap declared with the kind, and the pool's size."""
from __future__ import annotations

import io
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

from dumpgym.drills import kinds
from dumpgym.drills.item import FORMS, Choice, Item, Lines, Note, listing_text, resolve
from dumpgym.record.schema import ProgramRecord

# Kinds whose card is the same question whatever layer spells it (the decoder's dot, a decision's equation).
ACROSS_LAYERS = {"decoder", "decisions"}
# `dumpgym drills` printed 4.3 MB for 1,821 items under `dumpgym.drills/1`: 2.4 KB an item.
DRILLS_1_BYTES_PER_ITEM = 2400


@pytest.fixture(scope="module")
def records(corpus):
    return {p["slug"]: ProgramRecord.from_json(p) for p in corpus["programs"]}


def _by_card(pool):
    cards = defaultdict(list)
    for item in pool["items"]:
        cards[item["card"]].append(item)
    return cards


def test_no_two_different_questions_share_a_card(pool):
    for card, items in _by_card(pool).items():
        if len(items) == 1:
            continue
        kind = items[0]["drill"]
        assert kind in ACROSS_LAYERS, (card, [i["question"] for i in items])
        # One question spelled at several layers: one item per layer, the same step.
        assert len({i["layer"] for i in items}) == len(items), card
        assert len({(i["program"], i.get("step"), i.get("skill")) for i in items}) == 1, card
        if kind == "decoder":
            assert len({i["eqn"] for i in items}) == 1, card


def test_every_layouts_item_is_a_card_of_its_own(pool, by_slug):
    layouts = [i for i in pool["items"] if i["drill"] == "layouts"]
    cards = {i["card"] for i in layouts}
    assert len(layouts) > 86 and len(cards) == len(layouts)  # drills/1's page made 86 families of them
    for item in layouts:  # the card names the buffer (the line shown prints it), the step and the layer's target
        assert item["card"].endswith(f"/{item['step']}/{item['layer']}")
        about = item["card"].split("/")[2]
        line = by_slug[item["program"]]["compiled"][item["layer"]]["text"].splitlines()[item["facts"]["hlo_line"] - 1]
        if item["step"] == "memory-space":  # a run of lines: the card names its first instruction
            assert f"%{about} = " in line
        else:  # the buffer without its memory space, as the shown line prints it
            assert item["facts"]["buffer"] in line and about == re.sub(r"S\(\d+\)", "", item["facts"]["buffer"])


def test_cpu_and_tpu_fusions_of_one_name_are_different_cards(pool):
    fusions = [i for i in pool["items"] if i["drill"] == "fusions"]
    by_name = defaultdict(dict)
    for item in fusions:
        by_name[(item["program"], item["facts"]["fusion"])][item["layer"]] = item["card"]
    both = [layers for layers in by_name.values() if {"cpu", "tpu"} <= layers.keys()]
    assert both  # the built-in corpus has fusions of one name in both compiles
    assert all(layers["cpu"] != layers["tpu"] for layers in both)
    assert len({i["card"] for i in fusions}) == len(fusions)


def test_cards_are_keys_the_progress_record_accepts(pool):
    for item in pool["items"]:
        parts = item["card"].split("/")
        assert len(parts) >= 3 and all(parts) and len(item["card"]) <= 600  # streaks.js validate()
        assert not re.search(r"\s", item["card"])


def test_items_hold_references_not_copies_of_listings(pool, records):
    """A block of more than three lines that a listing holds verbatim is a reference, never text."""
    for item in pool["items"]:
        program = records[item["program"]]
        texts = [t for t in (listing_text(program, layer) for layer in ("jaxpr", "stablehlo", "cpu", "tpu", "gpu"))
                 if t]
        for block in item["context"]:
            if "text" in block and block["text"].count("\n") >= 3:
                assert not any(block["text"] in t for t in texts), (item["card"], block["text"][:200])


def test_a_fusion_item_points_at_the_jaxpr_instead_of_copying_it(pool, records):
    item = next(i for i in pool["items"] if i["drill"] == "fusions")
    jaxpr = records[item["program"]].jaxpr
    assert item["context"][0] == {"layer": "jaxpr", "lines": [1, len(jaxpr.split("\n"))]}  # the rows to tap
    assert resolve(item["context"], records[item["program"]])[0] == jaxpr
    assert jaxpr not in json.dumps(item)


def test_the_printed_pool_is_at_most_a_fifth_of_drills_1_per_item(pool):
    from dumpgym.drills import write_pool
    from dumpgym.drills._stored import Kept

    programs: dict[str, list] = {}
    for item in pool["items"]:
        programs.setdefault(item["program"], []).append(item)
    out = io.BytesIO()
    write_pool([Kept.of(items, []) for items in programs.values()], out)  # as `dumpgym drills` prints it
    per_item = len(out.getvalue()) / len(pool["items"])
    # Issue 26's fifth: each program's words written once (drills/_packed.py), none copied from a listing.
    assert per_item <= DRILLS_1_BYTES_PER_ITEM / 5, per_item
    # And an item's size does not grow with its program's listings: none is more than a few KB, unpacked.
    assert max(len(json.dumps(i)) for i in pool["items"]) <= 4000


def test_resolve_cuts_strips_and_numbers_lines(records):
    program = records["mlp"]
    tpu = program.compiled["tpu"].text.split("\n")
    line = next(n for n, row in enumerate(tpu, start=1) if ", metadata=" in row)
    assert resolve([{"layer": "tpu", "lines": [line, line], "cut": True}], program) == [
        tpu[line - 1].strip().split(", metadata=")[0]]
    assert resolve([{"layer": "jaxpr", "lines": [2, 3], "numbered": True}], program) == [
        "\n".join(f"{n:>3}  {program.jaxpr.split(chr(10))[n - 1]}" for n in (2, 3))]
    assert resolve([{"text": "a note"}, {"layer": "stablehlo", "lines": [1, 1], "strip": True}], program) == [
        "a note", program.stablehlo.split("\n")[0].strip()]


def test_a_reference_to_a_missing_layer_is_refused(records):
    program = next(p for p in records.values() if "gpu" not in p.compiled)
    with pytest.raises(ValueError, match="does not have"):
        resolve([{"layer": "gpu", "lines": [1, 1]}], program)


def test_an_item_refuses_an_unknown_layer_or_an_empty_card_part():
    make = dict(question="q?", answer=Choice(("a", "b"), 0, ("", "x"), ("", "y")), context=(Note("n"),))
    with pytest.raises(ValueError, match="layer 'hlo_tpu'"):
        Item(card=("a",), layer="hlo_tpu", **make)
    with pytest.raises(ValueError, match="card"):
        Item(card=("a", ""), layer="tpu", **make)
    assert Item(card=(3, "b"), layer="tpu", **make).stamped("k", "p", 1.0).card_key == "k/p/3/b"
    long = "f32[" + ",".join(["8"] * 80) + "]"
    (part,) = Item(card=(long,), layer="tpu", **make).card
    assert part.startswith("sha256:") and len(part) < 30 and part != Item(card=(long + "x",), layer="tpu", **make).card[0]


def test_answer_forms_are_a_registry_each_tagged():
    assert set(FORMS) >= {"choice", "line"}
    for name, cls in FORMS.items():
        assert cls.form == name


def test_the_weight_cap_is_declared_with_the_kind_and_kept(pool):
    """Each group of one program's items (alike in the kind's `cap_by`) shares at most `per_program`."""
    capped = {name: k for name, k in kinds().items() if k.per_program is not None}
    assert {"fusions", "layouts", "units", "partitioner", "backward", "loops", "buffers"} <= capped.keys()
    sums = defaultdict(float)
    for item in pool["items"]:
        kind = capped.get(item["drill"])
        if kind:
            sums[(kind.name, item["program"], *(item.get(f) for f in kind.cap_by))] += item["weight"]
    for (name, *_), total in sums.items():
        assert total <= capped[name].per_program + 0.01, (name, total)


def test_no_kind_module_works_out_the_cap_itself():
    drills = Path(__file__).parents[1] / "src" / "dumpgym" / "drills"
    for path in drills.glob("*.py"):
        assert "round(min(1.0" not in path.read_text(), path.name


def test_a_context_block_is_one_of_two_shapes(pool):
    for item in pool["items"]:
        for block in item["context"]:
            assert set(block) == {"text"} or ({"layer", "lines"} <= set(block) <= {"layer", "lines", "cut", "strip",
                                                                                   "numbered"}), block
            if "lines" in block:
                first, last = block["lines"]
                assert 1 <= first <= last


def test_the_blocks_of_a_kind_made_reference_are_the_same_as_the_lines_class_says():
    assert Lines("tpu", 3, 4, cut=True).to_json() == {"layer": "tpu", "lines": [3, 4], "cut": True}
    assert Note("x").to_json() == {"text": "x"}
