"""Listings highlighted at build time: Pygments tokens as short CSS classes, op names linked to their cards."""
from __future__ import annotations

import re
import sys
from functools import lru_cache

from pygments.token import Token

HLO_LISTING_SCHEMA = "dumpgym.hlo-listing/1"
LISTINGS_SCHEMA = "dumpgym.listings/1"

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

    from dumpgym.site.lexers import HloLexer, JaxprLexer, StableHloLexer

    lexer = {"source": PythonLexer, "jaxpr": JaxprLexer, "stablehlo": StableHloLexer, "hlo": HloLexer}.get(layer)
    return lexer(stripnl=False, ensurenl=False) if lexer else None


_CLASSES: dict = {}  # token type -> class, as `token_class` says: a dict lookup per token, not a cached call


@lru_cache(maxsize=256)
def _line_tokens(text: str, layer: str) -> tuple[tuple[tuple[str, str], ...], ...]:
    """The text split into lines, each a tuple of (class, text) runs with neighbours of one class merged.

    Kept per process: lexing is most of a site's render, and a process that renders the site more than
    once (the test suite does, many times) lexes the same built-in listings each time.
    """
    lexer = lexer_for(layer)
    # The lexer's own tokens, without `get_tokens`' wrapping generator (a tenth of a listing's render): what
    # it would do first, with these options (no strip, no tabs, no filters), is to normalise line ends.
    unix = text.replace("\r\n", "\n").replace("\r", "\n")
    if lexer is None:
        tokens = [(Token.Text, unix)]
    elif hasattr(lexer, "pairs"):  # ours (`lexers._OneMatchPerToken`): no positions, read from one match
        tokens = lexer.pairs(unix)
    else:
        tokens = ((ttype, value) for _, ttype, value in lexer.get_tokens_unprocessed(unix))
    classes = _CLASSES
    lines: list[list[tuple[str, str]]] = [[]]
    run = lines[-1]
    for ttype, value in tokens:
        cls = classes.get(ttype)
        if cls is None:
            cls = classes[ttype] = token_class(ttype)
        if "\n" in value:
            run = _put_lines(lines, cls, value)
        elif value:
            if run and ((last := run[-1])[0] == cls or (not last[0] and not value.strip())):
                run[-1] = (last[0], last[1] + value)
            else:
                run.append((cls if value.strip() else "", value))
    want = text.count("\n") + 1
    return tuple(tuple(line) for line in (lines + [[] for _ in range(want - len(lines))])[:want])


def _put_lines(lines: list[list[tuple[str, str]]], cls: str, value: str) -> list[tuple[str, str]]:
    """Add a token that spans line ends to `lines` (its first part ends the last line, each other starts
    one), merged as `_line_tokens` merges; the last line's runs."""
    run = lines[-1]
    for i, part in enumerate(value.split("\n")):
        if i:
            run = []
            lines.append(run)
        if not part:
            continue
        if run and ((last := run[-1])[0] == cls or (not last[0] and not part.strip())):
            run[-1] = (last[0], last[1] + part)
        else:
            run.append((cls if part.strip() else "", part))
    return run


def _link_runs(runs: tuple[tuple[str, str], ...], links: list[tuple[int, int, str]], raw: str) -> list:
    """One line's runs with each (start, end, anchor) character range of `links` made one linked run.

    A run is bare text (a string), a highlighted run `[class, text]`, or an op name linked to its card,
    `[class, text, anchor]` (its class is dropped: the link has its own look). `raw` is the line's text
    (its runs' joined), the links are in order and none overlaps another (as `listing_lines` finds them).
    One pass over the runs: a line of a compiled listing has dozens of runs and a few links, and this was
    most of what a listing's render did besides lexing.
    """
    if not links:
        return [[cls, value] if cls else value for cls, value in runs]
    out: list = []
    links = iter(sorted(links))
    start, stop, anchor = next(links)
    pos = 0  # where the run starts
    for cls, value in runs:
        end = pos + len(value)
        if end <= start:  # the whole run before the next link (or after the last)
            out.append([cls, value] if cls else value)
        else:
            at = pos  # the run's first character not yet placed
            while at < end:
                if at < start:
                    cut = start if start < end else end
                    piece = value[at - pos:cut - pos]
                    out.append([cls, piece] if cls else piece)
                    at = cut
                    continue
                if at == start:
                    out.append(["o", raw[start:stop], anchor])
                at = stop if stop < end else end
                if at == stop:
                    start, stop, anchor = next(links, _NO_LINK)
        pos = end
    while start < _NO_LINK[0]:  # a link at the line's very end (an empty name)
        out.append(["o", raw[start:stop], anchor])
        start, stop, anchor = next(links, _NO_LINK)
    return out


_NO_LINK = (sys.maxsize, sys.maxsize, "")


def listing_lines(text: str, layer: str, links: dict[int, list[tuple[str, str]]] | None = None) -> list[list]:
    """A listing highlighted at build time, a list of runs per line (see `_link_runs`), op names linked.

    `links` maps a 1-based line to the ops printed on it, in order, as (name as printed, card anchor);
    each name is looked for after the previous one (`reduce ... applies stablehlo.add` holds two).
    The page builds the markup itself with its escaping `html` helper, so no markup travels as data.
    """
    links = links or {}
    lines = []
    for number, runs in enumerate(_line_tokens(text, layer), start=1):
        if number not in links:
            lines.append([[cls, value] if cls else value for cls, value in runs])
            continue
        found = []
        raw, after = "".join([v for _, v in runs]), 0
        for name, anchor in links[number]:
            at = _find_op(raw, name, after)
            if at >= 0:
                found.append((at, at + len(name), anchor))
                after = at + len(name)
        lines.append(_link_runs(runs, found, raw))
    return lines


def hlo_listing(text: str, links: dict[int, list[tuple[str, str]]] | None = None) -> dict:
    """The compiled HLO highlighted at build time, for the page to fetch when it shows it.

    Each line is a list of runs: bare text as a string, a highlighted run as [class, text], an opcode
    linked to its card as [class, text, anchor] (`links` as for `listing_lines`). The page builds the
    markup itself with its escaping `html` helper, so no markup travels as data.
    """
    return {"schema": HLO_LISTING_SCHEMA, "lines": listing_lines(text, "hlo", links)}


@lru_cache(maxsize=None)
def _op_patterns(name: str) -> tuple[re.Pattern, ...]:
    """Where an op name may stand, most telling first: after `= `, in quotes, as a word."""
    return tuple(re.compile(p) for p in (rf"= {re.escape(name)}(?=[\[\s(\"]|$)", rf"\"{re.escape(name)}\"",
                                           rf"\b{re.escape(name)}\b"))


def _find_op(line: str, name: str, after: int = 0) -> int:
    """Where an op name stands on its line (from `after`): after `= ` for equations and ops, else its first match."""
    for pattern in _op_patterns(name):
        m = pattern.search(line, after)
        if m:
            return m.start() + (2 if m.group().startswith("= ") else 1 if m.group().startswith('"') else 0)
    return -1
