"""The drills of the later chapters in Chromium (the TPU layer; loops, the backward pass, sharding,
buffers): ten right answers in a row tick the chapter's target in each kind, and a wrong answer names
its misreading."""
import json

import pytest

from dumpgym.site import curriculum

pytestmark = pytest.mark.browser

KEY = "dumpgym.progress/2"


KINDS = ["layouts", "units", "fusions", "loops", "backward", "partitioner", "buffers"]


def chapter_target(kind):
    """The first chapter (before the bar) that sets a target in `kind`: its key and streak."""
    chapter = next(ch for ch in curriculum.PATH if ch.number != "12" and any(t.drill == kind for t in ch.targets))
    target = next(t for t in chapter.targets if t.drill == kind)
    return chapter.key(target), target.streak


@pytest.mark.parametrize("kind", KINDS)
def test_ten_right_answers_in_a_row_tick_the_chapter_target(page, gym, kind):
    key, need = chapter_target(kind)
    assert need == curriculum.FLUENCY
    target = page.locator(f'[data-target="{key}"]')
    gym.open(kind)
    for n in range(need):
        assert target.get_attribute("data-reached") is None
        item = gym.answer(kind, keys=n % 2 == 1)  # digits and taps both answer
        assert item["drill"] == kind and item["shown"]
        assert gym.streak(kind) == (n + 1, n + 1)
        if n < need - 1:
            gym.next(kind)
            # A long question (a whole fused computation) scrolls the page; the next one comes into view.
            assert page.evaluate(f"""() => {{ const q = document.querySelector('#drill-{kind} .q').getBoundingClientRect();
                const top = document.querySelector('.top').getBoundingClientRect().bottom;
                const first = document.querySelector('#drill-{kind} :is([data-opt], [data-pick], [data-typed-input], [data-axis])').getBoundingClientRect();
                return q.top >= top && first.top < innerHeight; }}""")
    assert target.get_attribute("data-reached") == ""
    assert target.locator("[data-target-state]").inner_text() == "reached"
    stored = json.loads(page.evaluate(f"localStorage.getItem('{KEY}')"))
    assert key in stored["reached"]


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "fusions"])
def test_a_wrong_answer_names_the_right_one_and_the_misreading(page, gym, kind):
    gym.open(kind)
    item = gym.answer(kind, right=False)
    assert gym.streak(kind) == (0, 0)
    feedback = page.locator(f"#drill-{kind} [data-feedback]").inner_text()
    form = item["answer_form"]
    if form["form"] == "choice":
        chosen = next(i for i in range(len(item["options"])) if i != item["answer"])
        assert item["options"][item["answer"]] in feedback
        assert item["reasons"][chosen].split("`")[0].strip() in feedback
    elif form["form"] == "typed":  # the right value, and the misreading's reason when the wrong one was one
        assert form["value"] in feedback
        misread = next(iter(form.get("misread", {}).values()), None)
        if misread:
            assert misread["reason"].split("`")[0].strip() in feedback
    elif form["form"] == "line":  # the right line, and why the tapped one is wrong (else the line of why)
        # Rows are named by the number the listing gives them (an excerpt of lines 237-250 shows 237-250).
        shown = page.locator(f"#drill-{kind} [data-pick] [data-line='{form['line']}']").get_attribute("data-n")
        assert f"the framework's line is {shown}" in feedback
        rows = page.locator(f"#drill-{kind} [data-pick] [data-line]").count()
        tapped = next(n for n in range(1, rows + 1) if n not in form["accepted"])  # as Gym.answer taps
        said = form.get("explain", {}).get(str(tapped))
        assert (said or item["feedback"]).split("`")[0].strip() in feedback
        return
    else:  # a set: what was left out or extra is named
        panel = page.locator(f"#drill-{kind}")
        assert panel.locator("[data-missing], [data-extra]").count() >= 1
    assert item["feedback"].split("`")[0].strip() in feedback  # and one line of why
