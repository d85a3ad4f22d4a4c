"""The `diff` drill (GYM·14): what one change made appear or vanish in a compile, and what a row became,
over the built-in pairs (`mlp` and `mlp-f32`, ...). Answers are checked against the compiled texts as
XLA's HLO bindings read them, not against the drill's own reading."""
import re
from collections import Counter

import pytest

from dumpgym.drills import build_pool
from dumpgym.drills.answer import from_json
from dumpgym.record.schema import ProgramRecord
from hlo_recount import Parsed
from pool_checks import assert_choice_item, readable


@pytest.fixture(scope="module")
def paired(whole_corpus):
    """The corpus narrowed to the compiles with one change and their bases, and its drill pool."""
    keep = {p["slug"] for p in whole_corpus["programs"] if "change" in p}
    keep |= {p["variant_of"] for p in whole_corpus["programs"] if "change" in p}
    corpus = {**whole_corpus, "programs": [p for p in whole_corpus["programs"] if p["slug"] in keep]}
    return corpus, build_pool(corpus)


@pytest.fixture(scope="module")
def items(paired):
    corpus, pool = paired
    records = {p["slug"]: ProgramRecord.from_json(p) for p in corpus["programs"]}
    # `answer_form`: the answer form as the pool has it, beside the fields `readable` spreads out.
    return [{**readable(i, records[i["program"]], records), "answer_form": i["answer"]}
            for i in pool["items"] if i["drill"] == "diff"], records


def _module(text: str):
    from jaxlib import xla_client

    return xla_client.hlo.hlo_module_from_text(text)


def _by_name(text: str) -> dict:
    """XLA's instructions of a compiled text by name, with their computation's name."""
    return {i.name: (c.name, i) for c in _module(text).computations() for i in c.instructions()}


def _result(instruction) -> tuple[str, tuple[int, ...]]:
    """An instruction's result element type and dims, from XLA's printing of it and XLA's shape parser."""
    from jaxlib import xla_client

    printed = re.match(r"(\w+\[[\d,]*\](?:\{[^}]*\})?)", instruction.to_string().split(" = ", 1)[1]).group(1)
    shape = xla_client.Shape(printed)
    return str(shape.numpy_dtype()) if shape.element_type() != xla_client.PrimitiveType.BF16 else "bfloat16", \
        tuple(shape.dimensions())


def test_the_built_in_pool_has_a_hundred_diff_items_in_each_pair(items):
    diff, _ = items
    assert len(diff) >= 100
    assert {i["step"] for i in diff} == {"appeared", "vanished", "became", "was", "fate", "origin"}
    programs = Counter(i["program"] for i in diff)
    _, records = items
    assert set(programs) == set(records)  # both sides of every pair ask something


def test_diff_items_come_only_from_change_pairs(corpus, pool):
    """The pool of the programs alone (no compile with one change) asks no diff item."""
    assert not [i for i in pool["items"] if i["drill"] == "diff"]
    assert "diff" not in {k["name"] for k in pool["kinds"]}


def test_no_two_diff_questions_share_a_card_and_every_block_points_into_a_listing(items):
    diff, records = items
    cards = Counter(i["card"] for i in diff)
    assert max(cards.values()) == 1
    for item in diff:
        assert item["context"][0].get("layer") == item["layer"]  # the rows to tap or the row asked about
        text = records[item["program"]].compiled[item["layer"]].text.split("\n")
        notes = [b["text"] for b in item["context"] if "text" in b]
        assert not any(n.strip() in (row.strip() for row in text) for n in notes)  # no listing copied


@pytest.mark.compiled_hlo
def test_a_typed_answer_is_what_the_counterpart_returns_in_the_other_compile_per_xla(items):
    """The row shown is the one XLA's parse names at that line, and the answer is the dtype and dims XLA's
    shape parser reads for the counterpart instruction in the other record's text."""
    from dumpgym.record.dtypes import short

    diff, records = items
    typed = [i for i in diff if i["step"] in ("became", "was")]
    assert typed
    for item in typed:
        mine = _by_name(records[item["program"]].compiled[item["layer"]].text)
        theirs = _by_name(records[item["partner"]].compiled[item["layer"]].text)
        shown = item["shown"][0]
        (name,) = [n for n in mine if shown.startswith(f"%{n} ") or shown.startswith(f"ROOT %{n} ")]
        dtype, dims = _result(theirs[item["counterpart"]][1])
        assert item["value"] == f"{short(dtype)}[{','.join(map(str, dims))}]", (item["card"], name)
        assert from_json(item["answer_form"]).check(item["value"]).right


@pytest.mark.compiled_hlo
def test_the_rows_to_tap_are_xlas_and_an_opcode_the_other_compile_lacks_is_tapped_whole(items):
    """Each right row is an instruction of XLA's parse of the shown computation; where the other compile's
    text holds no instruction of a right row's opcode at all, every row of that opcode shown is right."""
    from dumpgym.ir.hlo_graph import opcode_of

    diff, records = items
    sets = [i for i in diff if i["step"] in ("appeared", "vanished")]
    assert sets and {i["step"] for i in sets} == {"appeared", "vanished"}
    for item in sets:
        mine = _by_name(records[item["program"]].compiled[item["layer"]].text)
        other = Counter(opcode_of(i) for _, i in _by_name(records[item["partner"]].compiled[item["layer"]].text).values())
        rows = item["shown"][0].split("\n")
        names = {n: re.search(r"%([\w.\-]+) = ", row)[1] for n, row in enumerate(rows, 1) if " = " in row}
        right = {names[n] for n in item["answer_lines"]}
        assert right == set(item["rows"]) and right <= mine.keys()
        computation = {mine[n][0] for n in right}
        assert len(computation) == 1
        for op in {opcode_of(mine[n][1]) for n in right}:
            if not other[op]:
                shown = {n for n in names.values() if opcode_of(mine[n][1]) == op}
                assert shown <= right, (item["card"], op)


def test_each_answer_is_graded_right_and_a_wrong_tap_is_explained(items):
    diff, _ = items
    for item in diff:
        form = from_json(item["answer_form"])
        if item["answer_form"]["form"] == "choice":
            assert_choice_item(item)
            assert form.check(item["answer"]).right
        elif item["answer_form"]["form"] == "lines":
            assert form.check(item["answer_lines"]).right
            rows = item["shown"][0].split("\n")
            extra = next(n for n, row in enumerate(rows, 1) if " = " in row and n not in item["answer_lines"])
            verdict = form.check([*item["answer_lines"], extra])
            assert not verdict.right and verdict.reason and "in both compiles" in verdict.reason
        else:
            assert form.check(item["value"]).right and not form.check("f32[7,7,7]").right
        assert item["feedback"] and item["partner"] in item["feedback"] + item["question"]


def test_the_remat_pair_asks_what_the_saved_residual_became(items):
    """ckpt-policy's compile is asked about beside ckpt-policy-nothing's on every target."""
    diff, _ = items
    asked = {(i["program"], i["layer"]) for i in diff if i["program"].startswith("ckpt-policy")}
    assert {layer for _, layer in asked} == {"tpu", "gpu", "cpu"}
    assert {p for p, _ in asked} == {"ckpt-policy", "ckpt-policy-nothing"}


def test_each_fate_and_origin_answer_is_right_equally_often_by_weight(items):
    """The three answers of a choice step (kept as it is, kept but changed, gone) hold a third of the step's
    weight each, as the pool weighs them: the usual answer is a guess."""
    diff, _ = items
    for step in ("fate", "origin"):
        weights = Counter()
        for item in (i for i in diff if i["step"] == step):
            weights[item["answer"]] += item["weight"]
        assert len(weights) == 3 and max(weights.values()) - min(weights.values()) < 0.02 * sum(weights.values())


@pytest.mark.compiled_hlo
def test_a_kept_or_changed_row_has_its_counterpart_in_the_other_text_per_xla(items):
    """A row kept as it is has, in XLA's parse of the other compile's text, an instruction of its opcode with
    its result shape and the same fused body (the same opcodes over the same types, in the same dataflow); a
    changed row's counterpart is an instruction of the other text of its opcode."""
    from dumpgym.ir.hlo_graph import opcode_of

    diff, records = items
    parsed = {}
    for item in (i for i in diff if i["step"] in ("fate", "origin") and i["answer"] < 2):
        mine = _by_name(records[item["program"]].compiled[item["layer"]].text)
        theirs = _by_name(records[item["partner"]].compiled[item["layer"]].text)
        shown = item["shown"][0]
        (name,) = [n for n in mine if shown.startswith(f"%{n} ") or shown.startswith(f"ROOT %{n} ")]
        ins = mine[name][1]

        def result(i):
            return i.to_string().split(" = ", 1)[1].split(" ", 1)[0]
        if item["answer"] == 0:
            key = (item["program"], item["partner"], item["layer"])
            if key not in parsed:
                parsed[key] = (Parsed(records[item["program"]].compiled[item["layer"]].text),
                               Parsed(records[item["partner"]].compiled[item["layer"]].text), {})
            here, there, ids = parsed[key]
            body = here.body(name, ids)
            assert any(opcode_of(i) == opcode_of(ins) and result(i) == result(ins) and there.body(n, ids) == body
                       for n, (_, i) in theirs.items()), item["card"]
        else:
            assert opcode_of(theirs[item["counterpart"]][1]) == opcode_of(ins), item["card"]


def test_a_set_of_one_row_alone_of_its_opcode_is_not_asked_per_xla(items):
    """A blind reader taps the one row of the opcode a change is known for (or the ROOT): no set is a single
    row whose opcode, per XLA's parse, no other shown row has. The rule bites where `compare` finds such a
    set: auto-sharded's TPU and CPU ROOT all-reduce that replicated weights make vanish."""
    from dumpgym.cost.compare import compare
    from dumpgym.ir.hlo_graph import opcode_of

    diff, records = items
    for item in (i for i in diff if i["step"] in ("appeared", "vanished") and len(i["answer_lines"]) == 1):
        mine = _by_name(records[item["program"]].compiled[item["layer"]].text)
        rows = item["shown"][0].split("\n")
        names = [re.search(r"%([\w.\-]+) = ", row)[1] for row in rows if " = " in row]
        (right,) = item["rows"]
        assert sum(opcode_of(mine[n][1]) == opcode_of(mine[right][1]) for n in names) > 1, item["card"]
    pair = compare(records["auto-sharded"], records["auto-sharded-replicated"])
    asked = {i["layer"] for i in diff if i["step"] == "vanished" and i["program"] == "auto-sharded"
             and i["partner"] == "auto-sharded-replicated"}
    for target in ("tpu", "cpu"):
        assert [r.opcode for r in pair[target].vanished] == ["all-reduce"] and target not in asked
    assert "gpu" in asked  # its all-reduce-start and -done: two rows, still asked


def _strings(value):
    """Every string inside an item's JSON."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_diff_feedback_says_what_the_change_did_in_plain_words(paired):
    """Over the whole diff pool: no row "is vanished" or "is appeared", no doubled full stop, no choice reason
    ending in one (the page puts one after it), and each row item's feedback says what the change did to the
    row: with the change it became, appeared or vanished, or it is the same in both compiles."""
    corpus, pool = paired
    changes = {p["slug"]: p.get("change") for p in corpus["programs"]}
    bad = re.compile(r"\b(?:is|are|was|were|be) (?:vanished|appeared)\b|(?<!\.)\.\.(?!\.)")
    diff = [i for i in pool["items"] if i["drill"] == "diff"]
    assert diff
    for item in diff:
        for s in _strings(item):
            assert not bad.search(s), (item["card"], s)
        if item["answer"]["form"] == "choice":
            assert not any(r.rstrip().endswith((".", "!", "?")) for r in item["answer"]["reasons"]), item["card"]
        change = changes[item["program"]] or changes[item["facts"]["partner"]]
        if item["step"] in ("fate", "origin", "became", "was"):
            said = item["feedback"]
            assert f"With the change, {change}, " in said or "is the same in both compiles" in said, (item["card"], said)
            if item["facts"].get("counterpart"):
                assert f"%{item['facts']['counterpart']}" in said, (item["card"], said)


def test_diff_words_read_as_english(paired):
    """Over the whole diff pool's words (not the listings shown): no word doubled, no `an` before a consonant
    or `a` before a vowel, every sentence about the change opens "With the change, <its words>," (the change's
    words may be a clause: "both weights arrive replicated"), and nothing "went from" a value to itself."""
    corpus, pool = paired
    changes = {p.get("change") for p in corpus["programs"]} - {None}
    bad = re.compile(r"\b([A-Za-z]+) \1\b|\ban (?![aeiou])[a-z]|\ba (?=[aeiou])|went from (\S+) to \2(?!\S)")
    for item in (i for i in pool["items"] if i["drill"] == "diff"):
        for said in _strings({k: v for k, v in item.items() if k not in ("shown", "context")}):
            assert not bad.search(said), (item["card"], said)
            for opening in re.findall(r"With (?:the change, )?(.*?)(?: \(`|, (?:%|`|its|it ))", said):
                assert said.count("With the change, ") and opening in changes, (item["card"], said)


def test_a_pair_the_record_cannot_tell_is_flagged_and_not_asked(items, paired):
    """Some changed pairs are flagged uncertain (another row was as close a partner, as two elements of one
    tuple alike in all the record holds are); no typed, fate or origin item asks about a row of such a pair."""
    from dumpgym.cost import compare

    corpus, pool = paired
    _, records = items
    flagged = 0
    asked = {(i["program"], i["facts"]["partner"], i["layer"], i["facts"].get("hlo_line"))
             for i in pool["items"] if i["drill"] == "diff"}
    for changed in (r for r in records.values() if r.change is not None):
        base = records[changed.variant_of]
        for target, diff in compare.compare(base, changed).items():
            for pair in diff.modified:
                if pair.uncertain:
                    flagged += 1
                    assert (base.slug, changed.slug, target, pair.base.line) not in asked, (changed.slug, pair.base.name)
                    assert (changed.slug, base.slug, target, pair.changed.line) not in asked, \
                        (changed.slug, pair.changed.name)
    assert flagged


@pytest.mark.compiled_hlo
def test_each_diff_item_shows_both_compiles_around_its_row_per_xla(items):
    """Every item shows its own compile around what it asks (the rows to tap, or the row with its neighbours)
    and the other compile's entry computation whole: every instruction XLA's parse puts in that computation
    is on a shown line."""
    diff, records = items
    for item in diff:
        theirs = [k for k, b in enumerate(item["context"]) if b.get("program") == item["partner"]]
        assert len(theirs) == 1 and item["context"][theirs[0]]["layer"] == item["layer"], item["card"]
        module = _module(records[item["partner"]].compiled[item["layer"]].text)
        entry = re.search(r"^ENTRY %([\w.\-]+)", module.to_string(), re.M)[1]
        (computation,) = [c for c in module.computations() if c.name == entry]
        shown = item["shown"][theirs[0]]
        for ins in computation.instructions():
            assert re.search(rf"(?:^|\n)(?:ROOT )?%{re.escape(ins.name)} = ", shown), (item["card"], ins.name)
        if item["step"] not in ("appeared", "vanished"):
            row = item["shown"][0]
            around = [s for b, s in zip(item["context"], item["shown"]) if "layer" in b and "program" not in b
                      and row in s.split("\n") and s != row]
            assert around and len(around[0].split("\n")) >= 3, item["card"]
