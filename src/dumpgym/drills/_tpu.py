"""Reading the TPU layer for the drills: XLA's shapes and layouts, buffer sizes, memory spaces, fusion bodies.

A printed shape (`bf16[256,512]{1,0:T(8,128)(2,1)S(1)}`) is read by XLA's own parser
(`jaxlib.xla_client.Shape`): its dimensions, element type, `minor_to_major` and tiles come from
that object. XLA's Python `Layout` does not expose the memory space, so `S(n)` is read off the
layout as XLA prints it back (`Layout.to_string()`), nothing else. From the instruction text only
two things are read, narrowly: the shape between ` = ` and the opcode, and `calls=`/`to_apply=`.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

from dumpgym.hlo import APPLIES_RE, CALLS_RE
from dumpgym.record import CompiledLayer

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
_MEMORY_SPACE = re.compile(r"S\((\d+)\)")
# `%name = SHAPE opcode(`: no ` word(` occurs inside a printed shape (tiles and spaces follow `:`).
_DEFINITION = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = (.+?) ([a-z][a-z0-9\-]*)\(")
_TAIL = re.compile(r", (?:metadata|backend_config|frontend_attributes|sharding|operand_layout_constraints)=")
# Opcodes that multiply matrices: on a TPU these run on the MXU, the systolic matrix unit.
MATMUL_OPCODES = frozenset({"convolution", "dot"})


@dataclass(frozen=True)
class Buffer:
    """One array shape as XLA reads it: dims, element type, minor-to-major order, tiles, memory space."""

    text: str
    dtype: str  # as printed: bf16, f32, u32, pred
    dims: tuple[int, ...]
    minor_to_major: tuple[int, ...]
    tiles: tuple[tuple[int, ...], ...]
    memory_space: int
    itemsize: int  # bytes per element

    @property
    def plain(self) -> str:
        """The shape without its layout: `bf16[256,512]`."""
        return self.text.split("{", 1)[0]

    def padded_bytes(self, tiles=None) -> int:
        """Bytes the tiled buffer takes, padding included: each tile pads the minor dims it covers."""
        return padded_elements(self.dims, self.minor_to_major, self.tiles if tiles is None else tiles) * self.itemsize


@functools.lru_cache(maxsize=None)
def read_buffer(text: str) -> Buffer | None:
    """XLA's reading of a printed array shape with its layout, or None for a tuple or a shape without one."""
    from jaxlib import xla_client  # XLA's shape parser; its Layout carries minor_to_major and tiles

    shape = xla_client.Shape(text)
    if shape.is_tuple() or "{" not in text:
        return None
    layout = shape.layout()
    space = _MEMORY_SPACE.search(layout.to_string())
    bits = layout.element_size_in_bits()
    itemsize = bits // 8 if bits else shape.numpy_dtype().itemsize
    return Buffer(text, text.split("[", 1)[0], tuple(shape.dimensions()), tuple(layout.minor_to_major()),
                  tuple(tuple(t) for t in layout.tiling()), int(space.group(1)) if space else 0, itemsize)


def padded_elements(dims, minor_to_major, tiles) -> int:
    """Elements stored for `dims` laid out minor-to-major and tiled by `tiles` in turn (XLA's tiling).

    The first tile cuts the physical (major-to-minor) shape: its minor dims round up to the tile and
    become (count of tiles, tile); each later tile cuts the minor dims of that result, so a bf16
    `(2,1)` sub-tile pairs the rows inside each `(8,128)` tile. A scalar is one element, tiled too.
    """
    shape = [dims[i] for i in reversed(minor_to_major)] or [1]
    for tile in tiles:
        if len(shape) < len(tile):
            shape = [1] * (len(tile) - len(shape)) + shape
        head, minor = shape[:-len(tile)], shape[-len(tile):]
        shape = head + [-(-d // t) for d, t in zip(minor, tile)] + list(tile)
    return math.prod(shape)


@dataclass(frozen=True)
class Definition:
    """An instruction's line read for its result: name, printed result shape and opcode."""

    line: int
    name: str
    shape: str
    opcode: str

    @property
    def buffers(self) -> list[Buffer]:
        """The result's arrays with their layouts: the result, or each member of a tuple (as XLA splits it)."""
        from jaxlib import xla_client

        shape = xla_client.Shape(self.shape)
        members = shape.tuple_shapes() if shape.is_tuple() else [shape]
        return [b for b in (read_buffer(str(m)) for m in members if not m.is_tuple()) if b is not None]


def definition(text_line: str, line: int) -> Definition | None:
    """The instruction an HLO line defines, its result shape and opcode as printed; None for other lines."""
    match = _DEFINITION.match(text_line)
    if match:
        return Definition(line, match.group(1), match.group(2), match.group(3))
    return None


def short(text_line: str) -> str:
    """An instruction line without its metadata, backend config and other trailing attributes."""
    return _TAIL.split(text_line.strip(), maxsplit=1)[0]


def which_compile(hlo: CompiledLayer) -> str:
    """The first block of every compiled item: what compiled this, for what, and on which machine."""
    if hlo.backend == "tpu":
        return (f"compiled by libtpu {hlo.libtpu_version} for {hlo.device_kind} ({hlo.topology}), without a TPU "
                f"(jaxlib {hlo.jaxlib_version})")
    if hlo.backend == "gpu":
        return (f"compiled by XLA for {hlo.device_kind} ({hlo.topology}), without a GPU: default GEMM "
                f"configurations, not autotuned (jax-cuda12-plugin {hlo.cuda_plugin_version}, jaxlib {hlo.jaxlib_version})")
    return f"compiled by XLA for {hlo.backend.upper()} (jaxlib {hlo.jaxlib_version}; this machine kind: {hlo.host})"


@dataclass(frozen=True)
class Listing:
    """One compiled text read for the drills: lines, computations by name, what each fusion runs."""

    hlo: CompiledLayer

    @functools.cached_property
    def lines(self) -> list[str]:
        """The compiled text's lines."""
        return self.hlo.text.splitlines()

    @functools.cached_property
    def computations(self) -> dict[str, tuple[int, int]]:
        """Each computation's first and last line (1-based), read from its signature and closing brace."""
        out, start, name = {}, None, None
        for n, line in enumerate(self.lines, start=1):
            head = re.match(r"(?:ENTRY )?%([\w.\-]+) \(", line)
            if head and start is None:
                start, name = n, head.group(1)
            elif line.startswith("}") and start is not None:
                out[name] = (start, n)
                start = None
        return out

    def computation_text(self, name: str) -> str:
        """The printed computation `name`, signature to closing brace."""
        first, last = self.computations[name]
        return "\n".join(self.lines[first - 1:last])

    def body(self, line: int) -> list[str]:
        """The computations the instruction on `line` runs: the one it calls, then those it calls or applies."""
        found: list[str] = []
        stack = CALLS_RE.findall(self.lines[line - 1])
        while stack:
            name = stack.pop(0)
            if name not in found and name in self.computations:
                found.append(name)
                stack += APPLIES_RE.findall(self.computation_text(name))
        return found

    def opcodes_in(self, computations) -> set[str]:
        """The opcodes (the record's spelling, `copystart`) of the instructions in these computations."""
        return {i.opcode for i in self.hlo.instructions if i.computation in computations}
