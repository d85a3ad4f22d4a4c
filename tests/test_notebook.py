"""`dumpgym.xray(f, *args)` in a notebook: data attributes, and self-contained HTML that links its columns."""
import re
import subprocess
import sys
import textwrap
from importlib import resources

import jax
import jax.numpy as jnp
import pytest

import dumpgym

X, W = jax.ShapeDtypeStruct((4, 8), jnp.float32), jax.ShapeDtypeStruct((8, 2), jnp.float32)


def mlp(x, w):
    return jnp.tanh(x @ w) * 2.0


def root_id(html: str) -> str:
    return re.search(r'<div class="dgx" id="([^"]+)"', html)[1]


def column(html: str, layer: str) -> list[tuple[str, str]]:
    """(class, text) of each line of a column, unescaped."""
    body = html.split(f'data-layer="{layer}">')[1].split("</h4>", 1)[1].split('<div class="dgx-col"')[0]
    rows = re.findall(r'<div class="l ([^"]*)" data-line="\d+">(.*?)</div>', body)
    return [(cls, text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
             .replace("&#x27;", "'").replace("&amp;", "&")) for cls, text in rows]


def test_xray_object_carries_the_data():
    view = dumpgym.xray(mlp, "f32[4,8]", jnp.ones((8, 2)))
    assert view.jaxpr == str(jax.jit(mlp).trace(X, W).jaxpr)
    assert view.stablehlo == jax.jit(mlp).lower(X, W).as_text()
    assert [view.eqns[g["eqn"]].primitive for g in view.groups] == ["dot_general", "tanh", "mul"]
    assert view.hlo is None
    html = view._repr_html_()
    assert "<script src" not in html and "http" not in html  # self-contained: nothing fetched
    assert "tensor&lt;4x8xf32&gt;" in html and "tensor<4x8xf32>" not in html.split("<script")[0]


def test_two_renders_do_not_share_ids():
    view = dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]")
    assert root_id(view._repr_html_()) != root_id(view._repr_html_())


def test_renders_in_two_processes_do_not_share_ids():
    # A kernel restart, or a second notebook in the same JupyterLab page: a fresh process renders again.
    render = textwrap.dedent("""
        import jax.numpy as jnp
        import dumpgym

        def mlp(x, w):
            return jnp.tanh(x @ w) * 2.0

        print(dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]")._repr_html_())
    """)
    other = subprocess.run([sys.executable, "-c", render], capture_output=True, check=True, text=True,
                           encoding="utf-8", timeout=300).stdout
    here = dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]")._repr_html_()
    assert root_id(other) != root_id(here)


def test_the_notebook_runs_the_pages_own_hover_module():
    html = dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]")._repr_html_()
    script = html.split('<script type="module">')[1].split("</script>")[0]
    static = resources.files("dumpgym") / "static"
    for module in ("scroll.js", "hover.js"):
        text = (static / module).read_text(encoding="utf-8")
        body = re.sub(r"^export ", "", re.sub(r"^import .*\n", "", text, flags=re.M), flags=re.M)
        assert body in script, module
    assert not re.search(r"^\s*(import|export)\b", script, re.M)  # one module script, nothing left to resolve
    assert "function indexCompiled" not in script  # the compiled layer's reader only comes with its column


def test_the_fragment_declares_its_charset_first():
    html = dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]")._repr_html_()
    # A browser looks for the charset in the first 1,024 bytes of a file saved from the output.
    assert html.startswith('<meta charset="utf-8">')


def test_save_writes_a_standalone_utf8_page(tmp_path):
    view = dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]")
    path = view.save(tmp_path / "mlp.html")
    data = path.read_bytes()
    head = data.split(b"<body>")[0]
    assert head == '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>mlp · dumpgym x-ray</title></head>'.encode()
    assert data.count(b'charset="utf-8"') == 1 and "mlp · 3 of 3 equations mapped".encode() in data


@pytest.mark.compiled_hlo
def test_the_compiled_column_comes_only_on_request():
    two = dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]")._repr_html_()
    assert re.findall(r'data-layer="(\w+)"', two.split("<script")[0]) == ["jaxpr", "stablehlo"]
    view = dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]", compiled=True)
    html = view._repr_html_()
    assert re.findall(r'data-layer="(\w+)"', html.split("<script")[0]) == ["jaxpr", "stablehlo", "hlo"]
    assert [text for _, text in column(html, "hlo")] == [line or " " for line in view.hlo.text.splitlines()]
    script = html.split('<script type="module">')[1].split("</script>")[0]
    compiled_js = (resources.files("dumpgym") / "static" / "compiled.js").read_text(encoding="utf-8")
    assert "function indexCompiled(hlo)" in compiled_js and "function indexCompiled(hlo)" in script


@pytest.mark.compiled_hlo
def test_fusion_lines_are_bold_in_the_compiled_column():
    view = dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]", compiled=True)
    # Which instructions are fusions, from a compile of JAX's own in this test (XLA fuses per host CPU).
    text = jax.jit(mlp).lower(X, W).compile().as_text()
    fusions = set(re.findall(r"^\s*(?:ROOT )?%([\w.-]+) = \S+ fusion\(", text, re.M))
    assert fusions
    bold = {re.match(r"\s*(?:ROOT )?%([\w.-]+) = ", text)[1] for cls, text in column(view._repr_html_(), "hlo")
            if "fz" in cls.split()}
    assert bold == fusions


@pytest.mark.compiled_hlo
def test_no_program_text_can_end_the_script():
    def inner(x):
        return jnp.sin(x)

    inner.__name__ = "</script><img src=x id=pwned><!--"

    def outer(x):
        return jax.jit(inner)(x) * 2

    html = dumpgym.xray(outer, "f32[3]", compiled=True)._repr_html_()
    assert html.count("</script>") == 2 and "<img" not in html and "<!--" not in html
