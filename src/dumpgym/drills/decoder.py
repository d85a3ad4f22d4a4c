"""GYM·01, the dot_general decoder: decode `dimension_numbers` in the jaxpr's, StableHLO's and the compiled spelling.

Each dot_general is read at every layer that shows it (`_dot.DotView`). The page shows that
layer's line(s) with the output type masked, and the two operands' types; the questions need
the axis lists and the shapes together, so no answer can be copied off the screen:

- `lhs-free` / `rhs-free`: which axes of one operand are free (neither contracted nor batch)?
- `contracted-size`: how many products does each output element sum?
- `output-axis`: which output axis does a given operand axis become?
- `output`: what type comes out? (StableHLO and HLO only: the jaxpr's is the shape oracle's.)

Dots that read alike (same axis lists and ranks) are asked once per program, layer and question;
the plain `x @ w` matmul gets one question per layer, and harder skeletons weigh more.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Iterator

from dumpgym.drills import drill
from dumpgym.drills._avals import choice_item, order
from dumpgym.drills._layers import text_lines
from dumpgym.drills._dot import DotView, hlo_view, jaxpr_view, stablehlo_view
from dumpgym.drills.item import Item, Note, choice
from dumpgym.record import CompiledLayer, EqnFact, ProgramRecord

# Every misreading rule the decoder's wrong options name (documented in docs/drills.md, GYM·01).
AXIS_MISREADINGS = ("contracted-for-free", "batch-for-free", "swapped-operands", "matmul-habit", "other-end",
                    "every-axis", "nothing", "batch-as-contracted", "free-as-contracted", "first-contracted-only",
                    "kept-place", "batch-forgotten", "summed-away", "batch-axes-last", "kept-contracted-axis",
                    "dropped-batch")
STEPS = ("lhs-free", "rhs-free", "contracted-size", "output-axis", "output")
MIN_OPTIONS = 3
MAX_WRONG = 3

# A question: its text, the answer's text, and wrong options as (text, rule, reason) in the order they are tried.
Question = tuple[str, str, list[tuple[str, str, str]]]


@dataclass(frozen=True)
class DecoderItem:
    """One decoder question about one dot at one layer: `options[answer]` is the decoded answer."""

    eqn: int
    question: str
    step: str
    layer: str
    options: list[str]
    answer: int
    reasons: list[str]
    rules: list[str]
    shown: list[str]
    weight: float
    jaxpr_lines: list[int]


def axes_text(view: DotView, side: str, axes) -> str:
    """Axes of one operand with their sizes: `axis 0 (size 64)`, `axes 0, 2 (sizes 2, 32)`, `none`."""
    axes = tuple(axes)
    if not axes:
        return "none"
    sizes = view.dims.sizes(side, axes)
    if len(axes) == 1:
        return f"axis {axes[0]} (size {sizes[0]})"
    return f"axes {', '.join(map(str, axes))} (sizes {', '.join(map(str, sizes))})"


# ---------------------------------------------------------------------------------------------
# The questions: each returns a `Question`, or None when it does not apply to this dot.


def _free_wrongs(view: DotView, side: str) -> Iterator[tuple[tuple[int, ...], str, str]]:
    d, other = view.dims, ("rhs" if side == "lhs" else "lhs")
    rank = d.rank(side)
    if d.axes(side, "contracting"):
        yield d.axes(side, "contracting"), "contracted-for-free", (
            f"took {side}'s contracting list {list(d.axes(side, 'contracting'))} for its free axes; "
            "those are summed away")
    if d.axes(side, "batch"):
        yield d.axes(side, "batch"), "batch-for-free", (
            f"took {side}'s batch list {list(d.axes(side, 'batch'))} for its free axes; "
            "batch axes pair with the other side's")
    yield d.free(other), "swapped-operands", f"swapped lhs and rhs: those are {other}'s free axes"
    habit = tuple(range(rank - 1)) if side == "lhs" else tuple(range(1, rank))
    yield habit, "matmul-habit", (
        "assumed plain x @ w: lhs keeps all but its last axis, rhs all but its first")
    yield tuple(sorted(rank - 1 - a for a in d.free(side))), "other-end", "counted the axes from the other end"
    yield tuple(range(rank)), "every-axis", f"took every axis of {side}"
    yield (), "nothing", f"assumed every {side} axis is contracted or batch"


def free_question(view: DotView, side: str) -> Question:
    """Which of `side`'s axes are free?"""
    d = view.dims
    rank = d.rank(side)
    wrong = [(axes_text(view, side, axes), rule, reason) for axes, rule, reason in _free_wrongs(view, side)
             if all(0 <= a < rank for a in axes)]
    return (f"Which {side} axes are free: neither contracted nor batch?", axes_text(view, side, d.free(side)), wrong)


def size_question(view: DotView) -> Question:
    """How many products does each output element sum?"""
    d = view.dims
    lc, lhs = d.lhs_contracting, d.lhs.shape

    def text(n: int) -> str:
        return f"{n} product" + ("" if n == 1 else "s")

    wrong = []
    if d.lhs_batch:
        wrong.append((text(d.contracted_size() * prod(d.sizes("lhs", d.lhs_batch))), "batch-as-contracted",
                      f"took the batch axes {list(d.lhs_batch)} for contracted ones"))
    for side in ("lhs", "rhs"):
        for a in d.free(side):
            wrong.append((text(d.operand(side).shape[a]), "free-as-contracted",
                          f"took {side}'s free axis {a} for the contracted one"))
    if len(lc) > 1:
        wrong.append((text(lhs[lc[0]]), "first-contracted-only",
                      f"counted only axis {lc[0]}; every axis of {list(lc)} is contracted"))
    if lc != (len(lhs) - 1,) and lhs:
        wrong.append((text(lhs[-1]), "matmul-habit", "assumed plain x @ w: lhs contracts its last axis"))
    mirrored = tuple(len(lhs) - 1 - a for a in lc)
    if mirrored != lc:
        wrong.append((text(prod(lhs[a] for a in mirrored)), "other-end",
                      f"counted lhs's axes from the other end: took {list(mirrored)} for {list(lc)}"))
    wrong.append((text(prod(lhs)), "every-axis", "multiplied every lhs axis"))
    return "How many products does each output element sum?", text(d.contracted_size()), wrong


def _asked_axis(view: DotView) -> tuple[str, int] | None:
    """The operand axis to ask about: one whose output position differs from its own index, rhs first."""
    d = view.dims
    for side, pool in (("rhs", d.free("rhs")), ("lhs", d.free("lhs")), ("rhs", d.rhs_batch)):
        for a in pool:
            if d.output_axis(side, a) != a:
                return side, a
    for side in ("rhs", "lhs"):
        if d.free(side):
            return side, d.free(side)[0]
    return None


def axis_question(view: DotView) -> Question | None:
    """Which output axis does one operand axis become?"""
    d = view.dims
    asked = _asked_axis(view)
    if asked is None:
        return None
    side, axis = asked
    out_rank, answer = len(d.out_shape()), d.output_axis(side, axis)

    def text(j: int | None) -> str:
        return "none: it is summed away" if j is None else f"output axis {j}"

    n_batch = len(d.lhs_batch)
    slips = [(axis, "kept-place", f"assumed {side} axis {axis} keeps its place")]
    if axis in d.free(side):
        i = d.free(side).index(axis)
        slips.append((n_batch + (len(d.free("rhs")) + i if side == "lhs" else i), "swapped-operands",
                      "swapped lhs and rhs: the output lists lhs's free axes before rhs's"))
        if n_batch:
            slips.append((answer - n_batch, "batch-forgotten",
                          f"forgot the batch {'axis' if n_batch == 1 else 'axes'} {list(d.lhs_batch)}, "
                          "which come first in the output"))
    slips.append((out_rank - 1 - answer, "other-end", "counted the output axes from the other end"))
    wrong = [(text(j), rule, reason) for j, rule, reason in slips if 0 <= j < out_rank]
    wrong.append((text(None), "summed-away", f"took {side} axis {axis} for a contracted axis"))
    return f"Which output axis does {side} axis {axis} become?", text(answer), wrong


def output_question(view: DotView) -> Question | None:
    """What type comes out? (asked where the output type is masked and is not the shape oracle's)"""
    d = view.dims
    if view.layer == "jaxpr" or view.out != view.type_text(d.out_shape()):
        return None  # jaxpr: a shapes item already; a non-default compiled layout would give the answer away
    lhs, rhs = d.lhs.shape, d.rhs.shape
    batch, lfree, rfree = d.sizes("lhs", d.lhs_batch), d.sizes("lhs", d.free("lhs")), d.sizes("rhs", d.free("rhs"))
    kept = d.sizes("lhs", [a for a in range(len(lhs)) if a not in d.lhs_batch])
    shapes = [
        (batch + rfree + lfree, "swapped-operands", "swapped lhs and rhs: lhs's free axes come first"),
        (lfree + rfree + batch, "batch-axes-last", "put the batch axes last; they lead the output"),
        (batch + kept + rfree, "kept-contracted-axis",
         f"kept lhs's contracted axes {list(d.lhs_contracting)}; contracted axes are summed away"),
        (lfree + rfree, "dropped-batch", f"took the batch axes {list(d.lhs_batch)} for contracted ones"),
        (tuple(lhs[:-1]) + tuple(rhs[1:]), "matmul-habit", "assumed plain x @ w: lhs[:-1] + rhs[1:]"),
    ]
    wrong = [(view.type_text(s), rule, reason) for s, rule, reason in shapes]
    return "What type comes out of this dot?", view.out, wrong


def _choice(view: DotView, made: Question | None, seed: tuple) -> dict | None:
    """options/answer/reasons/rules with distinct options, none of them in `shown` if it is the answer."""
    if made is None:
        return None
    question, answer, candidates = made
    if any(answer in block for block in view.shown()):
        return None
    seen, wrong = {answer}, []
    for option, rule, reason in candidates:
        if option not in seen and len(wrong) < MAX_WRONG:
            seen.add(option)
            wrong.append((option, rule, reason))
    if len(wrong) + 1 < MIN_OPTIONS:
        return None
    return {"question": question, **choice_item(answer, wrong, *seed)}


def view_items(eqn: EqnFact, view: DotView, steps=STEPS, seed: str = "") -> list[DecoderItem]:
    """The decoder's questions about one dot at one layer, for the asked `steps`."""
    makers = {"lhs-free": lambda: free_question(view, "lhs"), "rhs-free": lambda: free_question(view, "rhs"),
              "contracted-size": lambda: size_question(view), "output-axis": lambda: axis_question(view),
              "output": lambda: output_question(view)}
    out = []
    for step in steps:
        choice = _choice(view, makers[step](), (seed, eqn.id, view.layer, step))
        if choice is not None:
            out.append(DecoderItem(eqn=eqn.id, step=step, layer=view.layer, shown=view.shown(),
                                   weight=view.dims.weight(), jaxpr_lines=list(eqn.jaxpr_lines), **choice))
    return out


# ---------------------------------------------------------------------------------------------
# Where each layer shows the dot.


def shlo_line(program: ProgramRecord, eqn: EqnFact) -> str | None:
    """The `stablehlo.dot_general` line the x-ray gives this equation, if any."""
    lines = text_lines(program.stablehlo)
    for group in program.xray:
        if group.eqn == eqn.id:
            for n in group.stablehlo_lines:
                if "stablehlo.dot_general" in lines[n - 1]:
                    return lines[n - 1]
    return None


def hlo_line(hlo: CompiledLayer, eqn: EqnFact) -> int | None:
    """The line of the compiled `dot` (top level or inside a fusion) of `hlo` that carries this equation, if any."""
    return next((i.line for i in hlo.instructions if i.opcode == "dot" and eqn.id in i.eqns), None)


def views(program: ProgramRecord, eqn: EqnFact) -> Iterator[DotView]:
    """This dot_general as each layer shows it; the compiled one only when XLA kept its dims and operand shapes."""
    base = jaxpr_view(eqn, program.jaxpr)
    if base is None:
        return
    yield base
    line = shlo_line(program, eqn)
    shlo = stablehlo_view(line) if line is not None else None
    if shlo is not None and _same_dot(shlo, base):
        yield shlo
    # XLA's CPU spelling: a TPU writes most dots as convolutions or custom calls, which this decoder does not read.
    for hlo in program.layers("cpu").values():
        number = hlo_line(hlo, eqn)
        compiled = hlo_view(hlo.text, number) if number is not None else None
        # XLA may fold a transpose into the dot or merge heads; that line answers another dot's questions.
        if compiled is not None and _same_dot(compiled, base):
            yield compiled


def _same_dot(view: DotView, base: DotView) -> bool:
    a, b = view.dims, base.dims
    return a.skeleton() == b.skeleton() and (a.lhs.shape, a.rhs.shape) == (b.lhs.shape, b.rhs.shape)


def _steps(slug: str, view: DotView) -> list[str]:
    """The questions in an order fixed by the program and layer, so plain matmuls vary their one question."""
    return [STEPS[i] for i in order(len(STEPS), slug, view.layer)]


# The decoder's layers as items name them: the compiled one by its target.
_LAYER_IDS = {"jaxpr": "jaxpr", "stablehlo": "stablehlo", "hlo": "cpu"}


def _item(d: DecoderItem) -> Item:
    """The pool's item for one decoder question; its card is the equation and the question, whatever layer
    spells it, so a reader who decodes a dot in the jaxpr is not taught it again in StableHLO."""
    return Item(question=d.question, layer=_LAYER_IDS[d.layer], eqn=d.eqn, step=d.step, weight=d.weight,
                card=(d.eqn, d.step), jaxpr_lines=tuple(d.jaxpr_lines), context=tuple(Note(b) for b in d.shown),
                answer=choice({"options": d.options, "answer": d.answer, "reasons": d.reasons, "rules": d.rules}))


@drill("decoder", number="01", title="dot_general, decoded",
       aim="Read dimension_numbers and name the contracted and batch axes of each side.")
def decoder_pool(program: ProgramRecord) -> list[Item]:
    """Decoder items for the program's dot_generals: one per skeleton, layer and question."""
    out, asked = [], set()
    for eqn in program.eqns:
        if eqn.primitive != "dot_general":
            continue
        for view in views(program, eqn):
            key = (view.layer, view.dims.skeleton())
            if key in asked:
                continue
            asked.add(key)
            items = view_items(eqn, view, _steps(program.slug, view) if view.dims.is_plain_matmul() else STEPS,
                               program.slug)
            if view.dims.is_plain_matmul():
                items = items[:1]  # `x @ w` reads the same everywhere: one question per layer
            out.extend(_item(item) for item in items)
    return out
