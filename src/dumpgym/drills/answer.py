"""The answer forms of a drill item (`dumpgym.drills/2`), each with the check that grades a response.

A form is a tagged union in the pool's JSON (`{"form": "typed", ...}`); `FORMS` maps each tag to its
class. Where the answer is a thing, the learner builds it: a `typed` value (a shape and dtype, a count,
a tile), a set of `axes` tapped on an operand's shape, a `line` or a set of `lines` tapped in a listing.
Only a small closed category is asked as a `choice`. Every form's `check(response)` returns a `Verdict`,
and the page grades by the same rules (static/answer.js; a browser test runs both on one table).

A typed response is read by its form's `spelling` (`SPELLINGS`): forgiving of spaces, long dtype names
and brackets, so `bfloat16 (64, 512)` is `bf16[64,512]`. A response that cannot be read at all is not
graded: its verdict says how to write one. A response that matches a named misreading gets that
misreading's reason.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Mapping

FORMS: dict[str, type] = {}


def form(name: str) -> Callable[[type], type]:
    """Register an answer form class under `name`, the tag its JSON carries as `form`."""
    def register(cls: type) -> type:
        if name in FORMS:
            raise ValueError(f"answer form {name!r} is registered twice")
        FORMS[name] = cls
        cls.form = name
        return cls
    return register


@dataclass(frozen=True)
class Verdict:
    """How a response fared: right or not; `readable` False when it could not be read as an answer at all
    (then nothing is graded and `reason` says how to write one); `missing` and `extra` for a set; and the
    named misreading it matches, with its reason."""

    right: bool
    readable: bool = True
    missing: tuple = ()
    extra: tuple = ()
    reason: str | None = None
    rule: str | None = None

    def to_json(self) -> dict:
        """The verdict as a dict (what the browser test compares with the page's)."""
        return {"right": self.right, "readable": self.readable, "missing": list(self.missing),
                "extra": list(self.extra), "reason": self.reason, "rule": self.rule}


@dataclass(frozen=True)
class Misreading:
    """A wrong answer a named misreading gives, and why it is wrong."""

    reason: str
    rule: str

    def to_json(self) -> dict:
        return {"reason": self.reason, "rule": self.rule}


def _misread_json(misread: Mapping[str, Misreading]) -> dict:
    return {k: m.to_json() for k, m in misread.items()}


# --- spellings: how a typed answer is read ----------------------------------------------------------

_LONG = (("bfloat", "bf"), ("float", "f"), ("uint", "u"), ("complex", "c"), ("int", "i"))
_DTYPE = re.compile(r"bool|float0|(?:bf|f|u|i|c)[0-9]+(?:_[a-z0-9]+)*|key<[a-z0-9_]+>")


def read_dtype(text: str) -> str | None:
    """A dtype as the jaxpr prints it (`bf16`, `i32`, `bool`, `key<fry>`) from a short or numpy name, or None."""
    name = text.strip().lower()
    for word, short in _LONG:
        if name.startswith(word):
            name = short + name[len(word):]
            break
    return name if _DTYPE.fullmatch(name) else None


# The listings' own spellings of an array type: StableHLO's `tensor<16x32xf32>` (`tensor<f32>` a scalar), and
# a compiled listing's `f32[24,12]{1,0:T(8,128)}`, whose layout in braces says nothing of the shape.
_TENSOR = re.compile(r"tensor<((?:[0-9]+x)*)([a-z][a-z0-9_]*)>")
_DIGITS = frozenset("0123456789")
_KEY_IMPL = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


def _word(text: str) -> bool:
    """Whether `text` is a name: an ASCII letter, then ASCII letters, digits and underscores."""
    return bool(text) and text[0].isascii() and text[0].isalpha() and all(
        c.isascii() and (c.isalnum() or c == "_") for c in text)


def _listing_type(text: str) -> tuple[str, str] | None:
    """(dtype as written, shape as `[16,32]`) of a type the way a listing prints it, or None."""
    body = text.strip()
    brace = body.rfind("{") if body.endswith("}") else -1
    if brace >= 0 and "}" not in body[brace + 1:-1]:  # a layout in braces at the end says nothing of the shape
        body = body[:brace].strip()
    tensor = _TENSOR.fullmatch(body)
    if tensor:
        return tensor[2], "[" + ",".join(tensor[1].rstrip("x").split("x")) + "]" if tensor[1] else "[]"
    name, bracket, dims = body.partition("[")
    name = name.rstrip()
    if bracket and _word(name) and dims.endswith("]") and all(c in _DIGITS or c == "," or c.isspace()
                                                               for c in dims[:-1]):
        return name, "[" + dims
    return None


def read_shape(text: str) -> str | None:
    """A shape as `[64,512]` from `[64, 512]`, `(64, 512)`, `64x512`, `64 512` (`[]`, `()`: a scalar), or as a
    listing prints it with its dtype (`f32[64,512]`, `f32[64,512]{1,0}`, `tensor<64x512xf32>`), or None."""
    listed = _listing_type(text)
    if listed is not None and read_dtype(listed[0]) is not None:
        return read_shape(listed[1])
    body = text.strip()
    if body[:1] + body[-1:] in ("[]", "()"):
        body = body[1:-1].strip()
    elif not body:
        return None
    body = body.rstrip(",").strip()
    if not body:
        return "[]"
    dims = _numbers(body)
    return None if dims is None else "[" + ",".join(str(int(d)) for d in dims) + "]"


def _numbers(body: str) -> list[str] | None:
    """The whole numbers of `64, 512`, `64x512`, `64 × 512`, `64 512`: between each two, spaces and at most one
    separator (`,` `x` `×` `*`); None for anything else."""
    numbers, gaps, at = [], [], 0
    while at < len(body):
        end = at
        while end < len(body) and body[end] in _DIGITS:
            end += 1
        if end == at:
            return None
        numbers.append(body[at:end])
        at = end
        while end < len(body) and body[end] not in _DIGITS:
            end += 1
        gaps.append(body[at:end])
        at = end
    for k, gap in enumerate(gaps):
        last = k == len(gaps) - 1
        if last != (gap == "") or sum(c in ",x×*" for c in gap) > 1 or not all(c in ",x×*" or c.isspace() for c in gap):
            return None
    return numbers


def read_aval(text: str) -> str | None:
    """An array type as the jaxpr prints it (`bf16[64,512]`) from `bfloat16[64, 512]`, `bf16 (64, 512)`,
    `f32[]` or a bare `f32` (a scalar), or as the other listings print it (`tensor<64x512xbf16>`,
    `bf16[64,512]{1,0}`), or None."""
    listed = _listing_type(text)
    body = listed[0] + listed[1] if listed is not None else text.strip()
    at = 0
    while at < len(body) and body[at].isascii() and (body[at].isalnum() or body[at] == "_"):
        at += 1
    close = body.find(">", at) if body[at:at + 1] == "<" else -1
    if close > at + 1 and all(c in _KEY_IMPL for c in body[at + 1:close]):  # a typed key's `<fry>`
        at = close + 1
    if not _word(body[:at].partition("<")[0]):
        return None
    dtype, rest = read_dtype(body[:at]), body[at:]
    shape = read_shape(rest) if rest.strip() else "[]"
    return None if dtype is None or shape is None else dtype + shape


def read_int(text: str) -> str | None:
    """A whole number from `1024`, `1,024`, `1_024` or `1 024`, or None."""
    body = text.strip()
    sign = body[:1] if body[:1] in ("+", "-") else ""
    groups = body[len(sign):].replace("_", ",").replace(" ", ",").split(",")  # one separator between groups
    if not all(g and set(g) <= _DIGITS for g in groups):
        return None
    if len(groups) > 1 and (len(groups[0]) > 3 or any(len(g) != 3 for g in groups[1:])):
        return None
    return str(int(sign + "".join(groups)))


def read_tile(text: str) -> str | None:
    """A layout's tiling as `(8,128)` or `(8,128)(2,1)` from `T(8,128)(2,1)`, `(8, 128)`, `8x128`, or None."""
    body = text.strip()
    if body[:1] in ("T", "t"):
        body = body[1:].strip()
    if "(" not in body:
        shape = read_shape(body)
        return None if shape in (None, "[]") else "(" + shape[1:-1] + ")"
    parts, rest = [], body
    while rest.strip():  # `(8,128)(2,1)`: groups in parentheses, nothing between them but spaces
        rest = rest.lstrip()
        close = rest.find(")")
        if rest[:1] != "(" or close < 0 or "(" in rest[1:close]:
            return None
        parts.append(rest[1:close])
        rest = rest[close + 1:]
    if not parts:
        return None
    out = ""
    for part in parts:
        shape = read_shape(part) if part.strip() else None
        if shape in (None, "[]"):
            return None
        out += "(" + shape[1:-1] + ")"
    return out


# name -> (reader, an example the page shows as the placeholder and in "write it like ...")
SPELLINGS: dict[str, tuple[Callable[[str], str | None], str]] = {
    "aval": (read_aval, "bf16[64,512]"),
    "shape": (read_shape, "[64,512]"),
    "dtype": (read_dtype, "bf16"),
    "int": (read_int, "1024"),
    "tile": (read_tile, "(8,128)"),
}


def spell(spelling: str, value: str) -> str:
    """`value` as the spelling writes it, checking that it is one: a form's answer is always canonical."""
    read, _ = SPELLINGS[spelling]
    canonical = read(str(value))
    if canonical is None:
        raise ValueError(f"{value!r} is not a {spelling} answer")
    return canonical


# --- the forms --------------------------------------------------------------------------------------

@form("choice")
@dataclass(frozen=True)
class Choice:
    """Pick one option: `options[index]` is right; `reasons` and `rules` say what each wrong one misreads."""

    options: tuple[str, ...]
    index: int
    reasons: tuple[str, ...]
    rules: tuple[str, ...]

    def to_json(self) -> dict:
        """The form as the pool writes it."""
        return {"form": "choice", "options": list(self.options), "index": self.index,
                "reasons": list(self.reasons), "rules": list(self.rules)}

    def check(self, response: int) -> Verdict:
        """A picked option, by index."""
        if not isinstance(response, int) or not 0 <= response < len(self.options):
            return Verdict(False, readable=False, reason=f"pick one of the {len(self.options)} options")
        if response == self.index:
            return Verdict(True)
        return Verdict(False, reason=self.reasons[response] or None, rule=self.rules[response] or None)


@form("line")
@dataclass(frozen=True)
class LinePick:
    """Tap a line of the listing the context's first block shows (rows from 1): `line` is the answer,
    `accepted` every right one, `explain` why a wrong row is wrong."""

    line: int
    accepted: tuple[int, ...]
    explain: Mapping[str, str] = field(default_factory=dict)  # a wrong line (as a string) -> why it is wrong

    def to_json(self) -> dict:
        """The form as the pool writes it."""
        return {"form": "line", "line": self.line, "accepted": list(self.accepted), "explain": dict(self.explain)}

    def check(self, response: int) -> Verdict:
        """A tapped row of the first block, from 1."""
        if not isinstance(response, int) or response < 1:
            return Verdict(False, readable=False, reason="tap a line")
        if response in self.accepted:
            return Verdict(True)
        return Verdict(False, reason=self.explain.get(str(response)))


@form("lines")
@dataclass(frozen=True)
class LineSet:
    """Tap every line of a set in the listing the context's first block shows (rows from 1), then submit:
    right when the set is exactly `lines`. `explain` says, for a row, why it is in the set (told when it
    is left out) or why not (told when it is tapped)."""

    lines: tuple[int, ...]
    explain: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        if not self.lines or len(set(self.lines)) != len(self.lines):
            raise ValueError(f"a line set needs distinct lines, not {self.lines!r}")
        object.__setattr__(self, "lines", tuple(sorted(self.lines)))

    def to_json(self) -> dict:
        """The form as the pool writes it."""
        return {"form": "lines", "lines": list(self.lines), "explain": dict(self.explain)}

    def check(self, response) -> Verdict:
        """The tapped rows of the first block, from 1, in any order."""
        picked = set(response) if isinstance(response, (list, tuple, set)) else None
        if not picked or not all(isinstance(n, int) and n >= 1 for n in picked):
            return Verdict(False, readable=False, reason="tap one line or more, then submit")
        missing = tuple(n for n in self.lines if n not in picked)
        extra = tuple(sorted(picked - set(self.lines)))
        if not missing and not extra:
            return Verdict(True)
        said = [self.explain[str(n)] for n in (*extra, *missing) if str(n) in self.explain]
        return Verdict(False, missing=missing, extra=extra, reason=said[0] if said else None)


@form("typed")
@dataclass(frozen=True)
class Typed:
    """Type the answer: read by `spelling` (`SPELLINGS`), right when it reads as `value` or one of
    `accepted`; a reading that one of the named misreadings gives gets its reason."""

    spelling: str
    value: str
    accepted: tuple[str, ...] = ()
    misread: Mapping[str, Misreading] = field(default_factory=dict)

    def __post_init__(self):
        if self.spelling not in SPELLINGS:
            raise ValueError(f"unknown typed spelling {self.spelling!r} (known: {', '.join(SPELLINGS)})")
        object.__setattr__(self, "value", spell(self.spelling, self.value))
        object.__setattr__(self, "accepted", tuple(spell(self.spelling, a) for a in self.accepted))
        misread = {spell(self.spelling, k): m for k, m in self.misread.items()}
        right = {self.value, *self.accepted}
        object.__setattr__(self, "misread", {k: m for k, m in misread.items() if k not in right})

    def to_json(self) -> dict:
        """The form as the pool writes it."""
        out = {"form": "typed", "spelling": self.spelling, "value": self.value}
        if self.accepted:
            out["accepted"] = list(self.accepted)
        if self.misread:
            out["misread"] = _misread_json(self.misread)
        return out

    def check(self, response: str) -> Verdict:
        """The typed text."""
        read, example = SPELLINGS[self.spelling]
        got = read(response) if isinstance(response, str) else None
        if got is None:
            return Verdict(False, readable=False, reason=f"write it like {example}")
        if got == self.value or got in self.accepted:
            return Verdict(True)
        m = self.misread.get(got)
        return Verdict(False, reason=m.reason if m else None, rule=m.rule if m else None)


def axes_key(axes) -> str:
    """A set of axes as the `misread` map keys it: sorted, comma-separated (`"0,2"`; `""` for none)."""
    return ",".join(str(a) for a in sorted(set(axes)))


@form("axes")
@dataclass(frozen=True)
class AxisSet:
    """Tap the axes of a shape shown as one chip per dimension (`dims`, under `label`), then submit:
    right when the set is exactly `axes` (maybe none); a set a named misreading gives gets its reason."""

    label: str
    dims: tuple[int, ...]
    axes: tuple[int, ...]
    misread: Mapping[str, Misreading] = field(default_factory=dict)

    def __post_init__(self):
        if any(not 0 <= a < len(self.dims) for a in self.axes) or len(set(self.axes)) != len(self.axes):
            raise ValueError(f"axes {self.axes!r} are not distinct axes of a rank-{len(self.dims)} shape")
        object.__setattr__(self, "axes", tuple(sorted(self.axes)))
        right = axes_key(self.axes)
        object.__setattr__(self, "misread", {k: m for k, m in self.misread.items() if k != right})

    def to_json(self) -> dict:
        """The form as the pool writes it."""
        out = {"form": "axes", "label": self.label, "dims": list(self.dims), "axes": list(self.axes)}
        if self.misread:
            out["misread"] = _misread_json(self.misread)
        return out

    def check(self, response) -> Verdict:
        """The tapped axes, from 0, in any order (an empty list: none of them)."""
        if not isinstance(response, (list, tuple, set)) or not all(
                isinstance(a, int) and 0 <= a < len(self.dims) for a in response):
            return Verdict(False, readable=False, reason=f"tap axes of the rank-{len(self.dims)} shape, then submit")
        picked = set(response)
        missing = tuple(a for a in self.axes if a not in picked)
        extra = tuple(sorted(picked - set(self.axes)))
        if not missing and not extra:
            return Verdict(True)
        m = self.misread.get(axes_key(picked))
        return Verdict(False, missing=missing, extra=extra, reason=m.reason if m else None,
                       rule=m.rule if m else None)


Answer = Choice | LinePick | LineSet | Typed | AxisSet


def check(answer: Mapping, response) -> Verdict:
    """Grade a response against an item's answer as the pool writes it (`item["answer"]`)."""
    return from_json(answer).check(response)


def from_json(answer: Mapping) -> Answer:
    """The answer form a pool's `answer` dict spells."""
    data = dict(answer)
    kind = FORMS.get(data.pop("form", None))
    if kind is None:
        raise ValueError(f"unknown answer form {answer.get('form')!r} (known: {', '.join(FORMS)})")
    if kind is Choice:
        return Choice(tuple(data["options"]), data["index"], tuple(data["reasons"]), tuple(data["rules"]))
    if kind is LinePick:
        return LinePick(data["line"], tuple(data["accepted"]), data.get("explain", {}))
    if kind is LineSet:
        return LineSet(tuple(data["lines"]), data.get("explain", {}))
    misread = {k: Misreading(**m) for k, m in data.get("misread", {}).items()}
    if kind is Typed:
        return Typed(data["spelling"], data["value"], tuple(data.get("accepted", ())), misread)
    return AxisSet(data["label"], tuple(data["dims"]), tuple(data["axes"]), misread)
