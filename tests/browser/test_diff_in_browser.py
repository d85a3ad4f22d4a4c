"""The `diff` drill in Chromium, on a gym of two change pairs (mlp and mlp-f32, auto-sharded and
auto-sharded-replicated): the page shows what Python resolves, and grades a tapped set, a typed aval and
a choice."""
import json
import urllib.request

import pytest

pytestmark = pytest.mark.browser

PAIRS = ("mlp", "mlp-f32", "auto-sharded", "auto-sharded-replicated")


@pytest.fixture(scope="module")
def paired_url(serve_pool, whole_corpus):
    from dumpgym.drills import build_pool

    corpus = {**whole_corpus, "programs": [p for p in whole_corpus["programs"] if p["slug"] in PAIRS]}
    pool = build_pool(corpus)
    # Two items of each answer form, weighed alike: the page's draw, however it falls, shows every form
    # within the test's 40 questions (the whole pool's few tapped sets and light choices made it chance).
    kept, per_form = [], {}
    for item in pool["items"]:
        if item["drill"] == "diff" and per_form.get(item["answer"]["form"], 0) < 2:
            per_form[item["answer"]["form"]] = per_form.get(item["answer"]["form"], 0) + 1
            kept.append({**item, "weight": 1.0})
    assert set(per_form) == {"typed", "lines", "choice"}
    with serve_pool("diff-pairs-site", corpus, {**pool, "items": kept}) as url:
        yield url


@pytest.fixture
def paired_gym(kept_context, paired_url):
    """A `Gym` driver on a fresh page of the paired site, fetching its JSON from that site."""
    from conftest import DESKTOP, Gym, checked_page

    def fetch(rel: str):
        with urllib.request.urlopen(paired_url + rel, timeout=5) as r:
            return json.loads(r.read())

    with checked_page(kept_context(**DESKTOP), paired_url) as page:
        yield page, Gym(page, fetch)


def test_the_diff_drill_shows_its_blocks_and_grades_rows_and_avals(paired_gym):
    page, gym = paired_gym
    gym.open("diff")
    panel = page.locator("#drill-diff")
    forms = set()
    for n in range(40):
        if forms == {"typed", "lines", "choice"} and n >= 6:
            break
        item = gym.item("diff")
        forms.add(item["answer_form"]["form"])
        if item["answer_form"]["form"] in ("typed", "choice"):  # every block is shown as it is
            assert panel.locator(".ctx [data-shown]").all_inner_texts() == item["shown"], item["card"]
        else:
            rows = [t.removesuffix("\n") for t in panel.locator("[data-pick] [data-line]").all_text_contents()]
            assert rows == item["shown"][0].removesuffix("\n").split("\n"), item["card"]
            assert panel.locator(".ctx [data-shown]").all_inner_texts() == item["shown"][1:]
        right = n % 2 == 0
        gym.answer("diff", right=right)
        feedback = panel.locator("[data-feedback]").inner_text()
        assert feedback.startswith("right") == right, feedback
        gym.next("diff")
    assert gym.streak("diff")[1] >= 1
    assert forms == {"typed", "lines", "choice"}  # an aval, a set and a fate were each asked, shown and graded
