"""Answers the learner builds, in Chromium: the page's answer.js grades as Python does, and typed avals,
tapped axes and line sets are answered by keyboard alone at 1280 px and 375 px, with feedback that says
what was missing or extra, and why."""
import json

import pytest
from answer_cases import CASES
from forms_pool import forms_pool

from dumpgym.drills import answer as answer_forms

pytestmark = pytest.mark.browser

NARROW = {"viewport": {"width": 375, "height": 740}, "device_scale_factor": 2}
WIDTHS = {"1280": None, "375": NARROW}


@pytest.fixture(scope="module")
def forms_data(gym_data):
    corpus, pool = gym_data
    return corpus, forms_pool(pool, corpus)


@pytest.fixture(scope="module")
def forms_url(serve_pool, forms_data):
    """The corpus with the forms pool (forms_pool.py), built and served."""
    with serve_pool("forms-site", *forms_data) as url:
        yield url


@pytest.fixture(params=list(WIDTHS))
def forms_page(request, checked_on, forms_url):
    """A fresh page on the forms site, at 1280 px and at 375 px; fails on any console error."""
    with checked_on(forms_url, **(WIDTHS[request.param] or {})) as pg:
        pg.width = request.param
        yield pg


@pytest.fixture
def desk_page(checked_on, forms_url):
    """A fresh page on the forms site at 1280 px."""
    with checked_on(forms_url) as pg:
        yield pg


def on_screen_item(page, kind):
    _, slug, index = page.get_attribute(f"#drill-{kind}", "data-item").split("/")
    return page.evaluate(f"fetch('data/drills/{kind}/{slug}.json').then(r => r.json())")["items"][int(index)]


def open_kind(page, kind):
    page.click(f"#tab-{kind}")
    page.wait_for_selector(f"#drill-{kind}[data-state=asking]")


def next_question(page, kind):
    page.keyboard.press("Enter")
    page.wait_for_selector(f"#drill-{kind}[data-state=asking]")


def feedback(page, kind):
    page.wait_for_selector(f"#drill-{kind}[data-state=answered]")
    return page.locator(f"#drill-{kind} [data-feedback]").inner_text()


def test_the_page_grades_every_answer_case_as_python_does(desk_page):
    graded = desk_page.evaluate("""async (cases) => {
      const { check } = await import('./static/answer.js');
      return cases.map(([answer, response]) => check(answer, response));
    }""", [[a, r] for a, r, _, _ in CASES])
    for (answer, response, right, readable), page_verdict in zip(CASES, graded):
        python = answer_forms.check(answer, response).to_json()
        assert (python["right"], python["readable"]) == (right, readable), (answer, response)
        assert page_verdict == python, (answer["form"], response)


def test_a_typed_aval_is_answered_by_keyboard_alone(forms_page):
    page = forms_page
    open_kind(page, "shapes")
    item = on_screen_item(page, "shapes")
    assert item["answer"]["form"] == "typed"
    field = page.locator("#drill-shapes [data-typed-input]")
    assert field.get_attribute("placeholder") != item["answer"]["value"]  # the example never gives it away
    page.keyboard.type(item["answer"]["value"].replace("[", " (").replace("]", ")"))  # forgiving: `f32 (64, 512)`
    page.keyboard.press("Enter")
    text = feedback(page, "shapes")
    assert text.startswith("right:") and item["answer"]["value"] in text
    assert item["feedback"] in page.locator("#drill-shapes [data-why]").inner_text()  # one line of why
    next_question(page, "shapes")

    item = on_screen_item(page, "shapes")
    assert page.evaluate("document.activeElement.matches('[data-typed-input]')")  # type straight away
    page.keyboard.type("not a shape")
    page.keyboard.press("Enter")
    hint = page.locator("#drill-shapes [data-hint]").inner_text()
    assert "write it like" in hint and item["answer"]["value"] not in hint
    assert page.get_attribute("#drill-shapes", "data-state") == "asking"  # not graded
    misread, why = next(iter(item["answer"]["misread"].items()))
    page.keyboard.press("Control+a")
    page.keyboard.type(misread)
    page.keyboard.press("Enter")
    text = feedback(page, "shapes")
    assert text.startswith("not quite.") and item["answer"]["value"] in text and misread in text
    assert why["reason"].replace("`", "")[:40] in text
    assert "streak back to 0" in text


def test_tapped_axes_are_answered_by_keyboard_alone(forms_page):
    page = forms_page
    open_kind(page, "decoder")
    item = on_screen_item(page, "decoder")
    form = item["answer"]
    chips = page.locator("#drill-decoder [data-axis]")
    assert chips.count() == len(form["dims"])
    assert [t.split()[-1] for t in chips.all_inner_texts()] == [str(d) for d in form["dims"]]
    if page.width == "375":
        box = chips.first.bounding_box()
        assert box["height"] >= 44 and box["width"] >= 44  # thumb-sized
    for axis in form["axes"]:
        page.keyboard.press(str(axis))
    if not form["axes"]:  # the answer is no axis: toggle one on and off, which brings the focus to the chips
        page.keyboard.press("0")
        page.keyboard.press("0")
    page.keyboard.press("Enter")
    text = feedback(page, "decoder")
    assert text.startswith("right:")
    next_question(page, "decoder")

    item = on_screen_item(page, "decoder")
    form = item["answer"]
    key, misread = next(iter(form["misread"].items()), (None, None))
    wrong = [int(a) for a in key.split(",") if a] if key is not None else [
        next(a for a in range(len(form["dims"])) if a not in form["axes"])]
    for axis in wrong:
        page.keyboard.press(str(axis))
    page.keyboard.press("Enter")
    text = feedback(page, "decoder")
    assert text.startswith("not quite.")
    missing = [a for a in form["axes"] if a not in wrong]
    extra = [a for a in wrong if a not in form["axes"]]
    panel = page.locator("#drill-decoder")
    if missing:
        assert panel.locator("[data-missing]").inner_text().endswith(str(missing[-1]))
    if extra:
        assert panel.locator("[data-extra]").inner_text().endswith(str(extra[-1]))
    if misread:
        assert misread["reason"].replace("`", "")[:40] in text


def keyed(page, kind, line):
    """The key number the page shows beside row `line` (what a learner reads off the screen)."""
    return page.get_attribute(f"#drill-{kind} [data-pick] [data-line='{line}']", "data-key")


def test_a_line_set_is_answered_by_keyboard_alone(forms_page):
    page = forms_page
    open_kind(page, "fusions")
    item = on_screen_item(page, "fusions")
    want = item["answer"]["lines"]
    for line in want:
        for digit in keyed(page, "fusions", line):
            page.keyboard.press(digit)
        page.keyboard.press("Space")
    assert page.locator("#drill-fusions [data-pick] .sel").count() == len(want)
    page.keyboard.press("Enter")
    text = feedback(page, "fusions")
    assert text.startswith("right:") and item["feedback"].replace("`", "") in text  # `code` shown as code
    next_question(page, "fusions")

    item = on_screen_item(page, "fusions")
    want = item["answer"]["lines"]
    rows = page.locator("#drill-fusions [data-pick] [data-line][data-key]")
    extra = next(int(rows.nth(i).get_attribute("data-line")) for i in range(rows.count())
                 if int(rows.nth(i).get_attribute("data-line")) not in want)
    for line in [*want[1:], extra]:  # the first left out, one too many
        for digit in keyed(page, "fusions", line):
            page.keyboard.press(digit)
        page.keyboard.press("Space")
    page.keyboard.press("Enter")
    text = feedback(page, "fusions")
    assert text.startswith("not quite.")
    panel = page.locator("#drill-fusions")
    assert panel.locator("[data-missing]").inner_text() == f"line {want[0]}"
    assert panel.locator("[data-extra]").inner_text() == f"line {extra}"
    # the reason the verdict gives (answer.py: a tapped row's why-not first, else a left-out row's why)
    reason = answer_forms.check(item["answer"], [*want[1:], extra]).reason
    assert reason == item["answer"]["explain"].get(str(extra), item["answer"]["explain"][str(want[0])])
    assert panel.locator("[data-explain]").inner_text().startswith(reason.replace("`", ""))
    assert "ans" in panel.locator(f"[data-pick] [data-line='{want[0]}']").get_attribute("class").split()
    assert "wrong" in panel.locator(f"[data-pick] [data-line='{extra}']").get_attribute("class").split()


def test_an_empty_line_set_is_not_graded(desk_page):
    open_kind(desk_page, "fusions")
    desk_page.locator("#drill-fusions [data-submit]").click()
    assert desk_page.get_attribute("#drill-fusions", "data-state") == "asking"
    assert "tap one line or more" in desk_page.locator("#drill-fusions [data-feedback]").inner_text()


def test_the_tap_help_on_a_touch_screen_talks_of_taps_not_keys(checked_on, forms_url):
    with checked_on(forms_url, **NARROW, has_touch=True, is_mobile=True) as page:
        for kind in ("decisions", "fusions", "decoder"):
            open_kind(page, kind)
            help_text = page.locator(f"#drill-{kind} .fine:visible").first.inner_text().lower()
            assert "tap" in help_text and not any(w in help_text for w in ("key", "enter", "click")), (kind, help_text)
            keyed = page.locator(f"#drill-{kind} [data-pick] [data-key]")
            if keyed.count():  # the key numbers beside the rows are for keys: not shown on a touch screen
                assert keyed.first.evaluate("el => getComputedStyle(el, '::after').display") == "none"


def test_the_help_on_a_desktop_names_the_keys(desk_page):
    open_kind(desk_page, "decisions")
    help_text = desk_page.locator("#drill-decisions #pick-help-decisions").inner_text()
    assert "j" in help_text and "Enter" in help_text and "tap the line" not in help_text


def test_the_page_reads_every_spelling_of_random_text_as_python_does(desk_page):
    """Beyond the table: text made of the characters the spellings care about, read both ways."""
    import random

    rng = random.Random(27)
    alphabet = ["bf16", "f32", "float", "bfloat", "int", "uint", "i8", "bool", "key<fry>", "T", "t", "x", "×", "*",
                "(", ")", "[", "]", ",", " ", "_", "0", "1", "2", "8", "64", "128", "007", "+", "-", "e4m3fn", "\t"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 7))) for _ in range(3000)]
    readers = {"aval": answer_forms.read_aval, "shape": answer_forms.read_shape, "dtype": answer_forms.read_dtype,
               "int": answer_forms.read_int, "tile": answer_forms.read_tile}
    page_reads = desk_page.evaluate("""async (texts) => {
      const { SPELLINGS } = await import('./static/answer.js');
      return Object.fromEntries(Object.entries(SPELLINGS).map(([name, s]) => [name, texts.map(s.read)]));
    }""", texts)
    assert set(page_reads) == set(readers)
    for name, read in readers.items():
        differ = [(t, read(t), got) for t, got in zip(texts, page_reads[name]) if read(t) != got]
        assert not differ, (name, differ[:5])
