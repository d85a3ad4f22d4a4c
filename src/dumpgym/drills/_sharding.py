"""Reading shardings and device groups for the partitioner drill, through XLA's and Shardy's own objects.

A compiled sharding (`{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}`) is read by XLA's
parser (`jaxlib.xla_client.HloSharding`): the tile counts, whether the last count holds copies, and
the device order. StableHLO is parsed by MLIR and its `sdy.sharding` attributes are read through the
Shardy bindings (`jaxlib.mlir.dialects.sdy`). A device number in either is a position in the mesh's
device order (XLA's logical ids), so its mesh coordinates are that position unravelled, row-major,
over the mesh's axis sizes.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

import numpy as np

_IOTA_RESHAPE = re.compile(r"<=\[([\d,]+)\]")
_GROUPS = re.compile(r"replica_groups=(\{(?:\{[\d,]*\},?)*\}|\[[\d,]+\]<=\[[\d,]+\](?:T\([\d,]+\))?)")


# --- compiled shardings -----------------------------------------------------------------------

@dataclass(frozen=True)
class HloSplit:
    """A compiled array sharding as XLA reads it: split counts per array axis and the device tiles."""

    text: str
    counts: tuple[int, ...]  # how many ways each array axis is split
    tiles: np.ndarray  # device positions, one axis per split count (plus one for copies)
    copies: int  # devices holding each block (the last tile count under last_tile_dim_replicate)

    @property
    def reshape(self) -> tuple[int, ...] | None:
        """The iota form's device reshape, `<=[2,4]` -> (2, 4), or None for a listed tile assignment."""
        match = _IOTA_RESHAPE.search(self.text)
        return tuple(int(d) for d in match.group(1).split(",")) if match else None


def read_hlo_sharding(text: str, rank: int) -> HloSplit | None:
    """XLA's reading of a printed array sharding, or None when it is not a plain tiling (manual, maximal)."""
    from jaxlib import xla_client  # XLA's own sharding parser

    sharding = xla_client.HloSharding.from_string(text)
    if sharding.is_replicated():
        return HloSplit(text, (1,) * rank, np.zeros((1,) * rank, dtype=int), 1)
    if not sharding.is_tiled() or sharding.subgroup_types():
        return None
    dims = tuple(sharding.tile_assignment_dimensions())
    tiles = np.array(sharding.tile_assignment_devices()).reshape(dims)
    copies = dims[-1] if sharding.replicate_on_last_tile_dim() else 1
    counts = dims[:-1] if sharding.replicate_on_last_tile_dim() else dims
    return HloSplit(text, counts, tiles, copies) if len(counts) == rank else None


def without_transpose(split: HloSplit) -> HloSplit | None:
    """The same sharding with the iota's `T(...)` left out, as a reader who skips it takes it."""
    # Without the transpose, `<=[2,4]` numbers the devices 0..7 in order, as `<=[8]` does.
    plain = re.sub(r"<=\[[\d,]+\]T\([\d,]+\)", f"<=[{split.tiles.size}]", split.text)
    return None if plain == split.text else read_hlo_sharding(plain, len(split.counts))


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

def hlo_groups_text(line: str) -> str | None:
    """The `replica_groups` of a compiled collective's line as printed, list or iota form."""
    match = _GROUPS.search(line)
    return match.group(1) if match else None


def read_groups(text: str) -> list[list[int]]:
    """Printed replica groups as lists of device positions; the iota form (`[4,2]<=[2,4]T(1,0)`) read by XLA."""
    if text.startswith("["):
        from jaxlib import xla_client  # the iota form is a tile assignment's: XLA's sharding parser reads it

        shape = [int(d) for d in text[1:text.index("]")].split(",")]
        devices = xla_client.HloSharding.from_string("{devices=" + text + "}").tile_assignment_devices()
        return np.array(devices).reshape(shape).tolist()
    return [[int(d) for d in g.split(",") if d] for g in re.findall(r"\{([\d,]*)\}", text[1:-1])]


def groups_without_transpose(text: str) -> list[list[int]] | None:
    """Iota-form groups read without their `T(...)`, as a reader who skips it takes them; None if there is none."""
    if not text.startswith("[") or "T(" not in text:
        return None
    shape = [int(d) for d in text[1:text.index("]")].split(",")]
    return read_groups(f"[{','.join(map(str, shape))}]<=[{math.prod(shape)}]")


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


@functools.lru_cache(maxsize=64)
def read_stablehlo(text: str) -> SdyModule | None:
    """The mesh (one `sdy.mesh` only), main's sharded arguments and results, constraints and collectives."""
    from jaxlib.mlir import ir

    from dumpgym.jax_internals import location_line, stablehlo_context

    module = ir.Module.parse(text, context=stablehlo_context())
    meshes, values, collectives = [], [], []

    def visit(op):
        name = op.name
        if name == "sdy.mesh":
            meshes.append((_mesh(op), location_line(op.location)))
        elif name == "func.func" and op.attributes["sym_name"].value == "main":
            values.extend(_signature(op))
        elif name == "sdy.sharding_constraint":
            values.append(_constraint(op, location_line(op.location)))
        elif "replica_groups" in op.attributes:
            groups = np.array(ir.DenseIntElementsAttr(op.attributes["replica_groups"])).tolist()
            collectives.append(SdyCollective(name, location_line(op.location), groups))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    if len(meshes) != 1:
        return None
    return SdyModule(meshes[0][0], meshes[0][1], tuple(v for v in values if v is not None), tuple(collectives))


def _mesh(op) -> tuple[tuple[str, int], ...]:
    from jaxlib.mlir.dialects import sdy

    return tuple((sdy.MeshAxisAttr(a).name, sdy.MeshAxisAttr(a).size)
                 for a in sdy.MeshAttr(op.attributes["mesh"]).axes)


def _axes(attr) -> tuple[tuple[str, ...], ...] | None:
    """Mesh axis names per array axis of an `sdy.sharding`; None where a sub-axis is used."""
    from jaxlib.mlir.dialects import sdy

    out = []
    for dim in sdy.TensorShardingAttr(attr).dimension_shardings:
        refs = [sdy.AxisRefAttr(a) for a in sdy.DimensionShardingAttr(dim).axes]
        if any(r.sub_axis_info is not None for r in refs):
            return None
        out.append(tuple(r.name for r in refs))
    return tuple(out)


def _signature(op) -> list[SdyValue | None]:
    from jaxlib.mlir import ir

    kinds = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
    out = []
    for what, key, types in (("argument", "arg_attrs", kinds.inputs), ("result", "res_attrs", kinds.results)):
        if key not in op.attributes:
            continue
        for i, attrs in enumerate(ir.ArrayAttr(op.attributes[key])):
            attrs = ir.DictAttr(attrs)
            if "sdy.sharding" in attrs:
                out.append(_value(what, i, types[i], attrs["sdy.sharding"]))
    return out


def _constraint(op, line: int) -> SdyValue | None:
    return _value("constraint", line, op.results[0].type, op.attributes["sharding"])


def _value(what: str, index: int, type_, attr) -> SdyValue | None:
    from jaxlib.mlir import ir

    axes = _axes(attr)
    try:
        ranked = ir.RankedTensorType(type_)
    except ValueError:  # not a ranked tensor: no block to ask about
        return None
    return None if axes is None else SdyValue(what, index, tuple(ranked.shape), str(type_), axes)


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
