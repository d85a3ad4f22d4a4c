"""`dumpgym.xray(f, *args)` in a notebook: data attributes, and self-contained HTML that links both columns."""
import os
import shutil

import jax.numpy as jnp
import pytest

import dumpgym


def mlp(x, w):
    return jnp.tanh(x @ w) * 2.0


def test_xray_object_carries_the_data():
    view = dumpgym.xray(mlp, "f32[4,8]", jnp.ones((8, 2)))
    assert view.jaxpr.startswith("{ lambda ; a:f32[4,8] b:f32[8,2]. let")
    assert "stablehlo.dot_general" in view.stablehlo
    assert [view.eqns[g["eqn"]]["primitive"] for g in view.groups] == ["dot_general", "tanh", "mul"]
    html = view._repr_html_()
    assert "<script src" not in html and "http" not in html  # self-contained: nothing fetched
    assert "tensor&lt;4x8xf32&gt;" in html and "tensor<4x8xf32>" not in html.split("<script")[0]


def test_two_renders_do_not_share_ids():
    view = dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]")
    first, second = view._repr_html_(), view._repr_html_()
    assert first.split('id="')[1].split('"')[0] != second.split('id="')[1].split('"')[0]


@pytest.mark.browser
def test_rendered_xray_hovers_in_chromium():
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("Debian's chromium is not installed; ./scripts/test installs it") if os.environ.get("CI") else pytest.skip("no chromium")
    view = dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]")
    page_html = f"<!doctype html><html><body>{view._repr_html_()}</body></html>"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        page = browser.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.set_content(page_html)
        tanh = view.groups[1]
        page.hover(f'[data-layer="jaxpr"] .l[data-n="{tanh["jaxpr_lines"][0]}"]')
        lit_j = page.eval_on_selector_all('[data-layer="jaxpr"] .l.on', "els => els.map(e => +e.dataset.n)")
        lit_s = page.eval_on_selector_all('[data-layer="stablehlo"] .l.on', "els => els.map(e => +e.dataset.n)")
        browser.close()
    assert lit_j == tanh["jaxpr_lines"] and lit_s == tanh["stablehlo_lines"]
    assert errors == []
