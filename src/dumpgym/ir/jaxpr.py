"""Stage two, printed facts: how the jaxpr prints an equation (its binders and its operands), read once
from the text when the record is made (`traced/facts.py`), so that no later stage reads the jaxpr again;
and the top-level jaxpr's arguments as it binds them.

JAX's printer is given: an equation prints `name:type` per output, then ` = `, its primitive, its params in
brackets (which may hold whole sub-jaxprs and wrap over lines), and its operands separated by spaces; a
sub-jaxpr is a `{ lambda ... }` block. Where the text does not read that way (operands of an equation inside
a jaxpr printed on one line, binders wrapped over lines, a Pallas Ref write `x <- ...`), the fact is left
empty rather than guessed.
"""
from __future__ import annotations

import re

from dumpgym.record.schema import Binder, TextSpan

# A binder as the jaxpr prints it: `c:bf16[64,512]`, `k:key<fry>[]`, sharding marks after: `d:f32[8,32]{V:x}`.
_BINDER = re.compile(r"([a-z_]\w*):([a-z]\w*(?:<\w+>)?\[[^\]]*\](?:\{[^}]*\})?)")
_PRIMITIVE = re.compile(r"[\w-]+")
_BODY = re.compile(r"\{ lambda")
_LAMBDA = "{ lambda"


def read_equation(lines: list[str], span: tuple[int, int, int], primitive: str, outputs: int,
                  inputs: int) -> tuple[tuple[Binder, ...], tuple[str, ...], tuple[TextSpan, ...]]:
    """The binders, operand names and `{ lambda ... }` bodies of the equation of `primitive` printed on `span`
    (first line, last line, start column) of the jaxpr's `lines`: binders empty where the text does not read
    `name:type ... = primitive` with one binder per output, operands where they are not one per input."""
    first, last, column = span
    line = lines[first - 1]
    head, sep, rest = line[column:].partition(" = ")
    named = sep and outputs and _PRIMITIVE.match(rest) and _PRIMITIVE.match(rest).group() == primitive
    found = _binders(head, first, column) if named else ()
    binders = found if found is not None and len(found) == outputs else ()
    # Inside a jaxpr printed on one line the operands run into its `in (...)`: they are not read.
    operands = () if line[:column].strip() else _operands("\n".join([line[column:], *lines[first:last]]), inputs)
    return binders, operands, bodies("\n".join(lines[first - 1:last]), first)


def read_arguments(lines: list[str]) -> tuple[Binder, ...]:
    """The top-level jaxpr's invars as it binds them: `{ lambda ; a:f32[8] b:f32[8]. let`, wrapped over lines
    as the printer wraps them (the top-level jaxpr is the one line that starts `{ lambda`; the hoisted
    `let name = { lambda ...` blocks above it start `let`)."""
    start = next((n for n, text in enumerate(lines, 1) if text.startswith(_LAMBDA)), None)
    if start is None:
        return ()
    out: list[Binder] = []
    for n in range(start, len(lines) + 1):
        text = lines[n - 1]
        at = len(_LAMBDA) if n == start else 0
        if n == start:  # constvars come before the `;`
            at = text.index(";", at) + 1
        part, done, _ = text.partition(". let")
        if not done and text.endswith("."):  # the printer put `let` on a line of its own
            part, done = text[:-1], True
        found = _binders(part[at:], n, at)
        if found is None:
            return ()
        out += found
        if done:
            return tuple(out)
    return ()


def _binders(text: str, line: int, column: int) -> tuple[Binder, ...] | None:
    """`name:type` tokens separated by spaces, starting at `column` of `line`; None where one is not."""
    out = []
    at = column
    for token in text.split(" "):
        if token:
            if _BINDER.fullmatch(token) is None:
                return None
            name, _, type_ = token.partition(":")
            out.append(Binder(name, type_, line, at))
        at += len(token) + 1
    return tuple(out)


def bodies(text: str, first: int) -> tuple[TextSpan, ...]:
    """Each outermost `{ lambda ... }` in `text` (lines from `first` on), to its matching brace."""
    out, at = [], 0
    for start in (m.start() for m in _BODY.finditer(text)):
        if start < at:
            continue
        depth = 0
        for end in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                break
        at = end + 1
        out.append(TextSpan(*_place(text, start, first), *_place(text, at, first)))
    return tuple(out)


def _place(text: str, offset: int, first: int) -> tuple[int, int]:
    """(line, column) of `offset` in `text`, whose first line is line `first`."""
    before = text.rfind("\n", 0, offset)
    return first + text.count("\n", 0, offset), offset - before - 1


def _operands(text: str, inputs: int) -> tuple[str, ...]:
    """The operands printed after an equation's primitive and params, or () when they are not `inputs` of them."""
    _, sep, rest = text.partition(" = ")
    primitive = _PRIMITIVE.match(rest)
    if not sep or primitive is None:
        return ()
    at = primitive.end()
    if rest[at:at + 1] == "[":
        end = close_bracket(rest, at)
        if end is None:
            return ()
        at = end + 1
    names = tuple(rest[at:].split())
    return names if len(names) == inputs else ()


def nesting(text: str):
    """Each character of a printed param group with its bracket depth after it, quotes honoured."""
    depth, quote = 0, False
    for i, c in enumerate(text):
        if c == "'":
            quote = not quote
        elif not quote and c in "([{":
            depth += 1
        elif not quote and c in ")]}":
            depth -= 1
        yield i, c, depth, quote


def close_bracket(text: str, start: int) -> int | None:
    """The index of the bracket that closes the one at `start`, or None."""
    for i, c, depth, quote in nesting(text[start:]):
        if not quote and c in ")]}" and depth == 0:
            return start + i
    return None
