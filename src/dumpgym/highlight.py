"""Listings highlighted at build time: Pygments tokens as short CSS classes, op names linked to their cards."""
from __future__ import annotations

import re
from functools import lru_cache

from markupsafe import Markup, escape
from pygments.token import Token

HLO_LISTING_SCHEMA = "dumpgym.hlo-listing/1"

# Pygments token types to one-letter classes; anything unlisted (punctuation, variables) stays bare,
# which keeps the page light: a listing is mostly variables and punctuation.
_TOKEN_CLASSES = (
    (Token.Comment, "c"), (Token.Keyword.Type, "t"), (Token.Keyword, "k"), (Token.Name.Function, "f"),
    (Token.Name.Builtin, "b"), (Token.Name.Attribute, "a"),
    (Token.Name.Class, "t"), (Token.Name.Decorator, "k"), (Token.Name.Label, "f"), (Token.Name.Constant, "b"),
    (Token.Name.Tag, "a"), (Token.Literal.Number, "n"), (Token.Literal.String, "s"), (Token.Literal, "n"),
)


@lru_cache(maxsize=None)
def token_class(ttype) -> str:
    """The short CSS class for a Pygments token type, or "" for tokens left unstyled."""
    for parent, cls in _TOKEN_CLASSES:
        if ttype in parent:
            return cls
    return ""


def lexer_for(layer: str):
    """A fresh Pygments lexer for "source", "jaxpr", "stablehlo" or "hlo" (ours for the dumps); None for other text."""
    from pygments.lexers.python import PythonLexer

    from dumpgym.lexers import HloLexer, JaxprLexer, StableHloLexer

    lexer = {"source": PythonLexer, "jaxpr": JaxprLexer, "stablehlo": StableHloLexer, "hlo": HloLexer}.get(layer)
    return lexer(stripnl=False, ensurenl=False) if lexer else None


def _line_tokens(text: str, lexer) -> list[list[tuple[str, str]]]:
    """The text split into lines, each a list of (class, text) runs with neighbours of one class merged."""
    pairs = lexer.get_tokens(text) if lexer is not None else [(Token.Text, text)]
    lines: list[list[tuple[str, str]]] = [[]]
    for ttype, value in pairs:
        cls = token_class(ttype)
        for i, part in enumerate(value.split("\n")):
            if i:
                lines.append([])
            if not part:
                continue
            run = lines[-1]
            if run and (run[-1][0] == cls or (not part.strip() and not run[-1][0])):
                run[-1] = (run[-1][0], run[-1][1] + part)
            else:
                run.append((cls if part.strip() else "", part))
    want = text.count("\n") + 1
    return (lines + [[] for _ in range(want - len(lines))])[:want]


def _render_line(runs: list[tuple[str, str]], links: list[tuple[int, int, str]]) -> str:
    """One line's runs as HTML, each (start, end, anchor) character range of `links` wrapped in an op link."""
    cuts = sorted({0} | {p for a, b, _ in links for p in (a, b)})
    out, pos = [], 0
    for cls, value in runs:
        bounds = [pos] + [c for c in cuts if pos < c < pos + len(value)] + [pos + len(value)]
        for start, stop in zip(bounds, bounds[1:]):
            piece = value[start - pos: stop - pos]
            link = next((l for l in links if l[0] <= start and stop <= l[1]), None)
            body = str(escape(piece))
            if cls and not link:
                body = f"<span class={cls}>{body}</span>"
            if link and start == link[0]:
                body = f"<a class=o href=#{link[2]}>" + body
            if link and stop == link[1]:
                body += "</a>"
            out.append(body)
        pos += len(value)
    return "".join(out)


def render_listing(text: str, layer: str, links: dict[int, list[tuple[str, str]]] | None = None) -> Markup:
    """Highlighted HTML for a listing: one `<span data-line=N>` per line, op names linked to their cards.

    `links` maps a 1-based line to the ops printed on it, in order, as (name as printed, card anchor);
    each name is looked for after the previous one (`reduce ... applies stablehlo.add` holds two).
    """
    links = links or {}
    rows = []
    for number, runs in enumerate(_line_tokens(text, lexer_for(layer)), start=1):
        found = []
        if number in links:
            raw, after = "".join(v for _, v in runs), 0
            for name, anchor in links[number]:
                at = _find_op(raw, name, after)
                if at >= 0:
                    found.append((at, at + len(name), anchor))
                    after = at + len(name)
        rows.append(f"<span data-line={number}>{_render_line(runs, found)}\n</span>")
    return Markup(f'<pre class=ls data-layer={layer}><code>{"".join(rows)}</code></pre>')


def hlo_listing(text: str) -> dict:
    """The compiled HLO highlighted at build time, for the page to fetch when it shows it.

    Each line is a list of runs: bare text as a string, a highlighted run as [class, text]. The page
    builds the markup itself with its escaping `html` helper, so no markup travels as data.
    """
    lines = [[value if not cls else [cls, value] for cls, value in runs] for runs in _line_tokens(text, lexer_for("hlo"))]
    return {"schema": HLO_LISTING_SCHEMA, "lines": lines}


def _find_op(line: str, name: str, after: int = 0) -> int:
    """Where an op name stands on its line (from `after`): after `= ` for equations and ops, else its first match."""
    for pattern in (rf"= {re.escape(name)}(?=[\[\s(\"]|$)", rf"\"{re.escape(name)}\"", rf"\b{re.escape(name)}\b"):
        m = re.compile(pattern).search(line, after)
        if m:
            return m.start() + (2 if m.group().startswith("= ") else 1 if m.group().startswith('"') else 0)
    return -1
