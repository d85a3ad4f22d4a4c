"""`dumpgym open` in Chromium, on desktop and phone screens, on real dump folders made here in a subprocess
(XLA alone; JAX and XLA in one folder; in two folders): the gym's page lands on the dump's module in the
x-ray, its hover lights what XLA's own text ties together, the dump's facts are under it, and a link to the
module's old page leads to the same place."""
import threading

import pytest
from conftest import DESKTOP, checked_page

from dump_programs import dump_script
from dumpgym import cli
from dumpgym.serve import server as serve

pytestmark = pytest.mark.browser

PHONE = {"viewport": {"width": 390, "height": 844}, "has_touch": True, "is_mobile": True}

SCRIPT = r'''
import jax, jax.numpy as jnp

def step(w, x):
    h = jnp.tanh(x @ w)
    return (h * h).sum()

jax.jit(jax.grad(step))(jnp.ones((16, 8)), jnp.ones((4, 16)))
'''
FORMS = ("xla", "one", "two")
# The script's line that writes the tanh, as `python -c` numbers it (from the script's first line).
TANH_LINE = SCRIPT.split("\n").index("    h = jnp.tanh(x @ w)") + 1


@pytest.fixture(scope="module")
def opened(tmp_path_factory):
    """Each form's folders dumped, opened with `dumpgym open` (its server call caught) and served; yields
    form -> (URL of the page `open` starts at, the base URL, the folders)."""
    root = tmp_path_factory.mktemp("open")
    folders = {"xla": [root / "xla"], "one": [root / "one"], "two": [root / "two" / "jax", root / "two" / "xla"]}
    dump_script(SCRIPT, None, root / "xla")
    dump_script(SCRIPT, root / "one", root / "one")
    dump_script(SCRIPT, root / "two" / "jax", root / "two" / "xla")
    out, servers = {}, []
    with pytest.MonkeyPatch.context() as mp:
        for form, given in folders.items():
            caught = []
            mp.setattr(serve, "serve", lambda **kwargs: caught.append(kwargs))
            assert cli.main(["open", *map(str, given)]) == 0
            kwargs = caught[0]
            site, _ = serve.Site.start(root / f"corpus-{form}", shown=kwargs["shown"])
            server = serve.make_server(site, "127.0.0.1", 0)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            servers.append(server)
            base = serve.url_of(server)
            out[form] = (f"{base}/{kwargs['start']}", base, given)
    try:
        yield out
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def _ready(page, slug="dump-jit-step"):
    page.wait_for_selector(f"#xray[data-ready][data-program='{slug}']", timeout=30000)


def _lit(page, layer):
    return page.eval_on_selector_all(f"[data-xray-col={layer}] .on", "els => els.map(e => e.textContent)")


def _hover_line(page, layer, has_text):
    """Hover (or on a touch screen, tap) the first line of `layer` holding `has_text`; its text."""
    row = page.locator(f"[data-xray-col={layer}] [data-line]", has_text=has_text).first
    row.scroll_into_view_if_needed()
    if page.evaluate("matchMedia('(hover: none), (pointer: coarse)').matches"):
        row.tap()
    else:
        row.hover()
    return row.inner_text()


@pytest.mark.parametrize("screen", ["desktop", "phone"])
@pytest.mark.parametrize("form", FORMS)
def test_open_lands_on_the_dumps_module_in_the_gyms_xray_with_the_dumps_facts(form, screen, opened, kept_context):
    start, _base, given = opened[form]
    options = DESKTOP if screen == "desktop" else PHONE
    with checked_page(kept_context(**options), start) as page:
        _ready(page)
        assert page.locator("[data-xray-pick]").input_value() == "dump-jit-step"
        if form == "xla":
            # Its x-ray: the source lines XLA's stack frames name, the HLO before optimisations, the optimised HLO.
            assert page.locator("#xray[data-by-source]").count() == 1
            if screen == "phone":
                assert page.locator("[data-xray-tab=jaxpr]").inner_text().startswith("source")
            else:  # the HLO before optimisations opens at its first computation, XLA's source tables above it
                page.wait_for_timeout(300)  # the scroll settles over a few frames
                top = page.eval_on_selector("[data-xray-col=stablehlo]", """box => {
                  const b = box.getBoundingClientRect();
                  return [...box.querySelectorAll('[data-line]')].find((r) => r.getBoundingClientRect().top >= b.top)
                    .textContent; }""")
                assert top.startswith("ENTRY") or top.startswith("%"), top
            _hover_line(page, "jaxpr", f"<string>:{TANH_LINE} ")
        else:
            _hover_line(page, "jaxpr", "tanh")
        # What is lit is what XLA's text ties to it: a tanh among the compiled instructions, and in the middle
        # column a tanh op (StableHLO) or instructions XLA says came from a source line, one of them a tanh.
        lit_hlo, lit_mid = _lit(page, "hlo"), _lit(page, "stablehlo")
        assert any(" tanh(" in t for t in lit_hlo), lit_hlo
        if form == "xla":
            assert all("stack_frame_id=" in t for t in lit_mid) and any(" tanh(" in t for t in lit_mid), lit_mid
            # The fusion list names the source lines a fusion absorbed, as a traced program's names equations.
            fusions = page.eval_on_selector_all("[data-fusion-line]", "els => els.map(e => e.textContent)")
            assert any("source line" in f and f"<string>:{TANH_LINE} · source " in f for f in fusions), fusions
        else:
            assert any("stablehlo.tanh" in t for t in lit_mid), lit_mid
        # Under the x-ray, what only the dump says: the module, its buffers, the files it was read from.
        panel = page.locator("[data-xray-dump]")
        panel.scroll_into_view_if_needed()
        assert panel.is_visible() and "jit_step" in page.locator("[data-dump-module]").inner_text()
        assert page.locator("[data-dump-peak]").is_visible()
        files = [p for folder in given for p in folder.iterdir() if ".jit_step." in p.name or "_jit_step_" in p.name
                 or p.name.endswith("_step.jaxpr.txt")]
        said = page.locator("[data-dump-files] summary").inner_text()
        assert int(said.split()[0]) <= len(files) and int(said.split()[0]) >= 4
        # Nothing is wider than the screen.
        assert page.evaluate("document.scrollingElement.scrollWidth") <= options["viewport"]["width"] + 1


@pytest.mark.parametrize("form", ["xla", "two"])
def test_a_link_to_a_modules_old_page_leads_to_its_program_in_the_xray(form, opened, kept_context):
    _start, base, _given = opened[form]
    with checked_page(kept_context(**DESKTOP), f"{base}/dump/jit-step.html") as page:
        _ready(page)
        assert page.url.endswith("?xray=dump-jit-step#xray")



@pytest.fixture(scope="module")
def dump_card(tmp_path_factory, serve_pool, corpus):
    """The gym of mlp and ckpt-policy built in (the second has TPU and GPU items) and SCRIPT's dump, compiled
    for the CPU, as `open` shows it: the URL it is served at."""
    import copy

    from dumpgym.drills import build_pool
    from dumpgym.dumps.folder import read_folder
    from dumpgym.dumps.record import shown_records

    folder = tmp_path_factory.mktemp("card") / "one"
    dump_script(SCRIPT, folder, folder)
    records, _notes = shown_records(read_folder(folder))
    data = copy.deepcopy(corpus)
    data["programs"] = [p for p in data["programs"] if p["slug"] in ("mlp", "ckpt-policy")]
    data["programs"].append({**records[0].to_json(), "added": True})
    with serve_pool("dump-card-site", data, build_pool(data)) as url:
        yield url


def test_a_dumps_card_says_a_dump_would_add_another_targets_drills_not_an_add_flag(dump_card, kept_context):
    """A dump's module was compiled by the run that wrote it: its card and its place on the path say what a
    dump compiled for a TPU or GPU would add, never `--hlo` or `add … --replace`, which cannot compile it."""
    with checked_page(kept_context(**DESKTOP), dump_card) as page:
        note = page.locator("#p-dump-jit-step [data-compiles]").text_content()
        assert note.startswith("compiled for CPU · a dump compiled for TPU would add TPU items of "), note
        assert "--hlo" not in note and "--replace" not in note and "dumpgym add --dump" in note, note
        entry = page.locator('#path [data-yours-path] [data-yours-program="dump-jit-step"]').inner_text()
        assert "more from a dump compiled for TPU, GPU" in entry and "--hlo" not in entry, entry


@pytest.mark.parametrize("screen,late", [("desktop", 0), ("phone", 0), ("phone", 11_000)])
def test_open_lands_with_the_xrays_heading_below_the_sticky_header(screen, late, opened, kept_context):
    """On a phone the header wraps to two rows: the page `open` starts at (`#xray`) shows the x-ray's heading
    below it, not under it, and still there once the drills above it have asked their first question (on a
    phone, that pushed it down by the question's height, to the middle of the screen), however late that
    comes (`late` ms after the page: the items `serve` makes after its URL; a hold that ended after ten seconds
    left the heading mid-screen on a loaded machine)."""
    start, _base, _given = opened["one"]
    with checked_page(kept_context(**(DESKTOP if screen == "desktop" else PHONE)), start) as page:
        _ready(page)
        page.wait_for_timeout(300 + late)  # the scroll settles over a few frames
        # What a question does once it is asked (here its items may still be being made): the drill above grows.
        page.evaluate("""() => { const grown = document.createElement('div');
                                 grown.style.height = '300px';
                                 document.querySelector('#drills').append(grown); }""")
        page.wait_for_timeout(300)
        header, heading = page.evaluate("""() => [document.querySelector('.top').getBoundingClientRect().bottom,
                                                  document.querySelector('#xray h2').getBoundingClientRect().top]""")
        assert 0 < header <= heading < header + 60, (header, heading)
