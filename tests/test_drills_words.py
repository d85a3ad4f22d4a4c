"""The words of every item, over the whole pool the page serves: nothing said twice on a miss, nothing said
of a layout that it does not have, a mask made by what makes it. Each reads the item's own JSON and what
it shows, never the code that wrote it."""
import re

from test_drills_cited_lines import _texts


from test_drills_cited_lines import whole_pool  # noqa: E402,F401 - the pool the page serves, none skipped


def _said_on_a_miss(item: dict) -> list[str]:
    """What a miss may print before the item's feedback: a wrong option's reason, a misreading's, a line's."""
    form = item["answer"]
    return [r for r in (*form.get("reasons", []), *(m["reason"] for m in (form.get("misread") or {}).values()),
                        *(form.get("explain") or {}).values()) if r]


def _bare(text: str) -> str:
    return text.strip().rstrip(".").strip()


def test_a_miss_never_prints_the_same_words_twice(whole_pool):
    """A miss prints the picked option's reason, then the feedback: neither may hold the other."""
    doubled = []
    for item in whole_pool["items"]:
        feedback = _bare(item.get("feedback") or "")
        for reason in _said_on_a_miss(item):
            if feedback and (_bare(reason) in feedback or feedback in _bare(reason)):
                doubled.append((item["card"], reason))
    assert not doubled, doubled[:3]


def test_a_layout_shown_without_tiles_is_never_said_to_be_tiled(whole_pool, whole_corpus):
    """A CPU layout (`{1,0}`) has no tiles: an item that shows none says nothing of how it is tiled."""
    from pool_checks import readable

    records = {p["slug"]: p for p in whole_corpus["programs"]}
    said, checked = [], 0
    for item in whole_pool["items"]:
        if item["drill"] != "buffers":
            continue
        shown = "\n".join(readable(item, records[item["program"]])["shown"])
        if ":T(" in shown:
            continue
        checked += 1
        for where, text in _texts(item):
            if re.search(r"(?<!neither )(?<!un)\btiled\b", text):
                said.append((item["card"], where, text))
    assert checked and not said, said[:3]


def _elements(buffer_text: str) -> int:
    dims = re.match(r"\w+\[([\d,]*)\]", buffer_text).group(1)
    return eval("*".join(dims.split(",")) if dims else "1")  # noqa: S307 - digits and commas only


def test_a_one_element_move_is_never_said_to_reorder_anything(whole_pool):
    """`s32[1]` to `s32[]` holds one element: no layout can reorder it, and the words say so."""
    seen = 0
    for item in whole_pool["items"]:
        if item.get("step") != "copy-or-bitcast":
            continue
        note = next(b["text"] for b in item["context"] if "text" in b and b["text"].startswith("operand"))
        operand = re.match(r"operand\s+(\S+)", note).group(1)
        if _elements(operand) > 1:
            continue
        seen += 1
        words = " ".join(t for _, t in _texts(item))
        assert "reorder" not in words, (item["card"], words)
    assert seen  # the corpus holds such moves (`s32[1]` to `s32[]` in the TPU compiles)


def test_a_mask_is_made_by_the_comparison_not_compared_to(whole_pool):
    """An iota read against other positions makes a bool mask: no item has the comparison compare it to one."""
    wrong = [(i["card"], t) for i in whole_pool["items"] for _, t in _texts(i)
             if re.search(r"compar\w* (it|them) (to|with) a (bool|boolean) mask", t)]
    masks = [t for i in whole_pool["items"] for _, t in _texts(i) if "bool mask" in t or "boolean mask" in t]
    assert masks and not wrong, wrong[:3]


def test_a_gemm_whose_result_is_the_dot_transposed_says_why(whole_pool, whole_corpus):
    """XLA may swap a dot's operands: the GEMM's result (read from its HLO line) is the jaxpr dot's (read
    from the jaxpr's equation) with its last two axes exchanged. The feedback says so, and only then."""
    records = {p["slug"]: p for p in whole_corpus["programs"]}
    swapped = 0
    for item in whole_pool["items"]:
        if item["drill"] != "kernels":
            continue
        record = records[item["program"]]
        line = record["compiled"][item["layer"]]["text"].splitlines()[item["facts"]["hlo_line"] - 1]
        got = re.match(r"\s*(?:ROOT )?%\S+ = \w+\[([\d,]*)\]", line)
        want = record["eqns"][item["eqn"]]["outputs"][0]["shape"]
        dims = [int(d) for d in got.group(1).split(",") if d] if got else None
        is_swapped = (dims is not None and len(want) >= 2 and want[-1] != want[-2]
                      and dims == [*want[:-2], want[-1], want[-2]])
        swapped += is_swapped
        assert ("swapped the dot's operands" in item["feedback"]) == is_swapped, (item["card"], line, want)
    assert swapped  # the corpus has such GEMMs (issue 45: f32[56,40] for an f32[40,56] dot)
