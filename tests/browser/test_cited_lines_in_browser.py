"""Line numbers on screen, in Chromium: the caption names the layer (and the target), and gives jaxpr lines
only above the jaxpr; the line view numbers a listing excerpt's rows as the listing does (lines 3–7 show
3–7, not 1–5), and its verdict names them so; on a 390×844 phone as on a desktop."""
import os

import pytest

pytestmark = pytest.mark.browser

PHONE = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 2, "has_touch": True, "is_mobile": True}


def _pool():
    decoder = {"drill": "decoder", "program": "mlp", "card": "decoder/mlp/0/rhs-free", "eqn": 0, "layer": "stablehlo",
               "step": "rhs-free", "weight": 1, "question": "In this dot, what part does rhs axis 0 play?",
               "answer": {"form": "choice", "options": ["contracted", "free"], "index": 0,
                          "reasons": ["", "took it for free"], "rules": ["", "x"]},
               "context": [{"text": "%0 = stablehlo.dot_general %arg0, %arg1 ... -> ?"}], "jaxpr_lines": [2, 5]}
    buffers = {"drill": "buffers", "program": "mlp", "card": "buffers/mlp/compiled-alias/cpu/output=0", "eqn": None,
               "layer": "cpu", "step": "compiled-alias", "weight": 1, "question": "Tap the parameter line.",
               "answer": {"form": "line", "line": 2, "accepted": [2], "explain": {}},
               "context": [{"layer": "cpu", "lines": [3, 7], "cut": True}]}
    return {"schema": "dumpgym.drills/2",
            "kinds": [{"name": "decoder", "number": "01", "title": "dot_general, decoded", "aim": "a"},
                      {"name": "buffers", "number": "09", "title": "buffers", "aim": "b"}],
            "items": [decoder, buffers]}


@pytest.fixture(scope="module")
def cited_url(serve_pool, corpus):
    with serve_pool("cited-lines-site", corpus, _pool()) as url:
        yield url


@pytest.mark.parametrize("device", ["desktop", "phone"])
def test_captions_name_the_layer_and_rows_carry_their_listing_numbers(kept_context, cited_url, corpus, device,
                                                                     tmp_path):
    from conftest import DESKTOP, checked_page

    mlp = next(p for p in corpus["programs"] if p["slug"] == "mlp")
    listing = mlp["compiled"]["cpu"]["text"].splitlines()
    with checked_page(kept_context(**(DESKTOP if device == "desktop" else PHONE)), cited_url) as page:
        title = page.locator("#p-mlp .title").text_content()
        page.click("#tab-decoder")
        page.wait_for_selector("#drill-decoder[data-state=asking]")
        assert page.locator("#drill-decoder .where").inner_text() == f"{title} · StableHLO"  # no jaxpr lines

        page.click("#tab-buffers")
        page.wait_for_selector("#drill-buffers[data-state=asking]")
        panel = page.locator("#drill-buffers")
        assert panel.locator(".where").inner_text() == f"{title} · compiled HLO, CPU · compiled-alias"
        rows = panel.locator("[data-pick] [data-line]")
        assert [rows.nth(k).get_attribute("data-n") for k in range(rows.count())] == [str(n) for n in range(3, 8)]
        # the number drawn beside a row is its listing's, and the row is that line of the listing
        drawn = page.evaluate("""() => [...document.querySelectorAll('#drill-buffers [data-pick] [data-line]')]
            .map((r) => getComputedStyle(r, '::before').content)""")
        assert drawn == [f'"{n}"' for n in range(3, 8)]
        assert rows.nth(1).inner_text().strip() == listing[3].strip().split(", metadata=")[0].split(", backend_config=")[0]
        if os.environ.get("DUMPGYM_SHOTS"):
            page.screenshot(path=f"{os.environ['DUMPGYM_SHOTS']}/cited-{device}.png", full_page=False)
        rows.nth(0).click()
        page.wait_for_selector("#drill-buffers[data-state=answered]")
        said = panel.locator("[data-feedback]").inner_text()
        assert "You picked line 3; the framework's line is 4." in said
        if os.environ.get("DUMPGYM_SHOTS"):
            panel.screenshot(path=f"{os.environ['DUMPGYM_SHOTS']}/cited-{device}-answered.png")
