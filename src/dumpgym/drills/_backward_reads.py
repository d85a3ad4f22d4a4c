"""The backward drill's line and typed questions beside `wrt`'s choice: tap the backward dot that makes
one operand's gradient, tap where a backward dot's residual is made, type its cotangent's aval.

Every answer comes from the pairing (`_pairs`): the backward dot, the forward dot it differentiates, which
input is the residual. Each item shows the whole listing, numbered, as its first block (its rows are the
jaxpr's lines), since the reader has to find the other end of the pairing in it.
"""
from __future__ import annotations

from dumpgym.drills._dataflow import Dataflow, Value
from dumpgym.drills._pairs import SIDES, Pair, line, residual_value, shown, span
from dumpgym.drills.answer import LinePick, Misreading, Typed
from dumpgym.record.schema import EqnFact, ProgramRecord



def listing(program: ProgramRecord) -> list:
    """The whole jaxpr, numbered, as one block."""
    return shown(program, range(1, len(program.jaxpr.splitlines()) + 1))


def draft(pair: Pair, step: str, question: str, feedback: str, form, program: ProgramRecord, *about) -> dict:
    """A line or typed item's draft: its card is the backward dot, the step and what it asks (`about`)."""
    return {"eqn": pair.back.id, "layer": "jaxpr", "step": step, "question": question, "feedback": feedback,
            "form": form, "shown": listing(program), "jaxpr_lines": list(pair.back.jaxpr_lines),
            "about": about}


def gradient_item(program: ProgramRecord, pair: Pair, paired: list[Pair], backward: list[EqnFact],
                  forward: list[EqnFact]) -> dict:
    """Tap the backward dot_general whose result is the gradient of one operand of a forward dot (`wrt`,
    as a line): the one that reads the forward dot's other operand as its residual."""
    b, f, t = line(pair.back), line(pair.fwd), pair.target
    owner = {p.back.id: p for p in paired}
    explain: dict[str, str] = {}
    for other in backward:
        p = owner.get(other.id)
        if other.id == pair.back.id:
            continue
        if p is not None and p.fwd.id == pair.fwd.id:
            why = (f"that one reads line {f}'s {SIDES[t]} as its residual: its result is the gradient of the "
                   f"{SIDES[p.target]}, the other operand")
        elif p is not None:
            why = (f"that one belongs to line {line(p.fwd)}'s backward: its residual is an operand of line "
                   f"{line(p.fwd)}, not of line {f}")
        else:
            why = f"that one reads no operand of line {f}: it is not part of line {f}'s backward"
        explain.update({str(n): why for n in span(other)})
    for other in forward:
        explain.update({str(n): f"line {line(other)} is a forward dot_general; the gradient of line {f}'s "
                                f"{SIDES[t]} is made in the backward pass" for n in span(other)})
    question = (f"Tap the backward dot_general whose result is the gradient with respect to the {SIDES[t]} "
                f"of the forward dot_general on line {f}.")
    why = (f"line {b} reads line {f}'s {SIDES[pair.matched]}{pair.via}, the other operand, as its residual and "
           f"multiplies it by the cotangent: that gives the gradient of the {SIDES[t]} ({pair.fwd.inputs[t]})")
    rows = tuple(sorted(span(pair.back)))
    return draft(pair, "wrt", question, why, LinePick(rows[0], rows, explain), program, "tap", SIDES[t])


def declared(program: ProgramRecord, index: int) -> int | None:
    """The line that declares top-level argument `index` (`ProgramRecord.arg_binders`)."""
    names = program.arg_binders
    return names[index].line if len(names) == len(program.args) else None


def value_rows(program: ProgramRecord, flow: Dataflow, value: Value) -> tuple[int, ...] | None:
    """The rows where a forward value is made: its equation's lines (and any recomputation of it in the
    backward pass), or an argument's declaration; None for a value read through a loop's binders."""
    if value[0] == "arg":
        at = declared(program, value[1])
        return (at,) if at is not None else None
    if value[0] != "out":
        return None
    again = [e for e in flow.backward if flow.output(e, 0) == value and e != value[1]]
    return tuple(sorted(span(program.eqns[value[1]]).union(*(span(program.eqns[e]) for e in again))))


def residual_item(program: ProgramRecord, flow: Dataflow, pair: Pair) -> dict | None:
    """Tap where the residual a backward dot reads is made: the forward equation, or the argument's line."""
    value = residual_value(program, flow, pair.back, pair.residual)
    rows = value_rows(program, flow, value) if value is not None else None
    if not rows:
        return None
    b, f = line(pair.back), line(pair.fwd)
    explain = {str(n): f"that is line {b} itself, the backward dot_general that reads the residual"
               for n in span(pair.back)}
    target = flow.input(pair.fwd, pair.target)
    other = value_rows(program, flow, target) if target is not None and target != value else None
    for n in other or ():
        explain[str(n)] = (f"that makes line {f}'s {SIDES[pair.target]}, the operand whose gradient line {b} "
                           f"computes; the residual is the operand it does not differentiate, the "
                           f"{SIDES[pair.matched]}")
    made = flow.input(pair.back, pair.cotangent)
    if made is not None and made[0] == "out":
        for n in span(program.eqns[made[1]]):
            explain.setdefault(str(n), f"that makes line {b}'s cotangent, in the backward pass; the residual is "
                                       "a forward value")
    # The forward equation is the answer's line; a recomputation of it (in a remat body) is accepted too.
    at = rows[0] if value[0] == "arg" else line(program.eqns[value[1]])
    where = "an argument of the program" if value[0] == "arg" else f"line {at}'s {program.eqns[value[1]].primitive}"
    why = (f"line {b}'s {SIDES[pair.residual]} is line {f}'s {SIDES[pair.matched]}{pair.via}: {where} makes it")
    question = (f"The dot_general on line {b} runs in the backward pass: it multiplies a cotangent by a residual, "
                "a value the forward pass made. Tap the line that makes that residual (for an argument of the "
                "program, the line that declares it).")
    explain = {n: why for n, why in explain.items() if int(n) not in rows}
    return draft(pair, "residual", question, why, LinePick(at, rows, explain), program)


def cotangent_aval_item(program: ProgramRecord, pair: Pair) -> dict:
    """Type the aval of the cotangent a backward dot reads: the forward dot's result's, whatever the dot."""
    b, f, back, fwd = line(pair.back), line(pair.fwd), pair.back, pair.fwd
    answer = back.inputs[pair.cotangent]
    found = [
        (back.inputs[pair.residual], "residual-as-cotangent",
         f"took the residual for the cotangent: line {b}'s {SIDES[pair.residual]} is line {f}'s "
         f"{SIDES[pair.matched]}, a forward value"),
        (back.outputs[0], "result-as-cotangent",
         f"took line {b}'s own result for what it reads: the result is the gradient of line {f}'s "
         f"{SIDES[pair.target]}; the cotangent it reads is that of line {f}'s result"),
        (fwd.inputs[pair.target], "target-as-cotangent",
         f"took the aval of line {f}'s {SIDES[pair.target]}, the operand being differentiated; the cotangent "
         f"flows back into line {f}'s result"),
    ]
    if answer.rank == 2 and answer.shape[0] != answer.shape[1]:
        found.append((answer.with_shape(answer.shape[::-1]), "transposed-cotangent",
                      f"reversed the axes: the cotangent of line {f}'s result has that result's axes, in order"))
    misread = {}
    for aval, rule, reason in found:
        if not aval.same(answer) and str(aval) not in misread:
            misread[str(aval)] = Misreading(reason, rule)
    question = (f"The dot_general on line {b} runs in the backward pass. What aval is its cotangent, the operand "
                "the backward pass made? Type it.")
    why = (f"line {b}'s {SIDES[pair.cotangent]} comes from the backward pass as the cotangent of line {f}'s "
           f"result, so it has that result's aval: {answer}")
    return draft(pair, "cotangent", question, why, Typed("aval", str(answer), misread=misread), program, "aval")
