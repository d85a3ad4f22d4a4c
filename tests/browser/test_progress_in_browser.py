"""Progress at the browser's limits: full storage, refused saves, two tabs, and hashes that are not URLs."""
import json

import pytest

from dumpgym.site import curriculum

pytestmark = pytest.mark.browser

KEY = "dumpgym.progress/2"
CORRUPT = "{not json"

# Fill this origin's localStorage until nothing more fits, in halving chunks down to one character.
FILL_STORAGE = """() => {
    let size = 1 << 20, n = 0;
    while (size >= 1) {
        try { localStorage.setItem(`filler-${n++}`, 'x'.repeat(size)); } catch { size >>= 1; }
    }
}"""
# Refuse saves of the progress record, as a full or locked-down storage does, until `window.allowSaves`.
REFUSE_SAVES = """(() => {
    const setItem = Storage.prototype.setItem;
    Storage.prototype.setItem = function (key, value) {
        if (key === 'dumpgym.progress/2' && !window.allowSaves) throw new DOMException('quota', 'QuotaExceededError');
        return setItem.call(this, key, value);
    };
})();"""


def first_target(kind):
    chapter = next(ch for ch in curriculum.PATH if any(t.drill == kind for t in ch.targets))
    target = next(t for t in chapter.targets if t.drill == kind)
    return chapter.key(target), target.streak


def stored(page):
    return page.evaluate("k => localStorage.getItem(k)", KEY)


def ready(page):
    page.wait_for_selector("html[data-ready]")


def chip(page, kind):
    return page.locator(f'[data-summary-streak="{kind}"]')


def in_front(tab):
    """Bring `tab` to the front, as a learner does with the tab they act in or look at, and return it.
    A tab behind another gets an animation frame about once a second, and Playwright waits on frames (a
    target must hold still for two before a click): every action there took a second or more. The page
    has no visibility or focus handlers, so what it shows does not depend on which tab is in front."""
    tab.bring_to_front()
    return tab


@pytest.fixture
def second_tab(page, base_url):
    """Another page on the gym in the same context (the same localStorage); fails on its console errors."""
    other = page.context.new_page()
    errors = []
    other.on("console", lambda m: m.type == "error" and errors.append(m.text))
    other.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    other.goto(base_url)
    ready(other)
    yield other
    assert errors == [], f"console errors in the second tab: {errors}"


def test_a_corrupt_record_that_cannot_be_copied_aside_is_left_untouched(page, gym):
    page.evaluate("([k, v]) => localStorage.setItem(k, v)", [KEY, CORRUPT])
    page.evaluate(FILL_STORAGE)
    page.reload()
    ready(page)
    notice = page.locator(".notice.bad").first.inner_text()
    assert "could not be read" in notice
    assert "kept under" not in notice and "set-aside" not in notice
    assert "left as it is" in notice
    assert stored(page) == CORRUPT
    assert page.evaluate(f"Object.keys(localStorage).filter(k => k.startsWith('{KEY}:'))") == []
    gym.open("shapes")  # the page works, in memory, and still does not save over the original
    gym.answer("shapes")
    assert gym.streak("shapes") == (1, 1)
    assert stored(page) == CORRUPT


def test_a_refused_save_says_so_once_and_says_when_saving_works_again(page, gym):
    page.add_init_script(REFUSE_SAVES)
    page.reload()
    ready(page)
    gym.open("shapes")
    gym.answer("shapes")
    refused = page.locator(".notice.bad", has_text="Progress is not being saved")
    assert "full" in refused.inner_text()
    gym.next("shapes")
    gym.answer("shapes")
    assert refused.count() == 1  # once, not on every answer
    assert stored(page) is None
    page.evaluate("window.allowSaves = true")
    gym.next("shapes")
    gym.answer("shapes")
    page.wait_for_selector(".notice.good >> text=Progress is being saved again")
    assert refused.count() == 0  # the good news replaces the bad
    assert json.loads(stored(page))["streaks"]["shapes"] == {"current": 3, "best": 3}


def test_two_tabs_merge_their_streaks_and_targets(page, gym, second_tab, fetch_json):
    from conftest import Gym

    key, need = first_target("shapes")
    nearly = {"schema": KEY, "streaks": {"shapes": {"current": need - 1, "best": need - 1}}, "reached": {},
              "cards": {}, "tallies": {}}
    page.evaluate("([k, v]) => localStorage.setItem(k, v)", [KEY, json.dumps(nearly)])
    for tab in (page, second_tab):
        in_front(tab).reload()
        ready(tab)
    other = Gym(second_tab, fetch_json)

    in_front(page)
    gym.open("shapes")
    gym.answer("shapes")  # tab A reaches the target
    assert page.get_attribute(f'[data-target="{key}"]', "data-reached") == ""
    # Tab B shows it without a reload, from A's save.
    in_front(second_tab).wait_for_selector(f'[data-target="{key}"][data-reached]', timeout=10_000)
    assert chip(second_tab, "shapes").inner_text() == f"{need} · best {need}"

    other.open("decoder")
    other.answer("decoder")  # tab B's save keeps A's target and streak
    other.open("shapes")
    other.answer("shapes")  # and continues A's streak
    assert other.streak("shapes") == (need + 1, need + 1)

    for tab in (page, second_tab):
        in_front(tab).reload()
        ready(tab)
        assert tab.get_attribute(f'[data-target="{key}"]', "data-reached") == ""
        assert chip(tab, "shapes").inner_text() == f"{need + 1} · best {need + 1}"
        assert chip(tab, "decoder").inner_text() == "1 · best 1"
    record = json.loads(stored(page))
    assert key in record["reached"]
    assert record["streaks"] == {"shapes": {"current": need + 1, "best": need + 1}, "decoder": {"current": 1, "best": 1}}


def test_a_save_merges_what_another_tab_saved_before_its_event_arrived(page, gym):
    gym.open("decoder")
    gym.answer("decoder")
    # Another tab's save, written in this page so that no `storage` event announces it. That tab merged
    # this one's save first, so it holds this tab's cards and tallies.
    theirs = {**json.loads(stored(page)),
              "streaks": {"decoder": {"current": 1, "best": 1}, "shapes": {"current": 4, "best": 7}},
              "reached": {first_target("decoder")[0]: "2025-01-01T00:00:00.000Z"}, "saved": "2099-01-01T00:00:00.000Z"}
    page.evaluate("([k, v]) => localStorage.setItem(k, v)", [KEY, json.dumps(theirs)])
    gym.next("decoder")
    gym.answer("decoder")
    record = json.loads(stored(page))
    assert record["streaks"]["shapes"] == {"current": 4, "best": 7}
    assert record["reached"] == theirs["reached"]
    assert chip(page, "shapes").inner_text() == "4 · best 7"


def test_a_reset_in_one_tab_is_not_undone_by_the_other(page, gym, second_tab):
    in_front(page)
    gym.open("shapes")
    gym.answer("shapes")
    in_front(second_tab).wait_for_function("""() => document.querySelector('[data-summary-streak="shapes"]').textContent === '1 · best 1'""",
                                 timeout=10_000)
    in_front(page).click("[data-progress-reset]")
    page.click("[data-progress-reset]")  # the second click confirms
    in_front(second_tab).wait_for_function("""() => document.querySelector('[data-summary-streak="shapes"]').textContent === '0'""",
                                 timeout=10_000)
    second_tab.click("#tab-decoder")
    second_tab.wait_for_selector("#drill-decoder[data-state=asking]")
    from conftest import Gym

    Gym(second_tab, gym.fetch_json).answer("decoder")
    assert json.loads(stored(page))["streaks"] == {"decoder": {"current": 1, "best": 1}}


@pytest.mark.parametrize("hash_", ["#op-%E0%A4%A", "#op-%", "#drill-%E0%A4%A", "#drill-no-such-kind"])
def test_a_malformed_hash_is_ignored(page, base_url, hash_):
    page.locator("#reference").scroll_into_view_if_needed()
    page.wait_for_selector("#reference[data-ready]")
    page.goto(base_url + hash_)  # a hash change on the loaded page
    page.reload()  # and a page opened on that hash
    ready(page)
    page.locator("#reference").scroll_into_view_if_needed()
    page.wait_for_selector("#reference[data-ready]")
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => setTimeout(done, 50)))")
    assert page.locator("#reference .card.hit").count() == 0
    # A well-formed link to a card still finds it.
    anchor = page.get_attribute("#reference [data-op]", "id")
    page.goto(base_url + "#" + anchor)
    page.wait_for_selector(f"#{anchor}.hit")
