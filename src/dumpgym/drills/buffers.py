"""The buffer drill: whose buffer a result takes (donation), real copies against free bitcasts, and layout order.

Six questions (`step`), each answered from the record, as MLIR and XLA read the modules (`_buffers`):
- `lowered-alias` (StableHLO): which argument's buffer may result k take? (`tf.aliasing_output`)
- `compiled-alias` (TPU HLO): which parameter's buffer does output {k} go into? (`input_output_alias`)
- `real-copy` and `free-bitcast` (TPU HLO): of these instructions, written operand → result with the
  name and opcode hidden, which moves bytes, and which only relabels them?
- `minor-axis` (CPU HLO) and `major-axis` (CPU and TPU HLO): in a layout like `{0,2,1}`, which axis?
A program that donates nothing is asked once, at one layer, so that "none" stays a real answer.
"""
from __future__ import annotations

from dumpgym.drills import drill
from dumpgym.drills._avals import choice_item, order
from dumpgym.drills._layers import layer_seed
from dumpgym.drills._buffers import Compiled, Lowered, Move, compiled, lowered, moves
from dumpgym.drills._tpu import MEMORY_SPACES, Buffer, Listing, short, which_compile
from dumpgym.drills.item import Item, from_draft, refer
from dumpgym.record import CompiledLayer, ProgramRecord

PER_PROGRAM = 4  # a program with more items of one step shares this much weight among them
PROGRAM_CAP = 8  # and a program with many buffers (sdpa's layouts) at most this much in all
CONTRAST_WEIGHT = 0.25  # the one "nothing is donated" item of a program without donation
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
    return {
        "eqn": None, "layer": "stablehlo", "step": "lowered-alias", "output": k,
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


def _compiled_wrong(c: Compiled, k: int, answer) -> list[tuple[str, str, str]]:
    """The misreadings of "which parameter's buffer does output {k} go into?"."""
    p = c.aliasing.get(k)
    if p is not None:
        where = f"its entry `{{{k}}}: ({p}, {{}}, may-alias)` names `parameter({p})`"
    elif c.has_table:
        where = f"no entry of `input_output_alias` names output {{{k}}}"
    else:
        where = "the module has no `input_output_alias` at all: nothing was donated"
    wrong = []
    spot = p if p is not None else k
    if spot < len(c.parameters):
        shown = c.parameters[spot]
        how = "counted the parameter lines from the top" if p is not None else \
            f"paired output {{{k}}} with the parameter printed {_ordinal(spot + 1)}"
        wrong.append((shown.label, "listing-order",
                      f"{how}: %{shown.ins.name} is printed {_ordinal(spot + 1)} but is `parameter({shown.number})`; "
                      f"{where}"))
    if answer is not None:
        wrong.append((NONE_COMPILED, "fresh-buffer",
                      f"took output {{{k}}} for a new allocation, as if nothing were donated; {where}"))
    for q in c.parameters:
        if q.shape == c.outputs[k] and q is not answer:
            wrong.append((q.label, "same-shape",
                          f"%{q.ins.name} has output {{{k}}}'s shape, `{q.shape}`, but {_param_status(c, q.number)}"))
    twin = c.by_number(k)
    if twin is not None and twin is not answer:
        wrong.append((twin.label, "position-pairing",
                      f"paired output {{{k}}} with %{twin.ins.name}, `parameter({k})`, by position; "
                      f"{_param_status(c, k)}"))
    return wrong


def _compiled_item(program: ProgramRecord, target: str, hlo: CompiledLayer, c: Compiled, k: int) -> dict | None:
    """"Which parameter's buffer does output {k} go into?", read off the module's alias table."""
    p = c.aliasing.get(k)
    answer = c.by_number(p) if p is not None else None
    label = answer.label if answer is not None else NONE_COMPILED
    wrong = _distinct(label, _compiled_wrong(c, k, answer))
    if len(wrong) < 2:
        return None
    which = f"Output {{{k}}} (member {k} of the ROOT tuple)" if len(c.outputs) > 1 else "The entry's result"
    header = Listing(hlo).lines[0].split(", entry_computation_layout=")[0]  # the module line, up to the layouts
    return {
        "eqn": None, "layer": target, "step": "compiled-alias", "hlo_line": c.root_line, "output": k,
        "question": f"{which} is `{c.outputs[k]}`. Which parameter's buffer does XLA write it into?",
        "shown": [which_compile(hlo), header, *(short(Listing(hlo).lines[q.ins.line - 1]) for q in c.parameters),
                  c.root],
        **choice_item(label, wrong, program.slug, "compiled-alias", k),
    }


def _alias_items(program: ProgramRecord) -> list[dict]:
    """Every result of a program that donates; one contrast item, at one layer, for a program that does not."""
    sig = lowered(program)
    comps = [(target, hlo, compiled(hlo)) for target, hlo in program.layers("tpu").items()]
    if sig is None:
        return []
    if sig.aliasing or any(comp.aliasing for _, _, comp in comps):
        items = [_lowered_item(program, sig, k) for k in range(len(sig.results))]
        for target, hlo, comp in comps:
            items += [_compiled_item(program, target, hlo, comp, k) for k in range(len(comp.outputs))]
        return [i for i in items if i is not None]
    first = comps[0] if comps else None
    tries = [lambda: _lowered_item(program, sig, 0), lambda: first and _compiled_item(program, *first, 0)]
    for make in (tries[i] for i in order(2, program.slug, "contrast")):
        item = make()
        if item:
            return [{**item, "weight": CONTRAST_WEIGHT}]
    return []


# --- real copies and free bitcasts ---

def _physical(b: Buffer) -> str:
    """The sizes as memory holds them, major to minor: `32×64`."""
    return "×".join(str(b.dims[i]) for i in reversed(b.minor_to_major)) or "one element"


def _space(n: int) -> str:
    return MEMORY_SPACES[n].split(",")[0] if n in MEMORY_SPACES else f"memory space {n}"


def _tiling(b: Buffer) -> str:
    return "".join("(" + ",".join(map(str, t)) + ")" for t in b.tiles) or "none"


def _as_copy(m: Move) -> tuple[str, str]:
    """The misreading that takes this bitcast for a copy: its rule and reason."""
    tiled = "tiled the same" if m.src.tiles == m.dst.tiles else \
        f"tiled {_tiling(m.src)} and {_tiling(m.dst)}, which store the same {m.dst.padded_bytes():,} bytes"
    same = (f"read major to minor, the operand is laid out {_physical(m.src)} and the result {_physical(m.dst)}, "
            f"{tiled}: the same bytes in the same order, so XLA only relabels the buffer")
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


def _nearest(found: list[Move], line: int, rule, k: int = 3) -> list[Move]:
    """The `k` moves nearest `line`, one of each misreading first, so that the options differ in kind."""
    near = sorted(found, key=lambda m: (abs(m.ins.line - line), m.ins.line))
    firsts = list({rule(m)[0]: m for m in reversed(near)}.values())[::-1]
    return sorted(firsts[:k] + [m for m in near if m not in firsts][:k - len(firsts[:k])],
                  key=lambda m: m.ins.line)


def _distinct_moves(found: list[Move]) -> list[Move]:
    """One move per option text, the first printed."""
    seen, out = set(), []
    for m in sorted(found, key=lambda m: m.ins.line):
        if m.label not in seen:
            seen.add(m.label)
            out.append(m)
    return out


def _move_items(program: ProgramRecord) -> list[dict]:
    """`real-copy` items for each copy and `free-bitcast` items for each bitcast, among the other kind,
    in each TPU layer."""
    return [item for target, hlo in program.layers("tpu").items() for item in _layer_moves(program, target, hlo)]


def _layer_moves(program: ProgramRecord, target: str, hlo: CompiledLayer) -> list[dict]:
    # A no-op, and a bitcast whose memory-space mark changes (a fusion's parameter view), teach nothing here.
    found = [m for m in moves(hlo) if m.src.text != m.dst.text
             and (m.copies or m.src.memory_space == m.dst.memory_space)]
    copies = _distinct_moves([m for m in found if m.copies])
    bitcasts = _distinct_moves([m for m in found if not m.copies and m.label not in {c.label for c in copies}])
    items = []
    asks = (("real-copy", copies, bitcasts, _as_copy,
             "Which of these instructions moves bytes: a real copy, not a free bitcast?"),
            ("free-bitcast", bitcasts, copies, _as_free,
             "Which of these instructions is free: a bitcast, the same bytes relabelled, not a copy?"))
    for step, answers, others, misreading, question in asks:
        for m in answers:
            near = _nearest(others, m.ins.line, misreading)
            wrong = [(o.label, *misreading(o)) for o in near]
            if len(wrong) < 2:
                continue
            items.append({
                "eqn": None, "layer": target, "step": step, "hlo_line": m.ins.line, "instruction": m.ins.name,
                "instructions": {o.label: o.ins.name for o in (m, *near)},
                "question": _NOTE + question, "shown": [which_compile(hlo)],
                **choice_item(m.label, wrong, program.slug, step, m.label),
            })
    return items


# --- which axis, in a layout ---

def _axis(b: Buffer, a: int) -> str:
    return f"axis {a} (size {b.dims[a]})"


def _layout_text(b: Buffer) -> str:
    return "{" + ",".join(map(str, b.minor_to_major)) + "}"


def _layout_question(b: Buffer, step: str) -> tuple[str, list[tuple[str, str, str]]]:
    """The answer and misreadings for "which axis is minor" (or major) in this buffer's layout."""
    m2m, rank, lay = b.minor_to_major, len(b.dims), _layout_text(b)
    minor = step == "minor-axis"
    answer, flipped = (m2m[0], m2m[-1]) if minor else (m2m[-1], m2m[0])
    end, edge = ("first", "minor") if minor else ("last", "major")
    logical = rank - 1 if minor else 0
    places = m2m.index(0 if minor else rank - 1)
    wrong = [
        (_axis(b, flipped), "major-to-minor",
         f"read `{lay}` major first; XLA lists the axes minor first, so the {end} entry, axis {answer}, is the "
         f"{edge} one"),
        (_axis(b, logical), "logical-order",
         f"assumed axis {logical} is {edge}, as in a row-major array; this layout `{lay}` puts axis {answer} there"),
        (_axis(b, places), "entries-as-places",
         f"read `{lay}` as each axis's place in turn (axis {places}'s entry is {m2m[places]}, so it would be {edge}); "
         f"the entries name axes, minor first, so the {end}, axis {answer}, is {edge}"),
    ]
    return _axis(b, answer), wrong


def _layout_items(program: ProgramRecord) -> list[dict]:
    """Per layer, one item per step for each distinct buffer whose layout is not row-major."""
    items, seen = [], set()
    # The TPU's minor axis is the layout drill's; a GPU's layouts are left to the fusions they serve.
    layers = [*((t, hlo, 2, ("minor-axis", "major-axis")) for t, hlo in program.layers("cpu").items()),
              *((t, hlo, 3, ("major-axis",)) for t, hlo in program.layers("tpu").items())]
    for layer, hlo, min_rank, steps in layers:
        listing = Listing(hlo)
        lines = listing.lines
        for ins in hlo.instructions:
            d = listing.definition(ins)
            for b in d.buffers if d else ():
                rank = len(b.dims)
                if rank < min_rank or b.minor_to_major == tuple(range(rank - 1, -1, -1)):
                    continue
                for step in steps:
                    key = (layer, step, b.plain, b.minor_to_major)
                    answer, wrong = _layout_question(b, step)
                    wrong = _distinct(answer, wrong)
                    if key in seen or len(wrong) < 2:
                        continue
                    seen.add(key)
                    edge = "minor (its neighbours sit next to each other in memory)" if step == "minor-axis" \
                        else "major (the slowest to change as memory is walked)"
                    items.append({
                        "eqn": None, "layer": layer, "step": step, "hlo_line": d.line, "buffer": b.text,
                        "question": f"In `{b.plain}{_layout_text(b)}` (%{d.name}, compiled HLO line {d.line}), "
                                    f"which axis is {edge}?",
                        "shown": [which_compile(hlo), short(lines[d.line - 1])],
                        **choice_item(answer, wrong, program.slug, layer_seed(layer), step, b.text),
                    })
    return items


def _item(program: ProgramRecord, draft: dict) -> Item:
    """The pool's item for a draft; its card is the step, the layer and what it asks about: the result or
    output (donation), the instruction (copies and bitcasts), the buffer (layouts)."""
    layer = draft["layer"]  # stablehlo, or the compile target id of a compiled layer
    about = draft.get("buffer") or draft.get("instruction") or f"output={draft['output']}"
    return from_draft(draft, card=(draft["step"], layer, about), layer=layer,
                      context=refer(program, layer, draft["shown"]))


# Each (layer, step) of a program shares at most 4 of weight, the program at most 8 (sdpa has two dozen
# buffers); a contrast item keeps its own 0.25 before that scaling.
@drill("buffers", number="09", title="buffers: donated, copied, laid out",
       aim="Read where a buffer goes: which donated argument a result takes over, which instruction really "
           "copies bytes and which only relabels them, and which axis a layout puts minor or major.",
       per_program=PER_PROGRAM, cap_by=("layer", "step"), program_cap=PROGRAM_CAP)
def buffer_items(program: ProgramRecord) -> list[Item]:
    """Donation items (lowered and compiled), copy-or-bitcast items, and layout-order items of one program."""
    return [_item(program, d) for d in (*_alias_items(program), *_move_items(program), *_layout_items(program))]
