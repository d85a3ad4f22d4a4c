"""A dot_general's `dimension_numbers`, read once from its params for every drill that asks about them."""
from __future__ import annotations

from dataclasses import dataclass

from dumpgym.drills._avals import axis_list
from dumpgym.record import Aval, EqnFact


@dataclass(frozen=True)
class DotDims:
    """A dot_general's dimension numbers and its two operands' avals."""

    lhs_contracting: tuple[int, ...]
    rhs_contracting: tuple[int, ...]
    lhs_batch: tuple[int, ...]
    rhs_batch: tuple[int, ...]
    lhs: Aval
    rhs: Aval

    def text(self) -> str:
        """`dimension_numbers` exactly as the jaxpr prints it: `(([1], [0]), ([], []))`."""
        lc, rc, lb, rb = (axis_list(a) for a in (self.lhs_contracting, self.rhs_contracting,
                                                self.lhs_batch, self.rhs_batch))
        return f"(({lc}, {rc}), ({lb}, {rb}))"

    def operand(self, side: str) -> Aval:
        """The aval of one operand, `lhs` or `rhs`."""
        return self.lhs if side == "lhs" else self.rhs

    def rank(self, side: str) -> int:
        """The rank of one operand, `lhs` or `rhs`."""
        return self.operand(side).rank

    def axes(self, side: str, role: str) -> tuple[int, ...]:
        """The axis list for `side` (lhs or rhs) and `role` (contracting or batch)."""
        return getattr(self, f"{side}_{role}")

    def free(self, side: str) -> tuple[int, ...]:
        """Axes of one operand that are neither contracted nor batch: they survive into the output."""
        used = set(self.axes(side, "contracting")) | set(self.axes(side, "batch"))
        return tuple(i for i in range(self.rank(side)) if i not in used)


def dot_dims(eqn: EqnFact) -> DotDims | None:
    """The dimension numbers of a dot_general equation, or None when its params do not hold them."""
    try:
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        lhs, rhs = eqn.arrays[0], eqn.arrays[1]
        return DotDims(tuple(lc), tuple(rc), tuple(lb), tuple(rb), lhs, rhs)
    except (KeyError, ValueError, TypeError, IndexError):
        return None
