"""The cost files of the page: what the x-ray shows of one compiled layer's costs (estimate.py's), as the page reads it.

A pure function of the record, made at build time (by `site/files.py`, one file per program and compile target,
data/cost/TARGET/SLUG.json) and fetched when the compiled column shows that layer, as its listing is:
one program's costs cost one program's bytes. Every figure is cost/estimate.py's (`layer_cost`); this module only
picks what the page shows: each instruction outside a fusion that computes or moves something, its share
of the program's summed roofline time, and the instruction with the largest share, whose bound the page
puts in words beside the numbers it rests on.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from dumpgym.cost.chips import Chip
from dumpgym.cost.estimate import CostError, InstructionCost, LayerCost, layer_cost
from dumpgym.cost.table import gap
from dumpgym.record.schema import CompiledLayer

COST_SCHEMA = "dumpgym.cost/1"


@dataclass(frozen=True)
class ChipView:
    """The chip a layer is timed on, as the page names it: its peaks, their ridge point and their source."""

    name: str
    flops_per_s: float
    hbm_bytes_per_s: float
    ridge: float  # FLOPs per HBM byte at which compute and memory take equally long
    source: str
    interconnect_bytes_per_s: float | None = None  # what one chip sends to the others (ICI, NVLink)
    interconnect_source: str = ""
    f32_flops_per_s: float | None = None  # an f32 dot's own rate (an H100's TF32); None: the bf16 peak
    f32_ridge: float | None = None
    f32_source: str = ""


@dataclass(frozen=True)
class CostRow:
    """One compiled instruction outside a fusion, as the x-ray's line and cost table show it.

    `seconds` is its roofline time for one program run (one run's time times `runs`, a loop body's trip
    count; counted once where the record gives none, as `LayerCost.share` counts it); `share` is that
    time's part of the program's summed instruction times. Both are None on a layer without a chip.
    `per_byte` is (FLOPs + transcendentals) per HBM byte: what the roofline sets against the ridge point
    (`intensity`, FLOPs alone per HBM byte, is what docs/cost.md calls arithmetic intensity); `ridge` is the
    point it is set against: the chip's, or an f32 dot's own where the chip runs those at another rate (TF32).
    """

    line: int
    name: str
    opcode: str  # as XLA prints it (`copy-start`), not the record's key for it
    computation: str
    runs: int | None
    flops: int
    transcendentals: int
    hbm_bytes: int
    bytes: int  # read and written in every memory space
    sends: int
    unknown: bool  # a kernel whose FLOPs nothing gives (no cost estimate): `flops` and `seconds` are lower bounds
    intensity: float | None
    per_byte: float | None
    seconds: float | None
    bound: str  # "compute", "memory", "interconnect", or "" without a chip (or without time: a copy-done writes only VMEM)
    share: float | None
    ridge: float | None = None


@dataclass(frozen=True)
class CostView:
    """A compiled layer's costs as the x-ray shows them ("dumpgym.cost/1"), or why it has none (`error`).

    `chip` is None on the CPU (its peaks depend on the host) and on a device kind cost/chips.py does not register
    (a dump's `TPU (v5 lite)`): its rows carry FLOPs and bytes, no time. `rows` are in line order; `top` is the line of the row with the largest share (None without a chip);
    `seconds` is the program's summed instruction time, the whole the shares are parts of; `idle` counts
    the instructions outside fusions that compute and move nothing (parameters, bitcasts, tuples' members).
    """

    schema: str
    target: str
    error: str
    backend: str = ""  # the layer's: on a "cpu" layer no chip is expected, elsewhere its device kind is not registered
    device_kind: str = ""
    chip: ChipView | None = None
    seconds: float | None = None
    rows: tuple[CostRow, ...] = ()
    top: int | None = None
    idle: int = 0
    unknown_trips: tuple[int, ...] = ()
    unknown_kernels: int = 0  # custom kernels of unknown cost: `seconds` is at least the rest's
    sends: int = 0  # bytes each device sends over the program (loops at their trip counts)
    gap: str = ""  # why our time and XLA's optimal_seconds differ, where XLA gives one


def _chip(chip: Chip | None) -> ChipView | None:
    return None if chip is None else ChipView(
        chip.name, chip.flops_per_s, chip.hbm_bytes_per_s, chip.ridge, chip.source, chip.interconnect_bytes_per_s,
        chip.interconnect_source, chip.f32_flops_per_s, chip.f32_ridge if chip.f32_flops_per_s else None,
        chip.f32_source)


def _row(cost: LayerCost, c: InstructionCost, printed: str) -> CostRow:
    work = c.work
    timed = work.roofline(cost.chip)
    computed = work.flops + work.transcendentals
    return CostRow(
        line=c.line, name=c.name, opcode=printed, computation=c.computation, runs=c.runs,
        flops=work.flops, transcendentals=work.transcendentals, hbm_bytes=work.hbm_bytes, bytes=work.bytes,
        sends=work.sends, unknown=bool(work.unknown), intensity=work.intensity(), per_byte=computed / work.hbm_bytes if work.hbm_bytes else None,
        # weighted as LayerCost.share weighs a row: one run's time times its runs (once where not known)
        seconds=None if timed is None else timed[0] * (c.runs or 1),
        bound=timed[1] if timed and timed[0] else "",  # a row that takes no time is bound by nothing
        share=cost.share(c) if timed else None, ridge=None if cost.chip is None else work.ridge(cost.chip))


def cost_view(layer: CompiledLayer, target: str) -> CostView:
    """What the x-ray shows of a compiled layer's costs; a layer recorded without the facts cost/estimate.py needs
    gets its one-line reason instead (`CostError`), never an exception."""
    try:
        cost = layer_cost(layer, target)
    except CostError as e:
        return CostView(COST_SCHEMA, target, str(e), layer.backend, layer.device_kind)
    by_line = {i.line: i for i in layer.instructions}
    outside = [c for c in cost.instructions if c.place in ("entry", "control")]
    busy = [c for c in outside if c.work.flops or c.work.transcendentals or c.work.bytes or c.work.sends
            or c.work.unknown]
    rows = tuple(_row(cost, c, layer.printed(by_line[c.line]) or c.opcode) for c in busy)
    timed = [r for r in rows if r.share is not None]
    top = max(timed, key=lambda r: (r.share, -r.line)).line if timed and any(r.share for r in timed) else None
    seconds = sum(r.seconds for r in timed) if cost.chip else None
    return CostView(COST_SCHEMA, target, "", layer.backend, layer.device_kind, _chip(cost.chip), seconds, rows, top,
                    len(outside) - len(busy), cost.unknown_trips, cost.total.unknown, cost.total.sends,
                    gap(cost, layer))


def cost_file(layer: CompiledLayer, target: str) -> dict:
    """The JSON the page fetches for one program's layer (data/cost/TARGET/SLUG.json)."""
    return asdict(cost_view(layer, target))
