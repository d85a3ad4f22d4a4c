"""The cost drill's two typed steps: the HBM bytes a TPU layout's tiles waste on one instruction's traffic
(`padding`), and the bytes each device sends for a collective (`sends`). Both read `dumpgym.cost.estimate`'s counts
and the buffers the compile stage recorded (`record.Buffer`: dims, element bits, tiles, memory space).
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

from dumpgym.cost.estimate import LayerCost, Ring, rings, started_results
from dumpgym.drills._tpu import Buffer, Listing, which_compile
from dumpgym.drills.item import Item, Lines, Misreading, Note, Typed
from dumpgym.record.schema import CompiledLayer, Instruction


def dense_bytes(b: Buffer) -> int:
    """The bytes a buffer's elements take without padding: what its printed sizes hold."""
    return -(-math.prod(b.dims) * b.bits // 8)


def _context(target: str, hlo: CompiledLayer, ins: Instruction) -> tuple:
    """Which compile this is, the instruction's line, then the line defining each operand (once each, in order):
    HLO prints an operand by name only, so its shape and layout are on its own line."""
    lines = [ins.line, *dict.fromkeys(o for o in ins.operands if o != ins.line)]
    return (Note(which_compile(hlo)), *(Lines(target, n, n, cut=True, numbered=True) for n in lines))


def _shared_by_value(items: list[Item]) -> list[Item]:
    """Items of one step and layer with the same answer share one item's weight: a program's many alike
    buffers are one lesson, and a usual value must not be the habit that pays."""
    counts = Counter(i.answer.value for i in items)
    return [replace(i, weight=round(1 / counts[i.answer.value], 3)) for i in items]


# --- padding ------------------------------------------------------------------------------------

def _hbm(buffers) -> list[Buffer]:
    return [b for b in buffers if b.memory_space == 0]


def padding_items(target: str, hlo: CompiledLayer, costs: LayerCost) -> list[Item]:
    """Per TPU instruction outside fusions whose counted HBM traffic is its operands read whole and its result
    written whole, none of them a scalar, and whose tiles pad some of it: how many of those bytes are padding."""
    if hlo.backend != "tpu":
        return []
    listing = Listing(hlo)
    items = []
    for c in costs.instructions:
        ins = listing.at[c.line]
        if c.place not in ("entry", "control") or not c.work.hbm_bytes:
            continue
        result = listing.definition(ins)
        operands = [listing.definition(listing.at[n]) for n in ins.operands]
        if result is None or any(d is None for d in operands):
            continue
        read = [b for d in operands for b in d.buffers]
        # Only where cost/estimate.py counts exactly these buffers (no slice read in part, no in-place update, no async
        # half): then the padding of the traffic is the padding of its buffers.
        if (sum(b.padded_bytes() for b in _hbm(read)) != c.work.read.get(0, 0)
                or sum(b.padded_bytes() for b in _hbm(result.buffers)) != c.work.written.get(0, 0)):
            continue
        if any(not b.dims for b in _hbm(read) + _hbm(result.buffers)):
            continue  # a scalar's tile makes it 512 bytes, whatever it is: a habit, not a reading
        item = _padding_item(target, hlo, listing, ins, read, list(result.buffers))
        if item is not None:
            items.append(item)
    return _shared_by_value(items)


def _waste(buffers) -> int:
    return sum(b.padded_bytes() - dense_bytes(b) for b in buffers)


def _padding_item(target: str, hlo: CompiledLayer, listing: Listing, ins: Instruction, read: list[Buffer],
                  written: list[Buffer]) -> Item | None:
    answer = _waste(_hbm(read)) + _waste(_hbm(written))
    if answer == 0:
        return None
    total = sum(b.padded_bytes() for b in _hbm(read) + _hbm(written))
    wrong = [
        (0, "no-padding", "took the buffers for dense; a tile pads the minor axes it covers"),
        (total, "total-for-padding", f"gave all {total:,} bytes moved; {total - answer:,} are data"),
        (_waste(_hbm(written)), "result-only", "counted the result's padding only; reading the operands moves theirs"),
        (_waste(_hbm(read)), "operands-only", "counted the operands' padding only; writing the result moves its own"),
        (_waste(read) + _waste(written), "other-memory-space", "counted padding outside HBM (an `S(n)`) too"),
    ]
    misread = {}
    for value, rule, reason in wrong:
        if value != answer and str(value) not in misread:
            misread[str(value)] = Misreading(reason, rule)
    parts = [f"{b.text}: {b.padded_bytes():,} bytes for {dense_bytes(b):,} of data"
             for b in _hbm(read) + _hbm(written) if b.padded_bytes() != dense_bytes(b)]
    feedback = (f"%{ins.name} reads and writes {total:,} HBM bytes, {total - answer:,} of them data: "
                f"{'; '.join(parts)}. The padding is {answer:,} bytes, {total / (total - answer):.3g}x the data")
    name = hlo.printed(ins) or ins.opcode
    return Item(
        question=(f"%{ins.name} (TPU HLO line {ins.line}, printed `{name}`) reads its operands and writes its result in "
                  "HBM at the layouts XLA chose (their lines follow it). How many of the HBM bytes it moves are "
                  "padding its tiles add?"),
        answer=Typed("int", str(answer), misread=misread), feedback=feedback + ".",
        context=_context(target, hlo, ins), card=("padding", ins.name, target), layer=target, step="padding",
        facts={"hlo_line": ins.line, "instruction": ins.name, "hbm_bytes": total})


# --- sends --------------------------------------------------------------------------------------

_COLLECTIVE_WORDS = {"allgather": "an all-gather sends n-1 pieces of its result",
                     "reducescatter": "a reduce-scatter sends n-1 pieces of its operand",
                     "alltoall": "an all-to-all sends n-1 pieces of its operand",
                     "allreduce": "an all-reduce is a reduce-scatter then an all-gather: twice n-1 pieces"}


def send_items(target: str, hlo: CompiledLayer, costs: LayerCost) -> list[Item]:
    """Per ring collective outside fusions (all-gather, reduce-scatter, all-reduce, all-to-all, their async
    starts) over a group of two or more devices: the bytes each device sends."""
    listing = Listing(hlo)
    items = []
    for line, ring in rings(hlo).items():
        ins = listing.at[line]
        base = ring.op.removesuffix("start")
        if base not in _COLLECTIVE_WORDS or ring.devices < 2 or not ring.sends:
            continue
        items.append(_send_item(target, hlo, ins, ring, base, _dense_data(listing, ins, base, ring)))
    return _shared_by_value(items)


def _dense_data(listing: Listing, ins: Instruction, base: str, ring: Ring) -> int:
    """The bytes of the data a collective sends pieces of, without its tiles' padding (its result for an
    all-gather, an async start's result arrays; its operands otherwise); the padded size where they do not add up
    to what cost/estimate.py counted."""
    if base == "allgather":
        found = started_results(listing.hlo, ins) if ins.opcode.endswith("start") else list(listing.definition(ins).buffers)
    else:
        found = [b for n in ins.operands for b in listing.definition(listing.at[n]).buffers]
    return sum(map(dense_bytes, found)) if sum(b.padded_bytes() for b in found) == ring.data else ring.data


def _send_item(target: str, hlo: CompiledLayer, ins: Instruction, ring: Ring, base: str, dense: int) -> Item:
    n, data, answer = ring.devices, ring.data, ring.sends
    groups = len(next(g.groups for g in hlo.replica_groups if g.line == ins.line))
    piece = "result" if base == "allgather" else "operand"
    wrong = [
        (ring.passes * data, "own-piece-too", f"sent all {n} pieces; a device keeps its own and sends {n - 1}"),
        (ring.passes * data // n, "one-piece", f"sent one piece; on a ring a device passes on {n - 1} of {n}"),
    ]
    if ring.passes == 2:
        wrong.append((data * (n - 1) // n, "all-reduce-once", "counted one pass; an all-reduce makes two"))
    if dense != data:
        wrong.append((ring.passes * dense * (n - 1) // n, "unpadded",
                      f"counted its elements' {dense:,} bytes; this count takes the data at its layout, "
                      f"{data:,} bytes with its tiles' padding (a model choice, docs/cost.md: libtpu does not "
                      "publish how it packs a transfer)"))
    if groups != n and groups > 1:
        wrong.append((ring.passes * data * (groups - 1) // groups, "groups-for-size",
                      f"took the {groups} groups for the {n} devices in each"))
    misread = {}
    for value, rule, reason in wrong:
        if value != answer and str(value) not in misread:
            misread[str(value)] = Misreading(reason, rule)
    printed = hlo.printed(ins) or ins.opcode
    layer_name = {"tpu": "TPU", "gpu": "GPU"}.get(hlo.backend, "CPU")
    padded = f" ({dense:,} without padding)" if dense != data else ""
    feedback = (f"{n} devices a group; {_COLLECTIVE_WORDS[base]}. Its {piece}: {data:,} bytes at its layout{padded}; "
                f"each device sends {ring.passes} x {data:,} x ({n}-1)/{n} = {answer:,} bytes")
    return Item(
        question=(f"On a ring over its replica group, how many bytes does each device send to the others for "
                  f"%{ins.name} ({layer_name} HLO line {ins.line}, printed `{printed}`; its operands' lines follow it)?"),
        answer=Typed("int", str(answer), misread=misread), feedback=feedback + ".",
        context=_context(target, hlo, ins), card=("sends", ins.name, target), layer=target, step="sends",
        facts={"hlo_line": ins.line, "instruction": ins.name, "devices": n, "data": data, "passes": ring.passes})
