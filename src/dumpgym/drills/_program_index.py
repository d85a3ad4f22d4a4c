"""The lookups the decisions drill makes in one program record: run order, lines, StableHLO ops, x-ray owners."""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from dumpgym.record.primitives import COMPARISONS, REDUCTIONS
from dumpgym.record.schema import EqnFact, Literal, ProgramRecord


@dataclass(frozen=True)
class ProgramIndex:
    """One program record and the lookups the decisions make in it: order, lines, StableHLO ops, x-ray owners."""

    record: ProgramRecord
    jaxpr: tuple[str, ...]
    stablehlo: tuple[str, ...]
    order: tuple[int, ...]
    ops: tuple[tuple[int, str], ...]
    owners: dict[int, tuple[int, ...]]
    # Each `func.call` op's function by its line (`StablehloOp.callee`): a private function's ops run where it is called.
    callees: dict[int, str]
    # Which listing the item whose words these lookups write shows: "jaxpr" or "stablehlo" (`cite`).
    layer: str = "jaxpr"

    @classmethod
    def of(cls, record: ProgramRecord) -> ProgramIndex:
        """The lookups over one program record."""
        owners: dict[int, list[int]] = {}
        for group in record.xray:
            for line in group.stablehlo_lines:
                owners.setdefault(line, []).append(group.eqn)
        callees = {op.line: op.callee for op in record.stablehlo_ops if op.callee}
        return cls(
            record=record,
            jaxpr=tuple(record.jaxpr.splitlines()),
            stablehlo=tuple(record.stablehlo.splitlines()),
            order=_run_order(record.eqns),
            ops=_run_order_ops(record, callees),
            owners={line: tuple(ids) for line, ids in owners.items()},
            callees=callees,
        )

    @property
    def eqns(self) -> tuple[EqnFact, ...]:
        """Every equation, in print order (ids follow it)."""
        return self.record.eqns

    def running(self) -> list[EqnFact]:
        """Every equation in the order it runs: top level in order, a sub-jaxpr's body where it is called."""
        return [self.eqns[i] for i in self.order]

    def by_id(self, eqn_id: int | None) -> EqnFact | None:
        """The equation with this id (the record has checked that it exists), or None for no id."""
        return None if eqn_id is None else self.record.eqns[eqn_id]

    def ancestors(self, eqn: EqnFact) -> list[EqnFact]:
        """The containers that hold `eqn`, innermost first."""
        return self.record.ancestors(eqn)

    @functools.cached_property
    def _children(self) -> dict[int | None, list[EqnFact]]:
        """Each container's equations (None: the top level's), in print order: made once, asked per equation."""
        out: dict[int | None, list[EqnFact]] = {}
        for e in self.eqns:
            out.setdefault(e.parent, []).append(e)
        return out

    def own_lines(self, eqn: EqnFact) -> list[int]:
        """The lines that print `eqn` itself: its span without the lines of the equations inside it."""
        inner, stack = set(), list(self._children.get(eqn.id, ()))
        while stack:  # every equation inside it, at any depth
            e = stack.pop()
            inner.update(range(e.jaxpr_lines[0], e.jaxpr_lines[1] + 1))
            stack += self._children.get(e.id, ())
        return [n for n in range(eqn.jaxpr_lines[0], eqn.jaxpr_lines[1] + 1) if n not in inner]

    def siblings_after(self, eqn: EqnFact) -> list[EqnFact]:
        """Equations printed after `eqn` in the same jaxpr (same parent), in print order."""
        return [e for e in self._children.get(eqn.parent, ()) if e.id > eqn.id]

    def operands(self, eqn: EqnFact) -> tuple[str, ...]:
        """The variable names `eqn` reads as the jaxpr prints them (`EqnFact.operand_names`), literals left out."""
        return tuple(name for name, x in zip(eqn.operand_names, eqn.inputs) if not isinstance(x, Literal))

    def producer(self, eqn: EqnFact, operand: int = 0) -> EqnFact | None:
        """The equation in the same jaxpr that makes `eqn`'s variable operand number `operand` (literals not
        counted), by JAX's dataflow (`EqnFact.sources`); None for an input of the jaxpr or past the last."""
        made = [s for s, x in zip(eqn.sources, eqn.inputs) if not isinstance(x, Literal)]
        if operand >= len(made) or made[operand] is None or made[operand].eqn is None:
            return None
        return self.record.eqns[made[operand].eqn]


    @functools.cached_property
    def _stablehlo_op_line(self) -> dict[int, int]:
        """The StableHLO op line that does each equation's own op, by the equation's first jaxpr line: of the
        lines the x-ray traces to it, the one whose op the primitive lowers to (`reduce_sum` to
        `stablehlo.reduce`, not the constant it starts from), else its last (the result comes last)."""
        op_name = dict(self.ops)
        out: dict[int, int] = {}
        groups = {g.eqn: sorted(n for n in g.stablehlo_lines if n in op_name) for g in self.record.xray}
        for e in sorted(self.eqns, key=lambda e: e.jaxpr_lines[1] - e.jaxpr_lines[0]):  # innermost first
            lines = groups.get(e.id)
            if lines:
                own = [n for n in lines if op_name[n].removeprefix("stablehlo.") == _lowers_to(e.primitive)]
                out.setdefault(e.jaxpr_lines[0], (own or lines)[-1 if not own else 0])
        return out

    @functools.cached_property
    def on_stablehlo(self) -> ProgramIndex:
        """These lookups for the words of an item that shows the StableHLO (`cite`)."""
        return dataclasses.replace(self, layer="stablehlo")

    def cite(self, line: int, words: str = "line") -> str:
        """An equation named by its first jaxpr `line`: `line 12` (or `jaxpr line 12`, `words` saying so); for an
        item that shows the StableHLO, where the jaxpr's numbers are not on screen, the StableHLO line the
        x-ray traces it to, or, traced nowhere, the jaxpr named in words."""
        if self.layer == "jaxpr":
            return f"{words} {line}"
        found = self._stablehlo_op_line.get(line)
        return f"StableHLO line {found}" if found else "the jaxpr"


def _lowers_to(primitive: str) -> str:
    """The StableHLO op (without `stablehlo.`) a jaxpr primitive's own work lowers to, by name."""
    if primitive in COMPARISONS:
        return "compare"
    if primitive in REDUCTIONS:
        return "reduce"
    return {"convert_element_type": "convert", "broadcast_in_dim": "broadcast_in_dim"}.get(primitive, primitive)


def _run_order(eqns: tuple[EqnFact, ...]) -> tuple[int, ...]:
    # A hoisted `let` body is printed before its caller but runs inside the call: pre-order over
    # the parent tree, children in print order. (A `let` body called twice lists one caller as its
    # parent; it is placed at that call.)
    children: dict[int | None, list[int]] = {}
    for e in eqns:
        children.setdefault(e.parent, []).append(e.id)
    out: list[int] = []

    def visit(parent: int | None) -> None:
        for i in children.get(parent, ()):
            out.append(i)
            visit(i)
    visit(None)
    return tuple(out)


def _run_order_ops(record: ProgramRecord, callees: dict[int, str]) -> tuple[tuple[int, str], ...]:
    # `main` runs; a private function's ops run at its `call`, once (the first call decides "first").
    by_function: dict[str, list[tuple[int, str]]] = {}
    for op in sorted(record.stablehlo_ops, key=lambda op: op.line):
        by_function.setdefault(op.function, []).append((op.line, op.name))
    out: list[tuple[int, str]] = []
    seen: set[str] = set()

    def run(function: str) -> None:
        seen.add(function)
        for line, name in by_function.get(function, ()):
            out.append((line, name))
            callee = callees.get(line)
            if callee and callee not in seen:
                run(callee)
    run("main")
    for function in by_function:  # functions nothing reaches by a call stay in print order, last
        if function not in seen:
            run(function)
    return tuple(out)
