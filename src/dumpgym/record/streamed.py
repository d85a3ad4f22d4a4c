"""What one streaming pass over an optimised HLO too big to make a program of says of it: its lines, its
computations, its instructions counted by opcode, its ENTRY's parameters. The pass (`ir/hlo_index.py`) runs in
a process of its own; the server reads this and the byte offset of every line, nothing else."""
from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Computation:
    """One computation of the module: its name as printed, the 1-based line of its header, whether it is the
    ENTRY, and how many instructions its body holds."""

    name: str
    line: int
    entry: bool
    instructions: int


@dataclass(frozen=True)
class EntryParameter:
    """One `parameter(n)` instruction of the ENTRY computation: its number, its name, its shape as printed
    and the `op_name` XLA gave it (JAX writes the argument's pytree path there; "" where none)."""

    number: int
    name: str
    shape: str
    op_name: str
    line: int


@dataclass(frozen=True)
class StreamedHlo:
    """The facts of one linear pass over an HLO text file, read in chunks (never whole).

    `opcodes` counts the instructions of every computation by opcode, most first; `unread` counts the
    instruction lines whose opcode was not found within the first `head` bytes of the line (a shape
    longer than that), which are in no count. `index_bytes` is what the line index costs (8 bytes a line)."""

    size: int
    lines: int
    computations: tuple[Computation, ...]
    opcodes: tuple[tuple[str, int], ...]
    parameters: tuple[EntryParameter, ...]
    unread: int
    head: int
    longest_line: int
    index_bytes: int
    seconds: float
    peak_bytes: int  # the resident memory the pass's process reached (VmHWM), 0 where unknown
    cpu_seconds: float = 0.0  # the CPU time the pass's process spent (its `seconds` are the wall clock's)

    def to_json(self) -> dict:
        """The facts as JSON (what the indexing process sends the server): a computation or a parameter as a
        list of its fields, in their order (a hundred thousand of them decode to lists, not dicts)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        # Their fields are str, int and bool: read one by one (`astuple` copies each deeply, 0.4 s for 100,000).
        data["computations"] = [(c.name, c.line, c.entry, c.instructions) for c in self.computations]
        data["parameters"] = [(p.number, p.name, p.shape, p.op_name, p.line) for p in self.parameters]
        return data

    @classmethod
    def from_json(cls, data: dict) -> "StreamedHlo":
        """The facts `to_json` wrote."""
        return cls(**{**data, "computations": tuple(Computation(*c) for c in data["computations"]),
                      "opcodes": tuple((str(k), int(n)) for k, n in data["opcodes"]),
                      "parameters": tuple(EntryParameter(*p) for p in data["parameters"])})

    @property
    def instructions(self) -> int:
        """The instructions counted (those whose opcode was read)."""
        return sum(n for _, n in self.opcodes)

    def count(self, opcode: str) -> int:
        """How many instructions have `opcode`."""
        return dict(self.opcodes).get(opcode, 0)
