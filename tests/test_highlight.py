"""Listings highlighted at build time: every line numbered, every value escaped, op names linked."""
from __future__ import annotations

import json
import re

from dumpgym.site import highlight


def test_compiled_text_is_data_not_markup():
    text = 'HloModule m\n%a = f32[] constant(0), metadata={op_name="</script><img src=x onerror=alert(1)>"}'
    split = highlight.hlo_listing(text)
    assert json.dumps(split).count("<img") == 1  # once, inside a JSON string the page escapes when it renders
    assert split["lines"][1][-1] == ["c", 'metadata={op_name="</script><img src=x onerror=alert(1)>"}']


def test_a_listing_without_a_lexer_still_keeps_every_line_and_links_ops(monkeypatch):
    monkeypatch.setattr(highlight, "lexer_for", lambda layer: None)
    out = highlight.listing_lines("a <b>\n\n%c = x", "stablehlo", {3: [("x", "op-x")]})
    assert out == [["a <b>"], [], ["%c = ", ["o", "x", "op-x"]]]


def test_two_ops_on_one_line_both_link_and_the_text_reads_back():
    line = "%1 = stablehlo.reduce(%0 init: %c) applies stablehlo.add across dimensions = [1] : tensor<4xf32>"
    [runs] = highlight.listing_lines(line, "stablehlo", {1: [("stablehlo.reduce", "op-r"), ("stablehlo.add", "op-a")]})
    links = [r for r in runs if isinstance(r, list) and len(r) == 3]
    assert links == [["o", "stablehlo.reduce", "op-r"], ["o", "stablehlo.add", "op-a"]]
    assert "".join(r if isinstance(r, str) else r[1] for r in runs) == line
