"""The corpus record ("dumpgym.corpus/1") as frozen dataclasses: written by one function, read by one.

`ProgramRecord.from_json` is the only way a record comes in from disk or from the committed
corpus: it checks every field's type against the annotations below and every cross-reference
(equation ids, line numbers) against the texts, and raises `RecordError` naming the first field
that is wrong. `to_json` is the only way one goes out; it reproduces the export byte for byte.
"""
from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar

SCHEMA = "dumpgym.corpus/1"
SLUG = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")


class RecordError(ValueError):
    """A record that does not have the shape of the contract; the message names the field."""


def valid_slug(slug: object) -> bool:
    """Whether `slug` may name a program: lowercase letters, digits and dashes, at most 64."""
    return isinstance(slug, str) and SLUG.fullmatch(slug) is not None


class _Record:
    """Reading and writing for the dataclasses below: fields as annotated, in declaration order."""

    # Fields left out of the JSON when they hold their default (the export omits them then).
    OMIT_DEFAULT: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def from_json(cls, value: Any, path: str = ""):
        """A typed record from parsed JSON; raises `RecordError` naming the first wrong field."""
        record = _build(cls, value, path)
        record.check(path)
        return record

    def check(self, path: str) -> None:
        """Cross-field rules beyond the types (a subclass adds its own)."""

    def to_json(self) -> dict:
        """The record as the export writes it."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in self.OMIT_DEFAULT and value == f.default:
                continue
            out[f.name] = _json(value)
        return out


def _json(value):
    if isinstance(value, _Record):
        return value.to_json()
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    return value


_KIND = {dict: "an object", list: "a list", str: "a string", int: "a whole number", bool: "true or false",
         float: "a number", type(None): "null"}


def _at(path: str) -> str:
    return path or "the record"


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _what(value) -> str:
    return _KIND.get(type(value), type(value).__name__)


@cache
def _hints(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _build(tp, value, path: str):
    """`value` (parsed JSON) as an instance of type `tp`, or RecordError at `path`."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _build(option, value, path)
            except RecordError as e:
                errors.append(e)
        raise errors[0] if len(errors) == 1 else RecordError(f"{_at(path)}: {_what(value)} is none of the allowed forms")
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, list):
            raise RecordError(f"{_at(path)}: expected a list, got {_what(value)}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_build(args[0], v, f"{path}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise RecordError(f"{_at(path)}: expected {len(args)} items, got {len(value)}")
        return tuple(_build(a, v, f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if origin is dict:
        key_type, value_type = typing.get_args(tp)
        if not isinstance(value, dict):
            raise RecordError(f"{_at(path)}: expected an object, got {_what(value)}")
        return {k: _build(value_type, v, _join(path, k)) for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, _Record):
        return _build_record(tp, value, path)
    if tp is Any:
        return value
    if tp is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise RecordError(f"{_at(path)}: expected a whole number, got {_what(value)}")
        return value
    if tp in (str, bool, dict, list):
        if not isinstance(value, tp):
            raise RecordError(f"{_at(path)}: expected {_KIND[tp]}, got {_what(value)}")
        return value
    raise TypeError(f"record.py has no reader for {tp!r}")  # a programming error, not bad data


def _build_record(cls, value, path: str):
    if not isinstance(value, dict):
        raise RecordError(f"{_at(path)}: expected an object, got {_what(value)}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = [k for k in value if k not in fields]
    if unknown:
        raise RecordError(f"{_at(path)}: unknown field {unknown[0]!r}")
    hints = _hints(cls)
    kwargs = {}
    for name, f in fields.items():
        if name not in value:
            if f.default is dataclasses.MISSING:
                raise RecordError(f"{_at(path)}: missing field {name!r}")
            continue
        kwargs[name] = _build(hints[name], value[name], _join(path, name))
    return cls(**kwargs)


# ---------------------------------------------------------------------------------------------
# The record, leaves first.


@dataclass(frozen=True)
class Aval(_Record):
    """An array's abstract value as the export writes it: global shape and numpy dtype name."""

    OMIT_DEFAULT = frozenset({"weak_type"})
    shape: tuple[int, ...]
    dtype: str
    weak_type: bool = False


@dataclass(frozen=True)
class Literal(_Record):
    """A literal input of an equation: its value as printed and its dtype."""

    literal: str
    dtype: str


@dataclass(frozen=True)
class EqnFact(_Record):
    """One printed equation: what it is, what goes in and out, and the jaxpr lines that print it."""

    id: int
    parent: int | None
    primitive: str
    params: dict
    inputs: tuple[Aval | Literal, ...]
    outputs: tuple[Aval, ...]
    jaxpr_lines: tuple[int, int]


@dataclass(frozen=True)
class Group(_Record):
    """The lines of one equation at the jaxpr and StableHLO layers."""

    eqn: int
    jaxpr_lines: tuple[int, ...]
    stablehlo_lines: tuple[int, ...]


@dataclass(frozen=True)
class StablehloOp(_Record):
    """One StableHLO op line: the op's name, its line, and the function it sits in."""

    name: str
    line: int
    function: str


@dataclass(frozen=True)
class LoweredToNothing(_Record):
    """An equation that emitted no StableHLO, and why."""

    eqn: int
    why: str


@dataclass(frozen=True)
class XrayStats(_Record):
    """How much of each layer the x-ray links."""

    equations: int
    mapped_equations: int
    jaxpr_lines: int
    mapped_jaxpr_lines: int
    stablehlo_lines: int
    stablehlo_op_lines: int
    mapped_stablehlo_op_lines: int


@dataclass(frozen=True)
class Instruction(_Record):
    """One compiled HLO instruction and the equations it came from (none: the compiler's own)."""

    line: int
    name: str
    opcode: str
    computation: str
    eqns: tuple[int, ...]


@dataclass(frozen=True)
class Fusion(_Record):
    """A fusion instruction and every equation whose work it absorbed."""

    line: int
    name: str
    kind: str
    eqns: tuple[int, ...]


@dataclass(frozen=True)
class HloStats(_Record):
    """Counts over the compiled layer."""

    instructions: int
    with_op_name: int
    arguments: int
    attributed: int
    unattributed_with_op_name: int
    compiler_own: int
    fusions: int


@dataclass(frozen=True)
class CompiledLayer(_Record):
    """XLA's compiled HLO of a program, what compiled it, and which equations each line holds."""

    text: str
    backend: str
    jaxlib_version: str
    host: str
    host_id: str
    instructions: tuple[Instruction, ...]
    fusions: tuple[Fusion, ...]
    lines_by_eqn: dict[str, tuple[int, ...]]
    stats: HloStats

    def check_against(self, n_eqns: int, path: str) -> None:
        """Every line is in the compiled text and every equation id exists."""
        lines = _line_count(self.text)
        for name, rows in (("instructions", self.instructions), ("fusions", self.fusions)):
            for i, row in enumerate(rows):
                _lines_within((row.line,), lines, f"{path}.{name}[{i}].line", "the compiled HLO")
                for e in row.eqns:
                    _eqn_within(e, n_eqns, f"{path}.{name}[{i}].eqns")
        for key, hlo_lines in self.lines_by_eqn.items():
            if not key.isdigit():
                raise RecordError(f"{_join(path, 'lines_by_eqn')}: key {key!r} is not an equation id")
            _eqn_within(int(key), n_eqns, _join(path, "lines_by_eqn"))
            _lines_within(hlo_lines, lines, f"{_join(path, 'lines_by_eqn')}.{key}", "the compiled HLO")


@dataclass(frozen=True)
class ProgramRecord(_Record):
    """Everything the export says about one program."""

    OMIT_DEFAULT = frozenset({"hlo"})
    slug: str
    title: str
    lesson: str
    entry: str
    args: tuple[str, ...]
    mesh: dict[str, int] | None
    in_specs: list | None
    source: str
    jaxpr: str
    stablehlo: str
    eqns: tuple[EqnFact, ...]
    xray: tuple[Group, ...]
    stablehlo_ops: tuple[StablehloOp, ...]
    lowered_to_nothing: tuple[LoweredToNothing, ...]
    xray_stats: XrayStats
    hlo: CompiledLayer | None = None

    def check(self, path: str) -> None:
        """Slug, equation ids and every line number point at something that exists."""
        if not valid_slug(self.slug):
            raise RecordError(f"{_join(path, 'slug')}: {self.slug!r} is not a slug (lowercase letters, digits, dashes)")
        n = len(self.eqns)
        for i, e in enumerate(self.eqns):
            if e.id != i:
                raise RecordError(f"{_join(path, 'eqns')}[{i}].id: {e.id}, expected {i} (ids follow print order)")
            if e.parent is not None and not 0 <= e.parent < n:
                raise RecordError(f"{_join(path, 'eqns')}[{i}].parent: no equation {e.parent}")
        jaxpr_n, shlo_n = _line_count(self.jaxpr), _line_count(self.stablehlo)
        for i, e in enumerate(self.eqns):
            _lines_within(e.jaxpr_lines, jaxpr_n, f"{_join(path, 'eqns')}[{i}].jaxpr_lines", "the jaxpr")
        for i, g in enumerate(self.xray):
            _eqn_within(g.eqn, n, f"{_join(path, 'xray')}[{i}].eqn")
            _lines_within(g.jaxpr_lines, jaxpr_n, f"{_join(path, 'xray')}[{i}].jaxpr_lines", "the jaxpr")
            _lines_within(g.stablehlo_lines, shlo_n, f"{_join(path, 'xray')}[{i}].stablehlo_lines", "the StableHLO")
        for i, op in enumerate(self.stablehlo_ops):
            _lines_within((op.line,), shlo_n, f"{_join(path, 'stablehlo_ops')}[{i}].line", "the StableHLO")
        for i, gone in enumerate(self.lowered_to_nothing):
            _eqn_within(gone.eqn, n, f"{_join(path, 'lowered_to_nothing')}[{i}].eqn")
        if self.hlo is not None:
            self.hlo.check_against(n, _join(path, "hlo"))


def _line_count(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def _lines_within(lines, count: int, path: str, what: str) -> None:
    for line in lines:
        if not 1 <= line <= count:
            raise RecordError(f"{_at(path)}: line {line} is outside {what} ({count} lines)")


def _eqn_within(eqn: int, count: int, path: str) -> None:
    if not 0 <= eqn < count:
        raise RecordError(f"{_at(path)}: no equation {eqn}")


@dataclass(frozen=True)
class Corpus(_Record):
    """A whole corpus: the JAX that traced it and its programs, unique by slug."""

    schema: str
    jax_version: str
    programs: tuple[ProgramRecord, ...]

    def check(self, path: str) -> None:
        """The schema is ours and no slug is used twice."""
        if self.schema != SCHEMA:
            raise RecordError(f"{_join(path, 'schema')}: {self.schema!r}, expected {SCHEMA!r}")
        seen = set()
        for i, p in enumerate(self.programs):
            if p.slug in seen:
                raise RecordError(f"{_join(path, 'programs')}[{i}].slug: {p.slug!r} is used twice")
            seen.add(p.slug)

    @classmethod
    def from_json(cls, value: Any, path: str = ""):
        """A typed corpus; each program is checked as `ProgramRecord.from_json` checks it."""
        corpus = _build(cls, value, path)
        for i, p in enumerate(corpus.programs):
            p.check(f"{_join(path, 'programs')}[{i}]")
        corpus.check(path)
        return corpus
