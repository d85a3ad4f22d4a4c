"""The shape oracle's table of distractor rules, keyed by primitive, and the decorators that fill it.

A rule reads one equation (and `Where` it sits: inside a shard_map body, on which mesh) and
returns the aval a reader would write down after one specific slip, with the reason, or None
when the slip makes no sense for that equation. The rule modules (`_arithmetic_rules.py`,
`_layout_rules.py`, `_generic_rules.py`) register into the table; `_misreadings.py`, which reads
it, imports them, so the table never imports its rules.
"""
from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable

from dumpgym.record.schema import Aval, EqnFact

GENERIC = "*"  # rules for every primitive: tried after the primitive's own
WHERE = "@"  # rules about where an equation sits (a shard_map body): tried first, for every primitive


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
