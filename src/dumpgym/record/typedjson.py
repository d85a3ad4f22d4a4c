"""Frozen dataclasses read from JSON and written back: fields checked against their annotations as they are read.

A subclass of `TypedRecord` declares its fields with types (int, float, str, bool, `X | None`,
`tuple[X, ...]`, `dict[str, X]`, plain `dict`/`list` for free JSON, or another TypedRecord);
`from_json` builds it, raising `RecordError` that names the first wrong field by its path
(`eqns[3].outputs[0].shape`), and `to_json` writes the fields back in declaration order.
"""
from __future__ import annotations

import dataclasses
import json
import types
import typing
from functools import cache
from typing import Any, Callable, ClassVar


class RecordError(ValueError):
    """A record that does not have the shape of the contract; the message names the field."""


class TypedRecord:
    """Reading and writing for a frozen dataclass: fields as annotated, in declaration order."""

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
        return _writer(type(self))(self)


def made(cls, **fields):
    """A record of frozen dataclass `cls`, made as its own `__init__` makes it from `fields` (those not given at
    their defaults) without one `object.__setattr__` per field: a compile's instructions are made by the ten
    thousand, with some twenty fields each, and the setters cost ten times the rest. Only for a class with no
    `__post_init__`; a field without a default that is not given is a TypeError, as `__init__` says it."""
    out = object.__new__(cls)
    names, defaults = _defaults(cls)
    if len(fields) != len(names):
        for name in names:
            if name not in fields:
                if name not in defaults:
                    raise TypeError(f"{cls.__name__} needs the field {name!r}")
                fields[name] = _default(defaults[name])
    out.__dict__.update(fields)
    return out


@cache
def _defaults(cls) -> tuple[tuple[str, ...], dict[str, dataclasses.Field]]:
    """A dataclass's field names, and its fields that have a default (or a factory), by name."""
    fields = dataclasses.fields(cls)
    return (tuple(f.name for f in fields),
            {f.name: f for f in fields if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING})


def dumps(value) -> str:
    """JSON text as every record file is written: UTF-8 kept, no spaces."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def record_text(value) -> str:
    """`dumps(_json(value))`, byte for byte, for a value holding records (a record, a tuple of them): JSON's own
    encoder walks the tuples and dicts, and asks for each record only its own fields (`_fields`), so no copy of
    the whole value as lists and dicts is made first (a big program's record holds a hundred thousand records)."""
    return _ENCODER.encode(value)


def _fields(value):
    """A record's fields as `to_json` writes them (in order, each left out at its default where the class omits
    it), their values as they are: what JSON's encoder asks of an object it does not know."""
    if isinstance(value, TypedRecord):
        if type(value).to_json is TypedRecord.to_json:
            return _writer(type(value), shallow=True)(value)
        return value.to_json()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_fields)


class TextAhead:
    """The JSON text of some of a record's field values, made ahead (while XLA compiles, on the caller's
    thread) and used by `text` if the record holds those very values: the text is `dumps(record.to_json())`,
    byte for byte, each field made ahead written once."""

    def __init__(self):
        self._made: dict[int, tuple[Any, str]] = {}

    def make(self, *values) -> None:
        """The text of each of `values` (a field's value: a tuple of records, say), made now."""
        for value in values:
            self._made[id(value)] = (value, record_text(value))

    def text(self, record: TypedRecord) -> str:
        """`dumps(record.to_json())`, with the text of each field whose value was made ahead taken from it.
        The text of each other field that is not a scalar is kept too: the same record marked otherwise
        (`dataclasses.replace(record, added=True)`, as a start reads an added one back) is written again in
        the time of a join."""
        parts = []
        for f in dataclasses.fields(record):
            value = getattr(record, f.name)
            if f.name in type(record).OMIT_DEFAULT and value == _default(f):
                continue
            made = self._made.get(id(value))
            if made is not None and made[0] is value:
                text = made[1]
            elif type(value) in _SCALARS:
                text = dumps(value)
            else:
                text = record_text(value)
                self._made[id(value)] = (value, text)
            parts.append(f"{dumps(f.name)}:{text}")
        return "{" + ",".join(parts) + "}"


@cache
def _writer(cls, shallow: bool = False) -> Callable[[Any], dict]:
    """The function writing a record class's fields in declaration order, each left out where the class
    omits it at its default, made once per class as straight-line code: a big program writes a hundred
    thousand records, and a loop over each one's fields, looking each up by name, costs several times more.
    `shallow`: each value as it is (`record_text`'s encoder writes what it holds), not as JSON's lists and dicts.

    The code is made from the class's own field names (Python identifiers) and nothing else; defaults are
    compared as values bound to the function (made once: they are only compared, never handed out)."""
    lines, bound = ["def to_json(self):", "    out = {}"], {"_SCALARS": _SCALARS, "_json": _json}
    for n, f in enumerate(dataclasses.fields(cls)):
        assert f.name.isidentifier()
        lines.append(f"    v = self.{f.name}")
        indent = "    "
        if f.name in cls.OMIT_DEFAULT:
            bound[f"_default{n}"] = _default(f)
            lines.append(f"    if not v == _default{n}:")
            indent = "        "
        lines.append(f"{indent}out[{f.name!r}] = v" if shallow else
                     f"{indent}out[{f.name!r}] = v if type(v) in _SCALARS else _json(v)")
    lines.append("    return out")
    exec("\n".join(lines), bound)  # noqa: S102 (the code is the class's field names, above)
    return bound["to_json"]


def _default(f: dataclasses.Field):
    """A field's default value, made afresh where it has a factory (an empty dict)."""
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


# Values written as they are: checked by exact type first, as most of a record's values are one of these.
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _json(value):
    if isinstance(value, TypedRecord):
        return value.to_json()
    if isinstance(value, tuple):
        return [v if type(v) in _SCALARS else _json(v) for v in value]
    if isinstance(value, dict):
        return {k: v if type(v) in _SCALARS else _json(v) for k, v in value.items()}
    return value


_KIND = {dict: "an object", list: "a list", str: "a string", int: "a whole number", bool: "true or false",
         float: "a number", type(None): "null"}


def at(path: str) -> str:
    """How an error names the place `path`: the path, or 'the record' at the top."""
    return path or "the record"


def join(path: str, name: str) -> str:
    """The path of field `name` inside `path`."""
    return f"{path}.{name}" if path else name


def _what(value) -> str:
    return _KIND.get(type(value), type(value).__name__)


class _Wrong(Exception):
    """A mismatch found while reading; `steps` collects the path to it, innermost first, as it unwinds."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message
        self.steps: list[str | int] = []


def _build(tp, value, path: str):
    """`value` (parsed JSON) as an instance of type `tp`, or RecordError at `path`."""
    try:
        return _reader(tp)(value)
    except _Wrong as wrong:
        where = path
        for step in reversed(wrong.steps):
            where = f"{where}[{step}]" if isinstance(step, int) else join(where, step)
        raise RecordError(f"{at(where)}: {wrong.message}") from None


@cache
def _reader(tp) -> Callable[[Any], Any]:
    """A function reading parsed JSON as type `tp`, made once per type: the corpus holds ~100,000 values,
    so the type is taken apart here, not at each value. It raises `_Wrong`; `_build` names the place."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return _union_reader(typing.get_args(tp))
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return _tuple_reader(_reader(args[0]), _PLAIN.get(args[0]))
        return _fixed_tuple_reader(tuple(_reader(a) for a in args))
    if origin is dict:
        return _dict_reader(_reader(typing.get_args(tp)[1]))
    if isinstance(tp, type) and issubclass(tp, TypedRecord):
        return _record_reader(tp)
    if tp is Any:
        return lambda value: value
    if tp is int:
        def read_int(value):
            if type(value) is not int and (not isinstance(value, int) or isinstance(value, bool)):
                raise _Wrong(f"expected a whole number, got {_what(value)}")
            return value
        return read_int
    if tp is float:  # a measured figure (XLA's cost analysis): JSON writes a whole one without a point
        def read_float(value):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise _Wrong(f"expected a number, got {_what(value)}")
            return float(value)
        return read_float
    if tp in (str, bool, dict, list):
        def read_plain(value):
            if not isinstance(value, tp):
                raise _Wrong(f"expected {_KIND[tp]}, got {_what(value)}")
            return value
        return read_plain
    raise TypeError(f"record/schema.py has no reader for {tp!r}")  # a programming error, not bad data


def _union_reader(options: tuple) -> Callable[[Any], Any]:
    nullable = type(None) in options
    readers = [_reader(o) for o in options if o is not type(None)]

    def read(value):
        if value is None and nullable:
            return None
        errors = []
        for reader in readers:
            try:
                return reader(value)
            except _Wrong as e:
                errors.append(e)
        raise errors[0] if len(errors) == 1 else _Wrong(f"{_what(value)} is none of the allowed forms")
    return read


def _each(reader, values: list, start: int = 0):
    """`reader` over `values`; a mismatch records the index it was found at."""
    for i, v in enumerate(values):
        try:
            yield reader(v)
        except _Wrong as e:
            e.steps.append(start + i)
            raise


def _tuple_reader(item, plain: type | None = None) -> Callable[[Any], Any]:
    """Reading a list as a tuple of `item`'s; with `plain` (`_PLAIN`), items of exactly that type are taken
    as they are, in one pass."""

    def read(value):
        if not isinstance(value, list):
            raise _Wrong(f"expected a list, got {_what(value)}")
        if plain is not None:
            for v in value:
                if type(v) is not plain:
                    break
            else:
                return tuple(value)
        try:  # readers are pure: on a mismatch, read again one by one to say where it is
            return tuple(map(item, value))
        except _Wrong:
            return tuple(_each(item, value))
    return read


def _fixed_tuple_reader(items: tuple) -> Callable[[Any], Any]:
    def read(value):
        if not isinstance(value, list):
            raise _Wrong(f"expected a list, got {_what(value)}")
        if len(value) != len(items):
            raise _Wrong(f"expected {len(items)} items, got {len(value)}")
        out = []
        for i, (reader, v) in enumerate(zip(items, value)):
            try:
                out.append(reader(v))
            except _Wrong as e:
                e.steps.append(i)
                raise
        return tuple(out)
    return read


def _dict_reader(item) -> Callable[[Any], Any]:
    def read(value):
        if not isinstance(value, dict):
            raise _Wrong(f"expected an object, got {_what(value)}")
        try:  # readers are pure: on a mismatch, read again one by one to say where it is
            return {k: item(v) for k, v in value.items()}
        except _Wrong:
            pass
        out = {}
        for k, v in value.items():
            try:
                out[k] = item(v)
            except _Wrong as e:
                e.steps.append(k)
                raise
        return out
    return read


def _record_reader(cls) -> Callable[[Any], Any]:
    """The reader of a record class, made once per class as straight-line code (as `_writer` is): the
    corpus holds records by the hundred thousand, and a loop over each one's fields costs several times
    more. A field of an exact scalar type is taken as it is (any other value goes through its reader,
    which says what is wrong); the instance is made as the frozen dataclass's own `__init__` makes it,
    without its per-field `object.__setattr__`. The code is made from the class's field names
    (Python identifiers) and nothing else."""
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    names = frozenset(f.name for f in fields)
    assert not hasattr(cls, "__post_init__") and not hasattr(cls, "__slots__")
    bound = {"_Wrong": _Wrong, "_what": _what, "_names": names, "_new": object.__new__, "_cls": cls,
             "_MISSING": _MISSING, "_unknown": _unknown}
    lines = ["def read(value):",
             "    if not isinstance(value, dict):",
             "        raise _Wrong(f'expected an object, got {_what(value)}')",
             "    if not _names.issuperset(value):",
             "        raise _Wrong(_unknown(value, _names))",
             "    get = value.get",
             "    out = _new(_cls)",
             "    d = out.__dict__"]
    for n, f in enumerate(fields):
        assert f.name.isidentifier()
        bound[f"_read{n}"] = _reader(hints[f.name])
        exact = _PLAIN.get(hints[f.name])
        lines.append(f"    v = get({f.name!r}, _MISSING)")
        lines.append("    if v is _MISSING:")
        if f.default is not dataclasses.MISSING:
            bound[f"_default{n}"] = f.default
            lines.append(f"        d[{f.name!r}] = _default{n}")
        elif f.default_factory is not dataclasses.MISSING:
            bound[f"_factory{n}"] = f.default_factory
            lines.append(f"        d[{f.name!r}] = _factory{n}()")
        else:
            lines.append(f"        raise _Wrong({f'missing field {f.name!r}'!r})")
        if exact is not None:
            bound[f"_exact{n}"] = exact
            lines.append(f"    elif type(v) is _exact{n}:")
            lines.append(f"        d[{f.name!r}] = v")
        lines += ["    else:",
                  "        try:",
                  f"            d[{f.name!r}] = _read{n}(v)",
                  "        except _Wrong as e:",
                  f"            e.steps.append({f.name!r})",
                  "            raise"]
    lines.append("    return out")
    exec("\n".join(lines), bound)  # noqa: S102 (the code is the class's field names, above)
    return bound["read"]


def _unknown(value: dict, names: frozenset) -> str:
    return f"unknown field {next(k for k in value if k not in names)!r}"


_MISSING = object()
# The types whose values a reader returns as they are when they are exactly of that type.
_PLAIN: dict = {int: int, str: str, bool: bool}
