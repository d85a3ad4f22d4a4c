"""The cost drill in Chromium: one item of each step and layer kind the built-in pool asks (`dominant` on the TPU
and on the GPU, `padding`, `sends`), served alone, is shown with exactly the blocks Python resolves, answered
right and wrong from the served drills JSON, and says why."""
import json
import urllib.request

import pytest

pytestmark = pytest.mark.browser


def _one_of_each(pool: dict) -> dict:
    """The pool's first cost item of each (step, layer kind): a choice of lines on a TPU and a GPU, a choice of
    compute- or memory-bound, a typed padding and a typed collective's bytes."""
    wanted = {}
    for item in pool["items"]:
        if item["drill"] == "cost":
            wanted.setdefault((item["step"], item["layer"] if item["step"] == "dominant" else ""), item)
    assert set(wanted) == {("dominant", "tpu"), ("dominant", "gpu"), ("bound", ""), ("padding", ""), ("sends", "")}, \
        set(wanted)
    return {"schema": pool["schema"], "kinds": [k for k in pool["kinds"] if k["name"] == "cost"],
            "items": list(wanted.values())}


@pytest.fixture(scope="module")
def cost_site(serve_pool, gym_data):
    corpus, pool = gym_data
    small = _one_of_each(pool)
    with serve_pool("cost-site", corpus, small) as url:
        yield url, small


def test_the_page_plays_one_cost_item_of_each_step(checked_on, cost_site):
    from conftest import Gym

    url, small = cost_site

    def fetch(rel):
        with urllib.request.urlopen(url + rel, timeout=5) as r:
            return json.loads(r.read())

    want = {i["card"] for i in small["items"]}
    played: dict[str, bool] = {}
    with checked_on(url) as page:
        gym = Gym(page, fetch)
        gym.open("cost")
        panel = page.locator("#drill-cost")
        for n in range(4 * len(want)):
            item = gym.item("cost")
            assert panel.locator(".ctx [data-shown]").all_inner_texts() == item["shown"], item["card"]
            right = item["card"] in played  # each item first answered wrongly, then rightly
            gym.answer("cost", right=right)
            said = panel.locator("[data-feedback]").inner_text()
            assert item["feedback"].replace("`", "") in said
            if not right and item["answer_form"]["form"] == "typed":  # the misreading typed is named
                reason = next(iter(item["misread"].values()))["reason"]
                assert reason.split("`")[0].strip() in said
            played[item["card"]] = played.get(item["card"], False) or right
            if set(played) == want and all(played.values()):
                break
            gym.next("cost")
    assert set(played) == want and all(played.values()), played
