"""What a checkpoint policy saves: the forward values passed into a backward remat (the backward
drill's `residual` step, as a choice of sets)."""
from __future__ import annotations

from dumpgym.drills._avals import choice_item
from dumpgym.drills._dataflow import Dataflow, Value
from dumpgym.drills._pairs import line, shown
from dumpgym.record.primitives import REMATS
from dumpgym.record.schema import EqnFact, ProgramRecord


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
