"""The dots of XLA's HLO before optimisations, as a dump prints them, read into the record (`DumpFacts.dots`).

Before optimisation every backend writes JAX's dot_generals as plain `dot`s with the dimension numbers JAX traced
(a TPU rewrites them as convolutions only later), so a dump without a jaxpr can be asked to decode them there. Each
line is read once, in order: an instruction's name and printed type where it is defined, a dot's operands by name
(defined before it, in its own computation), its dims as `hlo_facts.read_dot` reads a compiled dot's, and the
`op_name` of its metadata (which says whether JAX's name stack put it in a gradient's backward pass).
"""
from __future__ import annotations

import re

from dumpgym.ir.hlo_facts import read_arrays, read_dot
from dumpgym.ir.hlo_graph import OP_NAME_RE, defined
from dumpgym.record.schema import DumpArray, DumpDot

# A dot's two operands as its line prints them: ` dot(%a, %b)`.
_OPERANDS = re.compile(r" dot\(%([\w.\-]+), %([\w.\-]+)\)")


def _array(name: str, shape: str) -> DumpArray | None:
    """One array printed with its layout (`f32[32,8]{1,0}`); None for a tuple, a token or a bare scalar."""
    arrays = read_arrays(shape)
    if len(arrays) != 1 or not arrays[0][2] or shape.startswith("("):
        return None
    dtype, dims, _layout = arrays[0]
    return DumpArray(name, shape, dtype, dims)


def before_dots(text: str) -> tuple[DumpDot, ...]:
    """Every `dot` of the HLO before optimisations whose result and two operands are arrays printed with a layout,
    with its line; in line order."""
    types: dict[str, str] = {}
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("}"):
            types.clear()  # a computation's names are its own
            continue
        found = defined(line)
        if found is None:
            continue
        name, shape, opcode = found
        types[name] = shape
        if opcode != "dot":
            continue
        operands = _OPERANDS.search(line)
        if operands is None or operands.group(1) not in types or operands.group(2) not in types:
            continue
        arrays = [_array(n, types[n]) for n in (name, operands.group(1), operands.group(2))]
        if None in arrays:
            continue
        op_name = OP_NAME_RE.search(line)
        out.append(DumpDot(number, name, read_dot(line), *arrays, op_name=op_name.group(1) if op_name else ""))
    return tuple(out)
