""""Only your programs" with one added program whose every transpose is a matmul's gradient: the page asks
that step with the few items of other programs the build chose for it (data/drills/with/KIND/SLUG.json),
each shown with its own program's listing, and says why in one line; the box off, nothing changes."""
import pytest

pytestmark = pytest.mark.browser

KIND = "decisions"
QUESTIONS = 30


def _build(out, folder):
    """The built-in corpus and the deep MLP step added by the library API, built as `dumpgym build` builds it."""
    from deep_programs import add_deep_mlp_step

    from dumpgym.site import build
    from dumpgym.site.inputs import gym_inputs

    add_deep_mlp_step(folder)
    build.build_site(out, *gym_inputs(folder))


@pytest.fixture
def together_page(kept_context, built_once_dir, serve_directory, tmp_path_factory):
    """A desktop page on that gym, ready."""
    from conftest import DESKTOP, checked_page

    folder = tmp_path_factory.mktemp("corpus")
    out = built_once_dir("together-site", lambda out: _build(out, folder))
    with serve_directory(out) as url, checked_page(kept_context(**DESKTOP), url) as page:
        page.wait_for_selector("html[data-ready]")
        yield page


def _json(page, path):
    return page.evaluate("(path) => fetch(path).then((r) => r.json())", path)


def _answer_and_go_on(page):
    panel = page.locator(f"#drill-{KIND}")
    if panel.locator("[data-opt]").count():
        panel.locator("[data-opt]").first.click()
    else:  # a spot-the-line item: any row
        panel.locator("[data-pick] [data-line]").first.click()
    page.wait_for_selector(f"#drill-{KIND}[data-state=answered]")
    page.keyboard.press("Enter")
    page.wait_for_selector(f"#drill-{KIND}[data-state=asking]")


def test_only_your_programs_asks_a_one_answer_step_with_the_others_items(together_page):
    page = together_page
    assert page.get_attribute(f"#drill-{KIND}", "data-with").startswith("deep-mlp:")
    own = _json(page, f"data/drills/{KIND}/deep-mlp.json")["items"]
    more = _json(page, f"data/drills/with/{KIND}/deep-mlp.json")["items"]
    assert more and all(item["program"] != "deep-mlp" for item in more)
    page.click(f"#tab-{KIND}")
    page.wait_for_selector(f"#drill-{KIND}[data-state=asking]")
    notes = page.locator(f"#drill-{KIND} [data-together-note]")
    # The lines saying why are fetched with the items asked with (not carried by the page) and shown only then.
    assert not notes.count() or not notes.first.is_visible()
    page.check("[data-yours-only]")
    page.wait_for_selector(f"#drill-{KIND} [data-together-note]", state="visible")
    assert any("decisions transpose: alone" in text and "every time" in text for text in notes.all_inner_texts())
    asked_with = 0
    for _ in range(QUESTIONS):
        page.wait_for_selector(f"#drill-{KIND}[data-state=asking][data-item^='{KIND}/deep-mlp/']")
        index = int(page.get_attribute(f"#drill-{KIND}", "data-item").split("/")[2])
        item = (own + more)[index]
        # The caption names the program whose listing the question shows: the item's own.
        assert page.get_attribute(f"#drill-{KIND} .where a", "href") == f"#p-{item['program']}"
        assert page.locator(f"#drill-{KIND} .q").inner_text() == item["question"]
        asked_with += index >= len(own)
        _answer_and_go_on(page)
    assert asked_with, "no question of the items deep-mlp is asked with came up"
    page.uncheck("[data-yours-only]")
    assert not notes.first.is_visible()
