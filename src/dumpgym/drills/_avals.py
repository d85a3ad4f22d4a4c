"""Read-only views over the corpus's equation facts, written in the jaxpr's own aval notation."""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, replace
from typing import Any, Iterable, Sequence

from dumpgym.dtypes import short as short_dtype

_BITS = {
    "bfloat16": 16, "float16": 16, "float32": 32, "float64": 64,
    "int8": 8, "int16": 16, "int32": 32, "int64": 64,
    "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64, "bool": 1,
}


def short(dtype: str) -> str:
    """The jaxpr's short name for a numpy dtype name (`bfloat16` -> `bf16`, `complex64` -> `c64`)."""
    return short_dtype(dtype)


def is_float(dtype: str) -> bool:
    """Whether a numpy dtype name is a floating-point type."""
    return dtype.startswith(("float", "bfloat"))


def is_int(dtype: str) -> bool:
    """Whether a numpy dtype name is a signed or unsigned integer type."""
    return dtype.startswith(("int", "uint"))


def bits(dtype: str) -> int:
    """Width in bits of a numpy dtype name (0 when unknown)."""
    return _BITS.get(dtype, 0)


@dataclass(frozen=True)
class Aval:
    """An array's shape and numpy dtype name; `str()` gives `bf16[64,512]`."""

    shape: tuple[int, ...]
    dtype: str

    def __str__(self) -> str:
        return f"{short(self.dtype)}[{','.join(str(d) for d in self.shape)}]"

    @property
    def rank(self) -> int:
        """Number of axes."""
        return len(self.shape)

    def with_shape(self, shape: Iterable[int]) -> "Aval":
        """The same dtype with another shape."""
        return replace(self, shape=tuple(int(d) for d in shape))

    def with_dtype(self, dtype: str) -> "Aval":
        """The same shape with another dtype."""
        return replace(self, dtype=dtype)


@dataclass(frozen=True)
class Operand:
    """One equation input: an aval, with the printed value when it is a literal."""

    aval: Aval
    literal: str | None = None
    weak_type: bool = False

    def __str__(self) -> str:
        return f"{self.literal}:{self.aval}" if self.literal is not None else str(self.aval)


@dataclass(frozen=True)
class Eqn:
    """One equation fact of the corpus (`dumpgym.corpus/1` `eqns` record), typed for the drills."""

    id: int
    parent: int | None
    primitive: str
    params: dict
    inputs: tuple[Operand, ...]
    outputs: tuple[Aval, ...]
    jaxpr_lines: tuple[int, int]

    @property
    def arrays(self) -> tuple[Operand, ...]:
        """Inputs that are variables, not literals."""
        return tuple(x for x in self.inputs if x.literal is None)

    @property
    def literals(self) -> tuple[Operand, ...]:
        """Inputs that are printed literals."""
        return tuple(x for x in self.inputs if x.literal is not None)

    @property
    def is_container(self) -> bool:
        """Whether the equation holds a sub-jaxpr (jit, remat, shard_map, ...)."""
        return any(k in self.params for k in ("jaxpr", "call_jaxpr", "fun_jaxpr", "branches", "body_jaxpr"))

    def ints(self, name: str) -> tuple[int, ...] | None:
        """A parameter that is a list of integers (`axes`, `permutation`, ...), or None if absent or not one."""
        return as_ints(self.params.get(name))


def as_ints(value: Any) -> tuple[int, ...] | None:
    """A JSON list of integers as a tuple, else None."""
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    return None


def aval_of(record: dict) -> Aval:
    """An `Aval` from a `{"shape", "dtype"}` fact."""
    return Aval(tuple(int(d) for d in record.get("shape", ())), record["dtype"])


def operand_of(record: dict) -> Operand:
    """An `Operand` from an input fact (an aval, or `{"literal", "dtype"}`)."""
    if "literal" in record:
        return Operand(Aval((), record["dtype"]), literal=str(record["literal"]))
    return Operand(aval_of(record), weak_type=bool(record.get("weak_type", False)))


def eqn_of(record: dict) -> Eqn:
    """An `Eqn` view of one corpus equation record."""
    first, last = record["jaxpr_lines"]
    return Eqn(
        id=record["id"],
        parent=record.get("parent"),
        primitive=record["primitive"],
        params=record.get("params") or {},
        inputs=tuple(operand_of(x) for x in record.get("inputs", ())),
        outputs=tuple(aval_of(x) for x in record.get("outputs", ()) if "shape" in x),
        jaxpr_lines=(int(first), int(last)),
    )


def eqns_of(program: dict) -> list[Eqn]:
    """Every equation of a corpus program, in print order."""
    return [eqn_of(r) for r in program.get("eqns", ())]


def axis_list(axes: Sequence[int]) -> str:
    """An axis list as the dump prints it inside dimension_numbers: `[0, 1]`, `[]`."""
    return "[" + ", ".join(str(a) for a in axes) + "]"


def order(count: int, *seed: object) -> list[int]:
    """A fixed shuffle of `range(count)` for a seed, so option order is stable from run to run."""
    digest = hashlib.sha256(":".join(map(str, seed)).encode()).digest()
    positions = list(range(count))
    random.Random(digest).shuffle(positions)
    return positions


def choice_item(answer: str, wrong: Sequence[tuple[str, str, str]], *seed: object) -> dict:
    """`options`, `answer`, `reasons` and `rules` for an answer and (option, rule, reason) distractors, shuffled."""
    entries = [(answer, "", ""), *wrong]
    positions = order(len(entries), *seed)
    shuffled = [entries[i] for i in positions]
    return {
        "options": [e[0] for e in shuffled],
        "answer": positions.index(0),
        "reasons": [e[2] for e in shuffled],
        "rules": [e[1] for e in shuffled],
    }
