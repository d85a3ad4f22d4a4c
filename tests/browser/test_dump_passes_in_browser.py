"""`dumpgym open` of a dump with XLA's per-pass files, in Chromium: choosing a fusion's compiled line names the pass
that made it (the first per-pass file XLA wrote that prints it), with the texts before and after as text."""
import json
import os
import subprocess
import sys
import urllib.request

import pytest
from conftest import DESKTOP, checked_page, free_port
from test_xray_in_browser import open_xray

pytestmark = pytest.mark.browser

# A jitted function with a loop fusion on the CPU, under a scope whose name is markup: XLA copies it into the
# metadata of the lines the page shows, which must stay text.
SCRIPT = r'''
import jax, jax.numpy as jnp

def layer(x, w):
    with jax.named_scope("<i>scope"):
        return jnp.tanh(x @ w + 1.0) * 2.0

jax.jit(layer)(jnp.ones((4, 8)), jnp.ones((8, 16)))
'''


@pytest.fixture(scope="module")
def opened(tmp_path_factory):
    """A per-pass dump of SCRIPT (every pass that changed the module), served by `dumpgym open`; its URL and
    folder."""
    folder = tmp_path_factory.mktemp("per-pass")
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_DUMP_IR_TO", "XLA_FLAGS")}
    env.update(JAX_DUMP_IR_TO=str(folder), JAX_DUMP_IR_MODES="jaxpr,stablehlo",
               XLA_FLAGS=f"--xla_dump_to={folder} --xla_dump_hlo_pass_re=.*")
    run = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "dumpgym", "open", str(folder), "--port", str(port),
                             "--corpus", str(tmp_path_factory.mktemp("no-added-programs"))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith(f"dumpgym: the gym is at http://127.0.0.1:{port}/"), line + proc.stderr.read()
        yield f"http://127.0.0.1:{port}/", folder
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_choosing_a_fusion_line_names_the_pass_that_made_it_with_its_texts(kept_context, opened):
    url, folder = opened
    with urllib.request.urlopen(url + "data/programs/dump-jit-layer.json", timeout=30) as r:
        program = json.loads(r.read())
    text = program["compiled"]["cpu"]["text"].splitlines()
    n, fusion = next((n, line.split(" = ")[0].strip().removeprefix("ROOT ")[1:]) for n, line in enumerate(text, 1)
                     if " fusion(" in line and "kind=kLoop" in line)
    # XLA's own answer: the first per-pass file whose text prints the fusion (the one before does not).
    prefix = next(folder.glob("module_*.jit_layer.cpu_after_optimizations.txt")).name.split(".cpu_")[0] + "."
    files = sorted(folder.glob(prefix + "[0-9][0-9][0-9][0-9].*.txt"), key=lambda p: p.name)
    first = next(k for k, p in enumerate(files) if f"%{fusion} = " in p.read_text())
    assert first and f"%{fusion} " not in files[first - 1].read_text()
    _step, pipeline, after = files[first].name[len(prefix):].split(".")[:3]
    assert after.startswith("after_")
    context = kept_context(**DESKTOP)
    with checked_page(context, url) as page:
        open_xray(page, "dump-jit-layer")
        assert page.is_hidden("[data-xray-pass]")
        page.click(f"[data-xray-col=hlo] [data-line='{n}']")
        page.wait_for_selector("[data-xray-pass]:not([hidden])")
        made = page.inner_text("[data-xray-pass-made]")
        assert made.startswith(f"made by pass {after.removeprefix('after_')} (pipeline {pipeline})"), made
        shown_after = page.inner_text("[data-xray-pass-after] pre")
        assert f"%{fusion} = " in shown_after and "<i>scope" in shown_after
        assert page.inner_text("[data-xray-pass-before] pre")
        assert page.locator("[data-xray-pass] i").count() == 0  # the scope's markup stays text
        page.click(f"[data-xray-col=hlo] [data-line='{n}']")  # chosen again: folded away
        assert page.is_hidden("[data-xray-pass]")
