"""Listings highlighted at build time: every line numbered, every value escaped, op names linked."""
from __future__ import annotations

import json
import re

from dumpgym import highlight


def test_compiled_text_is_data_not_markup():
    text = 'HloModule m\n%a = f32[] constant(0), metadata={op_name="</script><img src=x onerror=alert(1)>"}'
    split = highlight.hlo_listing(text)
    assert json.dumps(split).count("<img") == 1  # once, inside a JSON string the page escapes when it renders
    assert split["lines"][1][-1] == ["c", 'metadata={op_name="</script><img src=x onerror=alert(1)>"}']


def test_render_listing_without_a_lexer_still_numbers_and_escapes(monkeypatch):
    monkeypatch.setattr(highlight, "lexer_for", lambda layer: None)
    out = highlight.render_listing("a <b>\n\n%c = x", "stablehlo", {3: [("x", "op-x")]})
    assert out == ("<pre class=ls data-layer=stablehlo><code><span data-line=1>a &lt;b&gt;\n</span>"
                   "<span data-line=2>\n</span><span data-line=3>%c = <a class=o href=#op-x>x</a>\n</span></code></pre>")


def test_two_ops_on_one_line_both_link():
    line = "%1 = stablehlo.reduce(%0 init: %c) applies stablehlo.add across dimensions = [1] : tensor<4xf32>"
    out = highlight.render_listing(line, "stablehlo", {1: [("stablehlo.reduce", "op-r"), ("stablehlo.add", "op-a")]})
    assert re.search(r"<a class=o href=#op-r>stablehlo.reduce</a>.*<a class=o href=#op-a>stablehlo.add</a>", out)
