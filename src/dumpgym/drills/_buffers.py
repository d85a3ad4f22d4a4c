"""Reading buffers for the buffer drill: donation in the lowered and compiled texts, copies and bitcasts.

The lowered module's donation is read by MLIR's own parser (jaxlib's, so that building the pool
does not import JAX): `main`'s argument attributes (`tf.aliasing_output = k` on an argument whose
buffer result k may take) and its function type.
XLA's Python `HloModule` has no accessor for the compiled module's alias table, so from the
compiled text three small things are read: the header's `input_output_alias={...}` entries, each
entry parameter's `parameter(n)`, and the operand named right after a copy's or bitcast's opcode.
Shapes and layouts are XLA's reading of the printed shape (`_tpu.read_buffer`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from dumpgym.drills._tpu import Buffer, Listing, definition, short
from dumpgym.record import CompiledLayer, Instruction

# `{1}: (1, {}, may-alias)`: output index, parameter number, index inside that parameter, kind.
_ALIAS_ENTRY = re.compile(r"\{([\d,\s]*)\}: \((\d+), \{([\d,\s]*)\}, ([\w-]+)\)")
_ALIAS_TABLE = re.compile(r"input_output_alias=\{ (.*?) \}(?:, [a-z_]+=|$)")
_PARAMETER = re.compile(r" parameter\((\d+)\)")
# Opcodes (the record's spelling) that either move a buffer's bytes or only relabel them.
MOVES = frozenset({"copy", "copystart", "bitcast"})


@dataclass(frozen=True)
class Lowered:
    """The lowered `main`'s signature: argument and result types, and the result each donated argument lends to."""

    line: str  # the `func.func public @main(...)` line as printed
    args: tuple[str, ...]  # types as MLIR prints them: tensor<32x64xf32>
    results: tuple[str, ...]
    aliasing: dict[int, int]  # argument -> result, from `tf.aliasing_output`

    def lender(self, result: int) -> int | None:
        """The argument whose buffer `result` may take, or None."""
        return next((a for a, r in self.aliasing.items() if r == result), None)


def lowered(stablehlo: str) -> Lowered | None:
    """MLIR's reading of the public `main` of a StableHLO module; None when there is none."""
    from jaxlib.mlir import ir

    from dumpgym.jax_internals import stablehlo_context

    with stablehlo_context():
        module = ir.Module.parse(stablehlo)
        for op in module.body.operations:
            if ir.StringAttr(op.attributes["sym_name"]).value != "main":
                continue
            ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            aliasing = {}
            if "arg_attrs" in op.attributes:
                for i, attrs in enumerate(ir.ArrayAttr(op.attributes["arg_attrs"])):
                    attrs = ir.DictAttr(attrs)
                    if "tf.aliasing_output" in attrs:
                        aliasing[i] = ir.IntegerAttr(attrs["tf.aliasing_output"]).value
            line = next(t for t in stablehlo.splitlines() if t.lstrip().startswith("func.func public @main("))
            return Lowered(line.strip(), tuple(str(t) for t in ftype.inputs), tuple(str(t) for t in ftype.results),
                           aliasing)
    return None


@dataclass(frozen=True)
class Parameter:
    """An entry parameter of the compiled module: its instruction, its number and its printed shape."""

    ins: Instruction
    number: int
    shape: str  # without layout: f32[32,64]

    @property
    def label(self) -> str:
        return f"%{self.ins.name} (line {self.ins.line})"


@dataclass(frozen=True)
class Compiled:
    """The compiled entry as the alias question reads it: header, parameters in listing order, outputs, aliases."""

    header: str  # the `input_output_alias={...}` attribute, or "" when the module has none
    parameters: tuple[Parameter, ...]  # in the order the listing prints them
    root: str  # the ROOT line, shortened
    root_line: int
    outputs: tuple[str, ...]  # each output's shape without layout, in output order
    aliasing: dict[int, int]  # output index -> parameter number (whole parameters only)

    def by_number(self, number: int) -> Parameter | None:
        """The parameter `parameter(number)`, or None."""
        return next((p for p in self.parameters if p.number == number), None)


def compiled(hlo: CompiledLayer) -> Compiled | None:
    """The compiled entry's parameters, outputs and alias table; None when the entry is not found."""
    listing = Listing(hlo)
    entry = next((n for n, (first, _) in listing.computations.items()
                  if listing.lines[first - 1].startswith("ENTRY ")), None)
    if entry is None:
        return None
    first, last = listing.computations[entry]
    root = next(n for n in range(first, last + 1) if listing.lines[n - 1].lstrip().startswith("ROOT "))
    params = []
    for ins in hlo.instructions:
        if ins.computation == entry and ins.opcode == "parameter":
            number = _PARAMETER.search(listing.lines[ins.line - 1])
            shape = definition(listing.lines[ins.line - 1], ins.line).shape.split("{", 1)[0]
            params.append(Parameter(ins, int(number.group(1)), shape))
    d = definition(listing.lines[root - 1], root)
    outputs = tuple(b.plain for b in d.buffers) if d.shape.startswith("(") else (d.shape.split("{", 1)[0],)
    header = listing.lines[0]
    table = _ALIAS_TABLE.search(header)
    aliasing = {}
    for out, param, inner, _kind in _ALIAS_ENTRY.findall(table.group(1) if table else ""):
        if not inner.strip():  # an alias into part of a tuple parameter is not asked
            aliasing[int(out.split(",")[0]) if out.strip() else 0] = int(param)
    return Compiled(f"input_output_alias={{ {table.group(1)} }}" if table else "", tuple(params),
                    short(listing.lines[root - 1]), root, outputs, aliasing)


@dataclass(frozen=True)
class Move:
    """A copy (`copy`, `copy-start`) or a `bitcast` of the compiled text: its operand's buffer and its result's."""

    ins: Instruction
    src: Buffer
    dst: Buffer

    @property
    def copies(self) -> bool:
        """Whether XLA wrote it as a copy (the bytes move), not a bitcast (the same bytes, relabelled)."""
        return self.ins.opcode != "bitcast"

    @property
    def label(self) -> str:
        """The option: operand's buffer, then result's, with no name or opcode."""
        return f"{self.src.text} → {self.dst.text}"


def moves(hlo: CompiledLayer) -> list[Move]:
    """Every copy, copy-start and bitcast of a compiled layer whose operand and result are arrays with layouts."""
    listing = Listing(hlo)
    defs = {}
    for n, text in enumerate(listing.lines, start=1):
        d = definition(text, n)
        if d is not None:
            defs.setdefault(d.name, d)
    out = []
    for ins in hlo.instructions:
        if ins.opcode not in MOVES:
            continue
        d = defs.get(ins.name)
        operand = re.search(rf" {re.escape(d.opcode)}\(%([\w.\-]+)", listing.lines[ins.line - 1]) if d else None
        src = defs.get(operand.group(1)) if operand else None
        if src is None or src.shape.startswith("(") or not d.buffers or not src.buffers:
            continue
        # A copy-start's result is (destination, source, context): the destination is the copy.
        out.append(Move(ins, src.buffers[0], d.buffers[0]))
    return out
