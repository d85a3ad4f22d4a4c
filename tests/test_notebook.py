"""`dumpgym.xray(f, *args)` in a notebook: data attributes, and self-contained HTML that links both columns."""
import re
from importlib import resources

import jax.numpy as jnp

import dumpgym


def mlp(x, w):
    return jnp.tanh(x @ w) * 2.0


def test_xray_object_carries_the_data():
    view = dumpgym.xray(mlp, "f32[4,8]", jnp.ones((8, 2)))
    assert view.jaxpr.startswith("{ lambda ; a:f32[4,8] b:f32[8,2]. let")
    assert "stablehlo.dot_general" in view.stablehlo
    assert [view.eqns[g["eqn"]].primitive for g in view.groups] == ["dot_general", "tanh", "mul"]
    html = view._repr_html_()
    assert "<script src" not in html and "http" not in html  # self-contained: nothing fetched
    assert "tensor&lt;4x8xf32&gt;" in html and "tensor<4x8xf32>" not in html.split("<script")[0]


def test_two_renders_do_not_share_ids():
    view = dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]")
    first, second = view._repr_html_(), view._repr_html_()
    assert first.split('id="')[1].split('"')[0] != second.split('id="')[1].split('"')[0]


def test_the_notebook_runs_the_pages_own_hover_module():
    html = dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]")._repr_html_()
    script = html.split('<script type="module">')[1].split("</script>")[0]
    static = resources.files("dumpgym") / "static"
    for module in ("scroll.js", "hover.js"):
        text = (static / module).read_text(encoding="utf-8")
        body = re.sub(r"^export ", "", re.sub(r"^import .*\n", "", text, flags=re.M), flags=re.M)
        assert body in script, module
    assert not re.search(r"^\s*(import|export)\b", script, re.M)  # one module script, nothing left to resolve
