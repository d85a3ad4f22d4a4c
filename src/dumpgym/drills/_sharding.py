"""Shardings and device groups for the partitioner drill, as the record holds XLA's and Shardy's reading of them.

A compiled sharding (`{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}`) is recorded as XLA's
parser read it (`record.Sharding`): the tile counts, whether the last count holds copies, and the
device order. The StableHLO's `sdy.sharding` attributes, meshes and collectives are recorded as MLIR's
Shardy bindings read them (`record.LoweredModule`). A device number in either is a position in the
mesh's device order (XLA's logical ids), so its mesh coordinates are that position unravelled,
row-major, over the mesh's axis sizes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dumpgym.record.schema import ProgramRecord, Sharding


# --- compiled shardings -----------------------------------------------------------------------

@dataclass(frozen=True)
class HloSplit:
    """A compiled array sharding as XLA reads it: split counts per array axis and the device tiles."""

    counts: tuple[int, ...]  # how many ways each array axis is split
    tiles: np.ndarray  # device positions, one axis per split count (plus one for copies)
    copies: int  # devices holding each block (the last tile count under last_tile_dim_replicate)
    reshape: tuple[int, ...] | None  # the iota form's device reshape, `<=[2,4]` -> (2, 4); None for a listed one
    transposed: bool  # whether the iota form transposes the devices (`T(1,0)`)


def hlo_split(sharding: Sharding | None, rank: int) -> HloSplit | None:
    """A recorded sharding of an array of this rank as splits, or None when it is not one (or not recorded)."""
    if sharding is None:
        return None
    if sharding.replicated:
        return HloSplit((1,) * rank, np.zeros((1,) * rank, dtype=int), 1, None, False)
    dims = sharding.tile_dims
    tiles = np.array(sharding.devices).reshape(dims)
    copies = dims[-1] if sharding.last_tile_dim_replicate else 1
    counts = dims[:-1] if sharding.last_tile_dim_replicate else dims
    if len(counts) != rank:
        return None
    return HloSplit(counts, tiles, copies, sharding.iota_reshape or None, bool(sharding.iota_transpose))


def without_transpose(split: HloSplit) -> HloSplit | None:
    """The same sharding with the iota's `T(...)` left out, as a reader who skips it takes it."""
    # Without the transpose, `<=[2,4]` numbers the devices 0..7 in order, as `<=[8]` does.
    if not split.transposed:
        return None
    plain = np.arange(split.tiles.size).reshape(split.tiles.shape)
    return HloSplit(split.counts, plain, split.copies, (split.tiles.size,), False)


def sharing_first_block(split: HloSplit) -> tuple[int, ...]:
    """The device positions holding the same block as the first tile's device."""
    if split.copies == 1:
        return (int(split.tiles.flat[0]),)
    return tuple(sorted(int(d) for d in split.tiles[(0,) * len(split.counts)]))


def along_first_split(split: HloSplit) -> tuple[int, ...]:
    """The devices that cut the first split axis among them, with the first tile's copy index."""
    axis = next(k for k, c in enumerate(split.counts) if c > 1)
    index = [0] * split.tiles.ndim
    index[axis] = slice(None)
    return tuple(sorted(int(d) for d in split.tiles[tuple(index)]))


def divided(shape, counts) -> tuple[int, ...] | None:
    """Each axis of `shape` cut `counts` ways; None when a count does not divide its axis."""
    if len(shape) != len(counts) or any(c < 1 or s % c for s, c in zip(shape, counts)):
        return None
    return tuple(s // c for s, c in zip(shape, counts))


# --- device groups ---------------------------------------------------------------------------

def groups_without_transpose(text: str, groups) -> list[list[int]] | None:
    """Iota-form groups (printed `text`) read without their `T(...)`, as a reader who skips it takes them;
    None if there is none."""
    if not text.startswith("[") or "T(" not in text:
        return None
    return np.arange(sum(map(len, groups))).reshape(len(groups), -1).tolist()


def varying_axes(positions, sizes: tuple[int, ...]) -> tuple[int, ...]:
    """The mesh axes along which these device positions differ."""
    coords = np.array([np.unravel_index(p, sizes) for p in positions]).reshape(len(positions), len(sizes))
    return tuple(a for a in range(len(sizes)) if len(set(coords[:, a])) > 1)


def group_axes(groups, sizes: tuple[int, ...]) -> tuple[int, ...] | None:
    """The mesh axes a collective's groups run over, or None when they are not whole mesh axes."""
    if not groups or not all(groups):
        return None
    axes = {varying_axes(g, sizes) for g in groups}
    if len(axes) != 1:
        return None
    (found,) = axes
    total = math.prod(sizes)
    if any(len(g) != math.prod(sizes[a] for a in found) for g in groups) or sum(map(len, groups)) != total:
        return None
    return found


def groups_along(axes: tuple[int, ...], sizes: tuple[int, ...]) -> list[list[int]]:
    """The groups a collective over these mesh axes would have, as device positions."""
    positions = np.arange(math.prod(sizes)).reshape(sizes)
    rest = [a for a in range(len(sizes)) if a not in axes]
    moved = np.transpose(positions, rest + list(axes))
    return moved.reshape(-1, math.prod(sizes[a] for a in axes) if axes else 1).tolist()


def group_text(group) -> str:
    """A device group as HLO prints it: `{0,1,2,3}`."""
    return "{" + ",".join(str(d) for d in group) + "}"


# --- StableHLO: Shardy's attributes ----------------------------------------------------------

@dataclass(frozen=True)
class SdyValue:
    """One sharded value of the StableHLO: where it is, its global type, and the mesh axes per array axis."""

    what: str  # "argument", "result" or "constraint"
    index: int  # argument or result number; for a constraint, its op's StableHLO line
    shape: tuple[int, ...]
    type: str  # as printed: tensor<64x32xf32>
    axes: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class SdyCollective:
    """A StableHLO collective with device groups: its op name, line and groups."""

    name: str
    line: int
    groups: list


@dataclass(frozen=True)
class SdyModule:
    """What the partitioner drill reads from a StableHLO module: the mesh, sharded values and collectives."""

    mesh: tuple[tuple[str, int], ...]
    mesh_line: int
    values: tuple[SdyValue, ...]
    collectives: tuple[SdyCollective, ...]


def sdy_module(program: ProgramRecord) -> SdyModule | None:
    """The mesh (one `sdy.mesh` only), main's sharded arguments and results, constraints and collectives, in
    print order; None without exactly one mesh (or without the record of the lowered module)."""
    lowered = program.lowered
    if lowered is None or len(lowered.meshes) != 1:
        return None
    found: list[tuple[int, SdyValue]] = []
    if lowered.main is not None:
        for what, values in (("argument", lowered.main.args), ("result", lowered.main.results)):
            found += [(lowered.main.line, SdyValue(what, i, v.shape, v.type, v.sharding))
                      for i, v in enumerate(values) if v.sharding is not None and v.shape is not None]
    found += [(c.line, SdyValue("constraint", c.line, c.shape, c.type, c.sharding))
              for c in lowered.sharding_constraints if c.sharding is not None and c.shape is not None]
    found.sort(key=lambda pair: pair[0])  # stable: main's values keep their order
    (mesh,) = lowered.meshes
    collectives = tuple(SdyCollective(c.name, c.line, [list(g) for g in c.replica_groups]) for c in lowered.collectives)
    return SdyModule(mesh.axes, mesh.line, tuple(v for _, v in found), collectives)


# --- StableHLO text, cut for display only ---------------------------------------------------

def signature_part(lines: list[str], value: SdyValue) -> str:
    """The argument or result of main's signature, with its attributes, as printed."""
    line = next(text for text in lines if "func.func public @main(" in text)
    if value.what == "argument":
        start = line.index(f"%arg{value.index}: ")
    else:
        start = line.index("-> (") + len("-> (")
        for _ in range(value.index):
            start = balanced_end(line, start) + len(", ")
    return line[start:balanced_end(line, start)]


def balanced_end(line: str, start: int) -> int:
    """Where the first `{...}` block after `start` closes (exclusive index)."""
    depth, i = 0, line.index("{", start)
    while True:
        depth += {"{": 1, "}": -1}.get(line[i], 0)
        i += 1
        if depth == 0:
            return i
