"""GYM·01, the dot_general decoder: decode `dimension_numbers` in the jaxpr's, StableHLO's and the compiled spellings.

Each dot_general is read at every layer that shows it (`_dot.DotView`): the jaxpr, StableHLO, a dump's HLO before
optimisations (where the record has no jaxpr), the CPU compile and the H100's (the `dot` inside the Triton GEMM fusion XLA makes of it). The page shows that
layer's line(s) with the output type masked, and the two operands' types; the questions need the
axis lists and the shapes together, so no answer can be copied off the screen:

- `lhs-free` / `rhs-free`: what part does each axis of one operand play (contracted, batch, free)? A
  choice per axis (`_dot_choices.role_question`); and, where the operand has rank 3 or more and its
  sizes do not tell the free axes, which axes are free, tapped on its shape (`AxisSet`).
- `contracted-size`: how many products does each output element sum? Typed (`int`).
- `output-axis`: where does an operand axis end up (an output axis, or summed away)? A choice per axis.
- `output`: what type comes out? Typed (`aval`). (StableHLO and HLO only: the jaxpr's is the shape oracle's.)

Each misreading (swapped operands, batch taken for free, the `x @ w` habit, ...) is a `misread` entry of
the answer form or a wrong option's rule, and every item has one line of `feedback` computed from the dims.

Dots that read alike (same axis lists and ranks) are asked once per program, layer and question; the
plain `x @ w` matmul gets one question per layer, harder skeletons weigh more, and a step's one-axis
items share their dot's weight so that no right option, nor the habit's pick, weighs much more. A
contracted size is weighted over the number of built-in programs that ask it (`_spread`), so that
typing the usual size of small models is no habit that pays.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod
from typing import Iterator

from dumpgym.drills import drill
from dumpgym.drills._avals import order, short
from dumpgym.drills._layers import text_lines
from dumpgym.drills._dot import DotDims, DotView, before_view, hlo_view, jaxpr_view, numpy_dtype, stablehlo_view
from dumpgym.drills._dot_choices import (blind_picks, even_over_program, habit, place_options, place_question,
                                         role_question, shares)
from dumpgym.drills._spread import answer_step, spread_weight
from dumpgym.drills.answer import Answer, AxisSet, Choice, Misreading, Typed, axes_key
from dumpgym.drills.item import Item, Note
from dumpgym.record.schema import Aval, CompiledLayer, EqnFact, Instruction, ProgramRecord, StablehloOp

# Every misreading rule the decoder's misread entries name (documented in docs/drills.md, GYM·01).
AXIS_MISREADINGS = ("contracted-for-free", "batch-for-free", "swapped-operands", "matmul-habit", "other-end",
                    "every-axis", "nothing", "batch-as-contracted", "free-as-contracted", "first-contracted-only",
                    "kept-place", "batch-forgotten", "contracted-kept", "batch-axes-last", "kept-contracted-axis",
                    "dropped-batch", "contracted-for-batch", "free-as-batch", "misplaced")
STEPS = ("lhs-free", "rhs-free", "contracted-size", "output-axis", "output")
# The steps asked one operand axis at a time, as a choice; a free step also asks the tapped set of free
# axes of an operand of rank SET_RANK or more (at rank 2 its answer is one of two single axes).
AXIS_STEPS = ("lhs-free", "rhs-free", "output-axis")
SET_RANK = 3
# A choice has 3 or 4 options, as every kind's: `output-axis` is asked of dots whose output has rank 2 or 3.
MAX_PLACES = 4

# A question: its text, its answer form and the one line of feedback that says why the answer is right.
Question = tuple[str, Answer, str]


@dataclass(frozen=True)
class DecoderItem:
    """One decoder question about one dot at one layer: `form` is its answer (typed or tapped axes). A dot of a
    dump without a jaxpr has no equation: `where` names its line in its layer instead (`stablehlo-12`)."""

    eqn: int | None
    question: str
    step: str
    layer: str
    form: Answer
    feedback: str
    shown: list[str]
    weight: float
    jaxpr_lines: list[int]
    about: str = ""  # the asked axis of a one-axis question (`lhs1`), part of its card
    where: str = ""  # without an equation, the dot's layer and line, part of its card
    dims: DotDims | None = None  # without an equation, the dot's dims and operands, said in the item's facts


def axes_text(view: DotView, side: str, axes) -> str:
    """Axes of one operand with their sizes: `axis 0 (size 64)`, `axes 0, 2 (sizes 2, 32)`, `none`."""
    axes = tuple(axes)
    if not axes:
        return "none"
    sizes = view.dims.sizes(side, axes)
    if len(axes) == 1:
        return f"axis {axes[0]} (size {sizes[0]})"
    return f"axes {', '.join(map(str, axes))} (sizes {', '.join(map(str, sizes))})"


def _misread(found, right, key=str) -> dict[str, Misreading]:
    """The misread map of (value, rule, reason) slips: the first slip that gives a value names it; the
    right value is never one."""
    out: dict[str, Misreading] = {}
    for value, rule, reason in found:
        k = key(value)
        if k != key(right) and k not in out:
            out[k] = Misreading(reason, rule)
    return out


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
    """Which of `side`'s axes are free? Tapped on that operand's shape."""
    d = view.dims
    rank, free = d.rank(side), d.free(side)
    found = [(axes, rule, reason) for axes, rule, reason in _free_wrongs(view, side)
             if all(0 <= a < rank for a in axes)]
    form = AxisSet(f"{side} {d.operand(side)}", d.operand(side).shape, free, _misread(found, free, axes_key))
    why = (f"{side}'s free axes are those in neither its contracting list {list(d.axes(side, 'contracting'))} nor "
           f"its batch list {list(d.axes(side, 'batch'))}: {axes_text(view, side, free)}")
    return f"Which {side} axes are free: neither contracted nor batch? Tap them (none, if none is).", form, why


def size_question(view: DotView) -> Question:
    """How many products does each output element sum? Typed as a number."""
    d = view.dims
    lc, lhs = d.lhs_contracting, d.lhs.shape
    wrong = []
    if d.lhs_batch:
        wrong.append((d.contracted_size() * prod(d.sizes("lhs", d.lhs_batch)), "batch-as-contracted",
                      f"took the batch axes {list(d.lhs_batch)} for contracted ones"))
    for side in ("lhs", "rhs"):
        for a in d.free(side):
            wrong.append((d.operand(side).shape[a], "free-as-contracted",
                          f"took {side}'s free axis {a} for the contracted one"))
    if len(lc) > 1:
        wrong.append((lhs[lc[0]], "first-contracted-only",
                      f"counted only axis {lc[0]}; every axis of {list(lc)} is contracted"))
    if lc != (len(lhs) - 1,) and lhs:
        wrong.append((lhs[-1], "matmul-habit", "assumed plain x @ w: lhs contracts its last axis"))
    mirrored = tuple(len(lhs) - 1 - a for a in lc)
    if mirrored != lc:
        wrong.append((prod(lhs[a] for a in mirrored), "other-end",
                      f"counted lhs's axes from the other end: took {list(mirrored)} for {list(lc)}"))
    wrong.append((prod(lhs), "every-axis", "multiplied every lhs axis"))
    n = d.contracted_size()
    sizes = d.sizes("lhs", lc)
    why = (f"one product per position of lhs's contracted axes {list(lc)}: "
           + (" x ".join(map(str, sizes)) + f" = {n}" if len(sizes) > 1 else f"{n}" if sizes else "none: 1"))
    return "How many products does each output element sum? Type the number.", Typed("int", str(n), misread=_misread(
        wrong, n)), why


def output_question(view: DotView) -> Question | None:
    """What type comes out? Typed as an aval. (Asked where the output type is masked and is not the shape oracle's.)"""
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
    answer = Aval(d.out_shape(), numpy_dtype(view.out_dtype))
    form = Typed("aval", str(answer), misread=_misread(((answer.with_shape(s), r, why) for s, r, why in shapes), answer))
    why = (f"batch {list(batch)}, then lhs's free {list(lfree)}, then rhs's free {list(rfree)}, in "
           f"{short(answer.dtype)}: {answer}")
    return "What type comes out of this dot? Type it as an aval.", form, why


def _axis_items(view: DotView, step: str) -> list[tuple[str, Choice, str, str, int]]:
    """The one-axis choice questions of a step, each with its card part (`lhs1`): every axis of the asked
    operand for a free step (its role), every axis of both operands for `output-axis` (its place)."""
    d = view.dims
    if step == "output-axis":
        if not 3 <= len(place_options(d)) <= MAX_PLACES:
            return []
        return [(*place_question(d, side, a), f"{side}{a}", habit(d, side, a, step))
                for side in ("lhs", "rhs") for a in range(d.rank(side))]
    side = step.split("-")[0]
    return [(*role_question(d, side, a), f"{side}{a}", habit(d, side, a, step)) for a in range(d.rank(side))]


def _sizes_mixed(d: DotDims, side: str) -> bool:
    """Whether the tapped set of `side`'s free axes is asked: a rank of SET_RANK or more, and some free axis
    as long as some contracted or batch one, so the sizes alone do not tell the free axes."""
    free = d.free(side)
    kept = {d.operand(side).shape[a] for a in free}
    rest = {d.operand(side).shape[a] for a in range(d.rank(side)) if a not in free}
    return d.rank(side) >= SET_RANK and bool(kept & rest)


def _shares(made: list, step: str) -> list[float]:
    """Each one-axis item's share of its dot's weight. At `output-axis` each asked operand holds an even part,
    shared among its own axes: a question names its side, and lhs's axes land in other places than rhs's."""
    if not made:
        return []
    sides = [m[3][:3] for m in made] if step == "output-axis" else ["" for _ in made]
    out = [0.0] * len(made)
    for side in dict.fromkeys(sides):
        ks = [k for k, s in enumerate(sides) if s == side]
        part = shares([made[k][1].index for k in ks], [made[k][4] for k in ks])
        for k, w in zip(ks, part):
            out[k] = w / len(set(sides))
    return out


def view_items(eqn: EqnFact | None, view: DotView, steps=STEPS, seed: str = "", where: str = "") -> list[DecoderItem]:
    """The decoder's questions about one dot at one layer, for the asked `steps`: a step's one-axis choices
    share the dot's weight so that each right option weighs the same (`_dot_choices.shares`). Without an
    equation (a dump without a jaxpr), `where` names the dot's line."""
    makers = {"lhs-free": lambda: free_question(view, "lhs"), "rhs-free": lambda: free_question(view, "rhs"),
              "contracted-size": lambda: size_question(view), "output": lambda: output_question(view)}
    weight = view.dims.weight()
    out = []

    def add(step, question, form, why, about="", share=1.0):
        out.append(DecoderItem(eqn=eqn.id if eqn is not None else None, step=step, layer=view.layer,
                               question=question, form=form, feedback=why, shown=view.shown(),
                               weight=round(weight * share, 3),
                               jaxpr_lines=list(eqn.jaxpr_lines) if eqn is not None else [], about=about,
                               where=where, dims=view.dims if eqn is None else None))

    for step in steps:
        if step in AXIS_STEPS:
            made = _axis_items(view, step)
            weights = _shares(made, step)
            for (question, form, why, about, _), share in zip(made, weights):
                add(step, question, form, why, about, share)
            if step == "output-axis" or not _sizes_mixed(view.dims, step.split("-")[0]):
                continue
        if step not in makers:
            continue
        made = makers[step]()
        if made is None or (step == "output" and any(view.out in block for block in view.shown())):
            continue
        # The tapped set weighs as one more question beside the operand's one-axis ones.
        add(step, *made, share=1 / view.dims.rank(step.split("-")[0]) if step in AXIS_STEPS else 1.0)
    return out


# ---------------------------------------------------------------------------------------------
# Where each layer shows the dot.


def shlo_op(program: ProgramRecord, eqn: EqnFact) -> StablehloOp | None:
    """The `stablehlo.dot_general` op on the lines the x-ray gives this equation, if any."""
    dots = {op.line: op for op in program.stablehlo_ops if op.name == "stablehlo.dot_general"}
    for group in program.xray:
        if group.eqn == eqn.id:
            for n in group.stablehlo_lines:
                if n in dots:
                    return dots[n]
    return None


def hlo_dot(hlo: CompiledLayer, eqn: EqnFact) -> Instruction | None:
    """The compiled `dot` (top level or inside a fusion) of `hlo` that carries this equation, if any."""
    return next((i for i in hlo.instructions if i.opcode == "dot" and eqn.id in i.computed_eqns), None)


def hlo_line(hlo: CompiledLayer, eqn: EqnFact) -> int | None:
    """The line of the compiled `dot` of `hlo` that carries this equation, if any."""
    dot = hlo_dot(hlo, eqn)
    return dot.line if dot is not None else None


def views(program: ProgramRecord, eqn: EqnFact) -> Iterator[DotView]:
    """This dot_general as each layer shows it; the compiled one only when XLA kept its dims and operand shapes."""
    base = jaxpr_view(eqn, program.jaxpr)
    if base is None:
        return
    yield base
    op = shlo_op(program, eqn)
    shlo = stablehlo_view(op, text_lines(program.stablehlo)[op.line - 1]) if op is not None else None
    if shlo is not None and _same_dot(shlo, base):
        yield shlo
    # XLA's CPU spelling, and the H100's: a `dot` inside the Triton GEMM fusion XLA makes of it (a TPU writes
    # most dots as convolutions or custom calls, which this decoder does not read).
    for backend, layer in (("cpu", "hlo"), ("gpu", "hlo-gpu")):
        for hlo in program.layers(backend).values():
            dot = hlo_dot(hlo, eqn)
            compiled = hlo_view(hlo, dot, layer) if dot is not None else None
            holder = next((i for i in hlo.instructions if dot is not None and dot.computation in i.calls), None)
            if compiled is not None and backend == "gpu" and holder is not None:
                compiled = replace(compiled, where=f"inside the fusion %{holder.name} "
                                                   f"(its fused computation %{dot.computation})")
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
_LAYER_IDS = {"jaxpr": "jaxpr", "stablehlo": "stablehlo", "hlo-before": "hlo-before", "hlo": "cpu", "hlo-gpu": "gpu"}


def _item(d: DecoderItem) -> Item:
    """The pool's item for one decoder question; its card is the equation and the question, whatever layer
    spells it, so a reader who decodes a dot in the jaxpr is not taught it again in StableHLO."""
    return Item(question=d.question, layer=_LAYER_IDS[d.layer], eqn=d.eqn, step=d.step, weight=d.weight,
                card=(d.eqn if d.eqn is not None else d.where, d.step, *((d.about,) if d.about else ())),
                jaxpr_lines=tuple(d.jaxpr_lines) if d.eqn is not None else None,
                context=tuple(Note(b) for b in d.shown), answer=d.form, feedback=d.feedback,
                primitive=None if d.eqn is not None else "dot_general",
                facts={} if d.dims is None else {"dimension_numbers": d.dims.text(), "lhs": str(d.dims.lhs),
                                                 "rhs": str(d.dims.rhs), "line": d.where})


@drill("decoder", number="01", title="dot_general, decoded",
       aim="Read dimension_numbers and name the contracted and batch axes of each side.")
def decoder_pool(program: ProgramRecord) -> list[Item]:
    """Decoder items for the program's dot_generals: one per skeleton, layer and question; a contracted size
    weighted by how many built-in programs ask it (`_spread`: `16` or `32` must not be the habit that pays)."""
    return [_item(replace(d, weight=round(d.weight * spread_weight(SIZE_STEP, d.form.value), 3))
                  if d.step == "contracted-size" else d) for d in _asked(program)]


SIZE_STEP = "decoder/contracted-size"


@answer_step(SIZE_STEP)
def _sizes_asked(program: ProgramRecord) -> list[str]:
    return [d.form.value for d in _asked(program) if d.step == "contracted-size"]


def dump_views(program: ProgramRecord) -> Iterator[tuple[str, DotView]]:
    """Each dot of a record without equations (a dump without a jaxpr) as the layers it has show it, with where
    it is (`stablehlo-12`, `hlo-before-73`, `cpu-40`): every `stablehlo.dot_general` op, every `dot` of XLA's HLO
    before optimisations (any backend's: a TPU rewrites its dots as convolutions only later), then each compiled
    CPU or GPU `dot` whose dims and operand shapes the record holds. Nothing is read from a jaxpr: there is none."""
    lines = text_lines(program.stablehlo)
    for op in program.stablehlo_ops:
        if op.name == "stablehlo.dot_general" and 0 < op.line <= len(lines):
            view = stablehlo_view(op, lines[op.line - 1])
            if view is not None:
                yield f"stablehlo-{op.line}", view
    before = text_lines(program.dump.hlo_before) if program.dump is not None else []
    for dot in program.dump.dots if program.dump is not None else ():
        view = before_view(dot, before[dot.line - 1]) if 0 < dot.line <= len(before) else None
        if view is not None:
            yield f"hlo-before-{dot.line}", view
    for backend, layer in (("cpu", "hlo"), ("gpu", "hlo-gpu")):
        for target, hlo in program.layers(backend).items():
            holders = {c: i for i in hlo.instructions for c in i.calls} if backend == "gpu" else {}
            for dot in (i for i in hlo.instructions if i.opcode == "dot"):
                view = hlo_view(hlo, dot, layer)
                holder = holders.get(dot.computation)
                if view is not None and holder is not None:
                    view = replace(view, where=f"inside the fusion %{holder.name} "
                                               f"(its fused computation %{dot.computation})")
                if view is not None:
                    yield f"{target}-{dot.line}", view


def _asked(program: ProgramRecord) -> list[DecoderItem]:
    """The program's decoder questions, weighted by their dots alone: each dot_general equation's at every layer,
    or, in a dump without a jaxpr, each dot its StableHLO and compiled layers print."""
    out, asked = [], set()
    found = [(eqn, view, "") for eqn in program.eqns if eqn.primitive == "dot_general"
             for view in views(program, eqn)]
    if not program.eqns:
        found = [(None, view, where) for where, view in dump_views(program)]
    for eqn, view, where in found:
        key = (view.layer, view.dims.skeleton())
        if key in asked:
            continue
        asked.add(key)
        items = view_items(eqn, view, _steps(program.slug, view) if view.dims.is_plain_matmul() else STEPS,
                           program.slug, where)
        if view.dims.is_plain_matmul() and items:
            # `x @ w` reads the same everywhere: one question per layer, its step drawn by layer and its
            # axis by step, so a step asks the same axis at every layer: its card is the dot and step
            first = [i for i in items if i.step == items[0].step]
            items = [replace(first[order(len(first), program.slug, first[0].step, "axis")[0]], weight=1.0,
                             about="")]
        out.extend(items)
    return _even_places(out)


def _even_places(asked: list[DecoderItem]) -> list[DecoderItem]:
    """The program's `output-axis` items reweighted together (`_dot_choices.even_over_program`), each dot (at
    one layer) keeping its weight, so that no place, no usual answer, nor the habit of the question's number
    is right in much more of the step's weight than chance."""
    ks = [k for k, d in enumerate(asked) if d.step == "output-axis" and d.about]  # a plain `x @ w` keeps its 1
    if not ks:
        return asked
    forms = [asked[k].form for k in ks]
    texts = tuple(sorted({o for f in forms for o in f.options}))
    weights = even_over_program(
        [f.index for f in forms], [blind_picks(f.options, int(asked[k].about[3:]), MAX_PLACES, texts)
                                   for k, f in zip(ks, forms)],
        [len(f.options) for f in forms], [asked[k].weight for k in ks],
        [(asked[k].eqn, asked[k].where, asked[k].layer) for k in ks])
    out = list(asked)
    for k, w in zip(ks, weights):
        out[k] = replace(asked[k], weight=round(w, 3))
    return out
