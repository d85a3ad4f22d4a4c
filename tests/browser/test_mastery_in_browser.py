"""The mastery map and "practise my weakest", driven from a seeded v2 progress record."""
from __future__ import annotations

import json

import pytest
from conftest import Gym

pytestmark = pytest.mark.browser

KEY = "dumpgym.progress/2"


def card(stability: float) -> dict:
    """A reviewed ts-fsrs card, dates as ISO text."""
    return {"due": "2026-02-01T00:00:00.000Z", "stability": stability, "difficulty": 5.0, "elapsed_days": 1,
            "scheduled_days": 3, "learning_steps": 0, "reps": 2, "lapses": 0, "state": 2,
            "last_review": "2026-01-29T00:00:00.000Z"}


TALLIES = {
    "shapes": {
        "all": {"attempts": 20, "correct": 14},
        "skill:reduction": {"attempts": 8, "correct": 7},
        "skill:slice-pad": {"attempts": 6, "correct": 2},
        "skill:contraction": {"attempts": 2, "correct": 0},  # worse, but too few answers to be the weakest
        "primitive:reduce_sum": {"attempts": 5, "correct": 4},
        "primitive:slice": {"attempts": 4, "correct": 2},
    },
    "decoder": {
        "all": {"attempts": 12, "correct": 10},
        "skill:output-axis": {"attempts": 5, "correct": 5},
        "skill:lhs-free": {"attempts": 7, "correct": 5},
        "primitive:dot_general": {"attempts": 12, "correct": 10},
    },
}
RECORD = {
    "schema": KEY,
    "streaks": {"shapes": {"current": 1, "best": 4}, "decoder": {"current": 0, "best": 3}},
    "reached": {},
    "saved": "2026-01-30T00:00:00.000Z",
    # Cards are keyed by the items' own `card` (the kind decides it in Python).
    "cards": {"shapes/mlp/0": card(2.0), "shapes/layernorm/1": card(4.0), "decoder/mlp/0/lhs-free": card(7.5)},
    "tallies": TALLIES,
}


def seed(page, record: dict) -> None:
    page.evaluate("([k, v]) => localStorage.setItem(k, v)", [KEY, json.dumps(record)])
    page.reload()
    page.wait_for_selector("html[data-ready]")


def item_on_screen(page, fetch_json, kind: str) -> dict:
    _, slug, index = page.get_attribute(f"#drill-{kind}", "data-item").split("/")
    return fetch_json(f"data/drills/{kind}/{slug}.json")["items"][int(index)]


def skill_of(item: dict):
    return item.get("skill") or item.get("step")


def family_of(item: dict) -> str:
    return item["card"]


def expected_stability(fetch_json) -> dict[str, str]:
    """Each cell's mean card stability as the map prints it, from the seeded cards and the served items."""
    found: dict[str, list[float]] = {}
    for family, c in RECORD["cards"].items():
        kind, slug = family.split("/")[:2]
        cells = {"all"}
        for item in fetch_json(f"data/drills/{kind}/{slug}.json")["items"]:
            if family_of(item) == family:
                cells |= {f"skill:{skill_of(item)}"} if skill_of(item) else set()
                cells |= {f"primitive:{item['primitive']}"} if item.get("primitive") else set()
        for cell in cells:
            found.setdefault(f"{kind}/{cell}", []).append(c["stability"])
    return {cell: f"S {sum(v) / len(v):.1f} d" for cell, v in found.items() if cell.split("/", 1)[1] in TALLIES[cell.split("/")[0]]}


def test_mastery_map_shows_each_attempted_cell_with_its_counts_and_accuracy(page, fetch_json):
    seed(page, RECORD)
    stability = expected_stability(fetch_json)
    assert {"shapes/all", "shapes/skill:contraction", "shapes/skill:reduction", "decoder/skill:lhs-free"} <= set(stability)
    # Cells learn their stability once the splits their cards name have loaded.
    page.wait_for_function("""want => Object.entries(want).every(([cell, text]) =>
        document.querySelector(`#mastery [data-cell="${cell}"] [data-stability]`)?.textContent === text)""", arg=stability)
    shown = page.eval_on_selector_all("#mastery [data-cell]", """cells => cells.map((g) => [g.dataset.cell,
        g.querySelector('[data-count]').textContent, g.querySelector('[data-accuracy]').textContent,
        g.querySelector('[data-stability]').textContent])""")
    expected = {f"{kind}/{key}": (f"{t['correct']}/{t['attempts']}", f"{round(100 * t['correct'] / t['attempts'])}%")
                for kind, cells in TALLIES.items() for key, t in cells.items()}
    assert {cell: (count, acc) for cell, count, acc, _ in shown} == expected
    assert len(shown) == len(expected)
    # Each cell carries the mean stability of its cards; cells without cards show none.
    assert {cell: s for cell, _, _, s in shown if s} == stability
    assert stability["shapes/all"] == "S 3.0 d"
    # Rows follow the drill tabs' order; every cell can be reached by keyboard.
    tabs = page.eval_on_selector_all("[data-drill-tab]", "tabs => tabs.map((t) => t.dataset.drillTab)")
    assert page.eval_on_selector_all("#mastery [data-mastery-kind]", "rows => rows.map((r) => r.dataset.masteryKind)") \
        == [kind for kind in tabs if kind in ("decoder", "shapes")]
    assert page.eval_on_selector_all("#mastery [data-cell]", "cells => cells.every((g) => g.tabIndex === 0)")
    assert not page.is_disabled("[data-mastery-weakest]")


def test_practise_my_weakest_opens_its_drill_and_draws_only_from_its_cell(page, fetch_json):
    seed(page, RECORD)
    page.wait_for_selector("#drills section[data-drill][data-state=asking]")
    page.click("[data-mastery-weakest]")
    # The weakest cell with three answers or more: shapes, skill slice-pad (2 of 6).
    page.wait_for_selector("#drill-shapes[data-focus][data-state=asking]")
    assert page.get_attribute("#tab-shapes", "aria-selected") == "true"
    note = page.locator("#drill-shapes [data-focus-note]")
    assert note.is_visible() and "slice-pad" in note.inner_text()
    assert "slice-pad" in page.inner_text("[data-mastery-status]")
    for _ in range(4):
        page.wait_for_selector("#drill-shapes[data-state=asking]")
        item = item_on_screen(page, fetch_json, "shapes")
        assert item["skill"] == "slice-pad"
        Gym(page, fetch_json).answer("shapes")  # in whatever form the item asks (a typed aval)
        page.locator("#drill-shapes [data-next]").click()
    note.locator("[data-focus-stop]").click()
    assert page.locator("[data-focus-note]").count() == 0
    assert page.get_attribute("#drill-shapes", "data-focus") is None
    assert page.inner_text("[data-mastery-status]").strip() == ""


def test_a_cell_chosen_by_keyboard_focuses_its_drill_on_that_cell(page, fetch_json):
    seed(page, RECORD)
    page.focus("#mastery [data-cell='decoder/skill:lhs-free']")
    page.keyboard.press("Enter")
    page.wait_for_selector("#drill-decoder[data-focus][data-state=asking]")
    for _ in range(3):
        page.wait_for_selector("#drill-decoder[data-state=asking]")
        assert skill_of(item_on_screen(page, fetch_json, "decoder")) == "lhs-free"
        Gym(page, fetch_json).answer("decoder")  # in whatever form the item asks (tapped axes)
        page.locator("#drill-decoder [data-next]").click()


def test_an_empty_record_says_so_and_offers_nothing_to_practise(page):
    assert "No answers recorded yet" in page.inner_text("#mastery [data-mastery-empty]")
    assert page.locator("#mastery [data-cell]").count() == 0
    assert page.is_disabled("[data-mastery-weakest]")


def test_mastery_map_fits_375_px(open_fresh, base_url):
    from conftest import close_pages

    pg = open_fresh(base_url, viewport={"width": 375, "height": 800})
    try:
        seed(pg, RECORD)
        width = pg.evaluate("document.querySelector('#mastery').scrollWidth")
        client = pg.evaluate("document.querySelector('#mastery').clientWidth")
        assert width <= client
        box = pg.locator("#mastery [data-mastery-kind=shapes] svg").bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 375
    finally:
        close_pages(pg.context)


@pytest.mark.parametrize("kind, field", [("decoder", "step"), ("decisions", "step"), ("shapes", "skill")])
def test_an_answer_is_tallied_under_its_skill_in_every_drill(gym, kind, field):
    """Decoder and decisions items name their skill `step`: both still fill skill cells."""
    gym.open(kind)
    item = gym.answer(kind, right=True)
    tallies = json.loads(gym.page.evaluate(f"localStorage.getItem('{KEY}')"))["tallies"][kind]
    assert tallies["all"] == {"attempts": 1, "correct": 1}
    assert tallies[f"skill:{item[field]}"] == {"attempts": 1, "correct": 1}
