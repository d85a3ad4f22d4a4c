"""The notebook x-ray rendered into a real page: hovering a line lights both columns, render by render."""
import jax.numpy as jnp
import pytest

import dumpgym


def mlp(x, w):
    return jnp.tanh(x @ w) * 2.0


def lit(page, render, layer):
    return page.eval_on_selector_all(f'.dgx >> nth={render} >> [data-layer="{layer}"] .l.on',
                                     "els => els.map(e => +e.dataset.line)")


@pytest.mark.browser
def test_rendered_xray_hovers_in_chromium(browser):
    view = dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]")
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_content(f"<!doctype html><html><body>{view._repr_html_()}</body></html>")
    tanh = view.groups[1]
    page.hover(f'[data-layer="jaxpr"] .l[data-line="{tanh["jaxpr_lines"][0]}"]')
    lit_j, lit_s = lit(page, 0, "jaxpr"), lit(page, 0, "stablehlo")
    page.mouse.move(0, 0)
    unlit = lit(page, 0, "jaxpr")
    page.close()
    assert lit_j == tanh["jaxpr_lines"] and lit_s == tanh["stablehlo_lines"]
    assert unlit == []
    assert errors == []


@pytest.mark.browser
def test_two_renders_in_one_page_light_only_themselves(browser):
    view = dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]")
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_content(f"<!doctype html><html><body>{view._repr_html_()}{view._repr_html_()}</body></html>")
    dot = view.groups[0]
    page.hover(f'.dgx >> nth=1 >> [data-layer="stablehlo"] .l[data-line="{dot["stablehlo_lines"][0]}"]')
    seen = [(lit(page, k, "jaxpr"), lit(page, k, "stablehlo")) for k in (0, 1)]
    page.close()
    assert seen == [([], []), (dot["jaxpr_lines"], dot["stablehlo_lines"])]
    assert errors == []
