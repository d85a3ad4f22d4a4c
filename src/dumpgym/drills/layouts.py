"""The layout drill: read a TPU buffer's layout down to the shape its tile pads it to, the bytes it takes, and
which instructions' results sit in which memory space.

Asked of each TPU layer (a program's `compiled` layers whose backend is `tpu`). Every buffer is as XLA's
shape parser read it when the program was compiled (the layer's `buffers`, `hlo_facts.read_buffer`):
`minor_to_major`, the tiles and the element size come from XLA's `Layout`; the padded size is
XLA's tiling rule applied to them (the tests compare it with `memory_analysis()` of a compile).
Three questions (`step`), each answered by building the answer: `padded-shape` (type the shape the first
tile pads the buffer to), `bytes` (type the bytes it takes) and `memory-space` (tap every row of a few
instruction lines whose result holds a buffer in one named memory space). A typed value that one
misreading of this very buffer's notation gives gets that misreading's reason.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

from dumpgym.cost.estimate import buffer_computations
from dumpgym.drills import drill
from dumpgym.drills._avals import order
from dumpgym.drills._spread import answer_step, spread_weight
from dumpgym.drills._tpu import MEMORY_SPACES, Buffer, Definition, Listing, placed_evenly, which_compile
from dumpgym.drills.item import Item, Lines, LineSet, Misreading, Note, Typed
from dumpgym.record.schema import CompiledLayer, ProgramRecord, padded_elements


def padded_shape(dims, minor_to_major, tile) -> tuple[int, ...]:
    """The logical shape a buffer fills once one tile pads its most minor axes: the tile's last number rounds
    up the minor axis, the one before it the next, and so on (`T(8,128)` on `{1,0}` pads axis 0 to 8s,
    axis 1 to 128s)."""
    physical = list(reversed(minor_to_major))  # major to minor
    out = list(dims)
    for axis, t in zip(physical[::-1], tuple(tile)[::-1]):
        out[axis] = -(-dims[axis] // t) * t
    return tuple(out)


def _shape_text(shape) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


def _tile_text(tile) -> str:
    return "T(" + ",".join(map(str, tile)) + ")"


def _layout_text(b: Buffer) -> str:
    return "{" + ",".join(map(str, b.minor_to_major)) + "}"


def _padding_words(b: Buffer, tile=None) -> str:
    """How a tile pads this buffer, in words: `axis 0 from 3 to 8, axis 1 from 5 to 128`."""
    tile = tile or b.tiles[0]
    if not b.dims:
        return f"its one element to a whole tile of {math.prod(tile)}"
    padded = padded_shape(b.dims, b.minor_to_major, tile)
    parts = [f"axis {a} from {b.dims[a]} to {p}" for a, (d, p) in enumerate(zip(b.dims, padded)) if d != p]
    if len(tile) > len(b.dims):  # the tile's leading numbers cover axes the array does not have
        parts.append(f"the {len(tile) - len(b.dims)} axis{'es' if len(tile) - len(b.dims) > 1 else ''} it lacks "
                     f"to {', '.join(map(str, tile[:len(tile) - len(b.dims)]))}")
    return ", ".join(parts) or "nothing: the sizes are multiples of the tile"


# --- padded-shape -------------------------------------------------------------------------------

def _padded(b: Buffer):
    """The answer, the misreadings and the feedback for "what shape does the tile pad this buffer to?";
    None where the tile pads nothing (the answer would be the printed shape) or covers axes it lacks."""
    if not b.dims or not b.tiles or len(b.tiles[0]) > len(b.dims):
        return None
    m2m, tile, rank = b.minor_to_major, b.tiles[0], len(b.dims)
    answer = padded_shape(b.dims, m2m, tile)
    if answer == b.dims:
        return None
    layout = _layout_text(b)
    wrong = [
        (b.dims, "no-padding", f"left the sizes as printed; `{_tile_text(tile)}` pads {_padding_words(b)}"),
        (padded_shape(b.dims, tuple(reversed(m2m)), tile), "major-to-minor",
         f"read `{layout}` major to minor; XLA lists the axes minor first, so axis {m2m[0]} is the minor one "
         f"and the tile's last number, {tile[-1]}, runs along it"),
    ]
    if len(tile) >= 2:
        wrong.append((padded_shape(b.dims, m2m, tuple(reversed(tile))), "tile-numbers-swapped",
                      f"put the tile's {tile[0]} on the minor axis; `{_tile_text(tile)}` is written like a shape, "
                      f"major first: {tile[-1]} along the minor axis {m2m[0]}"))
    if len(b.tiles) > 1 and len(b.tiles[-1]) <= rank:
        sub = b.tiles[-1]
        wrong.append((padded_shape(b.dims, m2m, sub), "sub-tile-as-tile",
                      f"padded by the last group `({','.join(map(str, sub))})`; it is a sub-tile inside each "
                      f"`{_tile_text(tile)}` tile, and the first group is the tile"))
    if m2m[0] != rank - 1:
        wrong.append((padded_shape(b.dims, tuple(range(rank - 1, -1, -1)), tile), "logical-order",
                      f"assumed the last axis is minor, as in a row-major array; the layout `{layout}` puts "
                      f"axis {m2m[0]} minor"))
    feedback = (f"`{layout}` makes axis {m2m[0]} minor and `{_tile_text(tile)}` lays its last number along it: "
                f"it pads {_padding_words(b)}, so the buffer fills {_shape_text(answer)}")
    return _shape_text(answer), [(_shape_text(v), rule, reason) for v, rule, reason in wrong], feedback


# --- bytes --------------------------------------------------------------------------------------

def _bytes(b: Buffer):
    """The answer, the misreadings and the feedback for "how many bytes of padding does the layout add?";
    None for a scalar (every scalar's tile makes it 512 bytes: a habit, not a reading) and where the tile
    pads nothing."""
    if not b.tiles or not b.dims:
        return None
    elements = padded_elements(b.dims, b.minor_to_major, b.tiles)
    dense = -(-math.prod(b.dims) * b.bits // 8)
    answer = b.padded_bytes() - dense
    if answer == 0:
        return None
    tile = b.tiles[0]
    tiles_text = "".join("(" + ",".join(map(str, t)) + ")" for t in b.tiles)
    wrong: list[tuple[int, str, str]] = [
        (0, "no-padding", f"took the buffer for dense; the tile `{_tile_text(tile)}` pads {_padding_words(b)}"),
        (b.padded_bytes(), "total-for-padding",
         f"gave the whole buffer's {b.padded_bytes():,} bytes; {dense:,} of them hold its {math.prod(b.dims)} elements"),
    ]
    if len(tile) == 2 and tile[0] != tile[1]:
        wrong.append((b.padded_bytes(((tile[1], tile[0]), *b.tiles[1:])) - dense, "tile-numbers-swapped",
                      f"padded the minor axis to {tile[0]} and the next to {tile[1]}; the tile's last number, "
                      f"{tile[1]}, runs along the minor axis {b.minor_to_major[0]}"))
    if b.bits < 8:  # XLA packs sub-byte elements (`E(4)`): counting a byte each is the slip
        wrong.append((elements - math.prod(b.dims), "element-width",
                      f"counted a whole byte per {b.dtype} element; the layout's `E({b.bits})` packs them "
                      f"{8 // b.bits} to a byte"))
    else:
        other = 4 if b.bits != 32 else 2
        wrong.append(((elements - math.prod(b.dims)) * other, "element-width",
                      f"counted {other} bytes per {b.dtype} element; a {b.dtype} takes {b.width()}"))
    if len(b.dims) >= 2:
        flipped = Buffer(b.text, b.dtype, b.dims, tuple(reversed(b.minor_to_major)), b.tiles, b.memory_space,
                         b.bits)
        wrong.append((flipped.padded_bytes() - dense, "major-to-minor",
                      f"read the layout major to minor and tiled axis {b.minor_to_major[-1]} as the minor one; "
                      f"axis {b.minor_to_major[0]} is minor"))
    feedback = (f"the tiles `{tiles_text}` pad {_padding_words(b)}: {elements:,} elements stored of "
                f"{math.prod(b.dims):,}, {b.width()} each, {b.padded_bytes():,} bytes for {dense:,} of data")
    return str(answer), [(str(v), rule, reason) for v, rule, reason in wrong], feedback


def one_tile(b: Buffer) -> bool:
    """Whether the buffer fits in one tile along every axis the tile covers (then padding it to the tile
    itself, a habit, gives the right answer without reading its sizes)."""
    tile = b.tiles[0]
    physical = list(reversed(b.minor_to_major))
    return all(b.dims[a] <= t for a, t in zip(physical[::-1], tuple(tile)[::-1]))


def _typed_question(step: str, d: Definition, k: int) -> str:
    """The question names the instruction and, in a tuple, which of its arrays: never the buffer's text, so
    its sizes and tile must be read off the line (a question quoting `f32[3,5]{1,0:T(8,128)}` hands a
    reader the tile, the answer of every buffer that fits in one)."""
    which = f"array {k + 1} of the tuple %{d.name} defines" if len(d.buffers) > 1 else f"the array %{d.name} defines"
    at = f"compiled HLO line {d.line}"
    if step == "padded-shape":
        return f"Once its tile pads it, what shape does {which} ({at}) fill, in its own axis order?"
    return f"How many bytes of padding does the layout add to {which} ({at})?"


_TYPED = (("padded-shape", _padded, "shape"), ("bytes", _bytes, "int"))


# --- memory-space -------------------------------------------------------------------------------

ROWS = 8  # instruction lines shown at most in one memory-space question


def _space_words(n: int) -> str:
    """A memory space as the question names it: `VMEM`, `HBM`, ... (the first words of its meaning)."""
    return MEMORY_SPACES[n].split(",")[0]


def _row_spaces(listing: Listing, line: int) -> set[int] | None:
    d = listing.definition(listing.at[line]) if line in listing.at else None
    return {b.memory_space for b in d.buffers} if d is not None and d.buffers else None


def _space_items(program: ProgramRecord, target: str, hlo: CompiledLayer, listing: Listing) -> list[Item]:
    """Per computation, every run of `ROWS` of its instruction lines (fewer in a shorter one), asked about one
    memory space that some but not all of its rows' results hold and that two rows of one opcode differ in
    (a `copy-done` into VMEM beside one into HBM, a fusion whose result is in VMEM beside one whose result
    is not): the opcode alone does not say which rows to tap, the layouts must be read. Only computations whose
    results are buffers are asked about: inside a fusion's body an intermediate has no buffer, in HBM or
    anywhere (it prints no `S(n)` without being in HBM)."""
    items = []
    buffered = buffer_computations(hlo)
    for comp in hlo.computations:
        if comp.name not in buffered:
            continue
        first, last = comp.lines
        body = list(range(first + 1, last))  # the signature and the closing brace are not instructions
        spaces = {n: _row_spaces(listing, n) for n in body}
        if not body or any(s is None for s in spaces.values()):
            continue
        for start in range(max(1, len(body) - ROWS + 1)):
            run = body[start:start + ROWS]
            if len(run) < 3 or any(not spaces[r] <= set(MEMORY_SPACES) for r in run):
                continue  # a space outside JAX's table (the corpus prints S(6)) is not asked about
            held = {n: sum(n in spaces[r] for r in run) for n in sorted(MEMORY_SPACES)}
            asked = [n for n, k in held.items() if 0 < k < len(run) and _alike_differ(listing, run, spaces, n)]
            if not asked:
                continue
            # Ask for a minority of the rows (tapping seven of eight teaches less than finding one).
            fewest = min(held[n] for n in asked)
            asked = [n for n in asked if 2 * held[n] <= len(run)] or [n for n in asked if held[n] == fewest]
            n = asked[order(len(asked), program.slug, target, run[0])[0]]
            items.append(_space_item(target, hlo, listing, run, spaces, n))
    edges = ["first" if i.answer.lines == (1,) else "last" if i.answer.lines == (i.facts["rows"],) else None
             for i in items]
    return placed_evenly(items, edges, ROWS)


def _alike_differ(listing: Listing, run: list[int], spaces: dict, n: int) -> bool:
    """Whether two rows of the run with one opcode differ in holding a buffer in space `n`."""
    by_opcode: dict[str, set[bool]] = {}
    for line in run:
        by_opcode.setdefault(listing.at[line].opcode, set()).add(n in spaces[line])
    return any(len(held) == 2 for held in by_opcode.values())


def _space_item(target: str, hlo: CompiledLayer, listing: Listing, run: list[int], spaces: dict, n: int) -> Item:
    rows = {line: k for k, line in enumerate(run, start=1)}
    right = [rows[line] for line in run if n in spaces[line]]
    mark = f"`S({n})`" if n else "no `S(n)`"
    explain = {}
    for line in run:
        name = listing.at[line].name
        held = sorted(spaces[line])
        if n in held:
            explain[str(rows[line])] = f"%{name}'s result holds a buffer with {mark}: {_space_words(n)}"
        else:
            marks = ", ".join(f"S({s})" if s else "no S(n)" for s in held)
            explain[str(rows[line])] = (f"%{name}'s result is in {' and '.join(_space_words(s) for s in held)} "
                                        f"({marks}), not {_space_words(n)}")
    where = "the layout prints no `S(n)`" if n == 0 else f"the layout prints `S({n})`"
    feedback = (f"{_space_words(n)} is memory space {n}, so {where}: row{'s' if len(right) > 1 else ''} "
                f"{', '.join(map(str, right))} of these {len(run)}")
    d = listing.at[run[0]]
    return Item(
        question=(f"In these {len(run)} lines of the TPU compile, tap every instruction whose result holds a "
                  f"buffer in {_space_words(n)}{' (the default space)' if n == 0 else ''}."),
        layer=target, step="memory-space", skill=f"space-{n}", card=(d.name, "memory-space", target),
        answer=LineSet(tuple(right), explain), feedback=feedback,
        context=(Lines(target, run[0], run[-1], cut=True), Note(which_compile(hlo))),
        facts={"hlo_line": run[0], "hlo_lines": [run[0], run[-1]], "space": n, "rows": len(run)})


# --- the kind -----------------------------------------------------------------------------------

# A program with more items of one step (the unrolled scan has two dozen buffers) shares 4 of weight among them.
@drill("layouts", number="10", title="TPU layouts, read",
       aim="Read a TPU buffer's layout: the shape its tile pads it to, the bytes it takes, and where it lives.",
       per_program=4, cap_by=("layer", "step"))
def layout_items(program: ProgramRecord) -> list[Item]:
    """Per TPU layer: for each distinct buffer (its text without its memory space), a `padded-shape` and a
    `bytes` item at the first instruction that makes it; and the `memory-space` runs of lines. Its card is
    the buffer (or the run's first instruction) and the step, and the layer's target."""
    return [item for target, hlo in program.layers("tpu").items() for item in _layer_items(program, target, hlo)]


def _layer_items(program: ProgramRecord, target: str, hlo: CompiledLayer) -> list[Item]:
    listing = Listing(hlo)
    typed = [item for step_items in _typed_items(target, hlo, listing).values() for item in _shared_by_value(step_items)]
    return typed + (_space_items(program, target, hlo, listing) if hlo.has_facts else [])


SHAPE_STEP = "layouts/padded-shape"


@answer_step(SHAPE_STEP)
def _shapes_asked(program: ProgramRecord) -> list[str]:
    return [item.answer.value for target, hlo in program.layers("tpu").items()
            for item in _typed_items(target, hlo, Listing(hlo))["padded-shape"]]


def _typed_items(target: str, hlo: CompiledLayer, listing: Listing) -> dict[str, list[Item]]:
    """The layer's `padded-shape` and `bytes` items by step, one per distinct buffer, not yet weighted."""
    seen: set[tuple[str, str]] = set()
    by_step: dict[str, list[Item]] = {step: [] for step, _, _ in _TYPED}
    for ins in hlo.instructions:
        d = listing.definition(ins)
        if d is None:
            continue
        for k, b in enumerate(d.buffers):
            for step, make, spelling in _TYPED:
                # The memory space does not change these answers: the buffer as printed but for its `S(n)`.
                key = (step, b.text.replace(f"S({b.memory_space})", "") if b.memory_space else b.text)
                if key in seen:
                    continue
                made = make(b)
                if made is None:
                    continue
                seen.add(key)
                answer, wrong, feedback = made
                misread = {}
                for value, rule, reason in wrong:
                    if value != answer and value not in misread:
                        misread[value] = Misreading(reason, rule)
                by_step[step].append(Item(
                    question=_typed_question(step, d, k), layer=target, step=step, card=(key[1], step, target),
                    answer=Typed(spelling, answer, misread=misread), feedback=feedback,
                    context=(Note(which_compile(hlo)), Lines(target, d.line, d.line, cut=True, numbered=True)),
                    facts={"hlo_line": d.line, "buffer": b.text, "one_tile": one_tile(b)}))
    return by_step


def _shared_by_value(items: list[Item]) -> list[Item]:
    """Items of one step whose answers are the same value share one item's weight: a program's many
    `f32[8,128]` buffers are one lesson, and a habit must not be what the sampler asks most. A buffer that
    fits in one tile (its answer is the tile itself, whatever its sizes) is asked a fifth as often. A padded
    shape is weighted, besides, over the number of built-in programs that ask it (`_spread`): many small
    models pad `[16,128]`, and typing it must not pay."""
    counts = Counter(i.answer.value for i in items)
    return [replace(i, weight=round((ONE_TILE_WEIGHT if i.facts["one_tile"] else 1) / counts[i.answer.value]
                                    * (spread_weight(SHAPE_STEP, i.answer.value) if i.step == "padded-shape" else 1), 3))
            for i in items]


ONE_TILE_WEIGHT = 0.2
