"""Reviews ask anew, in Chromium: a question asked again shows its options in a new order, a missed one
comes back as a sibling where it has one, and a right answer to a question whose answer this run has
shown does not count toward ten in a row."""
import math

import pytest

pytestmark = pytest.mark.browser


# A kind with choice items of two skills: buffers asks `lowered-alias` (skill donation, three options or
# four) and `copy-or-bitcast` (two options) as a choice. A re-asked question's new order is a thing only
# options have.
KIND = "buffers"
STEPS = ("lowered-alias", "copy-or-bitcast")


@pytest.fixture(scope="module")
def two_url(serve_pool, gym_data):
    """Two real choice items of one kind, of two steps and skills (so neither has a sibling), and nothing else."""
    corpus, pool = gym_data
    items = [next(i for i in pool["items"] if i["drill"] == KIND and i["step"] == step
                  and i["answer"]["form"] == "choice" and len(i["answer"]["options"]) >= (3 if n == 0 else 2))
             for n, step in enumerate(STEPS)]
    assert len({i.get("skill", i["step"]) for i in items}) == 2  # not siblings
    two = {"schema": pool["schema"], "kinds": [k for k in pool["kinds"] if k["name"] == KIND], "items": items}
    with serve_pool("two-items-site", corpus, two) as url:
        yield url


def on_screen(gym, kind):
    item = gym.item(kind)
    return item["card"], gym.options(kind)


def test_a_question_asked_again_has_its_options_in_an_order_not_shown_before(checked_on, two_url, fetch_json):
    from conftest import Gym

    with checked_on(two_url) as page:
        gym = Gym(page, lambda rel: page.evaluate(f"fetch('{rel}').then(r => r.json())"))
        gym.open(KIND)
        seen = {}
        for n in range(9):  # the two alternate: each asked four or five times
            card, options = on_screen(gym, KIND)
            orders = seen.setdefault(card, [])
            if len(orders) < math.factorial(len(options)):  # an order not shown yet, while one is left
                assert options not in orders, (n, card, options)
            else:  # then one unlike the last (two options have two orders)
                assert options != orders[-1], (n, card, options)
            assert not orders or sorted(options) == sorted(orders[0])
            seen[card].append(options)
            gym.answer(KIND, right=n != 0, keys=n % 2 == 1)
            gym.next(KIND)
        assert all(len(orders) >= 4 for orders in seen.values())


def test_a_question_whose_answer_was_shown_does_not_count_toward_the_streak(checked_on, two_url):
    from conftest import Gym

    with checked_on(two_url) as page:
        gym = Gym(page, lambda rel: page.evaluate(f"fetch('{rel}').then(r => r.json())"))
        gym.open(KIND)
        gym.answer(KIND)
        assert gym.streak(KIND) == (1, 1)
        gym.next(KIND)
        gym.answer(KIND)
        assert gym.streak(KIND) == (2, 2)
        gym.next(KIND)  # the first again: its answer was shown
        gym.answer(KIND)
        assert gym.streak(KIND) == (2, 2)
        text = page.locator(f"#drill-{KIND} [data-feedback]").inner_text()
        assert text.startswith("right:") and "streak stays at 2" in text
        gym.next(KIND)
        gym.answer(KIND, right=False)  # a wrong one still ends it
        assert gym.streak(KIND) == (0, 2)


def test_a_missed_question_with_siblings_comes_back_as_one(page, gym):
    gym.open("shapes")
    first = gym.item("shapes")
    missed = gym.answer("shapes", right=False)["card"]
    for _ in range(10):
        gym.next("shapes")
        if page.get_attribute("#drill-shapes", "data-stands-for") == missed:
            break
        assert gym.item("shapes")["card"] != missed  # never the missed question itself: it has siblings
        gym.answer("shapes")
    else:
        pytest.fail("no sibling came back for the missed question within ten questions")
    item = gym.item("shapes")
    assert item["skill"] == first["skill"] and item["card"] != missed
    gym.answer("shapes")
    assert gym.streak("shapes")[0] >= 1  # a sibling's answer was never shown: it counts
