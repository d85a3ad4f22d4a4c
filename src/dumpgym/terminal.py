"""Text for the terminal: what users and file systems give us, with every control character escaped.

A file name or an exception message can hold escape sequences (`\\x1b[31m` recolours a terminal,
`\\x1b]0;...` retitles it), bidi overrides that reorder the rest of the line, or the lone surrogates
Python makes of bytes that are not UTF-8 (which cannot even be printed). `printable` writes each such
character as its Python escape, so a line says what it holds and stays one line.
"""
from __future__ import annotations

import re

# C0 and C1 controls (newlines too: one error is one line), DEL, the bidi embeddings, overrides and
# isolates, the line and paragraph separators, and lone surrogates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object) -> str:
    """`str(text)` with every control, bidi-formatting and surrogate character written as its escape."""
    return _UNSAFE.sub(_escape, str(text))
