"""The printed and kept drill pool is packed (drills/_packed.py): each program's words written once, in
tables the programs share, and read back as exactly the items `Item.to_json` made."""
import io
import json

import pytest

from dumpgym import cli
from dumpgym import drills
from dumpgym.drills import _packed, _stored, kept_pool, pool_of, write_pool


def _dumped(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def _by_program(items):
    out = {}
    for item in items:
        out.setdefault(item["program"], []).append(item)
    return out


@pytest.fixture(scope="module")
def printed() -> bytes:
    """What `dumpgym drills` prints of the built-in corpus."""
    import contextlib

    with contextlib.redirect_stdout(io.TextIOWrapper(io.BytesIO(), encoding="utf-8")) as out:
        assert cli.main(["drills"]) == 0
        out.flush()
        return out.buffer.getvalue()


def test_every_program_of_the_pool_packs_and_unpacks_to_its_items_key_for_key(pool):
    for slug, items in _by_program(pool["items"]).items():
        back = _packed.unpack(json.loads(json.dumps(_packed.pack(items))))
        assert back == items and _dumped(back) == _dumped(items), slug


def test_what_drills_prints_reads_back_as_the_pool(printed):
    parts = [_stored.Kept.of(kept.items(), list(kept.skipped)) for kept in kept_pool(_stored.builtin_sources())]
    pool = pool_of(parts)
    back = drills.read_pool(json.loads(printed))
    assert back == pool and _dumped(back) == _dumped(pool)
    again = io.BytesIO()
    write_pool(parts, again)  # the items as just made, not read: the same bytes
    assert again.getvalue() + b"\n" == printed


def test_reasons_alike_but_for_their_option_share_one_shape():
    options = ["fills a literal constant out to a whole array", "spreads one scalar value over every element",
               "adds a trailing size-one axis, so a reduced row lines up"]
    fact = "it takes the literal False to bool[16,16] with broadcast_dimensions=[]"
    items = []
    for n in range(3):  # three items, each its own fact; the sentence shape is one
        reasons = [f"Not “{o}”: {fact.replace('16,16', f'{n + 2},4')}; so the answer is “{options[0]}”."
                   if i else "" for i, o in enumerate(options)]
        items.append({"drill": "decisions", "program": "p", "card": f"decisions/p/{n}/why", "eqn": n,
                      "layer": "jaxpr", "weight": 0.5, "question": "What does that broadcast do?",
                      "answer": {"form": "choice", "options": options, "index": 0, "reasons": reasons,
                                 "rules": ["", "why-scalar", "why-keepdims"]},
                      "context": [{"layer": "jaxpr", "lines": [1, 4]}]})
    packed = _packed.pack(items)
    assert _packed.unpack(packed) == items
    shapes = [s for s in packed["shapes"] if s[0] == "Not “"]
    assert len(shapes) == 1 and shapes[0][-1] == "”."
    text = json.dumps(packed, ensure_ascii=False)
    assert text.count("so the answer is") == 1 and text.count(options[1]) == 1
    first = packed["items"][0][1][0]
    assert "w" in first and "e" in first and first["x"] == 0  # the context all three show, written once
    assert packed["contexts"] == [[{"n": [packed["strings"].index("jaxpr"), 1, 4]}]]


def test_defaults_are_left_out_and_come_back():
    item = {"drill": "shapes", "program": "p", "card": "shapes/p/3", "eqn": None, "layer": "jaxpr", "weight": 1.0,
            "question": "What shape and dtype comes out?",
            "answer": {"form": "typed", "spelling": "aval", "value": "f32[16]"},
            "context": [{"text": "x:f32[16,64]"}]}
    packed = _packed.pack([item])
    (one,) = packed["items"][0][1]
    assert packed["items"][0][0] == "shapes" and set(one) == {"c", "l", "q", "a", "x"}
    assert one["c"] == "3" and one["a"] == ["typed", "aval", "f32[16]"]
    assert _packed.unpack(packed) == [item]


def test_a_kept_text_reads_alone():
    item = {"drill": "units", "program": "p", "card": "units/p/a/b", "eqn": 2, "layer": "tpu", "step": "b",
            "weight": 0.25, "question": "Type the count.",
            "answer": {"form": "typed", "spelling": "int", "value": "1024",
                       "misread": {"2048": {"reason": "counted both 1024 twice", "rule": "twice"}}},
            "context": [{"layer": "tpu", "lines": [3, 3], "cut": True}, {"text": "compiled by XLA"}],
            "feedback": "1024 of them", "facts": {"hlo_line": 3, "buffer": "f32[1024]{0}"}}
    text = _packed.kept_text([item])
    head, _ = text.split(b"\n", 1)
    assert set(json.loads(head)) == {"program", "strings", "shapes"}
    assert _packed.kept_items(text) == [item]


def test_unpacked_prints_every_item_whole_as_read_pool_gives_it(printed):
    import contextlib

    with contextlib.redirect_stdout(io.TextIOWrapper(io.BytesIO(), encoding="utf-8")) as out:
        assert cli.main(["drills", "--unpacked"]) == 0
        out.flush()
        whole = out.buffer.getvalue()
    assert json.loads(whole) == drills.read_pool(json.loads(printed))
    assert len(whole) > 2 * len(printed)  # whole items: what the packing saves


def test_packing_is_lossless_on_strings_it_never_saw(pool):
    """The packing is cut by patterns tuned on the built-in pool; a user's program says other things. Items
    of three programs, their strings mutated at random (quotes, numbers, %names, code spans, array types,
    bidi and escapes spliced in or instead), must come back exactly."""
    import copy
    import random

    rng = random.Random(0)
    pieces = ["%a.1", "12", "1,024", "`x`", "f32[2,3]{1,0}", "“", "”", '"', "\\", "\u202e", "Not ",
              "; so the answer is ", "\n", "é", "0", ".", "%", "`", "[", "]", "{", "}", " "]
    fixed = {"form", "program", "drill", "card", "layer"}

    def mutated(value):
        if isinstance(value, str):
            roll = rng.random()
            if roll < 0.3:
                return value
            noise = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
            return value + noise if roll < 0.6 else noise
        if isinstance(value, list):
            return [mutated(v) for v in value]
        if isinstance(value, dict):
            return {k: v if k in fixed else mutated(v) for k, v in value.items()}
        return value

    programs = _by_program(pool["items"])
    for _ in range(60):
        items = [mutated(copy.deepcopy(item)) for item in programs[rng.choice(["mlp", "attention", "layernorm"])]]
        rng.shuffle(items)
        items = items[:rng.randint(1, len(items))]
        back = _packed.unpack(json.loads(json.dumps(_packed.pack(items))))
        assert _dumped(back) == _dumped(items)
