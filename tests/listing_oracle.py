"""A listing's runs made the plain way, as the oracle of `site/highlight.py`'s `listing_lines`.

Tokens from Pygments' own `RegexLexer` loop (each rule tried in turn, `bygroups` called as Pygments calls
it), each split at line ends and merged with its neighbour where `listing_lines` says it merges; each line's
links cut out of its runs by walking every run from the line's start for every stretch of text between links.
Slow and obvious: what the page's listing files must equal, however `listing_lines` gets there.
"""
from __future__ import annotations

from pygments.lexer import RegexLexer
from pygments.token import Token

from dumpgym.site import highlight


def tokens(text: str, layer: str) -> list[tuple[object, str]]:
    """(token type, text) of `text` by Pygments' own loop for the layer's lexer (one bare token without one)."""
    lexer = highlight.lexer_for(layer)
    if lexer is None:
        return [(Token.Text, text)]
    return [(ttype, value) for _, ttype, value in RegexLexer.get_tokens_unprocessed(lexer, text)]


def line_runs(text: str, layer: str) -> list[list[tuple[str, str]]]:
    """Each line of `text` (split at `\\n`, after `\\r\\n` and `\\r` are made `\\n`) as (class, text) runs: a
    run of spaces only, or of one class; whitespace after an unclassed run joins it."""
    unix = text.replace("\r\n", "\n").replace("\r", "\n")
    lines: list[list[tuple[str, str]]] = [[]]
    for ttype, value in tokens(unix, layer):
        cls = highlight.token_class(ttype)
        for i, part in enumerate(value.split("\n")):
            if i:
                lines.append([])
            if not part:
                continue
            run = lines[-1]
            if run and (run[-1][0] == cls or (run[-1][0] == "" and part.strip() == "")):
                run[-1] = (run[-1][0], run[-1][1] + part)
            else:
                run.append((cls if part.strip() else "", part))
    want = text.count("\n") + 1
    return (lines + [[] for _ in range(want)])[:want]


def _pieces(runs: list[tuple[str, str]], start: int, stop: int) -> list:
    """The characters of `runs` from `start` to `stop`, each run's share kept with its class."""
    out, pos = [], 0
    for cls, value in runs:
        a, b = max(start, pos), min(stop, pos + len(value))
        if a < b:
            piece = value[a - pos:b - pos]
            out.append([cls, piece] if cls else piece)
        pos += len(value)
    return out


def listing_lines(text: str, layer: str, links: dict[int, list[tuple[str, str]]] | None = None) -> list[list]:
    """The runs of each line with each op name of `links` found as `highlight._find_op` finds it (each after
    the one before) and made a linked run `["o", name, anchor]`."""
    out = []
    for number, runs in enumerate(line_runs(text, layer), start=1):
        raw = "".join(value for _, value in runs)
        found, after = [], 0
        for name, anchor in (links or {}).get(number, []):
            at = highlight._find_op(raw, name, after)
            if at >= 0:
                found.append((at, at + len(name), anchor))
                after = at + len(name)
        line, pos = [], 0
        for start, stop, anchor in found:
            line += _pieces(runs, pos, start)
            line.append(["o", raw[start:stop], anchor])
            pos = stop
        out.append(line + _pieces(runs, pos, len(raw)))
    return out
