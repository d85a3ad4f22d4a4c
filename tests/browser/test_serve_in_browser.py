"""The page as `dumpgym serve` gives it: served from memory, each program's listings made when the
page first asks for them, and the x-ray lights across the columns just as on a static build."""
import json
import subprocess
import sys
import threading
import urllib.request

import pytest
from conftest import DESKTOP, checked_page, free_port

from dumpgym.serve import server as serve
from test_xray_in_browser import lit, open_xray

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`dumpgym serve` of the built-in corpus (an empty folder of added programs); yields its URL."""
    corpus_dir = tmp_path_factory.mktemp("no-added-programs")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "dumpgym", "serve", "--port", str(port), "--corpus", str(corpus_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith(f"dumpgym: the gym is at http://127.0.0.1:{port}/"), line + proc.stderr.read()
        yield f"http://127.0.0.1:{port}/"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_xray_of_a_served_gym_loads_its_listings_and_lights_both_columns(kept_context, served):
    with urllib.request.urlopen(served + "data/programs/attention.json", timeout=10) as r:
        program = json.loads(r.read())
    context = kept_context(**DESKTOP)
    with checked_page(context, served) as page:
        open_xray(page, "attention")  # its listings and compiled HLO are made now, on the page's request
        group = next(g for g in program["xray"] if len(g["stablehlo_lines"]) > 1)
        page.hover(f"[data-xray-col=jaxpr] [data-line='{group['jaxpr_lines'][0]}']")
        assert sorted(lit(page, "jaxpr")) == sorted(group["jaxpr_lines"])
        assert sorted(lit(page, "stablehlo")) == sorted(group["stablehlo_lines"])
        shown = page.locator("[data-xray-col=stablehlo] [data-line]").count()
        assert shown == program["stablehlo"].count("\n") + 1  # a line per line of JAX's text, as a build shows


def test_a_serve_with_no_items_kept_says_so_and_the_page_loads_them_when_made(kept_context, tmp_path, monkeypatch):
    monkeypatch.setenv("DUMPGYM_CACHE_DIR", str(tmp_path / "empty-cache"))  # as after an upgrade
    gym, rest = serve.Site.start(tmp_path / "no-added-programs")
    srv = serve.make_server(gym, "127.0.0.1", 0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        url = serve.url_of(srv)
        context = kept_context(**DESKTOP)
        with checked_page(context, url) as touched:
            note = touched.locator("[data-drills-pending]")
            assert "are being made" in note.inner_text() and touched.locator("[data-drill-tab]").count() == 0
            touched.keyboard.press("Tab")  # a learner at work: the page must not reload under them
            idle = context.new_page()
            errors = []
            idle.on("pageerror", lambda e: errors.append(str(e)))
            idle.goto(url)
            idle.wait_for_selector("[data-drills-pending]")
            srv.site = rest()  # every item made: the whole gym swapped in
            idle.wait_for_selector("section.drill:not([hidden]) p.q")  # it reloaded itself, and asks
            assert idle.locator("[data-drills-pending]").count() == 0 and errors == []
            touched.get_by_role("button", name="reload the page to drill them all").click()
            touched.wait_for_selector("section.drill:not([hidden]) p.q")
            assert touched.locator("[data-drills-pending]").count() == 0
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=10)
