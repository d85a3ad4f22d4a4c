"""GYM·01, the dot_general decoder: read `dimension_numbers` one list at a time, then the output.

For every dot_general, questions in turn: lhs's contracting axes, rhs's, the batch axes,
and the output aval. Answers come from the equation's params and output fact; wrong
options are other axis lists a reader plausibly mixes up with the asked one.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from dumpgym.drills import drill
from dumpgym.drills._avals import Eqn, axis_list, choice_item, eqns_of
from dumpgym.drills._misreadings import distractors

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


@dataclass(frozen=True)
class DotDims:
    """A dot_general's dimension numbers and operand ranks, read from its params and input facts."""

    lhs_contracting: tuple[int, ...]
    rhs_contracting: tuple[int, ...]
    lhs_batch: tuple[int, ...]
    rhs_batch: tuple[int, ...]
    lhs_rank: int
    rhs_rank: int

    def text(self) -> str:
        """`dimension_numbers` exactly as the jaxpr prints it: `(([1], [0]), ([], []))`."""
        lc, rc, lb, rb = (axis_list(a) for a in (self.lhs_contracting, self.rhs_contracting,
                                                self.lhs_batch, self.rhs_batch))
        return f"(({lc}, {rc}), ({lb}, {rb}))"

    def axes(self, side: str, role: str) -> tuple[int, ...]:
        """The axis list for `side` (lhs or rhs) and `role` (contracting or batch)."""
        return getattr(self, f"{side}_{role}")

    def free(self, side: str) -> tuple[int, ...]:
        """Axes of one operand that are neither contracted nor batch: they survive into the output."""
        used = set(self.axes(side, "contracting")) | set(self.axes(side, "batch"))
        return tuple(i for i in range(getattr(self, f"{side}_rank")) if i not in used)


def dot_dims(eqn: Eqn) -> DotDims | None:
    """The dimension numbers of a dot_general equation, or None if its params do not hold them."""
    try:
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        lhs, rhs = eqn.arrays[0].aval, eqn.arrays[1].aval
    except (KeyError, ValueError, TypeError, IndexError):
        return None
    return DotDims(tuple(lc), tuple(rc), tuple(lb), tuple(rb), lhs.rank, rhs.rank)


def _axis_candidates(d: DotDims, side: str, role: str):
    """(axes, rule, reason) for the axis lists a reader confuses with `side`'s `role` list."""
    other = "rhs" if side == "lhs" else "lhs"
    swap = "batch" if role == "contracting" else "contracting"
    rank = getattr(d, f"{side}_rank")
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
    rank = getattr(d, f"{side}_rank")
    seen, wrong = {answer}, []
    for axes, rule, reason in _axis_candidates(d, side, role):
        axes = tuple(axes)
        if axes not in seen and all(0 <= a < rank for a in axes) and len(wrong) < 3:
            seen.add(axes)
            wrong.append((axis_list(axes), rule, reason))
    return choice_item(axis_list(answer), wrong, *seed)


def decoder_items(eqn: Eqn, seed: str = "") -> list[DecoderItem]:
    """The decoder's questions for one dot_general, in the order the page asks them."""
    d = dot_dims(eqn)
    if eqn.primitive != "dot_general" or d is None or len(eqn.outputs) != 1:
        return []
    lhs, rhs = eqn.arrays[0].aval, eqn.arrays[1].aval
    show = {"lhs": str(lhs), "rhs": str(rhs), "dimension_numbers": d.text(),
            "preferred_element_type": eqn.params.get("preferred_element_type")}
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


@drill("decoder")
def decoder_pool(program: dict) -> list[dict]:
    """Decoder items for every dot_general of the program, sub-jaxprs included."""
    return [asdict(item) for e in eqns_of(program) for item in decoder_items(e, program["slug"])]
