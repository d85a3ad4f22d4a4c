"""The shape oracle's distractors: named misreadings, in a rule table keyed by primitive.

A rule reads one equation (and `Where` it sits: inside a shard_map body, on which mesh) and
returns the aval a reader would write down after one specific slip, with the reason, or None
when the slip makes no sense for that equation. Rules under `GENERIC` apply to every primitive,
after the primitive's own rules; rules under `WHERE` (a shard_map body holds per-device blocks)
come before both. Three generic rules are `FILLER`: slips that fit any aval
(`transposed-last-two`, `dropped-leading-axis`, `flattened`); an item takes at most one of them,
and only when the equation's own misreadings run short.
"""
from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from dumpgym.record import Aval, EqnFact

GENERIC = "*"
WHERE = "@"  # rules about where an equation sits (a shard_map body): tried first, for every primitive
FILLER = frozenset({"transposed-last-two", "dropped-leading-axis", "flattened"})


@dataclass(frozen=True)
class Misreading:
    """A wrong answer, the rule that produced it, and why a reader would give it."""

    rule: str
    aval: Aval
    reason: str


@dataclass(frozen=True)
class Where:
    """Where an equation sits: the mesh of its shard_map (axis name -> size), and for an equation in a
    shard_map body, the global aval of each operand that is a per-device block (None where it is not)."""

    mesh: dict[str, int] = field(default_factory=dict)
    in_body: bool = False
    operands_global: tuple[Aval | None, ...] = ()


NOWHERE = Where()

# A rule returns the wrong aval and the reason, or None; its name (underscores as dashes) names the misreading.
Found = tuple[Aval, str] | None
Rule = Callable[[EqnFact, Aval, Where], Found]
# A rule registered with `rule_on`: it gets what its reader found in place of `Where`.
ReadingRule = Callable[[EqnFact, Aval, Any], Found]
distractor_rules: dict[str, list[Rule]] = defaultdict(list)


def rule(*primitives: str) -> Callable[[Rule], Rule]:
    """Register a misreading rule for the named primitives (or `GENERIC`, or `WHERE`)."""
    def register(fn: Rule) -> Rule:
        for p in sorted(primitives):
            distractor_rules[p].append(fn)
        return fn
    return register


def rule_on(read: Callable[[EqnFact], Any], *primitives: str) -> Callable[[ReadingRule], Rule]:
    """Register, like `rule`, a rule that works on what `read(eqn)` finds: a dot's dimension numbers, a
    reduction's operand and axes, a pad's rows. The rule is called as `fn(eqn, answer, found)`, and not
    at all where `read` finds None. Several rules of a primitive need the same params read and checked;
    reading them here, once, leaves each rule only its own slip."""
    def register(fn: ReadingRule) -> Rule:
        @functools.wraps(fn)
        def reading(eqn: EqnFact, answer: Aval, where: Where) -> Found:
            found = read(eqn)
            return None if found is None else fn(eqn, answer, found)
        return rule(*primitives)(reading)
    return register


def rule_name(fn: Rule) -> str:
    """The name a rule's misreadings carry: the function's name with dashes, e.g. `kept-reduced-axis`."""
    return fn.__name__.replace("_", "-")


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


# The rule modules fill the table on import: each primitive's own rules, then the generic ones.
from dumpgym.drills import _arithmetic_rules, _layout_rules, _generic_rules  # noqa: E402,F401
