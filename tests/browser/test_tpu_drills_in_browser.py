"""The TPU-layer drills in Chromium: ten right answers in a row tick the TPU chapter's target in each kind."""
import json

import pytest

from dumpgym import curriculum

pytestmark = pytest.mark.browser

KEY = "dumpgym.progress/2"


def tpu_target(kind):
    chapter = next(ch for ch in curriculum.PATH if ch.title == "the TPU layer")
    target = next(t for t in chapter.targets if t.drill == kind)
    return chapter.key(target), target.streak


@pytest.mark.parametrize("kind", ["layouts", "units", "fusions"])
def test_ten_right_answers_in_a_row_tick_the_tpu_chapter_target(page, gym, kind):
    key, need = tpu_target(kind)
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
                const first = document.querySelector('#drill-{kind} [data-opt]').getBoundingClientRect();
                return q.top >= top && first.top < innerHeight; }}""")
    assert target.get_attribute("data-reached") == ""
    assert target.locator("[data-target-state]").inner_text() == "reached"
    stored = json.loads(page.evaluate(f"localStorage.getItem('{KEY}')"))
    assert key in stored["reached"]


@pytest.mark.parametrize("kind", ["layouts", "units"])
def test_a_wrong_tpu_answer_names_its_misreading(page, gym, kind):
    gym.open(kind)
    item = gym.answer(kind, right=False)
    assert gym.streak(kind) == (0, 0)
    chosen = next(i for i in range(len(item["options"])) if i != item["answer"])
    feedback = page.locator(f"#drill-{kind} [data-feedback]").inner_text()
    assert item["options"][item["answer"]] in feedback
    assert item["reasons"][chosen].split("`")[0].strip() in feedback
