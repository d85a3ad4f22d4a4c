"""Stage two, printed facts: how the jaxpr prints an equation (its binders and its operands), read once
from the text when the record is made (`traced/facts.py`), so that no later stage reads the jaxpr again.

JAX's printer is given: an equation that starts a line of its own prints `name:type` per output, then
` = `, its primitive, its params in brackets (which may hold whole sub-jaxprs and wrap over lines), and its
operands separated by spaces. Where the text does not read that way (an equation inside a jaxpr printed
on one line, binders wrapped over lines), the fact is left empty rather than guessed.
"""
from __future__ import annotations

import re

from dumpgym.record.schema import Binder

# A binder as the jaxpr prints it: `c:bf16[64,512]`, `k:key<fry>[]`, sharding marks after: `d:f32[8,32]{V:x}`.
_BINDER = re.compile(r"([a-z_]\w*):([a-z]\w*(?:<\w+>)?\[[^\]]*\](?:\{[^}]*\})?)")
_PRIMITIVE = re.compile(r"[\w-]+")


def read_equation(lines: list[str], span: tuple[int, int, int], outputs: int,
                  inputs: int) -> tuple[tuple[Binder, ...], tuple[str, ...]]:
    """The binders and operand names of the equation printed on `span` (first line, last line, start column)
    of the jaxpr's `lines`: each empty where the text does not hold one per output (input)."""
    first, last, column = span
    line = lines[first - 1]
    if line[:column].strip():  # inside a jaxpr printed on one line: the facts are not read
        return (), ()
    head, sep, _ = line[column:].partition(" = ")
    binders: tuple[Binder, ...] = ()
    if sep and outputs:
        at, found = column, []
        for token in head.split(" "):
            if _BINDER.fullmatch(token) is None:
                found = []
                break
            name, _, type_ = token.partition(":")
            found.append(Binder(name, type_, at))
            at += len(token) + 1
        binders = tuple(found) if len(found) == outputs else ()
    return binders, _operands("\n".join([line[column:], *lines[first:last]]), inputs)


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
