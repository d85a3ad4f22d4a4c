"""The learner's own programs in Chromium: first in the x-ray's picker (and shown by it first), a box of their
own on the path listing the drills that ask of each with its items in each (counted here from the pool), and
an added program's card saying which compiled layers it has and what `--hlo tpu`/`--hlo gpu` would add."""
import pytest
from conftest import DESKTOP, checked_page

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def yours(serve_pool, corpus):
    from yours_corpus import with_an_added_program

    from dumpgym.drills import build_pool

    data = with_an_added_program(corpus)
    pool = build_pool(data)
    with serve_pool("yours-site", data, pool) as url:
        yield url, pool


def test_your_program_has_its_place_on_the_path_in_the_picker_and_its_card(kept_context, yours):
    url, pool = yours
    titles = {k["name"]: k["title"] for k in pool["kinds"]}
    counts = {}
    for item in pool["items"]:
        if item["program"] == "mine":
            counts[item["drill"]] = counts.get(item["drill"], 0) + 1
    with checked_page(kept_context(**DESKTOP), url) as page:
        order = page.locator("#drills [data-drill-tab]").evaluate_all("els => els.map(t => t.dataset.drillTab)")
        entry = page.locator('#path [data-yours-path] [data-yours-program="mine"]')
        assert entry.locator("bdi").inner_text() == "my block"
        shown = entry.locator("[data-yours-kind]").evaluate_all(
            "els => els.map(a => [a.dataset.yoursKind, a.textContent, Number(a.nextElementSibling.value)])")
        assert shown == [[k, titles[k], counts[k]] for k in sorted(counts, key=order.index)]  # in tab order
        assert "more with --hlo tpu, --hlo gpu" in entry.inner_text()
        note = page.locator("#p-mine [data-compiles]").text_content()  # off screen: not laid out (content-visibility)
        assert note.startswith("compiled for CPU · --hlo tpu would add TPU items of ")
        for kind in ("layouts", "units"):
            assert titles[kind] in note.split("--hlo gpu")[0]
        assert "--hlo gpu would add GPU items of " in note and note.endswith("(dumpgym add … --replace with it: one target an add)")
        assert page.locator("#p-mlp [data-compiles]").count() == 0
        # a kind named there opens its drill
        first = entry.locator("[data-yours-kind]").first
        kind = first.get_attribute("data-yours-kind")
        first.click()
        page.wait_for_selector(f"#drill-{kind}[data-state=asking]")
        # the x-ray's picker: yours first, shown first
        assert page.locator("[data-xray-pick] option").first.get_attribute("value") == "mine"
        assert page.locator("[data-xray-pick] optgroup").first.get_attribute("label") == "your programs"
        page.locator("#xray").scroll_into_view_if_needed()
        page.wait_for_selector("#xray[data-ready][data-program='mine']")
