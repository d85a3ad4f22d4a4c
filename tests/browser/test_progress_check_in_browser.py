"""Saved progress the scheduler cannot take never stops a drill: each kind of bad record is set aside with a
notice at load and at import, and a scheduler that fails is a notice, with the drill going on."""
import json

import pytest

from dumpgym.site import curriculum

pytestmark = pytest.mark.browser

KEY = "dumpgym.progress/2"
SET_ASIDE = "dumpgym.progress/2:set-aside-cards:"
GOOD = {"due": "2026-01-02T00:00:00.000Z", "stability": 3.2, "difficulty": 5.1, "elapsed_days": 1,
        "scheduled_days": 3, "learning_steps": 0, "reps": 2, "lapses": 0, "state": 2,
        "last_review": "2025-12-30T00:00:00.000Z"}
# Cards that pass the record's shape check (`validate`) and that FSRS throws on, as the issue found them.
BAD_CARDS = {
    "due before its last review": {**GOOD, "due": "2020-01-01T00:00:00.000Z", "last_review": "2026-06-01T00:00:00.000Z"},
    "dates far in the future": {**GOOD, "due": "2300-01-01T00:00:00.000Z", "last_review": "2290-01-01T00:00:00.000Z"},
    "huge numbers": {**GOOD, "stability": 1e300, "elapsed_days": 1e300, "scheduled_days": 1e300},
    "a difficulty past FSRS's scale": {**GOOD, "difficulty": 1e12},
}


def stored(page):
    raw = page.evaluate("k => localStorage.getItem(k)", KEY)
    return None if raw is None else json.loads(raw)


def record_with(cards, reached=None):
    return {"schema": KEY, "streaks": {}, "reached": reached or {}, "cards": cards, "tallies": {}}


def first_family(page, fetch_json):
    """The card of the first shapes item of mlp, as the item names it (drills/2: the page keeps its card)."""
    return fetch_json("data/drills/shapes/mlp.json")["items"][0]["card"]


def set_aside_keys(page):
    return page.evaluate(f"Object.keys(localStorage).filter(k => k.startsWith('{SET_ASIDE}'))")


@pytest.mark.parametrize("label", list(BAD_CARDS))
def test_a_stored_card_the_scheduler_cannot_take_is_set_aside_and_the_drill_goes_on(page, gym, fetch_json, label):
    family = first_family(page, fetch_json)
    page.evaluate("([k, v]) => localStorage.setItem(k, v)", [KEY, json.dumps(record_with({family: BAD_CARDS[label]}))])
    page.reload()
    page.wait_for_selector("html[data-ready]")
    notice = page.locator(".notice.bad").first.inner_text()
    assert "Saved progress held a card the scheduler cannot take" in notice and "Kept under the key" in notice
    assert family in notice
    assert family not in stored(page)["cards"]
    keys = set_aside_keys(page)
    assert len(keys) == 1 and json.loads(page.evaluate("k => localStorage.getItem(k)", keys[0])) == {family: BAD_CARDS[label]}
    gym.open("shapes")
    for _ in range(3):  # answers are rated and the drill moves on, question after question
        gym.answer("shapes")
        assert page.locator("#drill-shapes [data-next]").is_visible()
        gym.next("shapes")
    cards = stored(page)["cards"]
    assert len(cards) == 3 and all(c["last_review"] <= c["due"] for c in cards.values())


def test_a_good_card_beside_a_bad_one_is_kept(page, fetch_json):
    family = first_family(page, fetch_json)
    other = family.replace("/mlp/", "/softmax/")
    record = record_with({family: BAD_CARDS["huge numbers"], other: GOOD})
    page.evaluate("([k, v]) => localStorage.setItem(k, v)", [KEY, json.dumps(record)])
    page.reload()
    page.wait_for_selector("html[data-ready]")
    assert stored(page)["cards"] == {other: GOOD}


def test_a_reached_time_that_is_not_a_date_is_dated_today(page):
    chapter = curriculum.PATH[0]
    target = chapter.key(chapter.targets[0])
    page.evaluate("([k, v]) => localStorage.setItem(k, v)", [KEY, json.dumps(record_with({}, {target: "yesterday"}))])
    page.reload()
    page.wait_for_selector("html[data-ready]")
    assert "reached at a time that is not a date" in page.locator(".notice.bad").first.inner_text()
    when = stored(page)["reached"][target]
    assert page.evaluate("w => !Number.isNaN(Date.parse(w))", when)
    assert page.locator(f'#path [data-target="{target}"][data-reached]').count() == 1


@pytest.mark.parametrize("label", ["due before its last review", "huge numbers"])
def test_an_imported_card_the_scheduler_cannot_take_is_left_out(page, gym, fetch_json, tmp_path, label):
    family = first_family(page, fetch_json)
    path = tmp_path / "progress.json"
    path.write_text(json.dumps({**record_with({family: BAD_CARDS[label]}), "saved": "2026-11-30T00:00:00.000Z"}))
    with page.expect_file_chooser() as chooser:
        page.click("[data-progress-import]")
    chooser.value.set_files(path)
    page.wait_for_selector("[data-import-confirm]")
    assert "The file held a card the scheduler cannot take" in page.locator(".notice.bad").first.inner_text()
    page.click("[data-import-confirm] [data-import-replace]")
    page.wait_for_selector(".notice.good >> text=Progress imported")
    assert stored(page)["cards"] == {}
    gym.open("shapes")
    gym.answer("shapes")
    assert page.locator("#drill-shapes [data-next]").is_visible()


def test_a_scheduler_that_fails_to_load_is_a_notice_and_the_drill_goes_on(page, gym):
    page.route("**/static/vendor/ts-fsrs.js", lambda route: route.fulfill(status=503, body="down"))
    page.reload()
    page.wait_for_selector("html[data-ready]")
    gym.open("shapes")
    gym.answer("shapes")
    assert page.locator("#drill-shapes [data-next]").is_visible()
    assert "could not be scheduled" in page.locator(".notice.bad").first.inner_text()
    gym.next("shapes")
    # The failed fetch is the browser's own console line, and the only one: nothing uncaught.
    assert page.console.errors and all("503" in e for e in page.console.errors), page.console.errors
    page.console.errors.clear()
