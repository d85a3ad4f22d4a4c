"""Frozen dataclasses read from JSON and written back: fields checked against their annotations as they are read.

A subclass of `TypedRecord` declares its fields with types (int, str, bool, `X | None`,
`tuple[X, ...]`, `dict[str, X]`, plain `dict`/`list` for free JSON, or another TypedRecord);
`from_json` builds it, raising `RecordError` that names the first wrong field by its path
(`eqns[3].outputs[0].shape`), and `to_json` writes the fields back in declaration order.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from typing import Any, ClassVar


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
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in self.OMIT_DEFAULT and value == f.default:
                continue
            out[f.name] = _json(value)
        return out


def _json(value):
    if isinstance(value, TypedRecord):
        return value.to_json()
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
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
        raise errors[0] if len(errors) == 1 else RecordError(f"{at(path)}: {_what(value)} is none of the allowed forms")
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, list):
            raise RecordError(f"{at(path)}: expected a list, got {_what(value)}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_build(args[0], v, f"{path}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise RecordError(f"{at(path)}: expected {len(args)} items, got {len(value)}")
        return tuple(_build(a, v, f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if origin is dict:
        key_type, value_type = typing.get_args(tp)
        if not isinstance(value, dict):
            raise RecordError(f"{at(path)}: expected an object, got {_what(value)}")
        return {k: _build(value_type, v, join(path, k)) for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, TypedRecord):
        return _build_record(tp, value, path)
    if tp is Any:
        return value
    if tp is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise RecordError(f"{at(path)}: expected a whole number, got {_what(value)}")
        return value
    if tp in (str, bool, dict, list):
        if not isinstance(value, tp):
            raise RecordError(f"{at(path)}: expected {_KIND[tp]}, got {_what(value)}")
        return value
    raise TypeError(f"record.py has no reader for {tp!r}")  # a programming error, not bad data


def _build_record(cls, value, path: str):
    if not isinstance(value, dict):
        raise RecordError(f"{at(path)}: expected an object, got {_what(value)}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = [k for k in value if k not in fields]
    if unknown:
        raise RecordError(f"{at(path)}: unknown field {unknown[0]!r}")
    hints = _hints(cls)
    kwargs = {}
    for name, f in fields.items():
        if name not in value:
            if f.default is dataclasses.MISSING:
                raise RecordError(f"{at(path)}: missing field {name!r}")
            continue
        kwargs[name] = _build(hints[name], value[name], join(path, name))
    return cls(**kwargs)
