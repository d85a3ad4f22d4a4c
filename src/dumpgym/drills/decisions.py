"""GYM·03, spot the decision: tap the first line where the framework did something you did not write.

Each kind in `decision_rules` says which equations show the decision (a predicate over
the facts) and which StableHLO ops carry it. Targets come from the equation facts, the
program's `stablehlo_ops` list and its x-ray groups; no dump text is searched.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

from dumpgym.drills import drill
from dumpgym.drills._avals import axis_list, bits, is_float, short
from dumpgym.primitives import COLLECTIVE_REDUCTIONS, COLLECTIVES, COMPARISONS, REDUCTIONS, REMATS
from dumpgym.record import EqnFact, Literal, ProgramRecord


@dataclass(frozen=True)
class ProgramIndex:
    """One program record and the lookups the decisions make in it: listing lines, StableHLO ops, x-ray owners."""

    record: ProgramRecord
    jaxpr: tuple[str, ...]
    stablehlo: tuple[str, ...]
    ops: tuple[tuple[int, str], ...]
    owners: dict[int, tuple[int, ...]]

    @classmethod
    def of(cls, record: ProgramRecord) -> ProgramIndex:
        """The lookups over one program record."""
        owners: dict[int, list[int]] = {}
        for group in record.xray:
            for line in group.stablehlo_lines:
                owners.setdefault(line, []).append(group.eqn)
        return cls(
            record=record,
            jaxpr=tuple(record.jaxpr.splitlines()),
            stablehlo=tuple(record.stablehlo.splitlines()),
            ops=tuple(sorted((op.line, op.name) for op in record.stablehlo_ops)),
            owners={line: tuple(ids) for line, ids in owners.items()},
        )

    @property
    def eqns(self) -> tuple[EqnFact, ...]:
        """Every equation, in print order (ids follow it)."""
        return self.record.eqns

    def by_id(self, eqn_id: int | None) -> EqnFact | None:
        """The equation with this id (the record has checked that it exists), or None for no id."""
        return None if eqn_id is None else self.record.eqns[eqn_id]

    def siblings_after(self, eqn: EqnFact) -> list[EqnFact]:
        """Equations printed after `eqn` in the same jaxpr (same parent), in print order."""
        return [e for e in self.eqns if e.parent == eqn.parent and e.id > eqn.id]

    def sibling_before(self, eqn: EqnFact) -> EqnFact | None:
        """The equation printed just before `eqn` in the same jaxpr."""
        before = [e for e in self.eqns if e.parent == eqn.parent and e.id < eqn.id]
        return before[-1] if before else None


@dataclass(frozen=True)
class Decision:
    """How to find one kind of framework decision: which equations show it, which StableHLO ops carry it."""

    kind: str
    asks: str
    picks: Callable[[EqnFact, ProgramIndex], bool]
    explain: Callable[[EqnFact, ProgramIndex], str]
    hlo_ops: frozenset[str]
    # True when the op name alone is not enough (a convert is not always an upcast): the
    # x-ray must trace the StableHLO line to an equation that `picks` accepts.
    hlo_owned: bool
    hlo_note: str = ""


decision_rules: dict[str, Decision] = {}


def decision(kind: str, asks: str, hlo_ops: set[str], hlo_owned: bool, explain: Callable, hlo_note: str = ""):
    """Register a predicate over equations as the decision kind `kind`."""
    def register(picks: Callable[[EqnFact, ProgramIndex], bool]):
        decision_rules[kind] = Decision(kind, asks, picks, explain, frozenset(hlo_ops), hlo_owned, hlo_note)
        return picks
    return register


def _inside(eqn: EqnFact, pf: ProgramIndex) -> str:
    parent = pf.by_id(eqn.parent)
    if parent is None:
        return ""
    name = parent.param("name")
    return f" It sits inside `{parent.primitive}`" + (f" (`{name}`)." if isinstance(name, str) else ".")


def _explain_broadcast(eqn: EqnFact, pf: ProgramIndex) -> str:
    out = eqn.outputs[0] if eqn.outputs else None
    x = eqn.inputs[0] if eqn.inputs else None
    dims = eqn.ints("broadcast_dimensions")
    if eqn.primitive != "broadcast_in_dim" or out is None or x is None or dims is None:
        return (f"the jaxpr's `{eqn.primitive}` takes a scalar or size-1 operand as it is; StableHLO wants equal "
                "shapes, so lowering writes the broadcast out.")
    k, r = len(dims), out.rank
    new = [d for i, d in enumerate(out.shape) if i not in dims]
    if isinstance(x, Literal):
        what = (f"The literal {x.literal} is filled out to {out}: how jnp.ones, jnp.full or a scalar "
                "in where are spelled.")
    elif x.rank == 0:
        what = f"A scalar is spread to {out}, as jnp.where or an elementwise op with a scalar operand needs."
    elif tuple(dims) == tuple(range(k)) and set(new) == {1}:
        what = (f"{x} gets a trailing size-1 axis ({out}), from keepdims=True or x[:, None], "
                "so it lines up against the full rows.")
    elif tuple(dims) == tuple(range(r - k, r)) and set(new) == {1}:
        what = (f"NumPy rank promotion: the {x} operand of an elementwise op (a bias or a scale) gets a "
                f"leading size-1 axis ({out}) to line up with the bigger operand's trailing axes.")
    else:
        what = f"broadcast_dimensions={axis_list(dims)} places {x}'s axes inside {out}."
    return f"jnp wrote this broadcast_in_dim, not your source. {what}{_inside(eqn, pf)}"


def _explain_upcast(eqn: EqnFact, pf: ProgramIndex) -> str:
    src, out = eqn.input_avals[0], eqn.outputs[0]
    then = next((e for e in pf.siblings_after(eqn) if e.primitive in REDUCTIONS
                 and e.arrays and e.arrays[0].same(out)), None)
    follow = f"; the {then.primitive} on line {then.jaxpr_lines[0]} then adds up in {short(out.dtype)}" if then else ""
    return (f"convert_element_type widens {src} to {out}{follow}. jnp's sums, means and variances of 16-bit "
            f"floats accumulate in f32 so rounding does not pile up.{_inside(eqn, pf)}")


def _explain_remat(eqn: EqnFact, pf: ProgramIndex) -> str:
    policy = eqn.param("policy")
    saves = "saves nothing" if policy in (None, "None") else f"saves what policy={policy} allows"
    return (f"jax.checkpoint wrote `{eqn.primitive}` around the region; it {saves}, so the backward pass "
            "recomputes the inner equations instead of keeping their outputs in memory.")


def _explain_collective(eqn: EqnFact, pf: ProgramIndex) -> str:
    axes = eqn.param("axes") if "axes" in eqn.params else eqn.param("axis_name")
    names = ", ".join(map(str, axes)) if isinstance(axes, list) else axes
    over = f" over mesh axis {names}" if names else ""
    if eqn.primitive in COLLECTIVE_REDUCTIONS:
        return (f"`{eqn.primitive}`{over} combines every device's partial result element by element; "
                "StableHLO spells it as an all_reduce.")
    return f"`{eqn.primitive}`{over} moves data between devices: a collective the single-device code never needs."


def _mask_compare(eqn: EqnFact, pf: ProgramIndex) -> EqnFact | None:
    if not eqn.outputs:
        return None
    out = eqn.outputs[0]
    return next((e for e in pf.siblings_after(eqn) if e.primitive in COMPARISONS and e.outputs
                 and e.outputs[0].dtype == "bool" and any(x.same(out) for x in e.arrays)), None)


def _explain_iota(eqn: EqnFact, pf: ProgramIndex) -> str:
    cmp = _mask_compare(eqn, pf)
    dim = eqn.param("dimension")
    where = f"the `{cmp.primitive}` on line {cmp.jaxpr_lines[0]}" if cmp else "a comparison"
    return (f"iota numbers the positions along axis {dim} of {eqn.outputs[0]}; {where} turns those numbers "
            f"into a boolean mask, which is how tril, one_hot and causal masks are built.{_inside(eqn, pf)}")


def _explain_transpose(eqn: EqnFact, pf: ProgramIndex) -> str:
    src, out = eqn.input_avals[0], eqn.outputs[0]
    perm = eqn.ints("permutation") or ()
    before = pf.sibling_before(eqn)
    after = next((e for e in pf.siblings_after(eqn) if any(x.same(out) for x in e.arrays)), None)
    if before is not None and before.primitive == "dot_general" and before.outputs and before.outputs[0].same(src):
        why = ("it puts the dot_general's output (batch axes, then lhs's free axes, then rhs's) into the order "
               "the source asked for, as an einsum's output spec does")
    elif after is not None and after.primitive == "dot_general":
        why = f"it feeds the dot_general on line {after.jaxpr_lines[0]}, as `.T` on an operand does"
    else:
        why = "the source calls no transpose here: `.T`, an einsum's axis order or a matmul's backward pass wrote it"
    return f"transpose[permutation={axis_list(perm)}] turns {src} into {out}: {why}.{_inside(eqn, pf)}"


@decision("hidden-broadcast", "makes a hidden broadcast explicit", {"stablehlo.broadcast_in_dim"}, False,
          _explain_broadcast)
def _hidden_broadcast(eqn: EqnFact, pf: ProgramIndex) -> bool:
    return eqn.primitive == "broadcast_in_dim"


@decision("upcast", "upcasts to a wider float to accumulate", {"stablehlo.convert"}, True, _explain_upcast)
def _upcast(eqn: EqnFact, pf: ProgramIndex) -> bool:
    if eqn.primitive != "convert_element_type" or not eqn.arrays or len(eqn.outputs) != 1:
        return False
    src, out = eqn.arrays[0].dtype, eqn.outputs[0].dtype
    return is_float(src) and is_float(out) and bits(out) > bits(src)


@decision("remat", "marks a region to be recomputed in the backward pass", {"stablehlo.optimization_barrier"},
          True, _explain_remat, hlo_note=" The optimization_barrier keeps XLA from reusing the forward pass's values, "
          "which is what forces the recomputation.")
def _remat(eqn: EqnFact, pf: ProgramIndex) -> bool:
    return eqn.primitive in REMATS


@decision("collective", "inserts a collective (communication between devices)",
          {"stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.all_to_all", "stablehlo.collective_permute",
           "stablehlo.reduce_scatter", "stablehlo.collective_broadcast"}, False, _explain_collective)
def _collective(eqn: EqnFact, pf: ProgramIndex) -> bool:
    return eqn.primitive in COLLECTIVES


@decision("iota-mask", "starts building a mask from iota", {"stablehlo.iota"}, True, _explain_iota)
def _iota_mask(eqn: EqnFact, pf: ProgramIndex) -> bool:
    # Without variable names, an iota counts as a mask's start when a comparison later in the
    # same jaxpr takes an operand of exactly its aval and yields bool.
    return eqn.primitive == "iota" and _mask_compare(eqn, pf) is not None


@decision("transpose", "inserts a transpose you did not write", {"stablehlo.transpose"}, False,
          _explain_transpose)
def _transpose(eqn: EqnFact, pf: ProgramIndex) -> bool:
    return eqn.primitive == "transpose"


@dataclass(frozen=True)
class DecisionItem:
    """One spot-the-decision question: tap `answer_line` of `layer`'s listing."""

    eqn: int | None
    question: str
    kind: str
    layer: str
    answer_line: int
    feedback: str
    # The equation that wrote the line; for StableHLO, the one the x-ray traces it to.
    source_eqn: int | None


def jaxpr_target(rule: Decision, pf: ProgramIndex) -> EqnFact | None:
    """The first equation, by printed line, that shows the decision."""
    hits = [e for e in pf.eqns if rule.picks(e, pf)]
    return min(hits, key=lambda e: (e.jaxpr_lines[0], e.id), default=None)


def stablehlo_target(rule: Decision, pf: ProgramIndex) -> tuple[int, str, EqnFact | None] | None:
    """The first StableHLO op line carrying the decision, with the equation that wrote it (or None)."""
    for line, name in pf.ops:
        if name not in rule.hlo_ops:
            continue
        owners = [e for e in (pf.by_id(i) for i in pf.owners.get(line, ())) if e is not None]
        picked = [e for e in owners if rule.picks(e, pf)]
        if rule.hlo_owned and not picked:
            continue
        # Containers own their descendants' lines: name the innermost writer.
        writer = min(picked or owners, key=lambda e: (e.jaxpr_lines[1] - e.jaxpr_lines[0], -e.id), default=None)
        return line, name, writer
    return None


def _line(text: tuple[str, ...], n: int) -> str:
    return text[n - 1].strip() if 0 < n <= len(text) else ""


def decision_items(program: ProgramRecord) -> list[DecisionItem]:
    """Items for every decision kind that occurs in the program, one per layer where the layer shows it."""
    pf = ProgramIndex.of(program)
    out = []
    for kind, rule in decision_rules.items():
        target = jaxpr_target(rule, pf)
        if target is not None:
            line = target.jaxpr_lines[0]
            out.append(DecisionItem(
                eqn=target.id, question=f"Tap the first jaxpr line where the framework {rule.asks}.", kind=kind,
                layer="jaxpr", answer_line=line, source_eqn=target.id,
                feedback=f"Line {line}: `{_line(pf.jaxpr, line)}`. {rule.explain(target, pf)}"))
        hlo = stablehlo_target(rule, pf)
        if hlo is not None:
            line, name, writer = hlo
            if writer is None:
                why = f"The x-ray traces this {name} to no equation."
            else:
                why = (f"The x-ray traces it to `{writer.primitive}` on jaxpr line {writer.jaxpr_lines[0]}: "
                       f"{rule.explain(writer, pf)}{rule.hlo_note}")
            out.append(DecisionItem(
                eqn=None, question=f"Tap the first StableHLO line where the framework {rule.asks}.", kind=kind,
                layer="stablehlo", answer_line=line, source_eqn=writer.id if writer else None,
                feedback=f"Line {line}: `{_line(pf.stablehlo, line)}`. {why}"))
    return out


@drill("decisions", number="03", title="the framework's hand",
       aim="Click the line the framework wrote for you: a broadcast, an upcast, a remat mark, a collective.")
def decisions_pool(program: ProgramRecord) -> list[dict]:
    """Spot-the-decision items for one program."""
    return [asdict(item) for item in decision_items(program)]
