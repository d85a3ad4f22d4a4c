"""The whole page in Chromium: every section loads cleanly from a plain static server, at any width."""
import urllib.request

import pytest
from conftest import DESKTOP, close_pages

pytestmark = pytest.mark.browser


def test_the_static_build_works_from_python_http_server(page, base_url):
    # `page` loaded the build from `python -m http.server`; every module and stylesheet arrived.
    with urllib.request.urlopen(base_url + "static/app.js") as r:
        assert r.status == 200
    assert page.evaluate("document.styleSheets.length") >= 1
    # The first question comes after its drill's split is fetched, which may finish after data-ready.
    page.wait_for_selector("#drills [data-state=asking]")
    assert page.locator("#drills [data-state=asking]").count() == 1


# Each program of the corpus in turn is brought near the screen (its tabs and listings are made then)
# and, once its jaxpr listing is in, each of its layer tabs is clicked as a mouse does: pointer and mouse
# down, focus, up, click, at the middle of the tab, which must be the element there. In the page, one
# call for the whole corpus: a Playwright click per tab cost a quarter of a second each.
CLICK_EVERY_LAYER_TAB = """async (articles) => {
    const until = async (what, ok) => {
        const deadline = performance.now() + 30000;
        while (!ok()) {
            if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
            await new Promise((r) => setTimeout(r, 10));
        }
    };
    const centre = (el) => { const r = el.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; };
    let clicked = 0;
    for (const article of articles) {
        article.scrollIntoView({block: 'center'});
        await until(`the jaxpr listing of ${article.id}`, () => article.querySelector('[data-layer-panel=jaxpr] pre'));
        for (const tab of article.querySelectorAll('[data-layer-tab]')) {
            let [x, y] = centre(tab);
            if (!tab.contains(document.elementFromPoint(x, y))) {
                tab.scrollIntoView({block: 'center'});
                [x, y] = centre(tab);
            }
            const hit = document.elementFromPoint(x, y);
            if (!tab.contains(hit)) throw new Error(`${tab.id} is covered by ${hit?.outerHTML.slice(0, 80)}`);
            const at = {bubbles: true, cancelable: true, composed: true, view: window, clientX: x, clientY: y, button: 0, detail: 1};
            const pointer = {...at, pointerId: 1, pointerType: 'mouse', isPrimary: true};
            hit.dispatchEvent(new PointerEvent('pointerdown', {...pointer, buttons: 1}));
            hit.dispatchEvent(new MouseEvent('mousedown', {...at, buttons: 1}));
            tab.focus();
            hit.dispatchEvent(new PointerEvent('pointerup', {...pointer, buttons: 0}));
            hit.dispatchEvent(new MouseEvent('mouseup', {...at, buttons: 0}));
            hit.dispatchEvent(new MouseEvent('click', {...at, buttons: 0}));
            clicked += 1;
        }
    }
    return clicked;
}"""


# Pick a program in the x-ray as `select_option` does (select it, then `input` and `change`), and wait
# for the x-ray to show it: one call instead of two.
PICK_AND_WAIT = """async (select, slug) => {
    if (!select.getClientRects().length || select.disabled) throw new Error('the x-ray picker is hidden or disabled');
    select.value = slug;
    if (select.value !== slug) throw new Error(`no option ${slug}`);
    select.dispatchEvent(new Event('input', {bubbles: true, composed: true}));
    select.dispatchEvent(new Event('change', {bubbles: true}));
    const xray = document.querySelector('#xray'), deadline = performance.now() + 30000;
    while (!(xray.hasAttribute('data-ready') && xray.dataset.program === slug)) {
        if (performance.now() > deadline) throw new Error(`the x-ray did not show ${slug}`);
        await new Promise((r) => setTimeout(r, 10));
    }
}"""


def test_no_console_errors_in_any_section(page):
    """Walk every section and tab; the `page` fixture fails the test on any console error."""
    for tab in page.locator("[data-drill-tab]").all():
        tab.click()
        page.wait_for_selector(f"#drill-{tab.get_attribute('data-drill-tab')}[data-state=asking]")
    for slug in page.eval_on_selector_all("[data-xray-pick] option", "os => os.map(o => o.value)"):
        page.eval_on_selector("[data-xray-pick]", PICK_AND_WAIT, slug)
        page.hover("[data-xray-col=stablehlo] [data-line='3']")
    clicked = page.eval_on_selector_all("#corpus article", CLICK_EVERY_LAYER_TAB)
    assert clicked == page.locator("#corpus [data-layer-tab]").count() > 0
    # Every tab's listing arrives, or fails to (its panel is lazy again) with an error logged by then.
    page.wait_for_function("""() => [...document.querySelectorAll('#corpus [data-layer-panel]')]
        .every((panel) => panel.querySelector('pre, [data-line]') || panel.hasAttribute('data-lazy'))""")
    for section in ("path", "drills", "xray", "corpus", "reference"):
        page.click(f".top nav a[href='#{section}']")
    page.wait_for_selector("#reference[data-ready]")
    page.reload()
    page.wait_for_selector("html[data-ready]")


def open_reference(page):
    page.locator("#reference").scroll_into_view_if_needed()
    page.wait_for_selector("#reference[data-ready]")


def test_the_reference_filter_finds_ops_and_says_when_none_match(page):
    open_reference(page)
    total = page.locator("#reference [data-op]").count()
    assert page.locator("[data-ref-count]").inner_text() == f"{total} ops"
    box = page.locator("[data-ref-filter]")
    box.fill("dot_general")
    shown = page.locator("#reference [data-op]:visible")
    names = shown.evaluate_all("els => els.map(e => e.dataset.op)")
    assert "dot_general" in names and "stablehlo.dot_general" in names
    assert len(names) < total
    assert page.locator("[data-ref-count]").inner_text() == f"{len(names)} of {total} ops"
    assert page.locator("[data-ref-empty]").is_hidden()
    box.fill("no-such-op-anywhere")
    assert shown.count() == 0
    empty = page.locator("[data-ref-empty]")
    assert empty.is_visible() and "no ops match" in empty.inner_text()
    assert "no-such-op-anywhere" in empty.inner_text()
    box.fill("")
    assert shown.count() == total


def test_the_reference_finds_a_matmul_by_gemm_and_a_compiled_opcode_by_its_own_spelling(page):
    """Issue 45: "gemm" found nothing, and compiled `dynamic-slice` seemed to have no card."""
    open_reference(page)
    box = page.locator("[data-ref-filter]")
    shown = page.locator("#reference [data-op]:visible")
    box.fill("gemm")
    ops = set(shown.evaluate_all("els => els.map(e => e.id)"))
    assert {"op-hlo-fusion", "op-hlo-custom-call", "op-hlo-dot", "op-dot_general"} <= ops, ops
    box.fill("compiled dynamic-slice")
    card = page.locator("#reference [data-op='stablehlo.dynamic_slice']")
    assert card.is_visible() and "compiled HLO prints it dynamic-slice" in " ".join(card.inner_text().split())


def test_op_names_in_listings_link_to_their_cards(page):
    page.locator("#p-mlp").scroll_into_view_if_needed()
    link = page.locator("#p-mlp [data-layer-panel=jaxpr] a.o", has_text="dot_general").first
    link.click()
    assert page.evaluate("location.hash") == "#op-dot_general"
    page.wait_for_selector("#op-dot_general.hit")
    assert page.locator("#op-dot_general").is_visible()
    assert page.evaluate("document.getElementById('op-dot_general').getBoundingClientRect().top") < 300


def test_a_link_to_a_card_works_on_a_fresh_load(open_fresh, base_url):
    pg = open_fresh(base_url + "#op-stablehlo.reduce", **DESKTOP)
    pg.wait_for_selector("#op-stablehlo\\.reduce.hit")
    assert pg.locator("#op-stablehlo\\.reduce").is_visible()
    close_pages(pg.context)


def test_a_link_to_a_card_hidden_by_the_filter_clears_the_filter(page):
    open_reference(page)
    page.locator("[data-ref-filter]").fill("tanh")
    assert page.locator("#op-dot_general").is_hidden()
    page.locator("#p-mlp").scroll_into_view_if_needed()  # its listing loads as it nears the screen
    page.locator("#p-mlp [data-layer-panel=jaxpr] a.o", has_text="dot_general").first.click()
    page.wait_for_selector("#op-dot_general.hit")
    assert page.locator("#op-dot_general").is_visible()


def test_user_given_names_are_shown_as_text(page, hostile_title):
    page.locator("#p-evil").scroll_into_view_if_needed()
    title = page.locator("#p-evil .title")
    assert title.text_content() == hostile_title
    assert page.locator("#pwned").count() == 0
    assert "<b>not bold</b>" in page.locator("#p-evil .lesson").text_content()
    assert page.locator("#p-evil b").count() == 0


def test_corpus_tabs_switch_layers(page):
    article = page.locator("#p-softmax")
    article.scroll_into_view_if_needed()
    article.locator("[data-layer-panel=jaxpr] pre").wait_for()  # fetched as the program nears the screen
    assert article.locator("[data-layer-panel=jaxpr]").is_visible()
    article.get_by_role("tab", name="StableHLO").click()
    article.locator("[data-layer-panel=stablehlo] pre").wait_for()
    assert "tensor<" in article.locator("[data-layer-panel=stablehlo] pre").inner_text()  # escaped, shown as text
    assert article.locator("[data-layer-panel=stablehlo]").is_visible()
    assert article.locator("[data-layer-panel=jaxpr]").is_hidden()
    article.get_by_role("tab", name="StableHLO").press("ArrowLeft")
    assert article.locator("[data-layer-panel=jaxpr]").is_visible()


def tap_an_answer(panel):
    """Answer the question on screen by touch, in whatever form it asks (right or not): tap an option; or
    type the field's example and tap check; or tap the first axis chip, or row, and tap check if there is one."""
    if panel.locator("button[data-opt]").count():
        panel.locator("button[data-opt]").first.tap()
    elif panel.locator("[data-typed-input]").count():
        field = panel.locator("[data-typed-input]")
        field.tap()
        field.fill(field.get_attribute("placeholder"))  # the spelling's example: a readable answer
        panel.locator("[data-submit]").tap()
    else:
        chips = panel.locator("[data-axis]")
        (chips if chips.count() else panel.locator("[data-pick] [data-line]")).first.tap()
        if panel.locator("[data-submit]").count():
            panel.locator("[data-submit]").tap()


def test_usable_at_375_pixels(open_fresh, base_url):
    pg = open_fresh(base_url, viewport={"width": 375, "height": 800}, has_touch=True, is_mobile=True)
    errors = pg.console.uncaught
    assert pg.evaluate("document.documentElement.scrollWidth") <= 375
    pg.wait_for_selector("#drills [data-state=asking]")
    tap_an_answer(pg.locator("#drills section[data-drill]:not([hidden])"))
    pg.wait_for_selector("#drills [data-state=answered]")
    pg.locator("#xray").scroll_into_view_if_needed()
    pg.wait_for_selector("#xray[data-ready]")
    assert pg.evaluate("document.documentElement.scrollWidth") <= 375
    close_pages(pg.context)
    assert errors == []


def test_respects_a_dark_color_scheme(page):
    """The colours follow the system's scheme, and follow it when it changes."""
    background = "getComputedStyle(document.body).backgroundColor"
    page.emulate_media(color_scheme="dark")
    dark = page.evaluate(background)
    page.emulate_media(color_scheme="light")
    assert page.evaluate(background) != dark


def test_focus_is_visible_on_buttons(page):
    page.locator("#tab-shapes").focus()
    page.keyboard.press("Tab")
    page.keyboard.press("Shift+Tab")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("none", "")


def test_the_compiled_hlo_tab_loads_on_demand(page, fetch_json):
    from dumpgym.record.targets import TARGETS

    program = fetch_json("data/programs/mlp.json")
    first = next(program["compiled"][t] for t in TARGETS if t in program["compiled"])  # the registry's order
    article = page.locator("#p-mlp")
    article.scroll_into_view_if_needed()
    article.get_by_role("tab", name="compiled HLO").click()
    panel = article.locator("[data-layer-panel=hlo]")
    panel.locator("[data-line]").first.wait_for()
    assert panel.locator("[data-line]").count() == first["text"].count("\n") + 1
    assert panel.locator("[data-line='1']").text_content().rstrip("\n") == first["text"].split("\n")[0]
