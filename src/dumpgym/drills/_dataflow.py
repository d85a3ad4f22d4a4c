"""Where a value comes from across containers, and which values the backward pass computes again.

A value is named by a small tuple, the same for every read of it wherever it is read:
`("arg", i)` a program argument, `("out", eqn, k)` output `k` of an equation, `("carry", eqn, i)`
a loop body's carried binder, `("slice", value)` one step's slice of a scanned array, and
`("opaque", eqn, i)` a binder this module cannot map (a while loop's, a shard_map's). A container
body's binder is named by the operand it stands for, and an equation that repeats a forward one
(the same primitive and params on the same values, as a remat body recomputes) by that forward
equation's output: value numbering.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from dumpgym.record.primitives import REMATS
from dumpgym.record.schema import EqnFact, ProgramRecord, Source

# Containers whose body's binders are their operands, one to one.
_ONE_TO_ONE = REMATS | frozenset({"jit", "pjit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call"})

Value = tuple


@dataclass
class Dataflow:
    """Names every input of every equation of one program by the value it reads (see the module's docstring)."""

    program: ProgramRecord
    _memo: dict = field(default_factory=dict, repr=False)
    _numbers: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        self.backward = frozenset(e.id for e in self.program.eqns if self.program.in_backward(e))
        # Forward equations in print order: the first to compute a value names it.
        for e in self.program.eqns:
            if e.id not in self.backward:
                key = self._key(e)
                if key is not None:
                    self._numbers.setdefault(key, ("out", e.id, 0))

    def input(self, eqn: EqnFact, k: int) -> Value | None:
        """The value input `k` of `eqn` reads; None for a literal."""
        src = eqn.sources[k] if eqn.sources else None
        return None if src is None else self.source(src, eqn.parent)

    def source(self, src: Source, holder: int | None) -> Value:
        """The value a `Source` names, read inside the body of `holder` (None: the top level)."""
        if src.eqn is not None:
            return self.output(src.eqn, src.index)
        if holder is None:
            return ("arg", src.index)
        return self._binder(self.program.eqns[holder], src.index)

    def output(self, eqn_id: int, k: int) -> Value:
        """Output `k` of an equation, or the forward equation's output it repeats."""
        if (eqn_id, k) not in self._memo:
            value: Value = ("out", eqn_id, k)
            eqn = self.program.eqns[eqn_id]
            if eqn_id in self.backward and k == 0:
                key = self._key(eqn)
                value = self._numbers.get(key, value) if key is not None else value
            self._memo[(eqn_id, k)] = value
        return self._memo[(eqn_id, k)]

    def forward(self, value: Value | None) -> bool | None:
        """Whether a value is the forward pass's (an argument or a forward output); None when unknown."""
        if value is None or value[0] == "opaque":
            return None
        if value[0] == "arg":
            return True
        if value[0] == "slice":
            return self.forward(value[1])
        return value[1] not in self.backward

    def _binder(self, container: EqnFact, i: int) -> Value:
        """A body binder of `container`, named by the operand it stands for."""
        operand = self._operand(container, i)
        if container.primitive in _ONE_TO_ONE:
            return operand if operand is not None else ("opaque", container.id, i)
        if container.primitive == "cond":  # the branches' binders are the operands after the index
            value = self._operand(container, i + 1)
            return value if value is not None else ("opaque", container.id, i)
        if container.primitive == "scan":
            consts, carries = container.param("num_consts") or 0, container.param("num_carry") or 0
            if i < consts and operand is not None:
                return operand
            if i < consts + carries or operand is None:
                return ("carry", container.id, i)
            return ("slice", operand)
        return ("opaque", container.id, i)

    def _operand(self, container: EqnFact, i: int) -> Value | None:
        return self.input(container, i) if i < len(container.inputs) else None

    def _key(self, eqn: EqnFact) -> tuple | None:
        """What makes two equations compute the same value: primitive, params and the values read."""
        if eqn.has_subjaxpr or len(eqn.outputs) != 1 or not eqn.sources:
            return None
        reads = tuple(self.input(eqn, k) if src is not None else str(eqn.inputs[k])
                      for k, src in enumerate(eqn.sources))
        return (eqn.primitive, json.dumps(eqn.params, sort_keys=True, default=str), reads)
