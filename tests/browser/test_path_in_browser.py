"""The way through, in Chromium: "next" moves along the path as targets are reached (or to a due review), the
page numbers only the course's chapters, the op search finds ops by what people call them at every layer,
and the corpus section's compiled tab names its backend and switches between the program's layers."""
import json
import re

import pytest

from dumpgym.site import curriculum
from dumpgym.reference import fold

pytestmark = pytest.mark.browser

KEY = "dumpgym.progress/2"


def record(streaks, reached=(), cards=None):
    """A progress record holding these streaks ({kind: best}, current = best) and reached target keys."""
    return {"schema": KEY, "streaks": {k: {"current": n, "best": n} for k, n in streaks.items()},
            "reached": {key: "2026-01-01T00:00:00.000Z" for key in reached}, "cards": cards or {}, "tallies": {}}


def seed(page, value):
    """Store `value` as the progress record and reload, as a returning learner's page starts."""
    page.evaluate("([k, v]) => localStorage.setItem(k, v)", [KEY, json.dumps(value)])
    page.reload()
    page.wait_for_selector("html[data-ready]")


def next_step(page):
    """(kind of step, the drill it opens, what it says)."""
    link = page.locator("#path [data-next]")
    return link.get_attribute("data-next"), link.get_attribute("data-open-drill"), \
        page.inner_text("#path [data-next-what]")


def here(page):
    return page.locator("#path [data-chapter][data-here]").evaluate_all("els => els.map(el => el.dataset.chapter)")


def test_next_walks_a_fresh_profile_along_the_path(page, gym, fetch_json):
    titles = {k["name"]: k["title"] for k in fetch_json("drills.json")["kinds"]}
    targets = [(ch, t) for ch in curriculum.PATH for t in ch.targets]
    total = len(targets)
    # A fresh profile: the first chapter's target, and nothing reached.
    first, target = targets[0]
    assert next_step(page) == ("target", target.drill, f"{first.label}: {titles[target.drill]}, {target.streak} in a row")
    assert here(page) == [first.id]
    assert page.inner_text("[data-path-standing]") == f"0 of {total} targets reached · 0 of {len(curriculum.PATH)} steps done"

    # Through the first four chapters (three of the course's, then the gym's first), one answer short of each
    # target: "next" opens that drill, the answer reaches the target, and "next" moves to the following one.
    streaks, reached = {}, []
    for i, (chapter, target) in enumerate(targets[:4]):
        streaks[target.drill] = target.streak - 1
        seed(page, record(streaks, reached))
        kind, drill, said = next_step(page)
        assert (kind, drill) == ("target", target.drill)
        assert said == (f"{chapter.label}: {titles[drill]}, {target.streak} in a row "
                        f"(now {target.streak - 1} · best {target.streak - 1})")
        assert here(page) == [chapter.id]
        page.click("#path [data-next]")
        page.wait_for_selector(f"#drill-{drill}[data-state=asking]")
        assert page.get_attribute(f"#tab-{drill}", "aria-selected") == "true"
        gym.answer(drill)
        notice = page.locator(f"#drill-{drill} .notice.good").inner_text()
        assert notice.startswith(f"Target reached: {chapter.label}: {titles[drill]}, {target.streak} in a row")
        streaks[target.drill] = target.streak
        reached.append(chapter.key(target))
        after, upcoming = next_step(page), targets[i + 1]
        assert after[:2] == ("target", upcoming[1].drill), f"next did not move on from {chapter.id}"
        assert after[2].startswith(f"{upcoming[0].label}: {titles[upcoming[1].drill]}")
        assert page.get_attribute(f'#path [data-chapter="{chapter.id}"]', "data-done") == ""
        assert page.inner_text(f'#path [data-chapter="{chapter.id}"] [data-chapter-state]') == "done"
        assert here(page) == [upcoming[0].id]
        assert page.inner_text("[data-path-standing]").startswith(f"{i + 1} of {total} targets reached · {i + 1} of ")
    assert targets[3][0].number is None  # the walk crossed into the gym's own chapters

    # Every target reached: "next" says so.
    seed(page, record({t.drill: 2 * curriculum.FLUENCY for _, t in targets}))
    assert next_step(page)[0] == "done" and "every target is reached" in next_step(page)[2]
    assert here(page) == []
    assert page.inner_text("[data-path-standing]") == (f"{total} of {total} targets reached · "
                                                       f"{len(curriculum.PATH)} of {len(curriculum.PATH)} steps done")


def card(due):
    return {"due": due, "stability": 3.0, "difficulty": 5.0, "elapsed_days": 3, "scheduled_days": 3,
            "learning_steps": 0, "reps": 2, "lapses": 0, "state": 2, "last_review": "2026-01-01T00:00:00.000Z"}


def test_next_points_at_the_most_overdue_review_when_reviews_are_due(page, fetch_json):
    pool = fetch_json("drills.json")
    titles = {k["name"]: k["title"] for k in pool["kinds"]}
    families = {kind: list(dict.fromkeys(i["card"] for i in pool["items"] if i["drill"] == kind))
                for kind in ("decoder", "loops", "shapes")}
    cards = {families["decoder"][0]: card("2026-01-05T00:00:00.000Z"),
             families["decoder"][1]: card("2026-01-09T00:00:00.000Z"),
             families["loops"][0]: card("2026-01-02T00:00:00.000Z"),  # the most overdue
             families["shapes"][0]: card("2999-01-01T00:00:00.000Z")}  # not due
    seed(page, record({"shapes": 3}, cards=cards))
    assert next_step(page) == ("review", "loops", f"review {titles['loops']}: 1 question due")
    assert here(page) == ["02"]  # where you stand on the path does not move for a review
    page.click("#path [data-next]")
    page.wait_for_selector("#drill-loops[data-state=asking]")
    del cards[families["loops"][0]]
    seed(page, record({"shapes": 3}, cards=cards))
    assert next_step(page) == ("review", "decoder", f"review {titles['decoder']}: 2 questions due")
    seed(page, record({"shapes": 3}, cards={families["shapes"][0]: cards[families["shapes"][0]]}))
    assert next_step(page)[:2] == ("target", "shapes")


def test_every_step_and_drill_label_on_the_page_uses_one_numbering(page, fetch_json):
    # The steps are numbered 1..N in order, the guide's chapters named after them; no other badge is numbered.
    steps = page.locator("#path h3 > .num").evaluate_all("els => els.map(el => el.textContent.trim())")
    assert steps == [str(n) for n in range(1, len(curriculum.PATH) + 1)]
    guides = page.locator("#path h3 [data-guide]").evaluate_all("els => els.map(el => el.textContent.trim())")
    assert guides == [f"guide ch {ch.number}" for ch in curriculum.PATH if ch.number]
    badges = page.locator("h2 > .num, h3 > .num:not(#path *)").evaluate_all("els => els.map(el => el.textContent.trim())")
    for badge in badges:
        assert not re.findall(r"\d+", badge), badge
    titles = [k["title"] for k in fetch_json("drills.json")["kinds"]]
    for where in ("[data-drill-tab]", "[data-summary] a", "#path [data-target] a"):
        labels = page.locator(where).evaluate_all("els => els.map(el => el.textContent.trim())")
        assert labels and all(label in titles for label in labels), (where, labels)
    text = page.inner_text("main")
    assert not re.search(r"\bdrills? \d", text) and "numbers differ" not in text
    assert page.inner_text("#xray-h").lower().split() == ["layers", "the", "x-ray"]


def shown_cards(page, query):
    page.fill("[data-ref-filter]", query)
    return set(page.locator("#reference [data-op]:not([hidden])").evaluate_all(
        "els => els.map(el => el.id)"))


@pytest.mark.parametrize("query, must", [
    ("all-reduce", {"op-psum", "op-stablehlo.all_reduce", "op-hlo-all-reduce"}),
    ("allreduce", {"op-psum", "op-stablehlo.all_reduce", "op-hlo-all-reduce"}),
    ("matmul", {"op-dot_general", "op-stablehlo.dot_general", "op-hlo-dot"}),
    ("donate", {"op-func.func", "op-hlo-input_output_alias"}),
])
def test_the_op_search_in_the_page_finds_ops_by_meaning_at_every_layer(page, fetch_json, query, must):
    page.locator("#reference").scroll_into_view_if_needed()
    page.wait_for_selector("#reference[data-ready]")
    cards = fetch_json("data/reference.json")["cards"]
    words = fold(query).split()
    expected = {c["anchor"] for c in cards if all(w in c["search"] for w in words)}
    shown = shown_cards(page, query)
    assert shown == expected and must <= shown
    assert page.inner_text("[data-ref-count]") == f"{len(shown)} of {len(cards)} ops"
    assert page.locator("[data-ref-empty]").is_hidden()
    assert shown_cards(page, query.upper().replace("-", "_")) == shown  # case, hyphen and underscore alike


def test_the_corpus_compiled_tab_names_its_backend_and_switches_layers(page, fetch_json):
    program = fetch_json("data/programs/fsdp-step.json")
    assert set(program["compiled"]) == {"tpu", "gpu", "cpu"}
    article = page.locator("#p-fsdp-step")
    article.scroll_into_view_if_needed()
    tab = article.locator('[data-layer-tab="hlo"]')
    tab.wait_for()
    lines = {t: layer["text"].count("\n") + 1 for t, layer in program["compiled"].items()}
    assert tab.inner_text().split() == ["compiled", "HLO", "TPU", str(lines["tpu"])]
    tab.click()
    panel = article.locator('[data-layer-panel="hlo"]')
    panel.locator("[data-line]").first.wait_for()
    buttons = panel.locator("[data-compiled-target]")
    assert buttons.evaluate_all("els => els.map(el => [el.dataset.compiledTarget, el.textContent.trim()])") == [
        ["tpu", "TPU"], ["gpu", "GPU"], ["cpu", "CPU"]]
    tpu = program["compiled"]["tpu"]
    note = panel.locator("[data-compiled-backend]")
    assert note.inner_text().startswith(f"compiled for {tpu['device_kind']} (") and "without a TPU" in note.inner_text()
    for target, says in (("cpu", "compiled by XLA for cpu"), ("gpu", "without a GPU"), ("tpu", "without a TPU")):
        panel.locator(f'[data-compiled-target="{target}"]').click()
        page.wait_for_function("([panel, n]) => panel.querySelectorAll('[data-line]').length === n",
                               arg=[panel.element_handle(), lines[target]])
        text = program["compiled"][target]["text"].split("\n")
        assert panel.locator("[data-line='1']").text_content().rstrip("\n") == text[0]
        assert says in note.inner_text()
        assert panel.locator(f'[data-compiled-target="{target}"]').get_attribute("aria-pressed") == "true"
        assert tab.inner_text().split()[2:] == [target.upper(), str(lines[target])]


def test_a_program_with_one_compiled_layer_names_it_and_offers_no_switch(page, fetch_json):
    program = fetch_json("data/programs/pallas-matmul.json")
    assert list(program["compiled"]) == ["tpu"]
    article = page.locator("#p-pallas-matmul")
    article.scroll_into_view_if_needed()
    article.locator('[data-layer-tab="hlo"]').click()
    panel = article.locator('[data-layer-panel="hlo"]')
    panel.locator("[data-line]").first.wait_for()
    assert "without a TPU" in panel.locator("[data-compiled-backend]").inner_text()
    assert panel.locator("[data-compiled-target]").count() == 0


@pytest.mark.parametrize("device", ["desktop", "phone"])
def test_each_step_opens_with_its_lesson_and_a_worked_example_before_its_drills(kept_context, base_url, fetch_json,
                                                                               device, tmp_path):
    """Steps 1..N, each a lesson, then (but the bar) a worked example, then its targets; the first step's
    example is open for a fresh profile, its blocks resolved from the program's listings as a drill's are
    (context.js), and another step's resolves when opened. On a desktop and on a 390×844 phone."""
    import os

    from conftest import DESKTOP, checked_page

    phone = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 2, "has_touch": True, "is_mobile": True}
    with checked_page(kept_context(**(DESKTOP if device == "desktop" else phone)), base_url) as pg:
        steps = pg.locator("#path [data-chapter]")
        assert steps.count() == len(curriculum.PATH)
        for k, chapter in enumerate(curriculum.PATH):
            li = steps.nth(k)
            assert li.get_attribute("data-chapter") == chapter.id
            order = li.evaluate("el => [...el.querySelectorAll('[data-lesson], [data-example], .targets')]"
                                ".map((e) => e.dataset.lesson !== undefined ? 'lesson' : e.dataset.example ? 'example' : 'targets')")
            assert order == (["lesson", "example", "targets"] if chapter.example else ["lesson", "targets"]), chapter.id
        first = steps.nth(0).locator("[data-example]")
        assert first.get_attribute("open") is not None
        pg.wait_for_selector('#path [data-chapter="02"] [data-example-blocks][data-state=shown]')
        card, program = first.get_attribute("data-example"), first.get_attribute("data-example-program")
        item = next(i for i in fetch_json(f"data/drills/shapes/{program}.json")["items"] if i["card"] == card)
        shown = first.locator("[data-shown]").all_inner_texts()
        assert shown and item["question"].replace("`", "") == first.locator(".q").inner_text()
        assert first.locator("[data-example-answer]").inner_text() == item["answer"]["value"]
        later = steps.nth(3).locator("[data-example]")  # loops: closed until opened
        assert later.get_attribute("open") is None
        later.locator("summary").click()
        pg.wait_for_selector('#path [data-chapter="loops"] [data-example-blocks][data-state=shown]')
        assert later.locator("[data-shown]").count() >= 1
        assert later.locator("summary").bounding_box()["height"] >= 40  # a tap target on a phone
        if os.environ.get("DUMPGYM_SHOTS"):
            steps.nth(0).screenshot(path=f"{os.environ['DUMPGYM_SHOTS']}/path-step1-{device}.png")
            steps.nth(3).screenshot(path=f"{os.environ['DUMPGYM_SHOTS']}/path-step4-{device}.png")
