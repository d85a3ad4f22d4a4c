"""GYM·08, the backward pass: pair each backward dot_general with the forward one it differentiates.

A backward `dot_general` multiplies two things: a cotangent that flows from the backward pass, and
a residual, a forward value (read directly, through a container body's binder, or computed
again inside a remat body). The forward dot that has the residual as an operand is the one being
differentiated, and the result is the gradient with respect to its other operand. Three
questions (`step`):

- `cotangent` (a `line`): tap the forward dot_general whose result's cotangent the backward dot reads,
  in the whole listing; asked of the first backward dot of each forward dot only, since the second
  would have the same answer. (Which operand is the cotangent is no question: JAX's transpose rule always puts
  it first, so that choice would be the same every time.)
- `wrt` (a choice of the forward dot's lhs and rhs, each right in half of a program's weight, the
  right one taking turns between the two places): the gradient with respect to which of them?
- `residuals` (a choice of sets): which forward values does a checkpoint policy save for the backward
  remat? One item: the corpus has one backward remat under a policy.

Every answer comes from the record's dataflow (`_dataflow`): JAX's name stacks say which
equations are backward, `sources` say what each reads. A dot whose residual matches no forward
dot operand, or more than one, is not asked. A `wrt` item's context holds the numbered jaxpr lines
that link the two dots (binder declarations, the container's operand line, a recomputation and its
original); a `cotangent` and a `residuals` item show the whole listing, numbered.
"""
from __future__ import annotations

from collections import Counter as Tally
from dataclasses import dataclass

from dumpgym.drills import drill
from dumpgym.drills._avals import choice_item, order
from dumpgym.drills._dataflow import Dataflow, Value
from dumpgym.drills.answer import LinePick
from dumpgym.drills.item import Item, Lines, from_draft
from dumpgym.primitives import REMATS
from dumpgym.record import EqnFact, ProgramRecord

# Backward equations that pass a forward value on unchanged in content: followed to find the residual.
_PASS_THROUGH = frozenset({"transpose", "convert_element_type", "copy", "reduce_precision"})
SIDES = ("lhs", "rhs")


@dataclass(frozen=True)
class Pair:
    """A backward dot `back` whose input `residual` is operand `matched` of the forward dot `fwd`."""

    back: EqnFact
    residual: int  # which input of `back` is the forward value
    fwd: EqnFact
    matched: int  # which operand of `fwd` that value is
    lines: frozenset[int]  # the jaxpr lines a reader follows from one to the other
    via: str  # how `back` reads the residual, for the reasons: "" when by its own name

    @property
    def target(self) -> int:
        """The operand of `fwd` whose gradient `back` computes."""
        return 1 - self.matched

    @property
    def cotangent(self) -> int:
        """Which input of `back` is the cotangent."""
        return 1 - self.residual


def line(eqn: EqnFact) -> int:
    """The equation's first jaxpr line, where a reader finds it."""
    return eqn.jaxpr_lines[0]


def operand_label(dot: EqnFact, k: int) -> str:
    """An operand of a dot as the options name it: `the lhs of the dot_general on line 26 (f32[16,32])`."""
    return f"the {SIDES[k]} of the dot_general on line {line(dot)} ({dot.inputs[k]})"


def result_label(dot: EqnFact) -> str:
    """A dot's result as the options name it."""
    return f"the result of the dot_general on line {line(dot)} ({dot.outputs[0]})"


# ---------------------------------------------------------------------------------------------
# Finding the pairs.


def _span(eqn: EqnFact) -> set[int]:
    return set(range(eqn.jaxpr_lines[0], eqn.jaxpr_lines[1] + 1))


def _header(program: ProgramRecord, container: EqnFact) -> set[int]:
    """The lines that declare a container body's binders: from its `{ lambda` to its first equation."""
    first = min((e.jaxpr_lines[0] for e in program.eqns if e.parent == container.id), default=None)
    if first is None:
        return set()
    text = program.jaxpr.splitlines()
    start = first - 1
    while start > 1 and "{ lambda" not in text[start - 1]:
        start -= 1
    return set(range(start, first))


def trail(program: ProgramRecord, flow: Dataflow, eqn: EqnFact, k: int) -> set[int]:
    """The lines a reader follows to see which value input `k` of `eqn` is: binders to operands, recomputations."""
    src = eqn.sources[k] if eqn.sources else None
    if src is None:
        return set()
    if src.eqn is None:
        if eqn.parent is None:
            return set()
        holder = program.eqns[eqn.parent]
        operand = _binder_operand(holder, src.index)
        lines = _header(program, holder) | set(holder.jaxpr_lines)
        return lines | (trail(program, flow, holder, operand) if operand is not None else set())
    source = program.eqns[src.eqn]
    value = flow.output(src.eqn, src.index)
    if value[:2] != ("out", src.eqn):  # computed again: show both computations and what they read
        lines = _span(source) | _span(program.eqns[value[1]])
        return lines.union(*(trail(program, flow, source, j) for j in range(len(source.inputs))))
    if src.eqn in flow.backward and source.primitive in _PASS_THROUGH:
        return _span(source) | trail(program, flow, source, 0)
    return set()


def _via(program: ProgramRecord, flow: Dataflow, eqn: EqnFact, k: int) -> str:
    """How input `k` of `eqn` reaches its forward value, in a phrase: recomputed, through a binder, transposed."""
    src = eqn.sources[k]
    if src.eqn is None:
        holder = program.eqns[eqn.parent] if eqn.parent is not None else None
        return f" (a binder of the {holder.primitive} on line {line(holder)})" if holder is not None else ""
    source, value = program.eqns[src.eqn], flow.output(src.eqn, src.index)
    if value[:2] != ("out", src.eqn):
        return f" (computed again on line {line(source)})"
    if src.eqn in flow.backward and source.primitive in _PASS_THROUGH:
        return f" (through the {source.primitive} on line {line(source)})"
    return ""


def _binder_operand(holder: EqnFact, i: int) -> int | None:
    """Which operand of a container a body binder stands for (cond's branches skip the index)."""
    k = i + 1 if holder.primitive == "cond" else i
    return k if k < len(holder.inputs) and holder.primitive != "while" else None


def residual_value(program: ProgramRecord, flow: Dataflow, back: EqnFact, k: int) -> Value | None:
    """The forward value input `k` of a backward equation reads, through pass-through equations; None if not one."""
    value = flow.input(back, k)
    while value is not None and value[0] == "out" and value[1] in flow.backward:
        source = program.eqns[value[1]]
        if source.primitive not in _PASS_THROUGH:
            return None
        value = flow.input(source, 0)
    return value if flow.forward(value) else None


def pairs(program: ProgramRecord, flow: Dataflow) -> list[Pair]:
    """Every backward dot_general whose residual is an operand of exactly one forward dot_general."""
    dots = [e for e in program.eqns if e.primitive == "dot_general" and len(e.inputs) == 2]
    forward = [e for e in dots if e.id not in flow.backward]
    out = []
    for back in (e for e in dots if e.id in flow.backward):
        found = []
        for k in (0, 1):
            if flow.forward(flow.input(back, 1 - k)) is not False:
                continue  # the other input must come from the backward pass: the cotangent
            value = residual_value(program, flow, back, k)
            found += [(k, f, j) for f in forward for j in (0, 1) if value is not None and flow.input(f, j) == value]
        if len(found) != 1:
            continue  # no forward dot reads the residual, or several: not asked
        k, fwd, j = found[0]
        if back.inputs[1 - k].shape != fwd.outputs[0].shape or \
                sorted(back.outputs[0].shape) != sorted(fwd.inputs[1 - j].shape):
            continue
        lines = _span(back) | _span(fwd) | trail(program, flow, back, k) | trail(program, flow, fwd, j)
        out.append(Pair(back, k, fwd, j, frozenset(lines), _via(program, flow, back, k)))
    return out


# ---------------------------------------------------------------------------------------------
# The questions.


def shown(program: ProgramRecord, lines) -> list[Lines]:
    """The listed jaxpr lines with their numbers, one block (a reference) per run of consecutive lines."""
    runs: list[list[int]] = []
    for n in sorted(lines):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return [Lines("jaxpr", first, last, numbered=True) for first, last in runs]


def _others(pair: Pair, forward: list[EqnFact], like, results: bool) -> list[tuple[EqnFact, int | None]]:
    """Other forward dots' operands (or, with `results`, their results: k None), those with the aval `like` first."""
    found = [(f, k) for f in forward if f.id != pair.fwd.id for k in ((None,) if results else (0, 1))]
    return sorted(found, key=lambda fk: not (fk[0].outputs[0] if fk[1] is None else fk[0].inputs[fk[1]]).same(like))


def _other_wrong(pair: Pair, other: EqnFact, k: int | None, like) -> tuple[str, str, str]:
    """Another forward dot's value: a shape match when its aval is `like`, else a pick of the wrong dot."""
    value = other.outputs[0] if k is None else other.inputs[k]
    label = result_label(other) if k is None else operand_label(other, k)
    b, f = line(pair.back), line(pair.fwd)
    if value.same(like):
        return label, "shape-match", (f"matched by shape: it is {value} too, but line {b}'s residual, its "
                                      f"{SIDES[pair.residual]}, is an operand of line {f}, not of line {line(other)}")
    return label, "other-dot", (f"took another forward dot: line {b}'s residual, its {SIDES[pair.residual]}, is "
                                f"an operand of line {f}, so line {b} belongs to line {f}'s backward, "
                                f"not line {line(other)}'s")


def wrt_item(program: ProgramRecord, pair: Pair, forward: list[EqnFact]) -> dict:
    """With respect to which operand of the forward dot is this backward dot's result the gradient? A choice
    of its two operands: each side, and each place, is about as often right (`_balanced`)."""
    b, f, fwd = line(pair.back), line(pair.fwd), pair.fwd
    options = [f"its {SIDES[k]} ({fwd.inputs[k]})" for k in (0, 1)]
    reasons, rules = ["", ""], ["", ""]
    reasons[pair.matched] = (f"took the residual for the target: line {b} reads this value itself{pair.via} as its "
                             f"{SIDES[pair.residual]}; what comes out is the gradient of the operand it multiplied "
                             f"on line {f}, the {SIDES[pair.target]}")
    rules[pair.matched] = "residual-as-target"
    question = (f"The dot_general on line {b} runs in the backward pass, for the forward dot_general on line {f}. "
                f"Its result is the gradient with respect to which operand of line {f}?")
    why = (f"line {b} reads line {f}'s {SIDES[pair.matched]}{pair.via} as its {SIDES[pair.residual]}, and a dot's "
           f"gradient for one operand multiplies the cotangent by the other: so it is the {SIDES[pair.target]}'s "
           f"({fwd.inputs[pair.target]})")
    return {**_item(program, pair, "wrt", question), "options": options, "answer": pair.target,
            "reasons": reasons, "rules": rules, "feedback": why, "side": pair.target}


def cotangent_item(program: ProgramRecord, pair: Pair, forward: list[EqnFact]) -> dict:
    """Whose result's cotangent does this backward dot read? Tap that forward dot_general in the listing."""
    b, f, back = line(pair.back), line(pair.fwd), pair.back
    explain = {}
    for other, _ in _others(pair, forward, back.inputs[pair.cotangent], True):
        _, rule, reason = _other_wrong(pair, other, None, back.inputs[pair.cotangent])
        explain.update({str(n): reason for n in _span(other)})
    explain.update({str(n): f"that is line {b}'s own dot_general, in the backward pass; its cotangent comes "
                            "from a forward one's result" for n in _span(back)})
    question = (f"The dot_general on line {b} runs in the backward pass, and one of its operands is a cotangent. "
                "Tap the forward dot_general whose result that cotangent is the gradient of.")
    why = (f"line {b}'s {SIDES[pair.residual]} is line {f}'s {SIDES[pair.matched]}{pair.via}, a forward value; its "
           f"{SIDES[pair.cotangent]} ({back.inputs[pair.cotangent]}) comes from the backward pass with the shape of "
           f"line {f}'s result ({pair.fwd.outputs[0]}): the cotangent of line {f}")
    rows = tuple(sorted(_span(pair.fwd)))
    return {**_item(program, pair, "cotangent", question), "feedback": why,
            "form": LinePick(rows[0], rows, explain),
            "shown": shown(program, range(1, len(program.jaxpr.splitlines()) + 1))}


def _item(program: ProgramRecord, pair: Pair, step: str, question: str) -> dict:
    return {
        "eqn": pair.back.id, "layer": "jaxpr", "step": step, "question": question,
        "shown": shown(program, pair.lines), "jaxpr_lines": list(pair.back.jaxpr_lines),
    }


def _balanced(items: list[dict], *seed) -> list[dict]:
    """The `wrt` items weighted so that lhs and rhs are each right in half of a program's weight, and the
    right option taking turns between the first and second place (from a start drawn by `seed`), so that
    neither a side nor a place is right more often, by weight or by count."""
    count = Tally(i["side"] for i in items if i["step"] == "wrt")
    turn = order(2, *seed)[0]
    out = []
    for draft in items:
        item = {k: v for k, v in draft.items() if k != "side"}
        if draft["step"] == "wrt":
            item["weight"] = round(len(count) / 2 / count[draft["side"]], 3)
            if item["answer"] != turn:  # the answer goes in this turn's place
                item.update({k: item[k][::-1] for k in ("options", "reasons", "rules")}, answer=turn)
            turn = 1 - turn
        out.append(item)
    return out


# ---------------------------------------------------------------------------------------------
# What a checkpoint policy saves: the forward values passed into the backward remat.


def value_label(program: ProgramRecord, value: Value) -> str:
    """A forward value as the residual options name it: `argument 0 (f32[16,32])`, `the sin on line 31 (...)`."""
    if value[0] == "arg":
        return f"argument {value[1]} ({program.args[value[1]]})"
    eqn = program.eqns[value[1]]
    return f"the {eqn.primitive} on line {line(eqn)} ({eqn.outputs[value[2]]})"


def _set_label(program: ProgramRecord, values) -> str:
    placed = sorted(values, key=lambda v: (0, v[1]) if v[0] == "arg" else (1, line(program.eqns[v[1]])))
    return "; ".join(value_label(program, v) for v in placed)


def _inside(program: ProgramRecord, eqn: EqnFact, container: int) -> bool:
    while eqn.parent is not None:
        if eqn.parent == container:
            return True
        eqn = program.eqns[eqn.parent]
    return False


def _saved(program: ProgramRecord, flow: Dataflow, remat: EqnFact) -> set[Value] | None:
    """The forward values a backward remat takes as operands; None when one of its operands is not placed."""
    reads = [flow.input(remat, k) for k in range(len(remat.inputs))]
    if any(v is not None and flow.forward(v) is None for v in reads):
        return None
    saved = {v for v in reads if v is not None and flow.forward(v)}
    if not saved or any(v[0] not in ("arg", "out") for v in saved):
        return None
    return saved


def residual_items(program: ProgramRecord, flow: Dataflow) -> list[dict]:
    """One `residuals` item per backward remat: which forward values its policy saved for it."""
    items = []
    for remat in program.eqns:
        if remat.primitive not in REMATS or remat.id not in flow.backward:
            continue
        saved = _saved(program, flow, remat)
        if saved is None:
            continue
        body = [e for e in program.eqns if _inside(program, e, remat.id) and len(e.outputs) == 1]
        again = {e.id: flow.output(e.id, 0) for e in body if flow.output(e.id, 0)[:2] != ("out", e.id)}
        wrong = _residual_wrongs(program, remat, saved, again)
        if len(wrong) < 2:
            continue
        policy = remat.param("policy")
        question = (f"Under this checkpoint policy ({policy}), which forward values are saved for the "
                    f"{remat.primitive} on line {line(remat)}, rather than computed again inside it?")
        why = (f"the {remat.primitive} on line {line(remat)} takes {_set_label(program, saved)} as operands from the "
               "forward pass; whatever else it needs it computes again inside")
        items.append({
            "eqn": remat.id, "layer": "jaxpr", "step": "residuals", "question": question, "feedback": why,
            "shown": shown(program, range(1, len(program.jaxpr.splitlines()) + 1)),
            "jaxpr_lines": list(remat.jaxpr_lines),
            **choice_item(_set_label(program, saved), wrong[:3], program.slug, "residuals", remat.id),
        })
    return items


def _residual_wrongs(program: ProgramRecord, remat: EqnFact, saved: set, again: dict) -> list[tuple[str, str, str]]:
    """Misread sets of saved values, each with its rule and reason, distinct and never the answer."""
    at = f"the {remat.primitive} on line {line(remat)}"
    args = {v for v in saved if v[0] == "arg"}
    outs = saved - args
    unread = {("arg", i) for i in range(len(program.args))} - args
    recomputed = set(again.values()) - saved
    where = ", ".join(f"line {line(program.eqns[e])}" for e in sorted(again) if again[e] in recomputed)
    candidates = [
        (saved | recomputed, "recomputed-as-saved",
         f"took recomputed values for saved ones: {_set_label(program, recomputed)} "
         f"{'is' if len(recomputed) == 1 else 'are'} computed again inside {at} (at {where}) from what is passed in"),
        (saved | unread, "every-argument",
         f"took every argument for a residual: {_set_label(program, unread)} is not an operand of {at}, "
         "so this policy does not keep it for that remat"),
        (args, "nothing-saveable",
         f"read the policy as saving nothing (jax.checkpoint's default), so only inputs come in; this one "
         f"also passes {_set_label(program, outs)} into {at}"),
        (outs, "inputs-forgotten",
         f"forgot the inputs: {_set_label(program, args)} is passed into {at} beside the forward results"),
    ]
    out, seen = [], {_set_label(program, saved)}
    for values, rule, reason in candidates:
        text = _set_label(program, values)
        if values and text not in seen:
            seen.add(text)
            out.append((text, rule, reason))
    return out


@drill("backward", number="08", title="the backward pass",
       aim="Pair each backward dot_general with the forward one it differentiates, and name what a "
           "checkpoint policy saves.", per_program=4)
def backward_items(program: ProgramRecord) -> list[Item]:
    """`wrt` and `cotangent` items for each paired backward dot, and a `residuals` item per backward remat.
    Its card is the backward equation and the step."""
    flow = Dataflow(program)
    forward = [e for e in program.eqns if e.primitive == "dot_general" and e.id not in flow.backward]
    items, tapped = [], set()
    for pair in pairs(program, flow):
        items.append(wrt_item(program, pair, forward))
        # Both backward dots of one forward dot would ask to tap the same line: one answer for two cards,
        # the second given by the first. The first backward dot asks it.
        if pair.fwd.id not in tapped:
            tapped.add(pair.fwd.id)
            items.append(cotangent_item(program, pair, forward))
    items += residual_items(program, flow)
    return [_pool_item(i) for i in _balanced(items, program.slug)]


def _pool_item(draft: dict) -> Item:
    """The pool's item for a draft: a choice (`wrt`, `residuals`) or a tapped line (`cotangent`)."""
    card, context = (draft["eqn"], draft["step"]), tuple(draft["shown"])
    if "form" not in draft:
        return from_draft(draft, card=card, layer="jaxpr", context=context)
    return Item(question=draft["question"], answer=draft["form"], context=context, card=card, layer="jaxpr",
                eqn=draft["eqn"], step=draft["step"], feedback=draft["feedback"],
                jaxpr_lines=tuple(draft["jaxpr_lines"]))

