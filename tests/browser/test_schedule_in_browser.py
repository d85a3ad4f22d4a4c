"""Spaced repetition in the page: missed questions come back, due and new items mix, the record migrates and travels."""
import json

import pytest

from dumpgym.site import curriculum

pytestmark = pytest.mark.browser

KEY = "dumpgym.progress/2"
KEY_V1 = "dumpgym.progress/1"


def stored(page):
    raw = page.evaluate("k => localStorage.getItem(k)", KEY)
    return None if raw is None else json.loads(raw)


def family(page, item):
    """The item's card: the key the record keeps its FSRS card under (the item names it; the page works out none)."""
    return item["card"]


def scheduled(page, kind):
    return page.get_attribute(f"#drill-{kind}", "data-scheduled")


def due_count(page, kind):
    return int(page.locator(f"#drill-{kind} [data-due-count]").inner_text())


def choose_file(page, path):
    with page.expect_file_chooser() as chooser:
        page.click("[data-progress-import]")
    chooser.value.set_files(path)


def stands_for(page, kind):
    """The due card the question on screen is asked in place of (a sibling's), or None."""
    return page.get_attribute(f"#drill-{kind}", "data-stands-for")


def test_a_missed_question_comes_back_within_ten_as_a_sibling_or_re_spelled(page, gym):
    gym.open("shapes")
    first = gym.item("shapes")
    shown = gym.options("shapes")
    missed = family(page, gym.answer("shapes", right=False))
    assert stored(page)["cards"][missed]["lapses"] == 0 and stored(page)["cards"][missed]["state"] == 1  # learning
    for n in range(10):
        gym.next("shapes")
        item = gym.item("shapes")
        if stands_for(page, "shapes") == missed or family(page, item) == missed:
            break
        gym.answer("shapes")
    else:
        pytest.fail("the missed question did not come back within ten questions")
    assert scheduled(page, "shapes") == "due"
    assert n >= 3  # not straight away: a few other questions first
    assert due_count(page, "shapes") == 1
    if family(page, item) == missed:  # re-spelled: the same options, never in the same order
        assert sorted(gym.options("shapes")) == sorted(shown) and gym.options("shapes") != shown
    else:  # a sibling: the same skill, another question (and another equation or program)
        assert item["skill"] == first["skill"] and item["card"] != missed
        assert (item["program"], item["eqn"]) != (first["program"], first["eqn"])
    gym.answer("shapes")
    assert stored(page)["cards"][missed]["reps"] == 2  # the sibling's answer rates the missed card too
    assert due_count(page, "shapes") == 0


def test_a_thirty_question_session_mixes_due_and_new_items(page, gym):
    gym.open("shapes")
    reasons, missed_at, wrongs = [], {}, 0
    asked = set()  # (card, options in the order shown): never twice
    for n in range(30):
        if n:
            gym.next("shapes")
        item = gym.item("shapes")
        fam = stands_for(page, "shapes") or family(page, item)  # the due card a sibling is asked for
        seen = fam in (stored(page) or {"cards": {}})["cards"]
        reason = scheduled(page, "shapes")
        reasons.append(reason)
        assert reason in ("due", "new")  # 104 families: never out of new ones in thirty questions
        assert seen == (reason == "due"), (n, reason, fam)
        shown = (item["card"], tuple(gym.options("shapes")))
        assert shown not in asked, shown
        asked.add(shown)
        if reason == "due" and fam in missed_at:
            assert n - missed_at.pop(fam) <= 10  # a miss comes back within ten questions
        wrong = reason == "new" and n % 2 == 0  # miss some new ones, so that some fall due
        if wrong:
            missed_at[fam] = n
            wrongs += 1
        gym.answer("shapes", right=not wrong)
    assert reasons.count("due") >= 5 and reasons.count("new") >= 10
    # roughly one new per two due: never three due questions in a row while new ones wait
    assert not any(reasons[i:i + 3] == ["due"] * 3 for i in range(len(reasons) - 2))
    record = stored(page)
    assert record["tallies"]["shapes"]["all"]["attempts"] == 30
    assert record["tallies"]["shapes"]["all"]["correct"] == 30 - wrongs


def test_a_v1_record_migrates_with_nothing_lost(page, gym):
    chapter = next(ch for ch in curriculum.PATH if any(t.drill == "shapes" for t in ch.targets))
    target = chapter.key(next(t for t in chapter.targets if t.drill == "shapes"))
    v1 = {"schema": KEY_V1, "streaks": {"shapes": {"current": 3, "best": 12}, "decoder": {"current": 0, "best": 4}},
          "reached": {target: "2026-01-01T12:00:00.000Z"}, "saved": "2026-01-02T00:00:00.000Z"}
    raw = json.dumps(v1)
    page.evaluate("([k, v]) => localStorage.setItem(k, v)", [KEY_V1, raw])
    page.reload()
    page.wait_for_selector("html[data-ready]")
    record = stored(page)
    assert record["schema"] == KEY
    assert record["streaks"] == v1["streaks"] and record["reached"] == v1["reached"]
    assert record["cards"] == {} and record["tallies"] == {}
    assert page.evaluate("k => localStorage.getItem(k)", KEY_V1) == raw  # the old key is left as it was
    assert page.get_attribute(f'[data-target="{target}"]', "data-reached") == ""
    gym.open("shapes")
    assert gym.streak("shapes") == (3, 12)
    gym.answer("shapes")
    assert gym.streak("shapes") == (4, 12)
    assert stored(page)["streaks"]["decoder"] == {"current": 0, "best": 4}
    page.reload()  # once migrated, the v2 record is the one read
    page.wait_for_selector("html[data-ready]")
    gym.open("shapes")
    assert gym.streak("shapes") == (4, 12)


def test_export_reset_import_restores_the_cards(page, gym, tmp_path):
    gym.open("shapes")
    gym.answer("shapes", right=False)
    for _ in range(2):
        gym.next("shapes")
        gym.answer("shapes")
    before = stored(page)
    assert len(before["cards"]) == 3
    with page.expect_download() as download:
        page.click("[data-progress-export]")
    saved = tmp_path / "progress.json"
    download.value.save_as(saved)
    exported = json.loads(saved.read_text())
    assert exported["cards"] == before["cards"] and exported["tallies"] == before["tallies"]

    page.click("[data-progress-reset]")
    page.click("[data-progress-reset]")
    assert stored(page)["cards"] == {}

    choose_file(page, saved)
    page.click("[data-import-confirm] [data-import-replace]")
    page.wait_for_selector(".notice.good >> text=Progress imported")
    after = stored(page)
    assert after["cards"] == before["cards"] and after["tallies"] == before["tallies"]
    assert after["streaks"] == before["streaks"]


def test_import_asks_first_and_says_what_it_changes(page, gym, tmp_path):
    gym.open("shapes")
    gym.answer("shapes")
    gym.next("shapes")
    gym.answer("shapes")
    mine = stored(page)
    theirs = json.loads(json.dumps(mine))
    theirs["streaks"]["decoder"] = {"current": 1, "best": 2}
    theirs["reached"]["01/decoder/2"] = "2026-01-01T00:00:00.000Z"
    card = next(iter(mine["cards"].values()))
    theirs["cards"]["decoder/mlp/0/output-axis"] = card
    path = tmp_path / "theirs.json"
    path.write_text(json.dumps(theirs))

    choose_file(page, path)
    box = page.locator("[data-import-confirm]")
    text = box.inner_text()
    assert "streaks 1 → 2" in text and "targets 0 → 1" in text and "cards 2 → 3" in text
    assert stored(page) == mine  # nothing changed while it asks
    box.locator("[data-import-cancel]").click()
    assert box.count() == 0
    assert stored(page) == mine

    choose_file(page, path)
    page.click("[data-import-confirm] [data-import-replace]")
    page.wait_for_selector(".notice.good >> text=Progress imported")
    record = stored(page)
    assert record["cards"] == theirs["cards"] and record["reached"] == theirs["reached"]
    assert record["streaks"]["decoder"] == {"current": 1, "best": 2}


def test_a_stored_record_with_a_malformed_card_is_set_aside(page):
    bad = {"schema": KEY, "streaks": {}, "reached": {}, "tallies": {},
           "cards": {"shapes/mlp/0/": {"due": "soon", "stability": 1, "difficulty": 1, "elapsed_days": 0,
                                       "scheduled_days": 0, "learning_steps": 0, "reps": 1, "lapses": 0, "state": 1,
                                       "last_review": "2026-01-01T00:00:00.000Z"}}}
    page.evaluate("([k, v]) => localStorage.setItem(k, v)", [KEY, json.dumps(bad)])
    page.reload()
    page.wait_for_selector("html[data-ready]")
    assert "could not be read" in page.locator(".notice.bad").first.inner_text()
    assert stored(page)["cards"] == {}


def loaded(page):
    """The static files the page has fetched so far, as paths from the site's root."""
    return page.evaluate("() => performance.getEntriesByType('resource').map((e) => new URL(e.name).pathname.slice(1))")


def test_the_scheduler_and_the_xray_load_when_needed_not_with_the_page(page, gym):
    page.wait_for_load_state("networkidle")
    first = loaded(page)
    assert "static/vendor/ts-fsrs.js" not in first and "static/xray.js" not in first, first
    assert not any(p.startswith("data/compiled/") for p in first), first
    gym.open("shapes")
    gym.answer("shapes")
    assert "static/vendor/ts-fsrs.js" in loaded(page)
    assert stored(page)["cards"], "the answer was rated once ts-fsrs came"
    page.locator("#xray").scroll_into_view_if_needed()
    page.wait_for_selector("#xray[data-ready]")
    assert "static/xray.js" in loaded(page)


def test_the_ratings_and_states_the_record_stores_are_ts_fsrs_own(page):
    ours, theirs = page.evaluate("""async () => {
      const ours = await import('./static/schedule.js');
      const theirs = await import('./static/vendor/ts-fsrs.js');
      const pick = (o, names) => Object.fromEntries(names.map((n) => [n, o[n]]));
      return [[pick(ours.Rating, ['Again', 'Hard', 'Good', 'Easy']), pick(ours.State, ['New', 'Learning', 'Review', 'Relearning'])],
              [pick(theirs.Rating, ['Again', 'Hard', 'Good', 'Easy']), pick(theirs.State, ['New', 'Learning', 'Review', 'Relearning'])]];
    }""")
    assert ours == theirs


def _card(due="2026-01-01T00:00:00.000Z", reps=1):
    return {"due": due, "stability": 2, "difficulty": 5, "elapsed_days": 0, "scheduled_days": 1, "learning_steps": 0,
            "reps": reps, "lapses": 0, "state": 2, "last_review": "2025-12-31T00:00:00.000Z"}


def test_cards_saved_under_the_old_family_keys_load_under_the_items_cards(page, gym, fetch_json):
    """Cards saved by the page of `dumpgym.drills/1` (keys it worked out, `familyOf`) still load: a family
    that named one question is that question's card (a trailing empty step dropped); a family that named
    several (`layouts/SLUG//bytes`, every buffer's question) starts fresh."""
    fusion = next(i for i in fetch_json("data/drills/fusions/mlp.json")["items"] if i["layer"] == "cpu")
    name = fusion["facts"]["fusion"]
    old = {"schema": KEY, "streaks": {"shapes": {"current": 1, "best": 3}}, "reached": {}, "tallies": {},
           "cards": {"shapes/mlp/0/": _card(), "decoder/mlp/0/output-axis": _card(reps=2),
                     "layouts/scan-layers//bytes": _card(), f"fusions/mlp/{name}/": _card(reps=3)}}
    page.evaluate("([k, v]) => localStorage.setItem(k, v)", [KEY, json.dumps(old)])
    page.reload()
    page.wait_for_selector("html[data-ready]")
    assert page.locator(".notice.bad").count() == 0  # read, not set aside
    shapes = {i["card"] for i in fetch_json("data/drills/shapes/mlp.json")["items"]}
    assert "shapes/mlp/0" in shapes and fusion["card"] == f"fusions/mlp/{name}"
    gym.open("shapes")
    assert scheduled(page, "shapes") == "due" and family(page, gym.item("shapes")) == "shapes/mlp/0"
    gym.answer("shapes")
    cards = stored(page)["cards"]
    assert set(cards) == {"shapes/mlp/0", "decoder/mlp/0/output-axis", f"fusions/mlp/{name}"}
    assert cards["shapes/mlp/0"]["reps"] == 2 and cards[f"fusions/mlp/{name}"]["reps"] == 3
    assert stored(page)["streaks"]["shapes"] == {"current": 2, "best": 3}


def test_the_progress_key_a_card_is_kept_under_is_the_items_own(page):
    keys = page.evaluate("""async () => { const { currentCard } = await import('./static/streaks.js');
      return ['shapes/mlp/0/', 'layouts/mlp//bytes', 'units/mlp//mxu', 'decoder/mlp/0/output-axis', 'units/mlp/none',
              'layouts/mlp/bf16[64,128]{1,0:T(8,128)(2,1)}/bytes'].map(currentCard); }""")
    assert keys == ["shapes/mlp/0", None, None, "decoder/mlp/0/output-axis", "units/mlp/none",
                    "layouts/mlp/bf16[64,128]{1,0:T(8,128)(2,1)}/bytes"]


# A learner's run of the scheduler, without the view: `draws` questions of a drill `kind` through `pickNext`,
# over the panel's own `data-pool` (read as the panel reads it) and its splits, each answered (one in four
# wrong, by a seeded source) and rated as the page rates it. `slugs` narrows the pool (as "only your programs"
# does) and `focus` filters the items (as the mastery map's focus does). Per draw: the program, its base (as
# the scheduler said), its reason, whether a program of another base than the last had weight, and how many
# due cards of other bases than the last waited.
RUN = """async ([kind, draws, slugs, focus]) => {
  const { pickNext, noteAnswer, nextCard, loadScheduler, dueFamilies, Rating } = await import('./static/schedule.js');
  const { focusMatches, readPool } = await import('./static/drill.js');
  const { drillURL, getJSON } = await import('./static/data.js');
  const { weightOf } = await import('./static/sample.js');
  await loadScheduler();
  let s = 20261205;  // mulberry32: a seeded source, so the run does not depend on the machine
  const random = () => { s = (s + 0x6D2B79F5) | 0; let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t; return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
  const all = readPool(document.querySelector(`section[data-drill="${kind}"]`).dataset.pool);
  const pool = slugs ? all.filter((p) => slugs.includes(p.slug)) : all;
  const split = (slug) => getJSON(drillURL(kind, slug));
  const weight = (item) => (focusMatches(item, focus) ? weightOf(item) : 0);
  const masses = await Promise.all(pool.map(async (p) => (await split(p.slug)).items.reduce((a, i) => a + weight(i), 0)));
  const baseOf = new Map(pool.map((p) => [p.slug, p.base]));
  const cards = {};
  const out = [];
  let last = null;
  for (let n = 0; n < draws; n++) {
    const other = pool.some((p, i) => masses[i] > 0 && (!last || p.base !== last.base));
    const waiting = dueFamilies(cards, kind).filter((f) => (!last || (f !== last.family && baseOf.get(f.split('/')[1]) !== last.base))).length;
    const picked = await pickNext({ kind, pool, masses, last, cards, split, weight, random });
    if (!picked) return out.concat([null]);
    const item = picked.split.items[picked.index];
    out.push([picked.slug, picked.base, picked.reason, other, waiting, picked.index]);
    const rating = random() < 0.25 ? Rating.Again : Rating.Good;
    cards[item.card] = nextCard(cards[item.card], rating);
    if (picked.standsFor) cards[picked.standsFor] = nextCard(cards[picked.standsFor], rating);
    noteAnswer(item, picked.standsFor);
    last = { slug: picked.slug, index: picked.index, weight: picked.weight, family: item.card, base: picked.base };
  }
  return out;
}"""


@pytest.fixture(scope="module")
def variants_url(serve_pool, whole_corpus, whole_pool):
    """The gym of the whole committed corpus, the programs' variants and their items included."""
    with serve_pool("variants-site", whole_corpus, whole_pool) as url:
        yield url


@pytest.fixture
def variants_page(checked_on, variants_url):
    with checked_on(variants_url) as pg:
        yield pg


def _family(whole_corpus):
    return {p["slug"]: p.get("variant_of") or p["slug"] for p in whole_corpus["programs"]}


@pytest.mark.parametrize("kind", ["shapes", "partitioner", "diff", "loops"])
def test_no_two_draws_in_a_row_come_from_one_program_and_its_variants(variants_page, whole_corpus, kind):
    """300 questions of a drill over the whole corpus: each from another family (a program and its variants)
    than the last while one had weight, the family the one the corpus's `variant_of` gives; due reviews first."""
    family = _family(whole_corpus)
    run = variants_page.evaluate(RUN, [kind, 300, None, None])
    assert None not in run
    assert all(base == family[slug] for slug, base, *_ in run)
    for (_, before, *_), (slug, base, reason, other, waiting, _) in zip(run, run[1:]):
        if other:
            assert base != before, (kind, before, slug)
    assert sum(slug != base for slug, *_ in run) >= 10  # variants are drawn, not only their programs
    reasons = [reason for _, _, reason, *_ in run]
    assert reasons.count("due") >= 30 and reasons.count("new") >= 30, reasons
    # Due cards of another family keep their priority: never three draws in a row past them (one new per two
    # due), and never one asked ahead while they wait.
    waited = [(reason, waiting) for _, _, reason, _, waiting, _ in run]
    assert not any(reason == "ahead" and waiting for reason, waiting in waited)
    assert not any(all(w and r != "due" for r, w in waited[i:i + 3]) for i in range(len(waited) - 2))


def test_one_family_alone_is_drawn_again_but_never_the_same_item(variants_page, whole_corpus):
    """With only one family's programs in the pool, or a focus only one family matches, the drill goes on from
    that family (never nothing to ask), and never asks the item just asked while its family has another."""
    family = _family(whole_corpus)
    mlp = [slug for slug, base in family.items() if base == "mlp"]
    run = variants_page.evaluate(RUN, ["shapes", 60, mlp, None])
    assert None not in run and {base for _, base, *_ in run} == {"mlp"} and len({slug for slug, *_ in run}) > 1
    assert not any(other for _, _, _, other, *_ in run[1:])  # after the first, no other family had weight
    assert all((a[0], a[5]) != (b[0], b[5]) for a, b in zip(run, run[1:]))
    # A focus on a primitive of one family's programs only, over the whole pool.
    items = variants_page.evaluate("""async () => { const { drillURL, getJSON } = await import('./static/data.js');
      const { readPool } = await import('./static/drill.js');
      const pool = readPool(document.querySelector('section[data-drill="shapes"]').dataset.pool);
      return (await Promise.all(pool.map((p) => getJSON(drillURL('shapes', p.slug)))))
        .flatMap((s) => s.items.map((i) => [i.primitive ?? null, i.program, i.weight]));
    }""")
    families = {}
    for primitive, slug, weight in items:
        if weight > 0:
            families.setdefault(primitive, set()).add(slug)
    primitive, slugs = next((p, s) for p, s in sorted(families.items(), key=str)
                            if p and len({family[x] for x in s}) == 1 and len(s) > 1)
    run = variants_page.evaluate(RUN, ["shapes", 40, None, {"primitive": primitive}])
    assert None not in run and {slug for slug, *_ in run} <= slugs and len({base for _, base, *_ in run}) == 1
    assert all((a[0], a[5]) != (b[0], b[5]) for a, b in zip(run, run[1:]))
