"""GYM·08, the backward pass: pair each backward dot_general with the forward one it differentiates.

A backward `dot_general` multiplies two things: a cotangent that flows from the backward pass, and
a residual, a forward value (read directly, through a container body's binder, or computed
again inside a remat body). The forward dot that has the residual as an operand is the one being
differentiated, and the result is the gradient with respect to its other operand (`_pairs`). Three
questions (`step`), each asked more than one way:

- `cotangent`: which forward dot_general's result is the cotangent the backward dot reads the gradient
  of? A choice of the program's forward dots, asked of the first backward dot of each forward dot only,
  since the second would have the same answer, and only where there are two forward dots or more: the
  odds of a pick among a program's two forward dots are one in two, whatever the listing's length,
  and a tap of the whole listing hid them. And type that cotangent's aval (`typed`), once per program,
  at the backward pass's first dot: the deeper layers' cotangents have the hidden sizes the corpus's
  programs share, so the usual one was a habit that paid. (Which operand is the cotangent is no
  question: JAX's transpose rule always puts it first.)
- `wrt`: the gradient with respect to which operand of the forward dot? A choice of its lhs and rhs
  (each right in half of a program's choice weight, the right one taking turns between the two
  places), or, the other way round, tap the backward dot that makes one operand's gradient (`line`).
- `residual`: tap where the residual a backward dot reads is made (`line`: the forward equation, or
  the argument's declaration); and, for each backward remat under a checkpoint policy, which forward
  values the policy saves for it (a choice of sets, `_checkpoint`).

Every answer comes from the record's dataflow (`_dataflow`): JAX's name stacks say which
equations are backward, `sources` say what each reads. A dot whose residual matches no forward
dot operand, or more than one, is not asked. A `wrt` choice's context holds the numbered jaxpr lines
that link the two dots (binder declarations, the container's operand line, a recomputation and its
original); every other item shows the whole listing, numbered.
"""
from __future__ import annotations

from collections import Counter as Tally

from dumpgym.drills import drill
from dumpgym.drills._avals import order
from dumpgym.drills._backward_reads import cotangent_aval_item, gradient_item, listing, residual_item
from dumpgym.drills._checkpoint import residual_items
from dumpgym.drills._dataflow import Dataflow
from dumpgym.drills._dump_backward import dump_wrt_items
from dumpgym.drills._pairs import SIDES, Pair, line, operand_label, pairs, result_label, shown
from dumpgym.drills.item import Item, from_draft
from dumpgym.record.schema import EqnFact, ProgramRecord


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
    # The sides alone: with their avals the options would hold numbers the question's line numbers match.
    options = [f"its {SIDES[k]}" for k in (0, 1)]
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


def cotangent_item(program: ProgramRecord, pair: Pair, forward: list[EqnFact]) -> dict | None:
    """Whose result's cotangent does this backward dot read? A choice of the program's forward dot_generals
    (at most four: the right one and the others, those whose result has the cotangent's aval first), in the
    order of the listing; None for a program with one forward dot."""
    b, f, back = line(pair.back), line(pair.fwd), pair.back
    like = back.inputs[pair.cotangent]
    others = _around(pair.fwd, [other for other, _ in _others(pair, forward, like, True)], like,
                     order(4, program.slug, pair.fwd.id, "cotangent")[0])
    if not others:
        return None
    dots = sorted([pair.fwd, *others], key=line)
    options, reasons, rules = [], [], []
    for dot in dots:
        options.append(f"the dot_general on line {line(dot)}")
        _, rule, reason = ("", "", "") if dot is pair.fwd else _other_wrong(pair, dot, None, like)
        reasons.append(reason)
        rules.append(rule)
    question = (f"The dot_general on line {b} runs in the backward pass, and one of its operands is a cotangent. "
                "Which forward dot_general's result is that cotangent the gradient of?")
    why = (f"line {b}'s {SIDES[pair.residual]} is line {f}'s {SIDES[pair.matched]}{pair.via}, a forward value; its "
           f"{SIDES[pair.cotangent]} ({like}) comes from the backward pass with the shape of "
           f"line {f}'s result ({pair.fwd.outputs[0]}): the cotangent of line {f}")
    return {**_item(program, pair, "cotangent", question), "options": options, "answer": dots.index(pair.fwd),
            "reasons": reasons, "rules": rules, "feedback": why, "shown": listing(program)}


def _around(right: EqnFact, others: list[EqnFact], like, place: int) -> list[EqnFact]:
    """Up to three of `others` to stand beside `right` in listing order, `place` of them before it where the
    listing has them: those with the aval `like` first, then the nearest. Taking the first alike ones put the
    right dot last in a deep program (its earlier layers' dots are alike), and a reader who picked the last
    option won; a drawn place puts it anywhere."""
    def nearest(side: list[EqnFact]) -> list[EqnFact]:
        return sorted(side, key=lambda o: (not o.outputs[0].same(like), abs(line(o) - line(right))))
    before = nearest([o for o in others if line(o) < line(right)])
    after = nearest([o for o in others if line(o) > line(right)])
    wanted = min(place, len(before), 3)
    chosen = before[:wanted] + after[:3 - wanted]
    return chosen + before[wanted:wanted + 3 - len(chosen)]


def _item(program: ProgramRecord, pair: Pair, step: str, question: str) -> dict:
    return {
        "eqn": pair.back.id, "layer": "jaxpr", "step": step, "question": question,
        "shown": shown(program, pair.lines), "jaxpr_lines": list(pair.back.jaxpr_lines),
    }


def _balanced(items: list[dict], *seed) -> list[dict]:
    """The `wrt` choices weighted so that lhs and rhs are each right in half of a program's choice weight,
    and the right option taking turns between the first and second place (from a start drawn by `seed`), so
    that neither a side nor a place is right more often, by weight or by count."""
    choices = [i for i in items if "side" in i]
    count = Tally(i["side"] for i in choices)
    turn = order(2, *seed)[0]
    out = []
    for draft in items:
        item = {k: v for k, v in draft.items() if k != "side"}
        if "side" in draft:
            item["weight"] = round(len(count) / 2 / count[draft["side"]], 3)
            if item["answer"] != turn:  # the answer goes in this turn's place
                item.update({k: item[k][::-1] for k in ("options", "reasons", "rules")}, answer=turn)
            turn = 1 - turn
        out.append(item)
    return out


@drill("backward", number="08", title="the backward pass",
       aim="Pair each backward dot_general with the forward one it differentiates, find its residual and its "
           "cotangent, and name what a checkpoint policy saves.", per_program=4)
def backward_items(program: ProgramRecord) -> list[Item]:
    """For each paired backward dot: a `wrt` choice, a `wrt` tap of the gradient's dot, a `residual` tap, and
    for the first of each forward dot a `cotangent` choice of the forward dots; a typed cotangent aval at the
    first pair; a `residual` choice per backward remat under a policy. Its card is the backward equation, the
    step and what it asks. A dump without a jaxpr asks `wrt` of the dots of its HLO before optimisations."""
    if not program.eqns:
        return dump_wrt_items(program)
    flow = Dataflow(program)
    forward = [e for e in program.eqns if e.primitive == "dot_general" and e.id not in flow.backward]
    backward = [e for e in program.eqns if e.primitive == "dot_general" and e.id in flow.backward]
    paired = pairs(program, flow)
    # A gradient two backward dots make alike has no one dot to tap.
    targets = Tally((p.fwd.id, p.target) for p in paired)
    items, tapped = [], set()
    for pair in paired:
        items.append(wrt_item(program, pair, forward))
        if targets[(pair.fwd.id, pair.target)] == 1:
            items.append(gradient_item(program, pair, paired, backward, forward))
        items += [i for i in [residual_item(program, flow, pair)] if i is not None]
        # Both backward dots of one forward dot read one cotangent: one answer for two cards, the second
        # given by the first. The first backward dot asks it.
        if pair.fwd.id not in tapped:
            tapped.add(pair.fwd.id)
            items += [i for i in [cotangent_item(program, pair, forward)] if i is not None]
        # The cotangent's aval once, at the backward pass's first dot (the loss's cotangent): the deeper
        # layers' have the hidden sizes the corpus's programs share, and typing the usual one paid.
        if pair is paired[0]:
            items.append(cotangent_aval_item(program, pair))
    items += [{**i, "step": "residual", "about": ("saved",)} for i in residual_items(program, flow)]
    return [_pool_item(i) for i in _balanced(items, program.slug)]


def _pool_item(draft: dict) -> Item:
    """The pool's item for a draft: a choice (a `wrt` or `residual` choice) or a tapped line or typed value."""
    card, context = (draft["eqn"], draft["step"], *draft.get("about", ())), tuple(draft["shown"])
    if "form" not in draft:
        return from_draft({k: v for k, v in draft.items() if k != "about"}, card=card, layer="jaxpr",
                          context=context)
    return Item(question=draft["question"], answer=draft["form"], context=context, card=card, layer="jaxpr",
                eqn=draft["eqn"], step=draft["step"], feedback=draft["feedback"],
                jaxpr_lines=tuple(draft["jaxpr_lines"]))
