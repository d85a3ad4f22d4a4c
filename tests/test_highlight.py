"""Listings highlighted at build time: every line numbered, every value escaped, op names linked."""
from __future__ import annotations

import json
import re

import pytest

import listing_oracle
from pygments.token import Comment, Keyword, Punctuation, String

from dumpgym.site import highlight
from dumpgym.site.lexers import _bygroups, _OneMatchPerToken


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


def _every_built_in_listing():
    """(slug, text, layer, links) for each listing the site highlights of every built-in program and variant:
    source, jaxpr and StableHLO with their op links, and each compiled layer with its opcodes'."""
    from dumpgym.drills._stored import builtin_corpus
    from dumpgym.site.files import _compiled_layers, compiled_ops, op_links, program_anchors

    for program in builtin_corpus().programs:
        anchors = program_anchors(program)
        links = op_links(program, anchors)
        for layer in ("source", "jaxpr", "stablehlo"):
            yield program.slug, getattr(program, layer), layer, links[layer]
        for target, compiled in _compiled_layers(program).items():
            ops = {line: [(op, anchors[f"hlo:{op}"])] for line, op in compiled_ops(compiled).items()}
            yield f"{program.slug} ({target})", compiled.text, "hlo", ops


def test_every_built_in_listing_is_highlighted_as_pygments_own_tokens_split_plainly():
    highlight._line_tokens.cache_clear()  # lexed here, not read from another test's renders
    count = 0
    for slug, text, layer, links in _every_built_in_listing():
        assert highlight.listing_lines(text, layer, links) == listing_oracle.listing_lines(text, layer, links), \
            (slug, layer)
        count += 1
    assert count > 400  # every program's three listings and compiled layers, variants too


# Text a listing may hold that no dump prints so: markup, entities, bidirectional overrides and isolates,
# controls, whitespace `str.strip` takes but a lexer's rules may not, every kind of line end.
_HOSTILE = [
    '%a = f32[2]{0} add(%b, %c), metadata={op_name="</script><b>&amp;\u202e"}\n',
    "ROOT %t = (f32[], s32[]) tuple(%a, %b)\r\n  %x = pred[] compare(%a, %b), direction=LT\rnext\n",
    "\u202e%add.1 = f32[] add(%p, %q)\u202c\n\u2066reduce\u2069 <&> add add add\n",
    "\x00\x01 \x1c\x1d\x85\xa0 \t add \u2028 add\u3000\n\n\n",
    '%1 = stablehlo.add %0, %0 : tensor<2xf32>  // "<x & y>"\n  a = add b c\n{ lambda ; a:f32[]. let b:f32[] = add a a in (b) }',
    '%m = f32[] add(%a, %b), metadata={ "add" {x} }\n%1 = stablehlo.add %0, %0 loc( "add" )\n',
    "add", "", "\n", " ", "add(", "= add", '"add"', "<<<add>>>", "add\n" * 3,
]


@pytest.mark.parametrize("layer", ["source", "jaxpr", "stablehlo", "hlo", "text"])
@pytest.mark.parametrize("text", _HOSTILE)
def test_hostile_text_is_highlighted_as_pygments_own_tokens_split_plainly(text, layer):
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    # An op on every line, twice on some, and names that stand inside others (`add` in `%add.1`).
    links = {n: [("add", "op-add"), ("add(%b", "op-span"), ("add", "op-add-2"), ("compare", "op-cmp")]
             for n in range(1, len(lines) + 1)}
    highlight._line_tokens.cache_clear()
    got = highlight.listing_lines(text, layer, links)
    assert got == listing_oracle.listing_lines(text, layer, links)
    assert len(got) == text.count("\n") + 1
    for line, runs in zip(lines, got):  # every character once, in order, as data
        assert "".join(r if isinstance(r, str) else r[1] for r in runs) == line


class _Spaced(_OneMatchPerToken):
    """Spaces as a comment, words as keywords, `<  >` as three groups: classed whitespace, alone, after an
    unclassed run and across line ends, which the dumps' own lexers seldom print."""

    tokens = {"root": [(r"[ \t]*\n[ \t]*", Comment), (r"[ \t]+", Comment), (r"(<)(\s*)(>)", _bygroups(Punctuation, String, None)),
                       (r"\w+", Keyword), (r"[^\w\s<]+", Punctuation)]}


@pytest.mark.parametrize("text", ["a  b", "  a", "a,  b", ",  \n  ,", "a \n b", "<  > a", "x,< \n >\n \n", ", ,add(%b  c"])
def test_classed_whitespace_splits_as_pygments_own_tokens_do(monkeypatch, text):
    monkeypatch.setattr(highlight, "lexer_for", lambda layer: _Spaced(stripnl=False, ensurenl=False))
    highlight._line_tokens.cache_clear()
    links = {n: [("add(%b", "op-span"), ("b", "op-b")] for n in range(1, text.count("\n") + 2)}
    try:
        assert highlight.listing_lines(text, "spaced", links) == listing_oracle.listing_lines(text, "spaced", links)
    finally:
        highlight._line_tokens.cache_clear()
