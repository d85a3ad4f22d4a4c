"""GYM·02, the shape oracle: what shape and dtype comes out of this equation?

The answer is the equation's output fact. Each wrong option comes from a named misreading
in `distractor_rules` (keyed by primitive), applied to this equation's operands and params.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from dumpgym.drills import drill
from dumpgym.drills._avals import choice_item
from dumpgym.drills._misreadings import GENERIC, Misreading, distractor_rules, distractors
from dumpgym.record import EqnFact, ProgramRecord

__all__ = ["GENERIC", "Misreading", "ShapesItem", "distractor_rules", "shapes_item", "shapes_items"]

MIN_OPTIONS = 3


@dataclass(frozen=True)
class ShapesItem:
    """One shape-oracle question: `options[answer]` is the output aval; `reasons` say why each other one tempts."""

    eqn: int
    question: str
    options: list[str]
    answer: int
    reasons: list[str]
    rules: list[str]
    show: dict
    jaxpr_lines: list[int]


def shapes_item(eqn: EqnFact, seed: str = "") -> ShapesItem | None:
    """The shape-oracle item for one equation, or None when it has no single array output or too few misreadings."""
    if len(eqn.outputs) != 1:
        return None
    answer = eqn.outputs[0]
    wrong = distractors(eqn, answer, limit=3)
    if len(wrong) + 1 < MIN_OPTIONS:
        return None
    choice = choice_item(str(answer), [(str(w.aval), w.rule, w.reason) for w in wrong], seed, eqn.id)
    return ShapesItem(
        eqn=eqn.id,
        question=f"What shape and dtype comes out of this {eqn.primitive}?",
        show={
            "primitive": eqn.primitive,
            "params": {k: v for k, v in eqn.params.items() if v is not None},
            "inputs": [str(x) for x in eqn.inputs],
        },
        jaxpr_lines=list(eqn.jaxpr_lines),
        **choice,
    )


@drill("shapes", number="02", title="shape on sight",
       aim="Say what comes out of one equation: every dimension and the dtype.")
def shapes_items(program: ProgramRecord) -> list[dict]:
    """A shape-oracle item for every equation of the program with exactly one array output."""
    made = (shapes_item(e, program.slug) for e in program.eqns)
    return [asdict(item) for item in made if item is not None]
