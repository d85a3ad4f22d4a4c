"""The "one change" section in Chromium: two compiles of a program side by side, every row cost/compare.py says
appeared, vanished or changed marked on its own line, a hover lighting the same equations on both sides,
and the counts and times the summary shows equal to what cost/compare.py computed."""
import pytest

from dumpgym.cost.compare import compare_layer
from dumpgym.record.schema import Corpus

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def records(whole_corpus):
    return {p.slug: p for p in Corpus.from_json(whole_corpus).programs}


@pytest.fixture(scope="module")
def change_url(serve_pool, whole_corpus, gym_data):
    """The gym of the whole committed corpus (the compiles with one change are records beside the variants)."""
    with serve_pool("change-site", whole_corpus, gym_data[1]) as url:
        yield url


@pytest.fixture
def page(checked_on, change_url):
    with checked_on(change_url) as pg:
        yield pg


def open_change(page, slug, target):
    page.locator("#change").scroll_into_view_if_needed()
    page.wait_for_selector("#change[data-ready]")
    page.select_option("[data-change-pick]", slug)
    page.wait_for_selector(f"#change[data-ready][data-change='{slug}']")
    page.click(f"[data-change-target='{target}']")
    page.wait_for_selector(f"#change[data-ready][data-change='{slug}'][data-target='{target}']")


def marked(page, side, mark):
    return page.eval_on_selector_all(f"[data-change-col={side}] .dm.{mark}", "els => els.map(e => Number(e.dataset.line))")


def lit(page, side):
    return page.eval_on_selector_all(f"[data-change-col={side}] .on", "els => els.map(e => Number(e.dataset.line))")


def test_the_picker_offers_every_change_of_the_corpus(page, records):
    page.locator("#change").scroll_into_view_if_needed()
    offered = page.eval_on_selector_all("[data-change-pick] option", "os => os.map(o => [o.value, o.dataset.base])")
    assert sorted(map(tuple, offered)) == sorted((p.slug, p.variant_of) for p in records.values() if p.change)
    assert len(offered) >= 6


@pytest.mark.parametrize("slug, target", [("fsdp-step-replicated", "tpu"), ("train-step-undonated", "gpu"),
                                          ("ckpt-policy-nothing", "tpu")])
def test_rows_are_marked_where_compare_puts_them(page, records, slug, target):
    changed = records[slug]
    base = records[changed.variant_of]
    diff = compare_layer(base, changed, target)
    open_change(page, slug, target)
    assert sorted(marked(page, "changed", "add")) == sorted(r.line for r in diff.appeared)
    assert sorted(marked(page, "base", "del")) == sorted(r.line for r in diff.vanished)
    assert sorted(marked(page, "base", "mod")) == sorted(m.base.line for m in diff.modified)
    assert sorted(marked(page, "changed", "mod")) == sorted(m.changed.line for m in diff.modified)
    # Each marked line is the instruction it names, in the listing the page shows.
    for side, rows in (("changed", diff.appeared), ("base", diff.vanished)):
        layer = (changed if side == "changed" else base).compiled[target]
        for r in rows:
            assert f"%{r.name} = " in layer.text.splitlines()[r.line - 1]
            text = page.inner_text(f"[data-change-col={side}] [data-line='{r.line}']")
            assert f"%{r.name} = " in text
    summary = page.inner_text("[data-change-summary]")
    assert f"{diff.kept} are alike" in summary
    assert f"{len(diff.appeared)} appeared" in summary and f"{len(diff.vanished)} vanished" in summary
    if diff.seconds:
        assert "estimated time" in summary
    else:
        assert "No estimated time" in summary


def test_hovering_a_row_lights_its_equations_on_both_sides(page, records):
    slug, target = "fsdp-step-replicated", "tpu"
    changed = records[slug]
    base = records[changed.variant_of]
    diff = compare_layer(base, changed, target)
    open_change(page, slug, target)
    # A changed row computing equations the base also has: its partner lines light on the base side.
    pair = next(p for p in diff.eqns if p.base is not None and p.changed is not None and p.base_lines and p.changed_lines)
    line = pair.changed_lines[0]
    expected = {side: set() for side in ("base", "changed")}
    own = next((r.eqns for r in diff.appeared + tuple(m.changed for m in diff.modified) if r.line == line), ())
    for p in diff.eqns:
        if line in p.changed_lines or p.changed in own:
            expected["base"] |= set(p.base_lines)
            expected["changed"] |= set(p.changed_lines)
    expected["changed"].add(line)
    twin = next((m.base.line for m in diff.modified if m.changed.line == line), None)
    if twin:
        expected["base"].add(twin)
    page.hover(f"[data-change-col=changed] [data-line='{line}']")
    assert set(lit(page, "changed")) == expected["changed"]
    assert set(lit(page, "base")) == expected["base"]
    assert pair.primitive in page.inner_text("[data-change-status]")
    # Clicking pins it; moving away keeps it; Esc lets it go.
    page.click(f"[data-change-col=changed] [data-line='{line}']")
    page.mouse.move(0, 0)
    assert set(lit(page, "base")) == expected["base"]
    page.keyboard.press("Escape")
    assert lit(page, "base") == []


def test_the_row_list_and_the_keyboard_show_lines(page, records):
    slug, target = "fsdp-step-replicated", "tpu"
    changed = records[slug]
    diff = compare_layer(records[changed.variant_of], changed, target)
    open_change(page, slug, target)
    row = diff.appeared[0]
    page.mouse.move(0, 0)  # off the listings: a line scrolled under the pointer would light instead
    page.focus(f"[data-change-rows] [data-change-side=changed][data-change-line='{row.line}']")
    assert row.line in lit(page, "changed")
    page.focus("[data-change-col=base]")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert page.eval_on_selector("[data-change-col=base] .cur", "e => Number(e.dataset.line)") == 2
    assert 2 in lit(page, "base")
