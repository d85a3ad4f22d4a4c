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
from dataclasses import dataclass

from dumpgym.record.schema import Binder, TextSpan

# A binder as the jaxpr prints it: `c:bf16[64,512]`, `k:key<fry>[]`, sharding marks after: `d:f32[8,32]{V:x}`.
_BINDER = re.compile(r"([a-z_]\w*):([a-z]\w*(?:<\w+>)?\[[^\]]*\](?:\{[^}]*\})?)")
_PRIMITIVE = re.compile(r"[\w-]+")
_BODY = re.compile(r"\{ lambda")
_LAMBDA = "{ lambda"
_ENTRY = re.compile(r"[A-Za-z_]\w*=")
# The characters that change a param group's bracket depth or quote state, and those with the whitespace
# that splits its entries: a group is read at these alone, not character by character.
_BRACKETS = re.compile(r"['()\[\]{}]")
_SPLITS = re.compile(r"['()\[\]{}\s]")


@dataclass(frozen=True)
class Printed:
    """How the jaxpr prints one equation (the `EqnFact` fields of the same names)."""

    binders: tuple[Binder, ...] = ()
    operand_names: tuple[str, ...] = ()
    bodies: tuple[TextSpan, ...] = ()
    printed_params: tuple[TextSpan, ...] = ()
    body_binders: tuple[Binder, ...] = ()
    printed_end: int = 0


def read_equation(lines: list[str], span: tuple[int, int, int], primitive: str, outputs: int,
                  inputs: int) -> Printed:
    """How the equation of `primitive` printed on `span` (first line, last line, start column) of the jaxpr's
    `lines` prints: its binders (empty where the text does not read `name:type ... = primitive` with one binder
    per output), operands (empty where they are not one per input), `{ lambda ... }` bodies and the invars they
    bind, and its params: the bracketed group, then each `name=value` in it (empty where one is not)."""
    first, last, column = span
    line = lines[first - 1]
    joined = "\n".join([line[column:], *lines[first:last]])
    head, sep, rest = joined.partition(" = ")
    named = sep and outputs and _PRIMITIVE.match(rest) and _PRIMITIVE.match(rest).group() == primitive
    found = _wrapped_binders(head, first, column) if named else ()
    if named and found is None and "\n" in head:
        named = False  # the first ` = ` is not this equation's: its head is not binders wrapped over lines
    binders = found if found is not None and len(found) == outputs else ()
    one_line = bool(line[:column].strip())  # inside a jaxpr printed on one line: it ends at its ` in (`
    operands, end = _operands(joined, inputs, one_line)
    found_bodies = bodies("\n".join(lines[first - 1:last]), first)
    return Printed(binders, operands, found_bodies, _params(joined, first, column) if named else (),
                   _body_invars(lines, found_bodies), column + end if one_line and end and first == last else 0)


def _params(joined: str, first: int, column: int) -> tuple[TextSpan, ...]:
    """The param group printed after the primitive (`[...]`, brackets included) and each `name=value` entry
    in it, split at whitespace outside brackets and quotes; () without a group, the group alone where an entry
    does not read `name=value` (JAX prints no empty group)."""
    _, _, rest = joined.partition(" = ")
    at = len(joined) - len(rest) + _PRIMITIVE.match(rest).end()
    if joined[at:at + 1] != "[":
        return ()
    end = close_bracket(joined, at)
    if end is None:
        return ()
    entries, start, depth, quote, plain = [], None, 0, False, at + 1  # `plain`: the first character not yet read
    for mark in _SPLITS.finditer(joined, at + 1, end):  # only these change the state: the rest starts an entry
        i, c = mark.start(), mark.group()
        if start is None and plain < i:
            start = plain
        plain = i + 1
        depth, quote = _step(c, depth, quote)
        if c.isspace() and depth == 0 and not quote:
            if start is not None:
                entries.append((start, i))
            start = None
        elif start is None:
            start = i
    if start is None and plain < end:
        start = plain
    if start is not None:
        entries.append((start, end))

    def place(offset: int) -> tuple[int, int]:
        line, col = _place(joined, offset, first)
        return line, col + column if line == first else col

    readable = all(_ENTRY.match(joined, a) for a, _ in entries)
    return tuple(TextSpan(*place(a), *place(b)) for a, b in [(at, end + 1), *(entries if readable else ())])


def _body_invars(lines: list[str], spans: tuple[TextSpan, ...]) -> tuple[Binder, ...]:
    """The invars each body binds (`{ lambda ; a:f32[8] b:f32[8]. let`, the head wrapped over lines where the
    printer wraps it), in order; a body whose head does not read so adds none."""
    out: list[Binder] = []
    for span in spans:
        at = lines[span.first - 1].find(";", span.column)
        found: list[Binder] = []
        for n in range(span.first, span.last + 1) if at >= 0 else ():
            text = lines[n - 1]
            begin = at + 1 if n == span.first else 0
            part, done, _ = text[begin:].partition(". let")
            if not done and text.endswith("."):  # `let` on a line of its own
                part, done = text[begin:-1], True
            read = _binders(part, n, begin)
            if read is None:
                found = []
                break
            found += read
            if done:
                break
        else:
            found = []
        out += found
    return tuple(out)


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


def _wrapped_binders(head: str, first: int, column: int) -> tuple[Binder, ...] | None:
    """The binders of an equation's head, which the printer wraps over lines when they are many; None where
    a line of it is not `name:type` tokens."""
    out: list[Binder] = []
    for k, part in enumerate(head.split("\n")):
        found = _binders(part, first + k, column if k == 0 else 0)
        if found is None:
            return None
        out += found
    return tuple(out)


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


def _operands(text: str, inputs: int, one_line: bool) -> tuple[tuple[str, ...], int]:
    """The operands printed after an equation's primitive and params, or () when they are not `inputs` of them;
    and where they end in `text`. In a jaxpr printed on one line (`let EQN; EQN in (...) }`) they end at the
    `;` that starts the next equation, or at the jaxpr's ` in (`."""
    _, sep, rest = text.partition(" = ")
    primitive = _PRIMITIVE.match(rest)
    if not sep or primitive is None:
        return (), 0
    at = primitive.end()
    if rest[at:at + 1] == "[":
        end = close_bracket(rest, at)
        if end is None:
            return (), 0
        at = end + 1
    stop = rest.find(" in (", at) if one_line else len(rest)
    if stop < 0:
        return (), 0
    if one_line and 0 <= rest.find(";", at, stop):
        stop = rest.find(";", at, stop)
    names = tuple(rest[at:stop].split())
    return (names if len(names) == inputs else ()), len(text) - len(rest) + stop


def _step(c: str, depth: int, quote: bool) -> tuple[int, bool]:
    """The bracket depth and quote state of a printed param group after its character `c`, quotes honoured."""
    if c == "'":
        return depth, not quote
    if not quote and c in "([{":
        return depth + 1, quote
    if not quote and c in ")]}":
        return depth - 1, quote
    return depth, quote


def close_bracket(text: str, start: int) -> int | None:
    """The index of the bracket that closes the one at `start`, or None (only brackets and quotes are read:
    no other character changes the depth)."""
    depth, quote = 0, False
    for mark in _BRACKETS.finditer(text, start):
        c = mark.group()
        depth, quote = _step(c, depth, quote)
        if not quote and c in ")]}" and depth == 0:
            return mark.start()
    return None
