"""A dump's module as a program of the gym's x-ray, in Chromium: a dump of JAX and XLA opens its compiled
column at its first computation, not on the dozens of lines of source tables XLA prints first; a dump of
XLA alone, added, shows what `open` shows: its source lines, HLO before optimisations and compiled HLO."""
import threading

import pytest
from conftest import DESKTOP, checked_page

from dump_programs import dump_script
from dumpgym import cli
from dumpgym.serve import server as serve
from test_xray_in_browser import open_xray

pytestmark = pytest.mark.browser

SCRIPT = r'''
import jax, jax.numpy as jnp

def {name}(w, x):
    h = jnp.tanh(x @ w)
    return (h * h).sum()

jax.jit(jax.grad({name}))(jnp.ones((16, 8)), jnp.ones((4, 16)))
'''


@pytest.fixture(scope="module")
def gym(tmp_path_factory):
    """The gym served with three dumped programs added: `dump-jit-both` (JAX's and XLA's dumps, one
    folder), `dump-jit-alone` (XLA's alone) and `dump-jit-nojaxpr` (StableHLO and XLA's, no jaxpr);
    yields its URL."""
    root = tmp_path_factory.mktemp("dumps")
    dump_script(SCRIPT.format(name="both"), root / "both", root / "both")
    dump_script(SCRIPT.format(name="alone"), None, root / "alone")
    dump_script(SCRIPT.format(name="nojaxpr"), root / "nojaxpr", root / "nojaxpr")
    for jaxpr in (root / "nojaxpr").glob("*.jaxpr.txt"):  # as JAX_DUMP_IR_MODES=stablehlo (the default) writes it
        jaxpr.unlink()
    corpus = root / "corpus"
    for folder in ("both", "alone", "nojaxpr"):
        assert cli.main(["add", "--dump", str(root / folder), "--corpus", str(corpus)]) == 0
    site, _ = serve.Site.start(corpus)
    server = serve.make_server(site, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield serve.url_of(server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _in_view(page, layer: str, line: int) -> bool:
    return page.eval_on_selector(
        f"[data-xray-col={layer}]",
        """(box, n) => { const row = box.querySelector(`[data-line="${n}"]`); const b = box.getBoundingClientRect();
                         const r = row.getBoundingClientRect(); return r.top >= b.top && r.bottom <= b.bottom; }""",
        line)


def _first_computation(page) -> int:
    """The line of the compiled listing's first computation signature (`%name (` or `ENTRY`), as shown."""
    return page.eval_on_selector(
        "[data-xray-col=hlo]",
        """box => Number([...box.querySelectorAll('[data-line]')]
                   .find((r) => /^(ENTRY )?%[\\w.-]+ \\(/.test(r.textContent.trim())).dataset.line)""")


def test_a_dumps_compiled_column_opens_at_its_first_computation(kept_context, gym):
    with checked_page(kept_context(**DESKTOP), gym) as page:
        open_xray(page, "dump-jit-both")
        first = _first_computation(page)
        assert first > 12  # XLA printed its source tables first: the case this is about
        page.wait_for_timeout(300)  # the scroll settles over a few frames
        assert _in_view(page, "hlo", first) and not _in_view(page, "hlo", 1)
        # It is the column's first line, not some lines down with source tables above it.
        top = page.eval_on_selector("[data-xray-col=hlo]", """box => { const b = box.getBoundingClientRect();
          return Number([...box.querySelectorAll('[data-line]')]
                        .find((r) => r.getBoundingClientRect().top >= b.top - 1).dataset.line); }""")
        assert top == first, (top, first)
        for layer in ("jaxpr", "stablehlo"):  # the JAX layers are there, beside it
            assert page.locator(f"[data-xray-col={layer}]").is_visible()


def test_an_added_dump_of_xla_alone_shows_its_source_lines_and_both_hlo_layers(kept_context, gym):
    with checked_page(kept_context(**DESKTOP), gym) as page:
        open_xray(page, "dump-jit-alone")
        assert page.locator("[data-xray-stats]").inner_text().startswith("XLA's layers and the source lines")
        assert page.locator("#xray-col-jaxpr h3").inner_text().lower() == "source lines"
        assert page.locator("#xray-col-stablehlo h3").inner_text().lower() == "hlo before optimisations"
        for layer in ("jaxpr", "stablehlo", "hlo"):
            assert page.locator(f"[data-xray-col={layer}]").is_visible()
        # A program of the gym's own, shown next, has its own columns again.
        open_xray(page, "mlp")
        assert page.locator("#xray-col-jaxpr h3").inner_text().lower() == "jaxpr"
        assert page.locator("#xray-col-stablehlo h3").inner_text().lower() == "stablehlo"
        assert page.locator("[data-xray-dump]").is_hidden()


def test_a_dump_without_a_jaxpr_shows_its_stablehlo_and_compiled_columns_and_says_why(kept_context, gym):
    with checked_page(kept_context(**DESKTOP), gym) as page:
        open_xray(page, "dump-jit-nojaxpr")
        assert "no jaxpr" in page.locator("[data-xray-stats]").inner_text()
        assert not page.locator("[data-xray-col=jaxpr]").is_visible()
        cols = page.locator("#xray .xray-cols").bounding_box()
        for layer in ("stablehlo", "hlo"):
            box = page.locator(f"[data-xray-col={layer}]").bounding_box()
            assert 0.4 * cols["width"] < box["width"] < 0.6 * cols["width"], layer


def test_a_dumps_compiled_layer_says_the_run_compiled_it_not_this_machine(kept_context, gym):
    """The note under a dump's compiled column names the chip its run compiled for and no version or topology
    of this machine's (the gym's own layers name those: they were compiled here)."""
    with checked_page(kept_context(**DESKTOP), gym) as page:
        open_xray(page, "dump-jit-both")
        note = page.locator("[data-xray-hlo-note]").inner_text()
        assert "by the run that wrote the dump" in note and "jaxlib" not in note and "undefined" not in note, note
        open_xray(page, "mlp")  # a layer the gym compiled says where and with what
        assert "jaxlib" in page.locator("[data-xray-hlo-note]").inner_text()
