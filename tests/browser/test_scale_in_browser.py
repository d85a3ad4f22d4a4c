"""A corpus of any size: twenty added programs change neither what a first visit fetches nor who gets asked."""
from __future__ import annotations

import contextlib
import copy

import pytest

from dumpgym.site import build

pytestmark = pytest.mark.browser

ADDED = 20
FIRST_VISIT_LIMIT = 400_000  # bytes, uncompressed (python -m http.server sends no gzip)


def with_added(corpus: dict, n: int) -> dict:
    """The built-in corpus plus `n` added programs: real records of the biggest built-in programs, renamed."""
    data = copy.deepcopy(corpus)
    biggest = sorted(data["programs"], key=lambda p: -len(p["eqns"]))[:4]
    for i in range(n):
        p = copy.deepcopy(biggest[i % len(biggest)])
        p.update(slug=f"mine-{i}", title=f"my program {i}", added=True, jax_version=corpus["jax_version"])
        data["programs"].append(p)
    return data


def site_of(make_data):
    """Builds the site of `make_data()` and its drill pool into a directory."""
    def build_into(out):
        from dumpgym.drills import build_pool

        data = make_data()
        build.build_site(out, data, build_pool(data))
    return build_into


@pytest.fixture(scope="module")
def sites(built_once_dir, corpus, serve_directory):
    """URLs of two builds served side by side: the built-in corpus, and it with twenty added programs."""
    urls = {}
    stack = []
    for name, make_data in (("builtin", lambda: copy.deepcopy(corpus)), ("added", lambda: with_added(corpus, ADDED))):
        out = built_once_dir(f"scale-{name}", site_of(make_data))
        server = serve_directory(out)
        urls[name] = server.__enter__()
        stack.append(server)
    yield urls
    for server in stack:
        server.__exit__(None, None, None)


@contextlib.contextmanager
def opened(browser, url: str):
    """A page of its own (fresh localStorage) on `url`, once the page has wired itself."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("html[data-ready]")
    try:
        yield page
    finally:
        context.close()


def first_visit(browser, url: str) -> dict[str, int]:
    """What a first visit fetches until the page settles: bytes by path (decoded: no compression here)."""
    with opened(browser, url) as page:
        page.wait_for_load_state("networkidle")
        return dict(page.evaluate("""() => [performance.getEntriesByType('navigation')[0], ...performance.getEntriesByType('resource')]
            .map((e) => [new URL(e.name).pathname, e.decodedBodySize])"""))


def test_a_first_visit_stays_small_and_does_not_grow_with_added_programs(browser, sites):
    alone = first_visit(browser, sites["builtin"])
    grown = first_visit(browser, sites["added"])
    assert sum(grown.values()) <= FIRST_VISIT_LIMIT, grown
    # The page itself grows by each program's card header, a picker option and its pool entries, a
    # kilobyte or so; the drill split the first question comes from is one program's, whichever it is.
    assert grown["/"] - alone["/"] <= 1_500 * ADDED, (alone["/"], grown["/"])
    assert not any(p.startswith(("/data/listings/", "/data/programs/", "/data/compiled/")) for p in grown), grown
    assert sum(1 for p in grown if p.startswith("/data/drills/")) == 1, grown


def test_a_programs_listings_come_when_it_nears_the_screen(browser, sites):
    with opened(browser, sites["added"]) as page:
        _listings_come_near(page)


def _listings_come_near(page):
    page.locator("#p-mine-7").scroll_into_view_if_needed()
    page.wait_for_selector("#p-mine-7 [data-layer-panel=jaxpr] pre [data-line]")
    fetched = page.evaluate("performance.getEntriesByType('resource').map((e) => new URL(e.name).pathname)")
    assert "/data/listings/mine-7.json" in fetched
    assert "/data/listings/mine-19.json" not in fetched  # far below: not yet


def test_no_program_holds_more_than_a_fifth_of_the_draw(browser, sites):
    with opened(browser, sites["added"]) as page:
        _shares_capped(page)


def _shares_capped(page):
    pools = page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('section[data-drill]')].map((s) =>
        [s.dataset.drill, s.dataset.pool.split(' ').map((e) => Number(e.split(':')[2]))]))""")
    for kind, masses in pools.items():
        capped = page.evaluate("async (m) => (await import('./static/schedule.js')).capShares(m)", masses)
        total = sum(capped)
        if sum(m > 0 for m in masses) < 5:  # a kind drawn from four programs (the partitioner's): equal shares
            assert len({c for c in capped if c > 0}) == 1, kind
            continue
        assert max(capped) / total <= 0.2 + 1e-9, kind
        cap = max(capped)
        for before, after in zip(masses, capped):
            # Only programs above the cap lose mass, down to the cap; everyone else keeps theirs.
            assert after == pytest.approx(before) if before <= cap + 1e-9 else after == pytest.approx(cap)
    # Fewer than five programs cannot each stay under a fifth: they share equally.
    assert page.evaluate("async () => (await import('./static/schedule.js')).capShares([9, 1, 0])") == [1, 1, 0]


def test_your_programs_filter_draws_only_from_added_programs(browser, sites):
    with opened(browser, sites["added"]) as page:
        _draw_only_yours(page)


def _draw_only_yours(page):
    page.click("#tab-shapes")
    page.wait_for_selector("#drill-shapes[data-state=asking]")
    page.check("[data-yours-only]")  # the question on screen is replaced by one of yours
    page.wait_for_function("() => document.querySelector('#drill-shapes').dataset.item.split('/')[1].startsWith('mine-')")
    seen = []
    for _ in range(6):
        page.wait_for_selector("#drill-shapes[data-state=asking]")
        seen.append(page.get_attribute("#drill-shapes", "data-item").split("/")[1])
        field = page.locator("#drill-shapes [data-typed-input]")  # shapes asks a typed aval
        field.fill(field.get_attribute("placeholder"))  # the spelling's example: a readable answer, graded
        field.press("Enter")
        page.wait_for_selector("#drill-shapes[data-state=answered]")
        page.keyboard.press("Enter")
    assert all(s.startswith("mine-") for s in seen), seen
