"""Every line number an item's words cite is on screen, in its own layer: a reader told "StableHLO line 6"
or "the `ge` on line 4" finds that number beside that line of the listing the item shows. Read over the
whole pool the page serves (the built-in programs and their variants), from the item's JSON alone, by a
reader of its own: what the page numbers (a `numbered` block's lines, the line view's rows, which carry
their listing's numbers) against each `line N` its question, options, reasons, explanations and feedback
say, with the layer the words name (`jaxpr line 4`, `StableHLO line 6`, `TPU HLO line 57`), or, unnamed,
the layer of the listing the item shows first.
"""
import re
from collections import Counter

import pytest

_LAYER_WORDS = r"(?:(?P<layer>jaxpr|StableHLO|(?:(?:CPU|TPU|GPU)\s+)?(?:compiled\s+)?HLO)(?:'s)?\s+)?"
# `line 4`, `lines 4–7`, `lines 64, 65, 67 and 68`; a number that follows "line" and is a line of a listing.
CITE = re.compile(_LAYER_WORDS + r"\b[Ll]ines?\s+(?P<first>\d+)(?P<more>(?:(?:\s*[–,]\s*|\s+and\s+|\s+to\s+)\d+)*)")
_NUMBER = re.compile(r"\d+")


def _texts(item: dict):
    """Every text the page may show for an item, with where it comes from."""
    form = item["answer"]
    yield "question", item["question"]
    if item.get("feedback"):
        yield "feedback", item["feedback"]
    for k, reason in enumerate(form.get("reasons", [])):
        yield f"reasons[{k}]", reason
    for k, option in enumerate(form.get("options", [])):
        yield f"options[{k}]", str(option)
    for key, text in (form.get("explain") or {}).items():
        yield f"explain[{key}]", text
    for key, misread in (form.get("misread") or {}).items():
        yield f"misread[{key}]", misread["reason"]
    for k, block in enumerate(item["context"]):
        if "text" in block:
            yield f"context[{k}]", block["text"]


def _layer_named(words: str | None, item: dict) -> str:
    """The layer a citation's words name; unnamed, the layer of the first listing the item shows."""
    if words is None:
        first = next((b["layer"] for b in item["context"] if "layer" in b), item["layer"])
        return first
    if words == "jaxpr":
        return "jaxpr"
    if words == "StableHLO":
        return "stablehlo"
    target = words.split()[0].lower()
    if target in ("cpu", "tpu", "gpu"):
        return target
    return item["layer"]  # "HLO line N", "compiled HLO line N": the item's own compiled layer


def cited(item: dict) -> list[tuple[str, str, int]]:
    """(where, layer, line) for each line number the item's words cite."""
    out = []
    for where, text in _texts(item):
        for m in CITE.finditer(text):
            layer = _layer_named(m.group("layer"), item)
            numbers = [int(m.group("first"))] + [int(n) for n in _NUMBER.findall(m.group("more") or "")]
            if "–" in (m.group("more") or "") and len(numbers) == 2:
                numbers = list(range(numbers[0], numbers[1] + 1))
            out += [(where, layer, n) for n in numbers]
    return out


def on_screen(item: dict) -> set[tuple[str, int]]:
    """(layer, line) for each line the page shows beside its number: a `numbered` block's lines, and the
    line view's rows (the first block of a `line` or `lines` item), numbered as their listing numbers them."""
    out = set()
    form = item["answer"]["form"]
    for k, block in enumerate(item["context"]):
        if "lines" not in block:
            continue
        first, last = block["lines"]
        if block.get("numbered") or (k == 0 and form in ("line", "lines")):
            out.update((block["layer"], n) for n in range(first, last + 1))
    return out


def stray_citations(pool: dict) -> list[tuple[str, str, str, int, str]]:
    """(kind/layer/step, card, where, line, layer) for each cited line that is not on screen."""
    bad = []
    for item in pool["items"]:
        shown = on_screen(item)
        for where, layer, n in cited(item):
            if (layer, n) not in shown:
                bad.append((f"{item['drill']}/{item['layer']}/{item.get('step')}", item["card"], where, n, layer))
    return bad


@pytest.fixture(scope="module")
def whole_pool(whole_corpus):
    from dumpgym.drills import build_pool

    pool = build_pool(whole_corpus)
    assert not pool.get("skipped"), pool["skipped"][:3]  # a kind that fails asks nothing, and would pass
    return pool


def test_every_cited_line_is_on_screen_in_its_own_layer(whole_pool):
    bad = stray_citations(whole_pool)
    kinds = Counter(b[0] for b in bad)
    assert not bad, (f"{len(bad)} cited lines not on screen, by kind/layer/step: {dict(kinds)}; e.g. "
                     + "; ".join(f"{b[1]} {b[2]} cites {b[4]} line {b[3]}" for b in
                                 {b[0]: b for b in bad}.values()))


def test_the_pool_cites_lines_at_all(whole_pool):
    """The reader finds citations in every kind that makes them: a reader that found none would pass."""
    kinds = {i["drill"] for i in whole_pool["items"] if cited(i)}
    assert {"fusions", "decisions", "backward", "cost", "layouts", "kernels", "buffers"} <= kinds


def test_the_reader_catches_a_jaxpr_line_cited_above_a_stablehlo_listing():
    item = {"drill": "decisions", "layer": "stablehlo", "card": "c", "question": "Why?",
            "feedback": "the reduce_sum on jaxpr line 4 reads it",
            "answer": {"form": "line", "line": 6, "accepted": [6], "explain": {}},
            "context": [{"layer": "stablehlo", "lines": [1, 9]}]}
    assert stray_citations({"items": [item]}) == [("decisions/stablehlo/None", "c", "feedback", 4, "jaxpr")]
    item["feedback"] = "the reduce_sum on StableHLO line 6 reads it"
    assert stray_citations({"items": [item]}) == []


def test_the_reader_catches_a_line_shown_without_its_number():
    item = {"drill": "layouts", "layer": "tpu", "card": "c", "question": "What does %x (compiled HLO line 62) fill?",
            "answer": {"form": "typed", "value": "1"}, "context": [{"layer": "tpu", "lines": [62, 62], "cut": True}]}
    assert [b[3] for b in stray_citations({"items": [item]})] == [62]
    item["context"][0]["numbered"] = True
    assert stray_citations({"items": [item]}) == []


# `the reduce_sum on StableHLO line 6`, `` `ge` on line 9 ``: an equation cited on a line, by its primitive.
_EQN_ON_LINE = re.compile(r"(?:`([a-z_][a-z0-9_]*)`|\bthe ([a-z_][a-z0-9_]*)) on (?:(jaxpr|StableHLO) )?[Ll]ine (\d+)")
_REF_PRIMITIVES = {"get", "swap"}  # a Pallas ref's read and write, printed `x <- ref[...]`


def _does(primitive: str, line: str, layer: str) -> bool:
    """Whether a line, as printed, is the equation of this primitive (jaxpr) or the op it lowers to (StableHLO)."""
    if layer == "jaxpr":
        return re.search(rf"= {re.escape(primitive)}\b", line) is not None or (
            primitive in _REF_PRIMITIVES and " <- " in line)
    if primitive in ("eq", "ne", "lt", "le", "gt", "ge"):
        return "stablehlo.compare" in line and f" {primitive.upper()}," in line
    if primitive.startswith(("reduce_", "arg")):
        return "stablehlo.reduce" in line
    if primitive == "convert_element_type":
        return "stablehlo.convert" in line
    return f"stablehlo.{primitive}" in line


def test_an_equation_cited_on_a_line_is_the_one_on_that_line(whole_pool, whole_corpus):
    """Words that cite an equation by its primitive and a line cite the line that does it, in the layer
    meant: a jaxpr line read from the jaxpr, and, above the StableHLO, the StableHLO line of the op it
    lowers to (the `reduce`, not the constant it starts from), never the jaxpr's number in its place."""
    records = {p["slug"]: p for p in whole_corpus["programs"]}
    found, wrong = Counter(), []
    for item in whole_pool["items"]:
        primitives = {e["primitive"] for e in records[item["program"]]["eqns"]}
        for where, text in _texts(item):
            for m in _EQN_ON_LINE.finditer(text):
                primitive, words, n = m.group(1) or m.group(2), m.group(3), int(m.group(4))
                layer = _layer_named(words, item)
                if primitive not in primitives or layer not in ("jaxpr", "stablehlo"):
                    continue  # "the one on line 3": no primitive named
                found[layer] += 1
                line = records[item["program"]][layer].splitlines()[n - 1]
                if not _does(primitive, line, layer):
                    wrong.append((item["card"], where, m.group(0), line.strip()[:80]))
    assert found["jaxpr"] > 100 and found["stablehlo"] > 100 and not wrong, (found, wrong[:5])
