"""The page of a dump's module too big to make a program of: one window of its optimised HLO's lines, what
the streaming pass counted, its computations' index, and a note saying exactly what is shown and what is
not. Every value is escaped; names are isolated (`<bdi>`); bidi and control characters in the listing are
shown as their code points, never obeyed."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from jinja2 import Environment, PackageLoader
from markupsafe import Markup, escape

LISTED = 1_000  # computations (and ENTRY parameters) listed on the page; the rest are counted
# C0 and C1 controls but the tab, the bidi marks, embeddings, overrides and isolates, the line separators.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")

BIG_CSS = """/* The streamed page of a module too big to make a program of (on top of gym.css). */
.big { max-width: 1200px; margin: 0 auto; padding: 12px 16px 48px; }
.big h1 { font-size: 18px; margin: 8px 0; overflow-wrap: anywhere; }
.big h1 .what { color: var(--muted); font-weight: normal; }
.big .note { background: var(--panel); border: 1px solid var(--rule); border-radius: 6px; padding: 8px 12px; margin: 8px 0; }
.big .note code { overflow-wrap: anywhere; }
.big nav.windows { display: flex; flex-wrap: wrap; gap: 8px 16px; align-items: center; margin: 8px 0; }
.big form { display: flex; gap: 6px; align-items: center; }
.big input { font: inherit; padding: 4px 6px; width: 12ch; max-width: 40vw; }
.big input[type=text] { width: 22ch; }
.big button { font: inherit; padding: 4px 10px; }
.big details { margin: 8px 0; }
.big summary { cursor: pointer; }
.big table { border-collapse: collapse; font-family: var(--mono); font-size: 12px; display: block; overflow-x: auto; max-width: 100%; }
.big td, .big th { padding: 2px 10px 2px 0; text-align: left; vertical-align: top; }
.big td.right, .big th.right { text-align: right; }
.big bdi { unicode-bidi: isolate; overflow-wrap: anywhere; }
.big pre.listing { background: var(--panel); border: 1px solid var(--rule); border-radius: 6px; padding: 8px 0;
                   overflow-x: auto; font-size: 12px; line-height: 1.45; margin: 8px 0; }
.big pre.listing .l { display: block; padding: 0 12px 0 0; white-space: pre; }
.big pre.listing .n { display: inline-block; min-width: 8ch; padding: 0 10px 0 8px; margin-right: 8px;
                      text-align: right; color: var(--muted); border-right: 1px solid var(--rule); user-select: none; }
.big .cut { color: var(--bad); font-style: italic; }
.big pre.listing .n[title] { color: var(--bad); font-weight: bold; }  /* a cut line, seen at its number */
.big .ctl { color: var(--bad); border: 1px solid currentColor; border-radius: 3px; padding: 0 2px; font-size: 10px; }
"""


@dataclass(frozen=True)
class Window:
    """Lines `first`.. of a listing as read: each line's bytes (cut) and how many bytes of it are left out
    (None: not known yet, the line read from the file's head no further); `total` lines in the file (None:
    not known yet), `size` its bytes."""

    first: int
    lines: tuple[tuple[bytes, int | None], ...]
    total: int | None
    size: int

    @property
    def last(self) -> int:
        """The 1-based number of the window's last line."""
        return self.first + len(self.lines) - 1


@cache
def _environment() -> Environment:
    return Environment(loader=PackageLoader("dumpgym", "templates"), autoescape=True, trim_blocks=True,
                       lstrip_blocks=True)


def megabytes(size: int) -> str:
    """`size` bytes in megabytes, as the notes say it."""
    if size < 100_000:
        return f"{size:,} bytes"
    return f"{size / 1e6:,.1f} MB" if size < 10e6 else f"{size / 1e6:,.0f} MB"


def _shown_text(raw: bytes, left_out: int | None) -> tuple[str, int | None]:
    """A line's bytes as text, a UTF-8 character the cut split moved to what is left out (None: not known)."""
    if left_out is None or left_out:
        for back in range(1, min(4, len(raw)) + 1):
            byte = raw[-back]
            if byte & 0xC0 != 0x80:  # the lead byte of the last character
                need = 1 if byte < 0x80 else 2 if byte >> 5 == 6 else 3 if byte >> 4 == 14 else 4 if byte >> 3 == 30 else 1
                if need > back:
                    raw, left_out = raw[:-back], None if left_out is None else left_out + back
                break
    return raw.decode("utf-8", "replace"), left_out


def _visible(text: str) -> Markup:
    """`text` escaped, each control and bidi-formatting character shown as its code point."""
    out, at = [], 0
    for m in _CONTROL.finditer(text):
        out.append(str(escape(text[at:m.start()])))
        point = f"U+{ord(m.group()):04X}"
        out.append(f'<span class="ctl" title="{point}, shown, not obeyed">{point}</span>')
        at = m.end()
    out.append(str(escape(text[at:])))
    return Markup("".join(out))


def listing_html(window: Window) -> tuple[Markup, int]:
    """The window's lines as the listing's HTML (each numbered, a cut one saying what it leaves out) and how
    many of its lines are cut."""
    rows, cut = [], 0
    for number, (raw, left_out) in enumerate(window.lines, window.first):
        text, left_out = _shown_text(raw, left_out)
        if left_out is None:  # read from the head no further than this: counted once the line index is made
            tail = ' <span class="cut">… more of this line not shown (how many bytes: once the line index is made)</span>'
        else:
            tail = f' <span class="cut">… {left_out:,} more bytes of this line not shown</span>' if left_out else ""
        more = "more bytes" if left_out is None else f"{left_out:,} more bytes"
        cut += left_out != 0
        number_html = (f'<span class="n" title="cut: {more} at its end">{number}</span>' if left_out != 0
                       else f'<span class="n">{number}</span>')
        rows.append(f'<span class="l" id="L{number}">{number_html}{_visible(text)}{tail}</span>')
    return Markup("".join(rows)), cut


def render_page(index, window: Window | None, asked: str, per_window: int, cut_at: int) -> bytes:
    """A streamed module's page: `index` is the server's state of its line index (module, state, read,
    lines, facts, error, size), `window` the lines to show (None: none can be read now), `asked` what to
    say of what was asked (a line or computation that is not there)."""
    facts = index.facts if index.state == "done" else None
    listing, cut = listing_html(window) if window is not None else (Markup(""), 0)
    near = None
    if index.lines and window is not None:  # windows by the line index, as far as it is made
        prev_first = max(1, window.first - per_window) if window.first > 1 else None
        next_first = window.last + 1 if facts is None or window.last < facts.lines else None
        near = (prev_first, next_first)
    computations = facts.computations if facts is not None else ()
    entry = next((c for c in computations if c.entry), None)
    listed = [c for c in computations[:LISTED]] + ([entry] if entry is not None and entry not in computations[:LISTED] else [])
    return _environment().get_template("big.html").render(
        module=index.module, state=index.state, error=index.error, read=index.read, lines_read=index.lines,
        size=index.size, changed=index.state == "done" and index.changed(), facts=facts, window=window,
        listing=listing, cut=cut, near=near, per_window=per_window, cut_at=cut_at,
        asked=asked, computations=computations, listed=listed, entry=entry, listed_max=LISTED,
        megabytes=megabytes,
    ).encode("utf-8")


def render_index(links) -> bytes:
    """The list of the streamed modules: (page path, name, why) each."""
    return _environment().get_template("big_index.html").render(
        links=[(path.removeprefix("big/"), name, why) for path, name, why in links]).encode("utf-8")
