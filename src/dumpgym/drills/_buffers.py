"""Reading buffers for the buffer drill: donation in the lowered and compiled modules, copies and bitcasts.

All from the record: the lowered `main`'s signature as MLIR read it (`ProgramRecord.lowered`: each
argument's `tf.aliasing_output`, its types), and the compiled layer's entry parameters, alias table,
result shapes and operands as the compile stage read them (`ir/hlo_facts.py`).
"""
from __future__ import annotations

from dataclasses import dataclass

from dumpgym.drills._tpu import Buffer, Listing
from dumpgym.record.schema import CompiledLayer, Instruction, ProgramRecord

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


def lowered(program: ProgramRecord) -> Lowered | None:
    """The public `main` of the program's StableHLO as MLIR read it; None when there is none (or no record of it)."""
    main = program.lowered.main if program.lowered is not None else None
    if main is None:
        return None
    aliasing = {i: a.aliasing_output for i, a in enumerate(main.args) if a.aliasing_output is not None}
    return Lowered(program.stablehlo.splitlines()[main.line - 1].strip(), tuple(a.type for a in main.args),
                   tuple(r.type for r in main.results), aliasing)


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
    """The compiled entry as the alias question reads it: alias table, parameters in listing order, outputs."""

    has_table: bool  # whether the module has an `input_output_alias` at all
    parameters: tuple[Parameter, ...]  # in the order the listing prints them
    root: str  # the ROOT line, shortened
    root_line: int
    outputs: tuple[str, ...]  # each output's shape without layout, in output order
    aliasing: dict[int, int]  # output index -> parameter number (whole parameters only)

    def by_number(self, number: int) -> Parameter | None:
        """The parameter `parameter(number)`, or None."""
        return next((p for p in self.parameters if p.number == number), None)


def compiled(hlo: CompiledLayer) -> Compiled | None:
    """The compiled entry's parameters, outputs and alias table; None without the compiled facts."""
    listing = Listing(hlo)
    if listing.entry is None:
        return None
    entry = next(c for c in hlo.computations if c.entry)
    params = [Parameter(listing.at[p.line], p.number, listing.definition(listing.at[p.line]).shape.split("{", 1)[0])
              for p in hlo.entry_parameters]
    d = listing.definition(listing.at[entry.root])
    outputs = tuple(b.plain for b in d.buffers) if d.shape.startswith("(") else (d.shape.split("{", 1)[0],)
    # An alias into part of a tuple parameter is not asked.
    aliasing = {(a.output[0] if a.output else 0): a.parameter for a in hlo.aliases if not a.parameter_index}
    return Compiled(bool(hlo.aliases), tuple(params), listing.short(entry.root), entry.root, outputs,
                    aliasing)


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
    out = []
    for ins in hlo.instructions:
        if ins.opcode not in MOVES or not ins.operands:
            continue
        d, src = listing.definition(ins), listing.definition(listing.at[ins.operands[0]])
        if d is None or src is None or src.shape.startswith("(") or not d.buffers or not src.buffers:
            continue
        # A copy-start's result is (destination, source, context): the destination is the copy.
        out.append(Move(ins, src.buffers[0], d.buffers[0]))
    return out
