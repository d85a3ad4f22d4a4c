"""On a 390×844 touch phone and on a 1280×900 desktop, in Chromium: listings wrap instead of scrolling sideways
(each row keeps its number), every tap target is at least 40 px tall, the line a question cites is in the
viewport, the x-ray speaks of taps on touch and keeps its program in the URL, and on the desktop each x-ray
column holds more than 45 characters a row. Set DUMPGYM_SHOTS=DIR to keep screenshots of both."""
import os
import re

import pytest
from conftest import DESKTOP, Gym, close_pages

pytestmark = pytest.mark.browser

PHONE = {"viewport": {"width": 390, "height": 844}, "has_touch": True, "is_mobile": True}
TAP = 40  # px: the least height of anything a finger taps
# Kinds whose questions cite a line of a numbered block ("compiled HLO line 148", "line 15").
CITING = ("layouts", "fusions", "kernels", "units", "cost", "backward")

# What a finger taps in a drill panel, the header, the path and the x-ray bar; what scrolls a listing.
TARGETS = """(root) => [...document.querySelectorAll(
    `header.top a, header.top button, [role=tab], ${root} button, ${root} a, ${root} input, ${root} summary,
     ${root} [data-pick] [data-line], ${root} [data-xray-col] [data-line], #xray .xray-bar select`)]
  .filter((el) => el.getClientRects().length && getComputedStyle(el).visibility !== 'hidden'
                  && getComputedStyle(el).pointerEvents !== 'none')  // a row's op name: the row takes the tap
  .map((el) => [el.tagName + (el.className ? '.' + el.className : '') + ' ' + el.textContent.trim().slice(0, 30),
                el.getBoundingClientRect().height])"""
WIDE = """(root) => [...document.querySelectorAll(`${root} pre, ${root} [data-pick], ${root} [data-xray-col]`)]
  .filter((el) => el.getClientRects().length && el.scrollWidth > el.clientWidth + 1)
  .map((el) => `${el.className}: ${el.scrollWidth} > ${el.clientWidth}`)"""


def shot(page, name):
    if os.environ.get("DUMPGYM_SHOTS"):
        page.screenshot(path=f"{os.environ['DUMPGYM_SHOTS']}/{name}.png")


def small_targets(page, root):
    return [(what, round(h, 1)) for what, h in page.evaluate(TARGETS, root) if h < TAP]


def kinds(fetch_json):
    return [k["name"] for k in fetch_json("drills.json")["kinds"]]


@pytest.fixture
def phone(open_fresh, base_url):
    pg = open_fresh(base_url, **PHONE)
    assert pg.evaluate("matchMedia('(hover: none), (pointer: coarse)').matches")  # a touch screen, as a phone is
    yield pg
    close_pages(pg.context)
    assert pg.console.errors == [], pg.console.errors


def test_on_a_phone_no_listing_scrolls_sideways_and_every_tap_target_is_40px(phone, fetch_json):
    gym = Gym(phone, fetch_json)
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    assert small_targets(phone, "#path") == []
    for kind in kinds(fetch_json):
        for n in range(2):  # two questions of each kind, answered wrongly: the feedback's links count too
            gym.open(kind) if n == 0 else gym.next(kind)
            panel = f"#drill-{kind}"
            assert phone.evaluate(WIDE, panel) == [], kind
            gym.answer(kind, right=False)
            assert phone.evaluate(WIDE, panel) == [], kind
            assert small_targets(phone, panel) == [], kind
            # Each row of the line view still starts with its number: the number drawn beside it is its own.
            rows = phone.locator(f"{panel} [data-pick] [data-line]")
            if rows.count():
                first = rows.first
                assert first.evaluate("r => getComputedStyle(r, '::before').content") == f'"{first.get_attribute("data-n")}"'
        if kind in ("fusions", "backward"):
            shot(phone, f"phone-{kind}")
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390


@pytest.mark.parametrize("device", ["phone", "desktop"])
def test_the_line_a_question_cites_is_in_the_viewport(open_fresh, base_url, fetch_json, device):
    phone = open_fresh(base_url, **(PHONE if device == "phone" else DESKTOP))
    gym = Gym(phone, fetch_json)
    seen = 0
    for kind in (k for k in CITING if k in kinds(fetch_json)):
        gym.open(kind)
        for _ in range(4):
            gym.answer(kind, right=False)
            gym.next(kind)  # a question asked (not the first one drawn on load) brings its cited line on screen
            question = phone.locator(f"#drill-{kind} .q").inner_text()
            cited = [int(n) for n in re.findall(r"\blines? (\d+)\b", question, flags=re.I)]
            # Where the page shows it: a row of the line view numbered so, or a numbered block's line.
            at = phone.evaluate("""([kind, n]) => {
                const panel = document.querySelector('#drill-' + kind);
                const row = panel.querySelector(`[data-pick] [data-n="${n}"]`);
                let r = row && row.getBoundingClientRect(), box = row && row.closest('[data-pick]');
                if (!row) for (const pre of panel.querySelectorAll('[data-shown]')) {
                    const text = pre.firstChild, lines = text ? text.data.split('\\n') : [];
                    const k = lines.findIndex((l) => new RegExp(`^ {0,3}${n}  `).test(l));
                    if (k < 0) continue;
                    const at = lines.slice(0, k).reduce((a, l) => a + l.length + 1, 0);
                    const range = document.createRange();
                    range.setStart(text, at); range.setEnd(text, at + lines[k].length);
                    r = range.getBoundingClientRect(); box = pre; break;
                }
                if (!r) return null;
                const b = box.getBoundingClientRect(), q = panel.querySelector('.q').getBoundingClientRect();
                return {top: r.top, bottom: r.bottom, boxTop: b.top, boxBottom: b.bottom, qTop: q.top, qBottom: q.bottom,
                        header: document.querySelector('.top').getBoundingClientRect().bottom, height: innerHeight};
            }""", [kind, cited[0]]) if cited else None
            if at is None:
                continue
            span = max(at["bottom"], at["qBottom"]) - min(at["top"], at["qTop"])
            if device == "desktop" and span > at["height"] - at["header"] - 24:
                # The line and the question do not fit together: a wide window keeps the question in view.
                assert at["header"] - 1 <= at["qTop"] < at["height"], (kind, question, at)
                continue
            seen += 1
            # Its first row is in its own box's view and in the window's, below the sticky header.
            assert at["boxTop"] - 1 <= at["top"] <= at["boxBottom"], (kind, question, at)
            assert at["header"] - 1 <= at["top"] and at["top"] + 16 <= at["height"], (kind, question, at)
        shot(phone, f"{device}-cited-{kind}")
    close_pages(phone.context)
    assert phone.console.errors == [], phone.console.errors
    assert seen >= 6, seen


def test_on_a_phone_the_xray_speaks_of_taps_and_keeps_its_program_in_the_url(phone, base_url):
    xray = phone.locator("#xray")
    xray.scroll_into_view_if_needed()
    aim = xray.locator(".aim").inner_text()
    assert "Tap a line" in aim and "Hover" not in aim and "j/k" not in aim.replace(" ", "")
    phone.select_option("[data-xray-pick]", "scan")
    phone.wait_for_selector("#xray[data-ready][data-program='scan']")
    assert "?xray=scan" in phone.url and phone.url.endswith("#xray")
    assert phone.evaluate(WIDE, "#xray") == []
    assert small_targets(phone, "#xray") == []
    tall = phone.evaluate("[...document.querySelectorAll('[data-xray-col=jaxpr] [data-line]')].slice(0, 30)"
                          ".map((r) => r.getBoundingClientRect().height)")
    assert tall and min(tall) >= TAP
    shot(phone, "phone-xray")
    phone.reload()
    phone.wait_for_selector("html[data-ready]")
    phone.wait_for_selector("#xray[data-ready][data-program='scan']")  # the reload opens the same program
    assert phone.input_value("[data-xray-pick]") == "scan"


def test_a_link_naming_a_program_the_gym_lacks_says_so_and_shows_another(open_fresh, base_url):
    pg = open_fresh(base_url + "?xray=no-such-program#xray", **DESKTOP)
    pg.wait_for_selector("#xray[data-ready]")
    shown = pg.get_attribute("#xray", "data-program")
    assert pg.locator("[data-xray-missing]").inner_text() == \
        f"The link names a program this gym does not hold (no-such-program); showing {shown}."
    close_pages(pg.context)


def test_on_a_desktop_each_xray_column_holds_more_than_45_characters_and_none_scrolls_sideways(open_fresh, base_url):
    pg = open_fresh(base_url, **DESKTOP)
    assert pg.evaluate("matchMedia('(hover: none), (pointer: coarse)').matches") is False
    assert "Hover a line" in pg.locator("#xray .aim").inner_text()
    pg.locator("#xray").scroll_into_view_if_needed()
    pg.select_option("[data-xray-pick]", "mlp")
    pg.wait_for_selector("#xray[data-ready][data-program='mlp'][data-compiled]")
    for layer in ("jaxpr", "stablehlo", "hlo"):
        # Characters a row holds: its text box's width over the width of one character of its font.
        chars = pg.evaluate("""(layer) => {
            const row = document.querySelector(`[data-xray-col=${layer}] [data-line]`);
            const s = getComputedStyle(row), probe = document.createElement('span');
            probe.textContent = 'x'.repeat(100);
            row.append(probe);
            const ch = probe.getBoundingClientRect().width / 100;
            probe.remove();
            return (row.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight)) / ch;
        }""", layer)
        assert chars > 45, (layer, chars)
    assert pg.evaluate(WIDE, "#xray") == []
    assert pg.evaluate("document.documentElement.scrollWidth") <= 1280
    shot(pg, "desktop-xray")
    close_pages(pg.context)
