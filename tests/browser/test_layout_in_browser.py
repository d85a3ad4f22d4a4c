"""What a new user sees at 375 and 1280 px: feedback in view, notices beside it, a path that explains itself, keys."""
import json

import pytest

from decisions_spot import to_a_spot_item
from dumpgym import drills
from dumpgym.site import curriculum

pytestmark = pytest.mark.browser

KEY = "dumpgym.progress/1"
VIEWPORTS = {"phone": (375, 740, "light"), "desktop": (1280, 900, "dark")}


def candidates(listing: str, layer: str) -> list[int]:
    """The line view's keyed lines (from 1), by the rule `candidateLines` in line-view.js states."""
    def op(line):
        return " = " in line or (layer == "stablehlo" and "stablehlo." in line)

    def structural(line):
        return line.lstrip().startswith(("module", "func.func"))

    lines = listing.removesuffix("\n").split("\n")
    return [i + 1 for i, line in enumerate(lines) if op(line) and not structural(line)]


def presses(item: dict) -> int:
    """Keys from the question to an accepted line, picked: the fewer of its key number's digits + Enter, or j's + Enter."""
    keyed = candidates(item["shown"][0], item["layer"])
    accepted = set(item.get("accepted_lines") or [item["answer_line"]])
    return min(min(len(str(k + 1)), k + 1) + 1 for k, line in enumerate(keyed) if line in accepted)


def sized(page, name):
    width, height, scheme = VIEWPORTS[name]
    page.set_viewport_size({"width": width, "height": height})
    page.emulate_media(color_scheme=scheme)


def box(page, selector):
    return page.eval_on_selector(selector, "el => { const r = el.getBoundingClientRect();"
                                           " return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; }")


def assert_in_view(page, selector):
    """The element's box lies inside the viewport, below the sticky header."""
    r = box(page, selector)
    header = box(page, "header.top")["bottom"]
    height = page.evaluate("innerHeight")
    assert r["bottom"] > r["top"], f"{selector} has no height"
    assert header - 1 <= r["top"] and r["bottom"] <= height + 1, f"{selector} at {r}, viewport {header}–{height}"


def seed_streak(page, kind, streak):
    """Make `kind`'s current and best streak `streak` in the stored record, then reload."""
    record = json.loads(page.evaluate(f"localStorage.getItem('{KEY}')") or "null") or {
        "schema": KEY, "streaks": {}, "reached": {}}
    record["streaks"][kind] = {**record["streaks"].get(kind, {}), "current": streak, "best": streak}
    page.evaluate("([k, v]) => localStorage.setItem(k, v)", [KEY, json.dumps(record)])
    page.reload()
    page.wait_for_selector("html[data-ready]")


def kinds(fetch_json):
    return [k["name"] for k in fetch_json("drills.json")["kinds"]]


@pytest.mark.parametrize("view", VIEWPORTS)
@pytest.mark.parametrize("kind", ["decoder", "shapes", "decisions", "fusions"])
def test_feedback_is_in_view_after_an_answer_and_no_notice_covers_it(page, gym, fetch_json, kind, view):
    assert kind in kinds(fetch_json)
    sized(page, view)
    # A streak one short of chapter 12's target, so the right answer below reaches it and a notice comes.
    need = next(t.streak for t in curriculum.PATH[-1].targets if t.drill == kind)
    seed_streak(page, kind, need - 1)
    for right in (True, False):
        gym.open(kind)
        page.eval_on_selector(f"#drill-{kind}", "el => el.scrollIntoView({block: 'start'})")
        gym.answer(kind, right=right)
        assert_in_view(page, f"#drill-{kind} [data-feedback]")
        feedback = box(page, f"#drill-{kind} [data-feedback]")
        notices = page.eval_on_selector_all(".notice", "els => els.map(el => { const r = el.getBoundingClientRect();"
                                                         " return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; })")
        if right:
            assert page.locator(f"#drill-{kind} .notice.good").inner_text().startswith(
                f"Target reached: {curriculum.PATH[-1].label}")
        for n in notices:
            overlaps = n["top"] < feedback["bottom"] and feedback["top"] < n["bottom"] and \
                n["left"] < feedback["right"] and feedback["left"] < n["right"]
            assert not overlaps, f"a notice at {n} covers the feedback at {feedback}"
        page.keyboard.press("Enter")
        page.wait_for_selector(f"#drill-{kind}[data-state=asking]")


@pytest.mark.parametrize("view", VIEWPORTS)
def test_next_opens_the_first_chapter_drill_with_its_question_in_view(page, view):
    sized(page, view)
    first = curriculum.PATH[0].targets[0].drill
    page.evaluate("scrollTo(0, 0)")
    page.click("[data-next]")
    page.wait_for_selector(f"#drill-{first}[data-state=asking]")
    assert page.get_attribute(f"#tab-{first}", "aria-selected") == "true"
    assert_in_view(page, f"#drill-{first} .q")


def test_the_path_names_each_chapter_and_the_drills_it_trains(page, fetch_json):
    titles = {k["name"]: k["title"] for k in fetch_json("drills.json")["kinds"]}
    for chapter in curriculum.PATH:
        li = page.locator(f'#path [data-chapter="{chapter.id}"]')
        assert li.locator("h3 .num").inner_text() == str(chapter.step)
        guide = li.locator("h3 [data-guide]")
        assert (guide.inner_text() if guide.count() else None) == (f"guide ch {chapter.number}" if chapter.number else None)
        said = li.locator("[data-target] a").evaluate_all("els => els.map(el => el.textContent.trim())")
        assert said == [titles[t.drill] for t in chapter.targets if t.drill in titles]
    bar = page.locator('#path [data-chapter="12"] [data-target]')
    # The bar names every registered kind; those with items here link to their drill (the fixture's pool is
    # the programs' own: no compile with one change, so no `diff` items, which says so in place of a link).
    assert sorted(bar.evaluate_all("els => els.map(el => el.dataset.drill)")) == sorted(drills.kinds())
    assert sorted(bar.evaluate_all("els => els.filter(el => el.querySelector('a')).map(el => el.dataset.drill)")) \
        == sorted(titles)
    assert "fusions" in bar.evaluate_all("els => els.map(el => el.dataset.drill)")


def test_every_decisions_item_is_five_key_presses_or_fewer_from_its_question(fetch_json):
    from pool_checks import readable

    items = [readable(i, fetch_json(f"data/programs/{i['program']}.json"))
             for i in fetch_json("drills.json")["items"] if i["drill"] == "decisions" and i["answer"]["form"] == "line"]
    assert items
    counts = {f"{i['program']}/{i['decision']}/{i['layer']}": presses(i) for i in items}
    assert max(counts.values()) <= 5, {k: v for k, v in counts.items() if v > 5}


def test_decisions_answer_with_key_numbers_and_j_alone(page, gym):
    # Keyboard only: arrows select the tab, then digits (or j) and Enter answer, Enter asks again.
    page.focus("[role=tablist] [aria-selected=true]")
    while page.get_attribute("#tab-decisions", "aria-selected") != "true":
        page.keyboard.press("ArrowRight")
    page.wait_for_selector("#drill-decisions[data-state=asking]")
    for n in range(6):
        item = to_a_spot_item(gym)
        before, _ = gym.streak("decisions")
        keyed = page.locator("#drill-decisions [data-pick] [data-key]")
        rows = keyed.evaluate_all("els => els.map(el => Number(el.dataset.line))")
        assert rows == candidates(item["shown"][0], item["layer"])
        assert keyed.evaluate_all("els => els.map(el => el.dataset.key)") == [str(k + 1) for k in range(len(rows))]
        accepted = set(item.get("accepted_lines") or [item["answer_line"]])
        k = next(k for k, line in enumerate(rows) if line in accepted) + 1
        keys = ["j"] * k if n % 3 == 2 else list(str(k))
        for key in keys:
            page.keyboard.press(key)
        assert page.get_attribute(f"#drill-decisions [data-line='{rows[k - 1]}']", "class").split().count("cur") == 1
        page.keyboard.press("Enter")
        page.wait_for_selector("#drill-decisions[data-state=answered]")
        assert gym.streak("decisions")[0] == before + 1
        gym.next("decisions")


def test_typed_key_numbers_start_again_when_they_cannot_grow(page, gym):
    gym.open("decisions")
    to_a_spot_item(gym)
    page.focus("#drill-decisions .q")
    rows = page.locator("#drill-decisions [data-pick] [data-key]").evaluate_all(
        "els => els.map(el => Number(el.dataset.line))")
    cursor = "#drill-decisions [data-pick] .cur"
    page.keyboard.press("1")
    assert page.get_attribute(cursor, "data-line") == str(rows[0])
    if len(rows) >= 12:
        page.keyboard.press("2")
        assert page.get_attribute(cursor, "data-line") == str(rows[11])
    # "9" extends "12" to 129 when the listing has that many candidates; otherwise it starts again at 9.
    typed = "12" if len(rows) >= 12 else "1"
    key = "9" if len(rows) >= 9 else str(len(rows))
    at = int(typed + key) if int(typed + key) <= len(rows) else int(key)
    page.keyboard.press(key)
    assert page.get_attribute(cursor, "data-line") == str(rows[at - 1])
    if at > 99:  # a long listing took "129": one more digit cannot grow it, and starts again at 9
        page.keyboard.press("9")
        at = 9 if 1299 > len(rows) else 1299
        assert page.get_attribute(cursor, "data-line") == str(rows[at - 1])
    if len(rows) >= 2:
        page.keyboard.press("k")
        assert page.get_attribute(cursor, "data-line") == str(rows[at - 2])
