"""The shape oracle's distractors: named misreadings, in a rule table keyed by primitive.

A rule reads one equation and returns the aval a reader would write down after one
specific slip, with the reason, or None when the slip makes no sense for that equation. Rules under
`GENERIC` apply to every primitive, after the primitive's own rules.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterator

from dumpgym.record import Aval, EqnFact

GENERIC = "*"


@dataclass(frozen=True)
class Misreading:
    """A wrong answer, the rule that produced it, and why a reader would give it."""

    rule: str
    aval: Aval
    reason: str


# A rule returns the wrong aval and the reason, or None; its name (underscores as dashes) names the misreading.
Found = tuple[Aval, str] | None
Rule = Callable[[EqnFact, Aval], Found]
distractor_rules: dict[str, list[Rule]] = defaultdict(list)


def rule(*primitives: str) -> Callable[[Rule], Rule]:
    """Register a misreading rule for the named primitives (or `GENERIC`)."""
    def register(fn: Rule) -> Rule:
        for p in sorted(primitives):
            distractor_rules[p].append(fn)
        return fn
    return register


def rule_name(fn: Rule) -> str:
    """The name a rule's misreadings carry: the function's name with dashes, e.g. `kept-reduced-axis`."""
    return fn.__name__.replace("_", "-")


def misreadings(eqn: EqnFact, answer: Aval) -> Iterator[Misreading]:
    """Every misreading that applies to `eqn`: its primitive's rules first, then the generic ones."""
    for fn in [*distractor_rules.get(eqn.primitive, ()), *distractor_rules[GENERIC]]:
        found = fn(eqn, answer)
        if found is not None:
            yield Misreading(rule_name(fn), *found)


def distractors(eqn: EqnFact, answer: Aval, limit: int = 3) -> list[Misreading]:
    """Up to `limit` misreadings with distinct avals, none equal to the answer, in rule order."""
    seen, out = {str(answer)}, []
    for wrong in misreadings(eqn, answer):
        if str(wrong.aval) not in seen and len(out) < limit:
            seen.add(str(wrong.aval))
            out.append(wrong)
    return out


# The rule modules fill the table on import: each primitive's own rules, then the generic ones.
from dumpgym.drills import _primitive_rules, _generic_rules  # noqa: E402,F401
