"""The drills, streaks and path in Chromium: answers come from the served drills JSON, never from the DOM."""
import json

import pytest

from dumpgym import curriculum

pytestmark = pytest.mark.browser

KEY = "dumpgym.progress/1"


def first_target(kind):
    chapter = next(ch for ch in curriculum.PATH if any(t.drill == kind for t in ch.targets))
    target = next(t for t in chapter.targets if t.drill == kind)
    return chapter.key(target), target.streak


def test_ten_right_answers_in_a_row_check_off_a_path_target(page, gym):
    key, need = first_target("shapes")
    assert need == 10
    target = page.locator(f'[data-target="{key}"]')
    gym.open("shapes")
    for n in range(need):
        assert target.get_attribute("data-reached") is None
        gym.answer("shapes", keys=n % 2 == 0)  # digits and taps both answer
        assert gym.streak("shapes") == (n + 1, n + 1)
        if n < need - 1:
            gym.next("shapes", key="Enter" if n % 3 else "Space")
    assert target.get_attribute("data-reached") == ""
    assert target.locator("[data-target-state]").inner_text() == "reached"
    assert page.locator(".notice.good").first.inner_text().startswith("Target reached: chapter")
    stored = json.loads(page.evaluate(f"localStorage.getItem('{KEY}')"))
    assert key in stored["reached"]


def test_a_wrong_answer_resets_the_streak_and_says_why(page, gym):
    gym.open("shapes")
    for _ in range(3):
        gym.answer("shapes")
        gym.next("shapes")
    item = gym.answer("shapes", right=False)
    assert gym.streak("shapes") == (0, 3)
    chosen = next(i for i in range(len(item["options"])) if i != item["answer"])
    feedback = page.locator("#drill-shapes [data-feedback]").inner_text()
    assert item["options"][item["answer"]] in feedback
    assert item["reasons"][chosen].split("`")[0].strip() in feedback


@pytest.mark.parametrize("kind", ["decoder", "decisions", "fusions"])
def test_every_drill_kind_answers_and_counts(page, gym, kind):
    gym.open(kind)
    gym.answer(kind)
    assert gym.streak(kind) == (1, 1)
    gym.next(kind)
    gym.answer(kind, right=False)
    assert gym.streak(kind) == (0, 1)


def test_the_fusion_drill_shows_the_compiled_line_it_asks_about(page, gym, fetch_json):
    gym.open("fusions")
    item = gym.item("fusions")
    text = fetch_json(f"data/programs/{item['program']}.json")["hlo"]["text"].split("\n")[item["hlo_line"] - 1]
    shown = page.locator("#drill-fusions [data-hlo-line]")
    page.wait_for_function("el => el.textContent.includes(':')", arg=shown.element_handle())
    assert shown.inner_text() == f"{item['hlo_line']}: {text.strip()}"


def test_decisions_marks_the_framework_line_after_a_miss(page, gym):
    gym.open("decisions")
    item = gym.answer("decisions", right=False)
    answer = page.locator(f"#drill-decisions [data-pick] [data-line='{item['answer_line']}']")
    assert "ans" in answer.get_attribute("class").split()


def test_streaks_survive_a_reload(page, gym):
    gym.open("decoder")
    gym.answer("decoder")
    gym.next("decoder")
    gym.answer("decoder")
    page.reload()
    page.wait_for_selector("html[data-ready]")
    gym.open("decoder")
    assert gym.streak("decoder") == (2, 2)
    assert page.locator('[data-summary-streak="decoder"]').inner_text() == "2 · best 2"


@pytest.mark.parametrize("stored", ["{not json", '{"schema": "someone-else/3", "x": 1}',
                                    '{"schema": "dumpgym.progress/1", "streaks": {"shapes": {"current": -4, "best": 2}}, "reached": {}}'])
def test_a_corrupt_or_foreign_stored_value_is_set_aside_with_a_notice(page, gym, stored):
    page.evaluate("([k, v]) => localStorage.setItem(k, v)", [KEY, stored])
    page.reload()
    page.wait_for_selector("html[data-ready]")
    notice = page.locator(".notice.bad").first
    assert "could not be read" in notice.inner_text()
    aside = page.evaluate(f"Object.keys(localStorage).filter(k => k.startsWith('{KEY}:set-aside:'))")
    assert len(aside) == 1
    assert page.evaluate("k => localStorage.getItem(k)", aside[0]) == stored
    assert aside[0] in notice.inner_text()
    gym.open("shapes")  # and the page still works
    gym.answer("shapes")
    assert gym.streak("shapes") == (1, 1)
    assert json.loads(page.evaluate(f"localStorage.getItem('{KEY}')"))["streaks"]["shapes"] == {"current": 1, "best": 1}


def test_export_then_import_restores_progress(page, gym, tmp_path):
    gym.open("shapes")
    for _ in range(2):
        gym.answer("shapes")
        gym.next("shapes")
    with page.expect_download() as download:
        page.click("[data-progress-export]")
    saved = tmp_path / "progress.json"
    download.value.save_as(saved)
    exported = json.loads(saved.read_text())
    assert exported["schema"] == KEY and exported["streaks"]["shapes"] == {"current": 2, "best": 2}

    page.click("[data-progress-reset]")
    page.click("[data-progress-reset]")  # the second click confirms
    assert gym.streak("shapes") == (0, 0)

    with page.expect_file_chooser() as chooser:
        page.click("[data-progress-import]")
    chooser.value.set_files(saved)
    page.wait_for_selector(".notice.good >> text=Progress imported")
    assert gym.streak("shapes") == (2, 2)


def test_importing_a_file_that_is_not_progress_changes_nothing(page, gym, tmp_path):
    gym.open("shapes")
    gym.answer("shapes")
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "dumpgym.progress/1", "streaks": [], "reached": {}}')
    with page.expect_file_chooser() as chooser:
        page.click("[data-progress-import]")
    chooser.value.set_files(bad)
    notice = page.wait_for_selector(".notice.bad")
    assert "Nothing imported" in notice.inner_text()
    assert gym.streak("shapes") == (1, 1)


def test_options_are_buttons_named_by_their_text(page, gym):
    gym.open("shapes")
    item = gym.item("shapes")
    panel = page.locator("#drill-shapes")
    assert panel.locator("button[data-opt]").count() == len(item["options"])
    for option in item["options"]:
        assert panel.get_by_role("button", name=option, exact=True).count() == 1


def test_decisions_answer_from_the_keyboard(page, gym):
    gym.open("decisions")
    item = gym.item("decisions")
    pick = page.locator("#drill-decisions [data-pick]")
    pick.focus()
    for _ in range(item["answer_line"] - 1):
        page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.wait_for_selector("#drill-decisions[data-state=answered]")
    assert gym.streak("decisions") == (1, 1)
    gym.next("decisions", key="Space")
