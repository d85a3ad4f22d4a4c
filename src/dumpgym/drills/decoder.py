"""GYM·01, the dot_general decoder: read `dimension_numbers` one list at a time, then the output.

For every dot_general, questions in turn: lhs's contracting axes, rhs's, the batch axes,
and the output aval. Answers come from the equation's params and output fact; wrong
options are other axis lists a reader plausibly mixes up with the asked one.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from dumpgym.drills import drill
from dumpgym.drills._avals import axis_list, choice_item
from dumpgym.drills._dot import DotDims, dot_dims
from dumpgym.drills._misreadings import distractors
from dumpgym.record import EqnFact, ProgramRecord

# The names of the axis-list misreadings `_axis_candidates` offers, in the order it tries them.
AXIS_MISREADINGS = ("other-operand-list", "swapped-role", "matmul-habit", "leading-batch-habit", "free-axes",
                    "nothing", "every-axis")
QUESTIONS = {"contracting": "Which {side} axes are contracted?", "batch": "Which {side} axes are batch axes?"}


@dataclass(frozen=True)
class DecoderItem:
    """One decoder question: `options[answer]` is the asked axis list (or the output aval)."""

    eqn: int
    question: str
    step: str
    options: list[str]
    answer: int
    reasons: list[str]
    rules: list[str]
    show: dict
    jaxpr_lines: list[int]


def _axis_candidates(d: DotDims, side: str, role: str):
    """(axes, rule, reason) for the axis lists a reader confuses with `side`'s `role` list."""
    other = "rhs" if side == "lhs" else "lhs"
    swap = "batch" if role == "contracting" else "contracting"
    rank = d.rank(side)
    yield d.axes(other, role), "other-operand-list", (
        f"that is {other}'s {role} list; each pair lists lhs first, then rhs")
    yield d.axes(side, swap), "swapped-role", (
        f"those are {side}'s {swap} axes; the first pair is contracting, the second batch")
    if role == "contracting":
        yield ((rank - 1,) if side == "lhs" else (0,)), "matmul-habit", (
            "assumed plain x @ w: lhs contracts its last axis, rhs its first")
    else:
        yield (0,), "leading-batch-habit", "assumed the leading axis is the batch axis"
    if d.free(side):
        yield d.free(side), "free-axes", (
            f"those are {side}'s free axes, the ones that survive into the output")
    yield (), "nothing", f"assumed {side} has no {role} axes"
    yield tuple(range(rank)), "every-axis", f"took every axis of {side}"


def axis_question(d: DotDims, side: str, role: str, seed: tuple) -> dict:
    """Options, answer and reasons for 'which `side` axes are `role`?'; at most four options."""
    answer = d.axes(side, role)
    rank = d.rank(side)
    seen, wrong = {answer}, []
    for axes, rule, reason in _axis_candidates(d, side, role):
        axes = tuple(axes)
        if axes not in seen and all(0 <= a < rank for a in axes) and len(wrong) < 3:
            seen.add(axes)
            wrong.append((axis_list(axes), rule, reason))
    return choice_item(axis_list(answer), wrong, *seed)


def decoder_items(eqn: EqnFact, seed: str = "") -> list[DecoderItem]:
    """The decoder's questions for one dot_general, in the order the page asks them."""
    d = dot_dims(eqn)
    if eqn.primitive != "dot_general" or d is None or len(eqn.outputs) != 1:
        return []
    show = {"lhs": str(d.lhs), "rhs": str(d.rhs), "dimension_numbers": d.text(),
            "preferred_element_type": eqn.param("preferred_element_type")}
    asked = [("lhs", "contracting"), ("rhs", "contracting"), ("lhs", "batch")]
    if d.rhs_batch != d.lhs_batch:
        asked.append(("rhs", "batch"))
    out = []
    for side, role in asked:
        choice = axis_question(d, side, role, (seed, eqn.id, side, role))
        out.append(DecoderItem(
            eqn=eqn.id, question=QUESTIONS[role].format(side=side), step=f"{side}-{role}", show=show,
            jaxpr_lines=list(eqn.jaxpr_lines), **choice))
    answer = eqn.outputs[0]
    wrong = [(str(w.aval), w.rule, w.reason) for w in distractors(eqn, answer)]
    out.append(DecoderItem(
        eqn=eqn.id, question="What shape and dtype comes out?", step="output", show=show,
        jaxpr_lines=list(eqn.jaxpr_lines), **choice_item(str(answer), wrong, seed, eqn.id, "output")))
    return out


@drill("decoder", number="01", title="dot_general, decoded",
       aim="Read dimension_numbers and name the contracted and batch axes of each side.")
def decoder_pool(program: ProgramRecord) -> list[dict]:
    """Decoder items for every dot_general of the program, sub-jaxprs included."""
    return [asdict(item) for e in program.eqns for item in decoder_items(e, program.slug)]
