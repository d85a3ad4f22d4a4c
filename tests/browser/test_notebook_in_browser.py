"""The notebook x-ray rendered into a real page: hovering a line lights both columns."""
import jax.numpy as jnp
import pytest

import dumpgym


def mlp(x, w):
    return jnp.tanh(x @ w) * 2.0


@pytest.mark.browser
def test_rendered_xray_hovers_in_chromium(browser):
    view = dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]")
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_content(f"<!doctype html><html><body>{view._repr_html_()}</body></html>")
    tanh = view.groups[1]
    page.hover(f'[data-layer="jaxpr"] .l[data-n="{tanh["jaxpr_lines"][0]}"]')
    lit_j = page.eval_on_selector_all('[data-layer="jaxpr"] .l.on', "els => els.map(e => +e.dataset.n)")
    lit_s = page.eval_on_selector_all('[data-layer="stablehlo"] .l.on', "els => els.map(e => +e.dataset.n)")
    page.close()
    assert lit_j == tanh["jaxpr_lines"] and lit_s == tanh["stablehlo_lines"]
    assert errors == []
