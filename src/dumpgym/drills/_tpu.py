"""Reading a compiled layer for the drills: its instructions' shapes and layouts, buffer sizes, memory spaces,
fusion bodies and computations, all as the compile stage recorded them (`ir/hlo_facts.py`), never from the text.

The text is only cut for display, where the record says (`short_rows`, `Listing.short`, `Listing.computation_text`).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Callable

from dumpgym.record.schema import Buffer, CompiledLayer, Instruction, padded_elements  # noqa: F401 (the drills' names)

# What an `S(n)` means on a TPU: XLA's memory-space numbers ("colors") as JAX's TPU custom calls
# name them (JAX's private tpu_custom_call module, `MemorySpace.color`; tests/test_drills_tpu.py checks
# this table against it). A layout without `S(...)` is in space 0, the chip's HBM.
MEMORY_SPACES = {
    0: "HBM, the chip's main memory (the default, so the layout prints no S)",
    1: "VMEM, the on-chip vector memory next to the compute units",
    2: "semaphore memory, where the chip keeps the flags that signal a DMA is done",
    4: "SMEM, the scalar unit's small on-chip memory",
    5: "host memory, off the chip (JAX's pinned_host memory kind)",
}
# Opcodes that multiply matrices: on a TPU these run on the MXU, the systolic matrix unit.
MATMUL_OPCODES = frozenset({"convolution", "dot"})


@dataclass(frozen=True)
class Definition:
    """What an instruction defines, as recorded: its line and name, result shape and opcode as printed, its arrays."""

    line: int
    name: str
    shape: str
    opcode: str
    buffers: tuple[Buffer, ...]  # the result's arrays with their layouts: the result, or each member of a tuple


def short_rows(hlo: CompiledLayer | None) -> Callable[[int, str], str]:
    """How rows of a listing are shortened: a compiled instruction's without its metadata, backend config and
    other trailing attributes (`Instruction.tail`, read in `ir/`); any other row stripped."""
    at = {i.line: i for i in hlo.instructions} if hlo is not None else {}

    def cut(number: int, row: str) -> str:
        ins = at.get(number)
        return ins.short(row) if ins is not None else row.strip()
    return cut


def which_compile(hlo: CompiledLayer) -> str:
    """The first block of every compiled item: what compiled this, for what, and on which machine (a dump's
    layer, which names no machine it was compiled on here, says it was read from the dump)."""
    if not hlo.host_id:
        return f"compiled for {hlo.device_kind or hlo.backend.upper()} by the run that wrote your dump, read from it"
    if hlo.backend == "tpu":
        return (f"compiled by libtpu {hlo.libtpu_version} for {hlo.device_kind} ({hlo.topology}), without a TPU "
                f"(jaxlib {hlo.jaxlib_version})")
    if hlo.backend == "gpu":
        return (f"compiled by XLA for {hlo.device_kind} ({hlo.topology}), without a GPU: default GEMM "
                f"configurations, not autotuned (jax-cuda12-plugin {hlo.cuda_plugin_version}, jaxlib {hlo.jaxlib_version})")
    return f"compiled by XLA for {hlo.backend.upper()} (jaxlib {hlo.jaxlib_version}; this machine kind: {hlo.host})"


@dataclass(frozen=True)
class Listing:
    """One compiled layer read for the drills: its lines (for display), computations, instructions by line."""

    hlo: CompiledLayer

    @functools.cached_property
    def lines(self) -> list[str]:
        """The compiled text's lines."""
        return self.hlo.text.splitlines()

    @functools.cached_property
    def computations(self) -> dict[str, tuple[int, int]]:
        """Each computation's first and last line (1-based): its signature and its closing brace."""
        return {c.name: c.lines for c in self.hlo.computations}

    @functools.cached_property
    def entry(self) -> str | None:
        """The entry computation's name (None in a record without the compiled facts)."""
        return next((c.name for c in self.hlo.computations if c.entry), None)

    @functools.cached_property
    def at(self) -> dict[int, Instruction]:
        """The instruction printed on each line."""
        return {i.line: i for i in self.hlo.instructions}

    def short(self, line: int) -> str:
        """The instruction on `line` without its trailing attributes (any other line stripped)."""
        ins = self.at.get(line)
        return ins.short(self.lines[line - 1]) if ins is not None else self.lines[line - 1].strip()

    def computation_text(self, name: str) -> str:
        """The printed computation `name`, signature to closing brace."""
        first, last = self.computations[name]
        return "\n".join(self.lines[first - 1:last])

    @functools.cached_property
    def _applies(self) -> dict[str, list[str]]:
        """Per computation, what its instructions call or apply, in print order."""
        out: dict[str, list[str]] = {}
        for ins in self.hlo.instructions:
            out.setdefault(ins.computation, []).extend((*ins.calls, *ins.to_apply))
        return out

    def body(self, line: int) -> list[str]:
        """The computations the instruction on `line` runs: the one it calls, then those it calls or applies."""
        found: list[str] = []
        stack = list(self.at[line].calls) if line in self.at else []
        while stack:
            name = stack.pop(0)
            if name not in found and name in self.computations:
                found.append(name)
                stack += self._applies.get(name, [])
        return found

    def opcodes_in(self, computations) -> set[str]:
        """The opcodes (the record's spelling, `copystart`) of the instructions in these computations."""
        return {i.opcode for i in self.hlo.instructions if i.computation in computations}

    def definition(self, ins: Instruction) -> Definition | None:
        """What an instruction defines: its result shape as printed, its printed opcode, its arrays; None
        in a record without the compiled facts."""
        if ins.shape is None:
            return None
        shape = self.hlo.shapes[ins.shape]
        return Definition(ins.line, ins.name, shape.text, self.hlo.printed(ins),
                          tuple(self.hlo.buffers[b] for b in shape.buffers))

    @functools.cached_property
    def _users(self) -> dict[int, list[Instruction]]:
        out: dict[int, list[Instruction]] = {}
        for ins in self.hlo.instructions:
            for line in dict.fromkeys(ins.operands):
                out.setdefault(line, []).append(ins)
        return out

    def users(self, ins: Instruction) -> list[Instruction]:
        """The instructions that take `ins` as an operand, in print order."""
        return self._users.get(ins.line, [])


def placed_evenly(items: list, edges: list[str | None], rows: int) -> list:
    """The items of one lines-to-tap step with weights such that those whose answer is the first (or the
    last) instruction row alone, as `edges` says of each (`"first"`, `"last"` or None), are asked together
    about as often as one place of `rows` would be: a computation's ROOT can only be shown near the end
    of its lines, and tapping the last row must not be a habit that pays. (With no other answer, the
    edge items share one place's weight.)"""
    inner = sum(1 for e in edges if e is None)
    share = {e: min(1.0, max(inner, 1) / (rows - 2) / n) if (n := edges.count(e)) else 1.0
             for e in ("first", "last")}
    return [replace(i, weight=round(i.weight * share[e], 3)) if e else i for i, e in zip(items, edges)]
