"""A user's title is isolated wherever the page shows it: an RTL override in it reverses nothing of the
page's own text. And "only your programs" says so when none of yours has an item in a drill."""
import copy

import pytest

pytestmark = pytest.mark.browser

RTL_TITLE = "\u202eRTL override, never closed"

# The x positions of the characters of the page's own text after the element `title` inside `block`,
# in reading order: increasing when laid out left to right, as the page's text is.
POSITIONS_AFTER = """([block, title]) => {
    const root = document.querySelector(block);
    const after = root.querySelector(title);
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const xs = [];
    const range = document.createRange();
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        if (after.contains(node) || !(after.compareDocumentPosition(node) & Node.DOCUMENT_POSITION_FOLLOWING)) continue;
        for (let i = 0; i < node.length; i++) {
            if (!/[A-Za-z0-9]/.test(node.data[i])) continue;
            range.setStart(node, i);
            range.setEnd(node, i + 1);
            xs.push(range.getBoundingClientRect().left);
        }
    }
    return xs;
}"""


@pytest.fixture(scope="module")
def rtl_url(built_once_dir, corpus, serve_directory):
    """mlp, and one added program: a copy of mlp whose title opens an RTL override and never closes it,
    without a compiled layer (so the drills on compiled HLO have none of its items)."""
    from dumpgym.site import build
    from dumpgym.drills import build_pool

    data = copy.deepcopy(corpus)
    mlp = next(p for p in data["programs"] if p["slug"] == "mlp")
    data["programs"] = [mlp, {**copy.deepcopy(mlp), "slug": "rtl", "title": RTL_TITLE, "added": True, "compiled": {}}]
    out = built_once_dir("rtl-site", lambda out: build.build_site(out, data, build_pool(data)))
    with serve_directory(out) as url:
        yield url


@pytest.fixture
def rtl_page(kept_context, rtl_url):
    from conftest import DESKTOP, checked_page

    with checked_page(kept_context(**DESKTOP), rtl_url) as pg:
        pg.wait_for_selector("html[data-ready]")
        yield pg


def isolating(page, selector):
    return page.eval_on_selector(selector, "el => getComputedStyle(el).unicodeBidi")


def test_the_drill_header_shows_the_pages_own_text_unreversed(rtl_page):
    rtl_page.click("#tab-shapes")
    rtl_page.wait_for_selector("#drill-shapes[data-state=asking]")
    rtl_page.check("[data-yours-only]")  # a question of the added program, whose title is the header's
    rtl_page.wait_for_selector("#drill-shapes[data-item^='shapes/rtl/'][data-state=asking]")
    where = "#drill-shapes .where"
    assert rtl_page.locator(f"{where} a").inner_text() == RTL_TITLE
    assert isolating(rtl_page, f"{where} bdi") == "isolate"
    xs = rtl_page.evaluate(POSITIONS_AFTER, [where, "a"])
    assert len(xs) >= 5 and xs == sorted(xs) and len(set(xs)) == len(xs), xs  # "jaxpr line 7", left to right


def test_the_corpus_card_and_the_xray_picker_isolate_the_title(rtl_page):
    assert rtl_page.locator("#p-rtl .title").text_content() == RTL_TITLE
    assert isolating(rtl_page, "#p-rtl .title") == "isolate"
    # An <option> holds text only: the title sits between FSI and PDI, which isolate it as <bdi> does.
    option = rtl_page.locator("[data-xray-pick] option[value=rtl]").text_content()
    assert option == f"rtl · \u2068{RTL_TITLE}\u2069"


def test_only_your_programs_says_when_none_of_yours_has_an_item_in_a_drill(rtl_page):
    page = rtl_page
    pools = page.eval_on_selector_all("section[data-drill]", "els => els.map((e) => [e.dataset.drill, e.dataset.pool])")
    without = next(kind for kind, pool in pools if pool and "rtl:" not in pool)
    note = f"#drill-{without} [data-none-yours-note]"
    page.click(f"#tab-{without}")
    page.wait_for_selector(f"#drill-{without}[data-state=asking]")
    assert not page.locator(note).is_visible()
    page.check("[data-yours-only]")
    page.wait_for_selector(note, state="visible")
    assert "None of your programs has a" in page.locator(note).inner_text()
    assert page.get_attribute(f"#drill-{without}", "data-item").split("/")[1] == "mlp"  # the built-in one, said
    page.click("#tab-shapes")  # a drill where yours has items: no note
    page.wait_for_selector("#drill-shapes[data-state=asking]")
    assert not page.locator("#drill-shapes [data-none-yours-note]").is_visible()
    page.uncheck("[data-yours-only]")
    page.click(f"#tab-{without}")
    page.wait_for_selector(f"#drill-{without}[data-state=asking]")
