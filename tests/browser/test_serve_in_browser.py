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


def test_a_program_added_or_removed_while_serve_runs_shows_on_the_next_reload(kept_context, tmp_path):
    """Issue 45: after `dumpgym add`, a running `serve` still showed the gym it started with. Now it looks at
    the folder of added programs, starts the gym again from it, and the page, reloaded, shows the program
    and says what changed; the same for `dumpgym remove`."""
    import time
    from pathlib import Path

    corpus_dir = tmp_path / "added"
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "dumpgym", "serve", "--port", str(port), "--corpus", str(corpus_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    source = Path(__file__).resolve().parents[1] / "user_programs.py"

    def dumpgym(*args):
        done = subprocess.run([sys.executable, "-m", "dumpgym", *args, "--corpus", str(corpus_dir)],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr

    def reload_until(page, ready, what):
        # A start after a change takes a second or two alone; a full run on two cores can make it much longer.
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            page.reload()
            page.wait_for_selector("html[data-ready]")
            if ready():
                return
            time.sleep(0.5)
        pytest.fail(f"the page never showed {what} in three minutes")

    try:
        line = proc.stdout.readline()
        assert line.startswith(f"dumpgym: the gym is at http://127.0.0.1:{port}/"), line + proc.stderr.read()
        url = f"http://127.0.0.1:{port}/"
        with checked_page(kept_context(**DESKTOP), url) as page:
            assert page.locator("#p-my-dot").count() == 0 and page.locator("[data-corpus-news]").count() == 0
            dumpgym("add", f"{source}:vmapped_dot", "--arg", "f32[4,8]", "--arg", "f32[4,8]", "--slug", "my-dot")
            reload_until(page, lambda: page.locator("#p-my-dot").count() == 1, "the added program")
            news = page.locator("[data-corpus-news]").inner_text()
            assert "added my-dot" in news, news
            assert page.locator('#xray [data-xray-pick] option[value="my-dot"]').count() == 1
            dumpgym("remove", "my-dot")
            reload_until(page, lambda: page.locator("#p-my-dot").count() == 0, "the program removed")
            assert "removed my-dot" in page.locator("[data-corpus-news]").inner_text()
    except BaseException:
        proc.terminate()
        proc.wait(timeout=10)
        print("serve said:\n" + proc.stderr.read(), file=sys.stderr)  # shown by pytest beside the failure
        raise
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    said = proc.stderr.read()
    assert "added `my-dot`" in said and "removed `my-dot`" in said and "reload the page" in said
