"""The shape oracle's distractors: the misreadings that the rule table names for an equation.

Rules under `GENERIC` apply to every primitive, after the primitive's own rules; rules under
`WHERE` (a shard_map body holds per-device blocks) come before both. Three generic rules are
`FILLER`: slips that fit any aval (`transposed-last-two`, `dropped-leading-axis`, `flattened`); an
item takes at most one of them, and only when the equation's own misreadings run short. The table
and how a rule registers are `_distractor_rules.py`'s.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from dumpgym.drills._distractor_rules import GENERIC, NOWHERE, WHERE, Where, distractor_rules, rule_name
# The rule modules fill the table on import: each primitive's own rules, then the generic ones (in this order).
from dumpgym.drills import _arithmetic_rules, _layout_rules, _generic_rules  # noqa: F401,I001
from dumpgym.record.schema import Aval, EqnFact

FILLER = frozenset({"transposed-last-two", "dropped-leading-axis", "flattened"})


@dataclass(frozen=True)
class Misreading:
    """A wrong answer, the rule that produced it, and why a reader would give it."""

    rule: str
    aval: Aval
    reason: str


def misreadings(eqn: EqnFact, answer: Aval, where: Where = NOWHERE) -> Iterator[Misreading]:
    """Every misreading that applies to `eqn`: where it sits first, then its primitive's rules, then the generic ones."""
    for fn in [*distractor_rules[WHERE], *distractor_rules.get(eqn.primitive, ()), *distractor_rules[GENERIC]]:
        found = fn(eqn, answer, where)
        if found is not None:
            yield Misreading(rule_name(fn), *found)


def pick(found: Iterator[Misreading], answer: Aval, limit: int = 3) -> list[Misreading]:
    """Up to `limit` misreadings with distinct avals other than the answer: the equation's own first,
    then at most one `FILLER`, and only when the own ones leave room."""
    seen, own, filler = {str(answer)}, [], []
    for wrong in found:
        text = str(wrong.aval)
        if text in seen or any(d < 0 for d in wrong.aval.shape):
            continue
        seen.add(text)
        (filler if wrong.rule in FILLER else own).append(wrong)
    return (own + filler[:1])[:limit]


def distractors(eqn: EqnFact, answer: Aval, limit: int = 3, where: Where = NOWHERE) -> list[Misreading]:
    """Up to `limit` misreadings of `eqn` with distinct avals, none equal to the answer (see `pick`)."""
    return pick(misreadings(eqn, answer, where), answer, limit)
