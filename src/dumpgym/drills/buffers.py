"""The buffer drill: whose buffer a result takes (donation), real copies against free bitcasts, and layout order.

Five questions (`step`), each answered from the record, as MLIR and XLA read the modules (`_buffers`):
- `lowered-alias` (StableHLO): which argument's buffer may result k take? (`tf.aliasing_output`; a choice
  of arguments)
- `compiled-alias` (TPU and CPU HLO): tap the parameter whose buffer output {k} goes into
  (`input_output_alias`; a `line` form on the entry's parameter lines)
- `copy-or-bitcast` (TPU and CPU HLO): this instruction, written operand → result with its name and opcode
  hidden: does it move bytes, or only relabel them? (a two-way choice, each side equally weighted)
- `minor-axis` (CPU HLO) and `major-axis` (CPU and TPU HLO): in a layout like `{0,2,1}`, tap every axis laid
  out minor (major) of axis k (`axes`), asked only where the shape alone does not give the set
A program that donates nothing is asked once, at StableHLO, so that "none" stays a real answer there.
"""
from __future__ import annotations

import math

from dumpgym.drills import drill
from dumpgym.drills._avals import choice_item
from dumpgym.drills._buffers import Compiled, Lowered, Move, compiled, lowered, moves
from dumpgym.drills._evenly import places
from dumpgym.drills._tpu import MEMORY_SPACES, Buffer, Listing, which_compile
from dumpgym.drills.answer import AxisSet, Choice, LinePick, Misreading, axes_key
from dumpgym.drills.item import Item, Lines, Note, from_draft, refer
from dumpgym.record.schema import CompiledLayer, ProgramRecord

PER_PROGRAM = 4  # a program with more items of one step shares this much weight among them
PROGRAM_CAP = 8  # and a program with many buffers (sdpa's layouts) at most this much in all
# The one "nothing is donated" item of a program without donation: at 0.25 `none` answered 46% of the
# step's weight (one donating program against ten), and the longest option, `none`, beat chance by 17 points.
CONTRAST_WEIGHT = 0.1
NONE_LOWERED = "none: it gets a buffer of its own"
NONE_COMPILED = "none: XLA gives it a fresh buffer"
# Said before the question: each option is an instruction with its name and opcode hidden.
_NOTE = "Each option reads operand buffer → result buffer. "


def _distinct(answer: str, wrong: list[tuple[str, str, str]], limit: int = 3) -> list[tuple[str, str, str]]:
    """The first wrong option of each text, none equal to the answer, at most `limit`."""
    seen, out = {answer}, []
    for w in wrong:
        if w[0] not in seen:
            seen.add(w[0])
            out.append(w)
    return out[:limit]


# --- donation, lowered ---

def _arg(sig: Lowered, i: int) -> str:
    return f"%arg{i} ({sig.args[i]})"


def _arg_status(sig: Lowered, i: int) -> str:
    """What argument i's own attributes say about its buffer."""
    if i in sig.aliasing:
        return f"its `tf.aliasing_output = {sig.aliasing[i]}` lends its buffer to result {sig.aliasing[i]}"
    return "it carries no `tf.aliasing_output`: it was not donated, and XLA never writes into a buffer the caller keeps"


def _lowered_item(program: ProgramRecord, sig: Lowered, k: int) -> dict | None:
    """"Which argument's buffer may result k take?", read off `main`'s argument attributes."""
    typ, lender = sig.results[k], sig.lender(k)
    answer = _arg(sig, lender) if lender is not None else NONE_LOWERED
    wrong = []
    if lender is not None:
        wrong.append((NONE_LOWERED, "looked-at-result",
                      f"looked for the alias on result {k}'s side of the signature; it is written on the argument "
                      f"that lends its buffer: %arg{lender} has `tf.aliasing_output = {k}`"))
    same = [i for i in range(len(sig.args)) if sig.args[i] == typ and i != lender]
    for i in sorted(same, key=lambda i: (abs(i - k), i))[:2]:
        wrong.append((_arg(sig, i), "same-type",
                      f"%arg{i} has result {k}'s type, `{typ}`, but a matching type is not enough: "
                      f"{_arg_status(sig, i)}"))
    if k < len(sig.args) and k != lender:
        wrong.append((_arg(sig, k), "position-pairing",
                      f"paired result {k} with %arg{k} by position; {_arg_status(sig, k)}"))
    wrong = _distinct(answer, wrong)
    if len(wrong) < 2:
        return None
    feedback = (f"%arg{lender} carries `tf.aliasing_output = {k}`: its buffer was donated, and result {k} may "
                "be written into it." if lender is not None else
                f"No argument of `main` carries `tf.aliasing_output = {k}`: nothing lends result {k} a buffer.")
    return {
        "eqn": None, "layer": "stablehlo", "step": "lowered-alias", "skill": "donation", "output": k,
        "feedback": feedback,
        "question": f"Result {k} of `main`, a `{typ}`: which argument's buffer may XLA write it into?",
        "shown": [sig.line],
        **choice_item(answer, wrong, program.slug, "lowered-alias", k),
    }


# --- donation, compiled ---

def _ordinal(n: int) -> str:
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(n, f"{n}th")


def _param_status(c: Compiled, number: int) -> str:
    """What the alias table says about `parameter(number)`."""
    outs = [o for o, p in c.aliasing.items() if p == number]
    if not c.has_table:
        return "the module has no `input_output_alias` at all: nothing was donated"
    if outs:
        return f"the table gives its buffer to output {{{outs[0]}}}"
    return f"no entry of the table names parameter {number}: it was not donated"


def _compiled_explain(c: Compiled, k: int, answer: Parameter, row) -> dict[str, str]:
    """Why each parameter row a misreading taps is not where output {k} goes (row numbers as strings)."""
    where = f"the entry `{{{k}}}: ({answer.number}, {{}}, may-alias)` of `input_output_alias` names `parameter({answer.number})`"
    out: dict[str, str] = {}

    def say(q: Parameter, text: str):
        if q is not answer:
            out.setdefault(str(row(q)), text)

    if answer.number < len(c.parameters):
        shown = c.parameters[answer.number]
        say(shown, f"counted the parameter lines from the top: %{shown.ins.name} is printed "
                   f"{_ordinal(answer.number + 1)} but is `parameter({shown.number})`; {where}")
    twin = c.by_number(k)
    if twin is not None:
        say(twin, f"paired output {{{k}}} with `parameter({k})` by position; {_param_status(c, k)}")
    for q in c.parameters:
        if q.shape == c.outputs[k]:
            say(q, f"%{q.ins.name} has output {{{k}}}'s shape, `{q.shape}`, but {_param_status(c, q.number)}")
    for q in c.parameters:
        say(q, f"%{q.ins.name} is `parameter({q.number})`: {_param_status(c, q.number)}")
    return out


def _compiled_item(program: ProgramRecord, target: str, hlo: CompiledLayer, c: Compiled, k: int) -> Item | None:
    """"Tap the parameter whose buffer output {k} goes into", on the entry's lines up to its last parameter,
    read off the module's alias table; None for an output the table gives no parameter."""
    p = c.aliasing.get(k)
    answer = c.by_number(p) if p is not None else None
    if answer is None:
        return None
    listing = Listing(hlo)
    entry = next(comp for comp in hlo.computations if comp.entry)
    first, last = entry.lines[0], max(q.ins.line for q in c.parameters)
    header = Listing(hlo).lines[0].split(", entry_computation_layout=")[0]  # the module line, up to the layouts
    which = f"output {{{k}}} (member {k} of the ROOT tuple)" if len(c.outputs) > 1 else "the entry's result"
    explain = _compiled_explain(c, k, answer, lambda q: q.ins.line - first + 1)
    return Item(
        question=(f"The module's alias table says where each donated output goes. Tap the parameter line whose "
                  f"buffer XLA writes {which}, a `{c.outputs[k]}`, into."),
        answer=LinePick(answer.ins.line - first + 1, (answer.ins.line - first + 1,), explain),
        context=(Lines(target, first, last, cut=True), Note(which_compile(hlo)),
                 *refer(program, target, [header]), Lines(target, c.root_line, c.root_line, cut=True)),
        card=("compiled-alias", target, f"output={k}"), layer=target, step="compiled-alias", skill="donation",
        feedback=(f"`{{{k}}}: ({p}, {{}}, may-alias)` in `input_output_alias` names `parameter({p})`, which is "
                  f"%{answer.ins.name} on HLO line {answer.ins.line}: output {{{k}}} is written into its buffer."),
        facts={"hlo_line": answer.ins.line, "output": k, "parameter": answer.ins.name})


def _alias_items(program: ProgramRecord) -> list[Item]:
    """Every result of a program that donates, at StableHLO and at each TPU and CPU layer; one StableHLO
    contrast item, `none` its answer, for a program that does not."""
    sig = lowered(program)
    comps = [(target, hlo, compiled(hlo)) for target, hlo in (*program.layers("tpu").items(),
                                                              *program.layers("cpu").items())]
    comps = [(t, h, c) for t, h, c in comps if c is not None]
    if sig is None:
        return []
    if sig.aliasing or any(comp.aliasing for _, _, comp in comps):
        drafts = [_lowered_item(program, sig, k) for k in range(len(sig.results))]
        items = [_item(program, d) for d in drafts if d is not None]
        for target, hlo, comp in comps:
            items += [i for i in (_compiled_item(program, target, hlo, comp, k) for k in range(len(comp.outputs)))
                      if i is not None]
        return items
    item = _lowered_item(program, sig, 0)
    return [_item(program, {**item, "weight": CONTRAST_WEIGHT})] if item else []


# --- real copies and free bitcasts ---

def _physical(b: Buffer) -> str:
    """The sizes as memory holds them, major to minor: `32×64`."""
    return "×".join(str(b.dims[i]) for i in reversed(b.minor_to_major)) or "one element"


def _space(n: int) -> str:
    return MEMORY_SPACES[n].split(",")[0] if n in MEMORY_SPACES else f"memory space {n}"


def _tiling(b: Buffer) -> str:
    return "".join("(" + ",".join(map(str, t)) + ")" for t in b.tiles) or "none"


def _same_order(m: Move) -> bool:
    """Whether the bitcast keeps its elements in the same order in memory, tiles aside: untiled (a bitcast
    keeps the linear order), or tiled alike over the same two minor-most sizes (the tiles hold the same
    elements, so only the major sizes regroup)."""
    s, d = m.src, m.dst
    if not s.tiles and not d.tiles:
        return True
    minor = [tuple(b.dims[i] for i in b.minor_to_major[:2]) for b in (s, d)]
    return s.tiles == d.tiles and minor[0] == minor[1]


def _why_free(m: Move) -> str:
    """Why a bitcast moves nothing, in the buffers' own sizes and tiles."""
    if not m.src.tiles and not m.dst.tiles:
        tiled = "neither tiled"  # a CPU's layouts have no tiles: "tiled the same" would invent them
    elif m.src.tiles == m.dst.tiles:
        tiled = f"both tiled {_tiling(m.src)}"
    else:
        tiled = f"tiled {_tiling(m.src)} and {_tiling(m.dst)}, which store the same {m.dst.padded_bytes():,} bytes"
    laid = f"read major to minor, the operand is laid out {_physical(m.src)} and the result {_physical(m.dst)}, {tiled}"
    if math.prod(m.src.dims) <= 1:  # `s32[1]` to `s32[]`: one element, which no layout can put elsewhere
        return f"{laid}: a single element, in the same bytes, so XLA only relabels the buffer"
    if _same_order(m):
        return f"{laid}: the same bytes in the same order, so XLA only relabels the buffer"
    # The tiles differ over the minor sizes, which in general regroups the elements; XLA found that these
    # sizes leave every element where it was (it printed a bitcast), which is what the reader is told.
    return (f"{laid}: retiled like this, every element still sits at the same byte, so XLA only relabels "
            "the buffer")


def _as_copy(m: Move) -> tuple[str, str]:
    """The misreading that takes this bitcast for a copy: its rule and reason."""
    same = _why_free(m)
    if m.src.dims == m.dst.dims:
        return "relayout-as-copy", f"the layout text changes, but {same}"
    if sorted(m.src.dims) == sorted(m.dst.dims) and _physical(m.src) == _physical(m.dst):
        return "transpose-as-copy", f"the axes are reordered, and the layout reorders with them: {same}"
    return "reshape-as-copy", f"the dims change from {m.src.plain} to {m.dst.plain}, but {same}"


def _as_free(m: Move) -> tuple[str, str]:
    """The misreading that takes this copy for a free relabelling: its rule and reason."""
    s, d = m.src, m.dst
    if s.minor_to_major != d.minor_to_major:
        return "relayout-as-free", (f"the minor axis goes from {s.minor_to_major[0]} to {d.minor_to_major[0]}: "
                                    f"{_physical(s)} becomes {_physical(d)} in memory, so every element moves")
    if s.tiles != d.tiles:
        return "retile-as-free", (f"same dims and order, but the tiling goes from {_tiling(s)} to {_tiling(d)}: "
                                  "the elements regroup into other tiles, which means writing them anew")
    return "space-move-as-free", (f"same dims and layout, but the operand lives in {_space(s.memory_space)} and the "
                                  f"result in {_space(d.memory_space)}: bytes cannot change memory without being "
                                  "copied")


# What a reader who picked the wrong side took the move for, by the misreading's rule: a miss shows this, then
# the feedback's why (which would otherwise be printed twice).
_THOUGHT = {
    "relayout-as-free": "took the new layout for a relabelling; a new minor axis moves every element",
    "retile-as-free": "took the new tiling for a relabelling; other tiles mean writing the elements anew",
    "space-move-as-free": "took a move between memories for a relabelling",
    "relayout-as-copy": "took the changed layout text for moved bytes",
    "transpose-as-copy": "took the reordered axes for moved bytes",
    "reshape-as-copy": "took the changed dims for moved bytes",
}


def _distinct_moves(found: list[Move]) -> list[Move]:
    """One move per operand → result text, the first printed."""
    seen, out = set(), []
    for m in sorted(found, key=lambda m: m.ins.line):
        if m.label not in seen:
            seen.add(m.label)
            out.append(m)
    return out


COPIES, FREE = "a copy: the bytes move", "a bitcast: the same bytes"
UNMATCHED_WEIGHT = 0.5  # a layer's copies with no bitcast beside them (or bitcasts with no copy)


def _move_items(program: ProgramRecord) -> list[Item]:
    """One `copy-or-bitcast` item per distinct copy and bitcast of each TPU and CPU layer, the two sides
    weighing the same over the program, so that neither answer is the habit."""
    found = [(target, hlo, m) for target, hlo in (*program.layers("tpu").items(), *program.layers("cpu").items())
             for m in _layer_moves(hlo)]
    count = {side: sum(m.copies == side for _, _, m in found) for side in (True, False)}
    asked, kept = [], set()
    for target, hlo, m in found:
        other = count[not m.copies]
        if not other:  # no move of the other kind in the program: one look-alike per layer is enough
            if (target, m.copies) in kept:
                continue
            kept.add((target, m.copies))
        asked.append((target, hlo, m, _balance(count[m.copies], other)))
    # The right option's place dealt per layer (the kind's cap scales a layer's items together), so that a
    # deep program's many bitcasts of one side do not leave one place right in most of the weight.
    at = {}
    for target in dict.fromkeys(t for t, _, _, _ in asked):
        mine = [(m, w) for t, _, m, w in asked if t == target]
        at.update(zip(((target, m.ins.name) for m, _ in mine),
                      places([m.copies for m, _ in mine], [w for _, w in mine], 2, program.slug, target)))
    return [_move_item(target, hlo, m, weight, at[target, m.ins.name]) for target, hlo, m, weight in asked]


def _balance(mine: int, other: int) -> float:
    """A move's weight, so that a program's copies and bitcasts weigh the same: the larger side is scaled
    down to the smaller (not the kind's cap, which the registry applies after)."""
    if not other:
        return UNMATCHED_WEIGHT
    return 1.0 if other >= mine else round(other / mine, 3)


def _layer_moves(hlo: CompiledLayer) -> list[Move]:
    """A layer's copies and bitcasts worth asking, one per operand → result text, in print order."""
    # A no-op, and a bitcast whose memory-space mark changes (a fusion's parameter view), teach nothing here.
    found = [m for m in moves(hlo) if m.src.text != m.dst.text
             and (m.copies or m.src.memory_space == m.dst.memory_space)]
    copies = _distinct_moves([m for m in found if m.copies])
    bitcasts = _distinct_moves([m for m in found if not m.copies and m.label not in {c.label for c in copies}])
    return sorted((*copies, *bitcasts), key=lambda m: m.ins.line)


def _move_item(target: str, hlo: CompiledLayer, m: Move, weight: float, right: int) -> Item:
    """"Does this instruction move bytes, or only relabel them?", shown as its operand's and result's buffers,
    the right option at place `right`."""
    rule, why = _as_free(m) if m.copies else _as_copy(m)
    reason = _THOUGHT[rule]  # what the pick took it for; the why is the feedback's, said once
    options = (COPIES, FREE) if (right == 0) == m.copies else (FREE, COPIES)
    return Item(
        question=("This instruction, its name and opcode hidden, turns its operand's buffer into its result's. "
                  "Does it move bytes (a copy), or only relabel them (a bitcast)?"),
        answer=Choice(options, right, tuple("" if k == right else reason for k in range(2)),
                      tuple("" if k == right else rule for k in range(2))),
        context=(Note(which_compile(hlo)), Note(f"operand  {m.src.text}\nresult   {m.dst.text}")),
        card=("copy-or-bitcast", target, m.ins.name), layer=target, step="copy-or-bitcast", skill="copy-or-bitcast",
        weight=weight,
        feedback=("It is a copy: " if m.copies else "It is a bitcast: ") + why + ".",
        facts={"hlo_line": m.ins.line, "instruction": m.ins.name, "copies": m.copies})


# --- which axis, in a layout ---

def _layout_text(b: Buffer) -> str:
    return "{" + ",".join(map(str, b.minor_to_major)) + "}"


def _beside(b: Buffer, step: str, k: int) -> tuple[int, ...]:
    """The axes laid out minor of axis k (`minor-axis`: before it in `minor_to_major`) or major of it
    (`major-axis`: after it)."""
    m2m = b.minor_to_major
    place = m2m.index(k)
    return tuple(m2m[:place]) if step == "minor-axis" else tuple(m2m[place + 1:])


def _habit(step: str, k: int, rank: int) -> tuple[int, ...]:
    """What the row-major habit takes for the axes minor of axis k (those after it) or major of it (before it)."""
    return tuple(range(k + 1, rank)) if step == "minor-axis" else tuple(range(k))


def _shape_gives(b: Buffer, step: str, k: int, answer: tuple[int, ...]) -> bool:
    """Whether a reader of the shape alone, not the layout, would tap `answer`: it is empty (what tapping
    nothing submits), what the row-major habit gives (the axes after k minor of it, those before it major),
    or exactly the largest or the smallest dims (large dims tend to be laid out minor, small ones major)."""
    rank, dims = len(b.dims), b.dims
    by_size = [tuple(a for a in range(rank) if dims[a] == pick(dims)) for pick in (max, min)]
    return not answer or sorted(answer) in ([*_habit(step, k, rank)], *map(list, by_size))


def _layout_question(b: Buffer, step: str, k: int) -> tuple[tuple[int, ...], dict[str, Misreading]]:
    """The answer and misreadings (a set of axes as the `axes` form keys it -> why) for "which axes are laid
    out minor (or major) of axis k" in this buffer's layout."""
    lay, rank = _layout_text(b), len(b.dims)
    minor = step == "minor-axis"
    answer, flipped = _beside(b, step, k), _beside(b, "major-axis" if minor else "minor-axis", k)
    side, before = ("minor", "before") if minor else ("major", "after")
    misread: dict[str, Misreading] = {}
    for axes, rule, reason in (
            (flipped, "major-to-minor", f"read `{lay}` major first; XLA lists the axes minor first, so the axes "
                                        f"{before} axis {k} in it are the ones {side} of it"),
            (_habit(step, k, rank), "logical-order", f"assumed the row-major order, the last axis minor; this "
                                                     f"layout `{lay}` puts {_axes_text(answer)} {side} of axis {k}"),
            ((*answer, k), "counted-itself", f"tapped axis {k} too; it is the axis asked about, not one laid "
                                             f"out {side} of it")):
        key = axes_key(axes)
        if set(axes) != set(answer):
            misread.setdefault(key, Misreading(reason, rule))
    return answer, misread


def _axes_text(axes) -> str:
    axes = sorted(axes)
    return "no axis" if not axes else f"axis {axes[0]}" if len(axes) == 1 else \
        "axes " + ", ".join(map(str, axes[:-1])) + f" and {axes[-1]}"


def _layout_items(program: ProgramRecord) -> list[Item]:
    """Per layer, for each distinct buffer whose layout breaks the row-major habit at the step's end, and
    each axis k, one item per step ("tap the axes laid out minor of axis k", or major of it), asked only
    where the shape alone leaves the answer open (`_shape_gives`)."""
    items, seen = [], set()
    # The TPU's minor axis is the layout drill's; a GPU's layouts are left to the fusions they serve. Rank 3
    # at least: the one rank-2 layout that is not row-major is `{0,1}`, which being asked would give away.
    layers = [*((t, hlo, ("minor-axis", "major-axis")) for t, hlo in program.layers("cpu").items()),
              *((t, hlo, ("major-axis",)) for t, hlo in program.layers("tpu").items())]
    for layer, hlo, steps in layers:
        listing = Listing(hlo)
        for ins in hlo.instructions:
            d = listing.definition(ins)
            for b in d.buffers if d else ():
                rank = len(b.dims)
                if rank < 3 or b.minor_to_major == tuple(range(rank - 1, -1, -1)):
                    continue
                for step in steps:
                    # The step's end of the layout must break the row-major habit (a major axis other than
                    # 0, a minor axis other than the last): elsewhere the order it asks about is the habit's.
                    end = b.minor_to_major[-1] if step == "major-axis" else b.minor_to_major[0]
                    if (layer, step, b.plain, b.minor_to_major) in seen or end == (0 if step == "major-axis"
                                                                                   else rank - 1):
                        continue
                    seen.add((layer, step, b.plain, b.minor_to_major))
                    for k in range(rank):
                        answer, misread = _layout_question(b, step, k)
                        if len(misread) < 2 or _shape_gives(b, step, k, answer):
                            continue
                        items.append(_layout_item(layer, hlo, d, b, step, k, answer, misread))
    return items


def _layout_item(layer: str, hlo: CompiledLayer, d, b: Buffer, step: str, k: int, answer: tuple[int, ...],
                 misread: dict[str, Misreading]) -> Item:
    """"Tap every axis laid out minor (major) of axis k" in one buffer's layout."""
    lay = _layout_text(b)
    side, pace, before = (("minor", "faster", "before") if step == "minor-axis" else ("major", "slower", "after"))
    return Item(
        question=f"In `{b.plain}{lay}` (%{d.name}, compiled HLO line {d.line}), tap every axis laid out {side} "
                 f"of axis {k} (changing {pace} than it as memory is walked).",
        answer=AxisSet(b.plain, b.dims, answer, misread),
        context=(Note(which_compile(hlo)), Lines(layer, d.line, d.line, cut=True, numbered=True)),
        card=(step, layer, b.text, f"axis={k}"), layer=layer, step=step, skill="layout-order",
        feedback=(f"XLA writes `minor_to_major`, minor first: `{lay}` names {_axes_text(answer)} {before} axis "
                  f"{k}, so {'they are' if len(answer) > 1 else 'it is'} {side} of it."),
        facts={"hlo_line": d.line, "buffer": b.text, "axis": k})


def _item(program: ProgramRecord, draft: dict) -> Item:
    """The pool's item for a draft; its card is the step, the layer and what it asks about: the result or
    output (donation), the instruction (copies and bitcasts), the buffer (layouts)."""
    layer = draft["layer"]  # stablehlo, or the compile target id of a compiled layer
    about = draft.get("buffer") or draft.get("instruction") or f"output={draft['output']}"
    return from_draft(draft, card=(draft["step"], layer, about), layer=layer,
                      context=refer(program, layer, draft["shown"]))


# Each (layer, step) of a program shares at most 4 of weight, the program at most 8 (sdpa has two dozen
# buffers); a contrast item keeps its own 0.1 before that scaling.
@drill("buffers", number="09", title="buffers: donated, copied, laid out",
       aim="Read where a buffer goes: which donated argument a result takes over, which instruction really "
           "copies bytes and which only relabels them, and which axes a layout puts minor or major of another.",
       per_program=PER_PROGRAM, cap_by=("layer", "step"), program_cap=PROGRAM_CAP)
def buffer_items(program: ProgramRecord) -> list[Item]:
    """Donation items (lowered and compiled), copy-or-bitcast items, and layout-order items of one program."""
    return [*_alias_items(program), *_move_items(program), *_layout_items(program)]
