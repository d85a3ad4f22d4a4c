"""The drills, streaks and path in Chromium: answers come from the served drills JSON, never from the DOM."""
import json

import pytest

from decisions_spot import to_a_spot_item
from dumpgym.site import curriculum

pytestmark = pytest.mark.browser

KEY = "dumpgym.progress/2"


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
    assert page.locator(".notice.good").first.inner_text().startswith("Target reached: step 1, ")
    stored = json.loads(page.evaluate(f"localStorage.getItem('{KEY}')"))
    assert key in stored["reached"]


def test_a_wrong_answer_resets_the_streak_and_says_why(page, gym):
    gym.open("shapes")
    for _ in range(3):
        gym.answer("shapes")
        gym.next("shapes")
    item = gym.answer("shapes", right=False)  # a typed aval: the wrong answer is its first named misreading
    assert gym.streak("shapes") == (0, 3)
    typed, why = next(iter(item["misread"].items()))
    feedback = page.locator("#drill-shapes [data-feedback]").inner_text()
    assert item["value"] in feedback and typed in feedback
    assert why["reason"].split("`")[0].strip() in feedback


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
    item = gym.item("fusions")  # `shown`: the item's context as Python resolves it
    # A line set: the first block is the jaxpr to tap, the rest are shown as context.
    assert item["answer_form"]["form"] == "lines"
    rows = page.locator("#drill-fusions [data-pick] [data-line]").all_inner_texts()
    assert [r.strip() for r in rows] == [r.strip() for r in item["shown"][0].split("\n")]
    assert page.locator("#drill-fusions .ctx [data-shown]").all_inner_texts() == item["shown"][1:]
    assert page.locator("#drill-fusions [data-hlo-line]").count() == 0
    text = fetch_json(f"data/programs/{item['program']}.json")["compiled"][item["layer"]]["text"].split("\n")[item["hlo_line"] - 1]
    asked = next(k for k, block in enumerate(item["context"])
                 if block.get("layer") == item["layer"] and block.get("lines") == [item["hlo_line"]] * 2)
    assert item["shown"][asked] == f"{item['hlo_line']:>3}  {text.strip()}"  # beside its number, as the question cites it


@pytest.mark.parametrize("kind", ["shapes", "decoder", "decisions", "fusions", "partitioner", "loops", "backward",
                                  "buffers", "layouts", "units", "kernels"])
def test_the_page_resolves_each_items_context_to_pythons_blocks(page, gym, kind):
    """The page reads an item's references into the listings it fetches; for a sample of items of every
    kind, what it shows is exactly the blocks `dumpgym.drills.item.resolve` makes."""
    gym.open(kind)
    for n in range(4):
        item = gym.item(kind)
        panel = page.locator(f"#drill-{kind}")
        if "options" in item:
            assert panel.locator(".ctx [data-shown]").all_inner_texts() == item["shown"], item["card"]
        elif item["answer_form"]["form"] in ("typed", "axes"):  # every block is shown as it is
            assert panel.locator(".ctx [data-shown]").all_inner_texts() == item["shown"], item["card"]
        else:  # a line pick: the first block is the listing to tap, the rest are shown above it
            rows = [t.removesuffix("\n") for t in panel.locator("[data-pick] [data-line]").all_text_contents()]
            assert rows == item["shown"][0].removesuffix("\n").split("\n"), item["card"]
            assert panel.locator(".ctx [data-shown]").all_inner_texts() == item["shown"][1:]
        if n < 3:
            gym.answer(kind, right=n % 2 == 0)
            gym.next(kind)


def test_decisions_marks_the_framework_line_after_a_miss(page, gym):
    gym.open("decisions")
    to_a_spot_item(gym)
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
                                    '{"schema": "dumpgym.progress/2", "streaks": {"shapes": {"current": -4, "best": 2}}, "reached": {},'
                                    ' "cards": {}, "tallies": {}}'])
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
    page.click("[data-import-confirm] [data-import-replace]")  # the import asks first
    page.wait_for_selector(".notice.good >> text=Progress imported")
    assert gym.streak("shapes") == (2, 2)


def test_importing_a_file_that_is_not_progress_changes_nothing(page, gym, tmp_path):
    gym.open("shapes")
    gym.answer("shapes")
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "dumpgym.progress/2", "streaks": [], "reached": {}, "cards": {}, "tallies": {}}')
    with page.expect_file_chooser() as chooser:
        page.click("[data-progress-import]")
    chooser.value.set_files(bad)
    notice = page.wait_for_selector(".notice.bad")
    assert "Nothing imported" in notice.inner_text()
    assert gym.streak("shapes") == (1, 1)


def test_options_are_buttons_named_by_their_text(page, gym):
    gym.open("loops")  # loops asks a loop's role as a choice
    for _ in range(20):
        item = gym.item("loops")
        if "options" in item:
            break
        gym.answer("loops")
        gym.next("loops")
    else:
        pytest.fail("no choice item of loops came up in twenty questions")
    panel = page.locator("#drill-loops")
    assert panel.locator("button[data-opt]").count() == len(item["options"])
    for option in item["options"]:
        assert panel.get_by_role("button", name=option, exact=True).count() == 1


def test_decisions_answer_from_the_keyboard(page, gym):
    gym.open("decisions")
    item = to_a_spot_item(gym)
    before, _ = gym.streak("decisions")
    pick = page.locator("#drill-decisions [data-pick]")
    pick.focus()
    for _ in range(item["answer_line"] - 1):
        page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.wait_for_selector("#drill-decisions[data-state=answered]")
    assert gym.streak("decisions")[0] == before + 1
    gym.next("decisions", key="Space")


# --- a hand-made pool: what the page does with `shown`, `accepted_lines`, `explain` and `weight` ---

SHOWN = ["e:? = dot_general[dimension_numbers=(([1], [0]), ([], []))] a b", "params <b>not bold</b> & `ticks`"]
LISTING = "{ lambda ; a:f32[4]. let\n    b:f32[1,4] = broadcast_in_dim a\n    c:f32[1,4] = add b b\n  in (c,) }"


def _choice(program, shown=("a:f32[4]",), weight=1, question="What comes out?", card="0", drill="shapes", **extra):
    return {"drill": drill, "program": program, "card": f"{drill}/{program}/{card}", "eqn": 0, "layer": "jaxpr",
            "weight": weight, "question": question,
            "answer": {"form": "choice", "options": ["f32[4]", "f32[1,4]", "f32[4,1]"], "index": 1,
                       "reasons": ["dropped the new axis", "", "put the new axis last"], "rules": ["a", "", "b"]},
            "context": [{"text": block} for block in shown], **extra}


HAND_MADE_POOL = {
    "schema": "dumpgym.drills/2",
    "kinds": [
        {"name": "decoder", "number": "01", "title": "dot_general, decoded", "aim": "Weighted items."},
        {"name": "shapes", "number": "02", "title": "shape on sight", "aim": "One item with `shown`."},
        {"name": "decisions", "number": "03", "title": "the framework's hand", "aim": "One line item."},
    ],
    "items": [
        # Facts the page does not read are here too; only the context's blocks may appear.
        _choice("mlp", shown=SHOWN, jaxpr_lines=[7, 7], facts={"hlo_line": 3, "show": {"primitive": "dot_general"}}),
        _choice("mlp", weight=0, question="weight 0: never asked", card="1", drill="decoder"),
        _choice("mlp", weight=0, question="weight 0: never asked either", card="2", drill="decoder"),
        _choice("softmax", weight=1, question="asked A", card="3", drill="decoder"),
        _choice("softmax", weight=2.5, question="asked B", card="4", drill="decoder"),
        {"drill": "decisions", "program": "mlp", "card": "decisions/mlp/0/hidden-broadcast", "eqn": 0,
         "layer": "jaxpr", "step": "hidden-broadcast", "weight": 1, "question": "Tap the broadcast.",
         "answer": {"form": "line", "line": 2, "accepted": [2, 3],
                    "explain": {"4": "line 4 is the `in` line: the results, not an op"}},
         "context": [{"text": LISTING}]},
    ],
}


@pytest.fixture(scope="module")
def hand_made_url(serve_pool, corpus):
    """The built-in corpus with the hand-made pool above, built and served."""
    with serve_pool("hand-made-site", corpus, HAND_MADE_POOL) as url:
        yield url


@pytest.fixture
def hand_page(kept_context, hand_made_url):
    """A fresh page (its own localStorage) on the hand-made site; fails on any console error."""
    from conftest import DESKTOP, checked_page

    with checked_page(kept_context(**DESKTOP), hand_made_url) as pg:
        yield pg


def _open(page, kind):
    page.click(f"#tab-{kind}")
    page.wait_for_selector(f"#drill-{kind}[data-state=asking]")


def test_an_item_with_shown_renders_exactly_those_blocks(hand_page):
    _open(hand_page, "shapes")
    ctx = hand_page.locator("#drill-shapes .ctx")
    assert ctx.locator("[data-shown]").all_inner_texts() == SHOWN  # as text: the markup in it stays text
    assert ctx.locator("pre").count() == len(SHOWN)
    assert ctx.locator("dl, details, [data-hlo-line], b").count() == 0
    title = hand_page.locator("#p-mlp .title").text_content()
    assert ctx.locator(".where").inner_text() == f"{title} · jaxpr line 7"
    assert "equation" not in ctx.inner_text()


def test_decisions_accepts_any_accepted_line_and_explains_a_wrong_tap(hand_page):
    _open(hand_page, "decisions")
    panel = hand_page.locator("#drill-decisions")
    rows = panel.locator("[data-pick] [data-line]")
    assert [t.rstrip("\n") for t in rows.all_text_contents()] == LISTING.split("\n")
    assert panel.locator(".ctx pre").count() == 0  # shown[0] is the listing itself, nothing else

    def tap(line):
        panel.locator(f"[data-pick] [data-line='{line}']").click()
        hand_page.wait_for_selector("#drill-decisions[data-state=answered]")
        text = panel.locator("[data-feedback]").inner_text()
        hand_page.keyboard.press("Enter")  # the one item is asked again: nothing else has weight
        hand_page.wait_for_selector("#drill-decisions[data-state=asking]")
        return text

    assert tap(3).startswith("right.")  # not answer_line, but accepted
    assert tap(2).startswith("right.")
    assert "line 4 is the in line: the results, not an op" in tap(4)
    generic = tap(1)
    assert "You picked line 1; the framework's line is 2." in generic and "line 4 is" not in generic


def test_items_of_weight_zero_are_never_asked(hand_page):
    _open(hand_page, "decoder")
    seen = []
    for _ in range(12):
        seen.append(hand_page.locator("#drill-decoder .q").inner_text())
        hand_page.locator("#drill-decoder button[data-opt='1']").click()
        hand_page.wait_for_selector("#drill-decoder[data-state=answered]")
        hand_page.keyboard.press("Enter")
        hand_page.wait_for_selector("#drill-decoder[data-state=asking]")
    assert set(seen) <= {"asked A", "asked B"}
    # never the item just asked: with two askable items, they alternate
    assert all(a != b for a, b in zip(seen, seen[1:]))


SAMPLE = """async ([weights, draws, skipLast]) => {
  const { pickWeighted } = await import('./static/sample.js');
  let s = 12345;  // mulberry32: a seeded source, so the counts do not depend on the run
  const random = () => { s = (s + 0x6D2B79F5) | 0; let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t; return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
  const counts = weights.map(() => 0);
  let last = -1;
  for (let n = 0; n < draws; n++) {
    const i = pickWeighted(weights, skipLast ? last : -1, random);
    if (skipLast && i === last) return 'repeated';
    counts[i] += 1;
    last = i;
  }
  return counts;
}"""


def test_the_sampler_never_draws_weight_zero(hand_page):
    counts = hand_page.evaluate(SAMPLE, [[1, 0, 2, 0], 200, False])
    assert counts[1] == counts[3] == 0 and counts[0] + counts[2] == 200


def test_the_sampler_follows_weights_three_to_one(hand_page):
    a, b = hand_page.evaluate(SAMPLE, [[3, 1], 4000, False])
    assert 2.7 < a / b < 3.3


def test_the_sampler_never_repeats_the_item_just_asked(hand_page):
    counts = hand_page.evaluate(SAMPLE, [[1, 1, 1, 0], 300, True])
    assert counts[3] == 0 and min(counts[:3]) > 50
    # with one askable item, it is asked again rather than nothing
    assert hand_page.evaluate("async () => (await import('./static/sample.js')).pickWeighted([0, 4, 0], 1, () => 0.5)") == 1
    assert hand_page.evaluate("async () => (await import('./static/sample.js')).pickWeighted([0, 0], -1, () => 0.5)") == -1


def test_an_item_weighs_what_the_pool_says_and_nothing_else(hand_page):
    # Every drills/2 item carries its weight; the page works out no default of its own.
    weights = hand_page.evaluate("""async () => { const { weightOf } = await import('./static/sample.js');
      return [{}, { weight: 0 }, { weight: 2.5 }, { weight: -1 }, { weight: null }].map(weightOf); }""")
    assert weights == [0, 0, 2.5, 0, 0]


def test_opening_a_tab_while_its_first_question_loads_asks_one_question(browser, base_url):
    """Clicking the tab of a drill whose first question is still being picked must not pick a second
    one over it (a learner, or a test, would be answering the question that is about to go)."""
    context = browser.new_context()
    page = context.new_page()
    # The drill splits are held until the test lets them go, so the first pick is still on its way
    # when the tab is clicked, however slow the machine.
    page.add_init_script("""const fetchNow = window.fetch;
        const held = new Promise((go) => { window.releaseDrills = go; });
        window.fetch = (url, options) => (String(url).includes('data/drills/')
          ? held.then(() => fetchNow(url, options)) : fetchNow(url, options));""")
    page.goto(base_url)
    page.wait_for_selector("html[data-ready]")
    kind = page.get_attribute("#drills [role=tab][aria-selected=true]", "data-drill-tab")
    picks = page.evaluate("""(kind) => new Promise((done) => {
        const panel = document.querySelector(`#drill-${kind}`);
        if (panel.dataset.item) done(-1);  // a question arrived without its split: the hold failed
        let picks = 0;  // every question put on screen sets data-item, the same item or not
        new MutationObserver((records) => {
          // After the first question, give any second pick in flight time to land.
          if (!picks) setTimeout(() => done(picks), 2000);
          picks += records.length;
        }).observe(panel, { attributes: true, attributeFilter: ['data-item'] });
        for (let i = 0; i < 3; i++) document.querySelector(`#tab-${kind}`).click();
        window.releaseDrills();
        setTimeout(() => done(picks), 20000);  // no question at all: 0
    })""", kind)
    assert picks == 1
    context.close()
