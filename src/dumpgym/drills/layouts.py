"""The layout drill: read a TPU buffer's layout (minor axis and tile), its memory space, and its padded size.

Asked of each TPU layer (a program's `compiled` layers whose backend is `tpu`). Every buffer is as XLA's
shape parser read it when the program was compiled (the layer's `buffers`, `hlo_facts.read_buffer`):
`minor_to_major`, the tiles and the element size come from XLA's `Layout`; the padded size is
XLA's tiling rule applied to them (the tests compare it with `memory_analysis()` of a compile).
Three questions (`step`): `minor-tile`, `memory-space` and `bytes`; each wrong option is what
one misreading of this very buffer's notation gives.
"""
from __future__ import annotations

import math

from dumpgym.drills import drill
from dumpgym.drills._avals import choice_item
from dumpgym.drills._tpu import MEMORY_SPACES, Buffer, Listing, which_compile
from dumpgym.drills.item import Item, Lines, Note, choice
from dumpgym.record import CompiledLayer, ProgramRecord, padded_elements


def _axes(b: Buffer, tile, minor: int, second: int | None) -> str:
    """A tile as axes: `axis 0 by 8, axis 1 by 128` (a 1-D tile covers the minor axis only)."""
    if len(tile) == 1 or second is None:
        return f"axis {minor} by {tile[-1]}"
    return f"axis {second} by {tile[-2]}, axis {minor} by {tile[-1]}"


def _reading(b: Buffer, minor: int, second: int | None, tile) -> str:
    return f"minor: axis {minor} (size {b.dims[minor]}) · tile: {_axes(b, tile, minor, second)}"


def _minor_tile(b: Buffer) -> tuple[str, list[tuple[str, str, str]]] | None:
    """The answer and misreadings for "which axis is minor, and what is the tile?"."""
    if len(b.dims) < 2 or not b.tiles or len(b.tiles[0]) != 2:
        return None
    m2m, tile = b.minor_to_major, b.tiles[0]
    layout = "{" + ",".join(map(str, m2m)) + "}"
    answer = _reading(b, m2m[0], m2m[1], tile)
    wrong = [
        (_reading(b, m2m[-1], m2m[-2], tile), "major-to-minor",
         f"read `{layout}` major to minor; XLA lists the axes minor first, so axis {m2m[0]} is the minor one "
         f"and the tile's last number, {tile[-1]}, runs along it"),
        (_reading(b, m2m[0], m2m[1], tuple(reversed(tile))), "tile-numbers-swapped",
         f"put the tile's {tile[0]} on the minor axis; `T({tile[0]},{tile[1]})` is written like a shape, "
         f"major first: {tile[1]} along the minor axis {m2m[0]}, {tile[0]} along axis {m2m[1]}"),
    ]
    if len(b.tiles) > 1 and len(b.tiles[-1]) == 2:
        sub = b.tiles[-1]
        wrong.insert(1, (_reading(b, m2m[0], m2m[1], sub), "sub-tile-as-tile",
                         f"took the last group `({sub[0]},{sub[1]})` for the tile; it is a sub-tile inside each "
                         f"`({tile[0]},{tile[1]})` tile, packing {sub[0]} narrow elements into one 32-bit word"))
    rank = len(b.dims)
    if m2m[0] != rank - 1:
        wrong.append((_reading(b, rank - 1, rank - 2, tile), "logical-order",
                      f"assumed the last axis is minor, as in a row-major array; this buffer's layout `{layout}` "
                      f"puts axis {m2m[0]} minor"))
    return answer, wrong


def _padding_words(b: Buffer) -> str:
    """How the first tile pads this buffer, in words: `axis 0 from 3 to 8, axis 1 from 5 to 128`."""
    tile = b.tiles[0] if b.tiles else ()
    physical = list(reversed(b.minor_to_major))[-len(tile):] if tile and b.dims else []
    parts = [f"axis {a} from {b.dims[a]} to {-(-b.dims[a] // t) * t}"
             for a, t in zip(physical, tile[-len(physical):]) if b.dims[a] % t]
    return ", ".join(parts) or "nothing: the sizes are multiples of the tile"


def _bytes(b: Buffer) -> tuple[str, list[tuple[str, str, str]]] | None:
    """The answer and misreadings for "how many bytes does this buffer take, padding included?"."""
    if not b.tiles:
        return None
    answer = b.padded_bytes()
    dense = -(-math.prod(b.dims) * b.bits // 8)
    tile = b.tiles[0]
    wrong: list[tuple[int, str, str]] = [
        (dense, "no-padding",
         f"counted the {math.prod(b.dims)} elements only; the tile `T({','.join(map(str, tile))})` pads "
         f"{_padding_words(b)}"),
    ]
    if len(tile) == 2 and tile[0] != tile[1]:
        swapped = b.padded_bytes(((tile[1], tile[0]), *b.tiles[1:]))
        wrong.append((swapped, "tile-numbers-swapped",
                      f"padded the minor axis to {tile[0]} and the next to {tile[1]}; the tile's last number, "
                      f"{tile[1]}, runs along the minor axis {b.minor_to_major[0]}"))
    if b.bits < 8:  # XLA packs sub-byte elements (`E(4)`): counting a byte each is the slip
        wrong.append((padded_elements(b.dims, b.minor_to_major, b.tiles), "element-width",
                      f"counted a whole byte per {b.dtype} element; the layout's `E({b.bits})` packs them "
                      f"{8 // b.bits} to a byte"))
    else:
        other = 4 if b.bits != 32 else 2
        wrong.append((b.padded_bytes() // (b.bits // 8) * other, "element-width",
                      f"counted {other} bytes per {b.dtype} element; a {b.dtype} takes {b.width()}"))
    if len(b.dims) >= 2:
        flipped = Buffer(b.text, b.dtype, b.dims, tuple(reversed(b.minor_to_major)), b.tiles, b.memory_space,
                         b.bits)
        wrong.append((flipped.padded_bytes(), "major-to-minor",
                      f"read the layout major to minor and tiled axis {b.minor_to_major[-1]} as the minor one; "
                      f"axis {b.minor_to_major[0]} is minor"))
    seen, out = {answer}, []
    for value, rule, reason in wrong:
        if value not in seen:
            seen.add(value)
            out.append((f"{value:,} bytes", rule, reason))
    return (f"{answer:,} bytes", out) if len(out) >= 2 else None


_SHARDING = ("split across devices along axis {n}, one slice per device", "sharding",
             "read `S({n})` as a sharding; XLA prints a sharding as `sharding={{...}}` after the operands, never "
             "inside the layout's braces")


def _memory_space(b: Buffer) -> tuple[str, list[tuple[str, str, str]]] | None:
    """The answer and misreadings for "what does S(n) say about where this buffer lives?"."""
    n = b.memory_space
    if n == 0 or n not in MEMORY_SPACES:
        return None
    wrong = [(MEMORY_SPACES[0], "default-space",
              f"took the buffer for one in the default space; `S(0)` is never printed, so an `S({n})` says it "
              "lives elsewhere")]
    for other in (1, 2, 5):
        if other != n and len(wrong) < 2:
            wrong.append((MEMORY_SPACES[other], "other-space", f"that is memory space {other}, printed `S({other})`"))
    text, rule, reason = _SHARDING
    wrong.append((text.format(n=n), rule, reason.format(n=n)))
    return MEMORY_SPACES[n], wrong


def _question(step: str, b: Buffer, d, at: str) -> str:
    if step == "minor-tile":
        return f"In `{b.text}` ({at}), which axis is minor, and what is the tile?"
    if step == "memory-space":
        return f"In `{b.text}` ({at}), what does `S({b.memory_space})` say about where this buffer lives?"
    return f"How many bytes does `{b.text}` ({at}) take in memory, padding included?"


_STEPS = (("minor-tile", _minor_tile), ("memory-space", _memory_space), ("bytes", _bytes))


# A program with more items of one step (the unrolled scan has two dozen buffers) shares 4 of weight among them.
@drill("layouts", number="10", title="TPU layouts, read",
       aim="Read a TPU buffer's layout: its minor axis and tile, its memory space, and the bytes it takes.",
       per_program=4, cap_by=("layer", "step"))
def layout_items(program: ProgramRecord) -> list[Item]:
    """Per TPU layer and step, one item per distinct buffer, at the first instruction that makes it.
    Its card is the step and the buffer as the step tells buffers apart (for `memory-space` the printed
    text, for the others the text without its memory space), and the layer's target."""
    return [item for target, hlo in program.layers("tpu").items() for item in _layer_items(program, target, hlo)]


def _layer_items(program: ProgramRecord, target: str, hlo: CompiledLayer) -> list[Item]:
    listing = Listing(hlo)
    seen: set[tuple[str, str]] = set()
    by_step: dict[str, list[Item]] = {step: [] for step, _ in _STEPS}
    for ins in hlo.instructions:
        d = listing.definition(ins)
        if d is None:
            continue
        for b in d.buffers:
            for step, make in _STEPS:
                # The layout question does not depend on the memory space; the others are asked per printed text.
                key = (step, b.text.split("S(")[0] if step != "memory-space" else b.text)
                if key in seen:
                    continue
                made = make(b)
                if made is None:
                    continue
                seen.add(key)
                answer, wrong = made
                texts = {answer}
                wrong = [w for w in wrong if not (w[0] in texts or texts.add(w[0]))]  # distinct, first rule kept
                if len(wrong) < 2:
                    continue
                at = f"%{d.name}, compiled HLO line {d.line}"
                by_step[step].append(Item(
                    question=_question(step, b, d, at), layer=target, step=step, card=(key[1], step, target),
                    answer=choice(choice_item(answer, wrong[:3], program.slug, step, b.text)),
                    context=(Note(which_compile(hlo)), Lines(target, d.line, d.line, cut=True)),
                    facts={"hlo_line": d.line, "buffer": b.text}))
    return [item for step_items in by_step.values() for item in step_items]
