"""GYM·03, the framework's hand: say what a line the framework wrote is for, or tap the first one it wrote.

"What is this line for" names a line of the numbered listing and asks which of its step's answers it
is (`_decision_why.why_steps`: which broadcast, whose cast, whose transpose, which mark); it holds most
of the weight, since spotting a line by its operation needs no reading. "Spot the line" asks for the
first line, in the order the program runs, of one decision kind, and is weighted down (`SPOT_SCALE`), the
more so where the first line of its operation is the answer (`PLAIN_SCALE`).

Each kind in `decision_rules` says which equations show the decision (a predicate over the
facts), which look like it but are not it (with the sentence that says why), and which StableHLO
ops carry it. Targets come from the equation facts, the program's `stablehlo_ops` list, its x-ray
groups and its source; the listings are read only for variable names on an equation's own lines
and for the callee of a StableHLO `call`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from dumpgym.drills import drill
from dumpgym.drills._decision_rules import Decision, decision_rules
from dumpgym.drills._decision_why import question_weights, readings as _readings, why_steps
from dumpgym.drills._program_index import ProgramIndex
from dumpgym.drills.item import Choice, Item, LinePick, Lines
from dumpgym.record.schema import EqnFact, ProgramRecord


@dataclass(frozen=True)
class DecisionItem:
    """One spot-the-decision question: tap any of `accepted_lines` of `layer`'s listing."""

    eqn: int | None
    question: str
    kind: str
    layer: str
    answer_line: int
    accepted_lines: list[int]
    # Line number (as a string, JSON's keys) -> why tapping it is wrong.
    explain: dict[str, str]
    feedback: str
    shown: list[str]
    weight: float
    # The equation that wrote the line; for StableHLO, the one the x-ray traces it to.
    source_eqn: int | None


def jaxpr_target(rule: Decision, pf: ProgramIndex) -> EqnFact | None:
    """The first equation, in the order the program runs, that shows the decision."""
    return next((e for e in pf.running() if rule.picks(e, pf)), None)


def _jaxpr_explain(rule: Decision, target: EqnFact, pf: ProgramIndex) -> dict[str, str]:
    first, out = target.jaxpr_lines[0], {}
    for e in pf.running():
        if e is target:
            continue
        if rule.picks(e, pf):
            why = f"is also {rule.noun}, but line {first} runs first"
            call = next((a for a in pf.ancestors(e) if a.jaxpr_lines[0] > e.jaxpr_lines[1]), None)
            if e.jaxpr_lines[0] < first and call is not None:
                why += f": it is printed in a `let` block, which runs only when line {call.jaxpr_lines[0]} calls it"
        elif e.primitive in rule.lookalikes:
            why = rule.why_not(e, pf)
        elif e in pf.ancestors(target):
            why = f"opens the `{e.primitive}` that holds the answer; the op itself is on line {first}"
        else:
            continue
        for n in pf.own_lines(e):
            out.setdefault(str(n), f"Line {n} {why}.")
    return out


def _jaxpr_item(rule: Decision, pf: ProgramIndex) -> DecisionItem | None:
    target = jaxpr_target(rule, pf)
    if target is None:
        return None
    line = target.jaxpr_lines[0]
    accepted = pf.own_lines(target)
    return DecisionItem(
        eqn=target.id, question=f"Tap the first jaxpr line, in the order the program runs, where the framework "
        f"{rule.asks}.", kind=rule.kind, layer="jaxpr", answer_line=line, accepted_lines=accepted,
        explain={k: v for k, v in _jaxpr_explain(rule, target, pf).items() if int(k) not in accepted},
        feedback=f"Line {line}: `{_line(pf.jaxpr, line)}`. {rule.explain(target, pf)}",
        shown=[pf.record.jaxpr], weight=rule.weight, source_eqn=target.id)


def _writer(rule: Decision, line: int, pf: ProgramIndex) -> tuple[bool, EqnFact | None]:
    """Whether a StableHLO op line carries the decision, and the equation that wrote it (or None)."""
    owners = [e for e in (pf.by_id(i) for i in pf.owners.get(line, ())) if e is not None]
    picked = [e for e in owners if rule.picks(e, pf)]
    # Containers own their descendants' lines: name the innermost writer.
    writer = min(picked or owners, key=lambda e: (e.jaxpr_lines[1] - e.jaxpr_lines[0], -e.id), default=None)
    return bool(picked) or not rule.hlo_owned, writer


def stablehlo_target(rule: Decision, pf: ProgramIndex) -> tuple[int, str, EqnFact | None] | None:
    """The first StableHLO op line, in the order the program runs, carrying the decision, with its writer."""
    for line, name in pf.ops:
        if name in rule.hlo_ops:
            counts, writer = _writer(rule, line, pf)
            if counts:
                return line, name, writer
    return None


def _stablehlo_item(rule: Decision, pf: ProgramIndex) -> DecisionItem | None:
    hlo = stablehlo_target(rule, pf)
    if hlo is None:
        return None
    line, name, writer = hlo
    accepted, explain = [line], {}
    for other, other_name in pf.ops:
        if other_name not in rule.hlo_ops or other == line:
            continue
        counts, by = _writer(rule, other, pf)
        if counts and writer is not None and by is writer:
            accepted.append(other)
        elif counts:
            explain[str(other)] = f"Line {other} is also {rule.noun}, but line {line} runs first."
        elif by is not None:
            if by.primitive in rule.lookalikes:
                what = f"which {rule.why_not(by, pf.on_stablehlo)}"
            elif by.has_subjaxpr:
                what = "a call, not to an equation inside it that shows the decision"
            else:
                what = f"whose lowering writes it as a step of its own, not as {rule.noun}"
            explain[str(other)] = (f"Line {other} is a {other_name}, but the x-ray traces it to a `{by.primitive}` "
                                   f"of the jaxpr, {what}.")
    function = next(op.function for op in pf.record.stablehlo_ops if op.line == line)
    for other, other_name in pf.ops:
        if other_name == "func.call" and pf.callees.get(other) == function:
            explain.setdefault(str(other), f"Line {other} calls @{function}, which holds the answer; the op itself "
                                           f"is on line {line}.")
    if writer is None:
        why = f"The x-ray traces this {name} to no equation."
    else:
        why = (f"The x-ray traces it to a `{writer.primitive}` of the jaxpr: "
               f"{rule.explain(writer, pf.on_stablehlo)}{rule.hlo_note}")
    return DecisionItem(
        eqn=None, question=f"Tap the first StableHLO line, in the order the program runs, where the framework "
        f"{rule.asks}.", kind=rule.kind, layer="stablehlo", answer_line=line, accepted_lines=sorted(accepted),
        explain=explain, feedback=f"Line {line}: `{_line(pf.stablehlo, line)}`. {why}",
        shown=[pf.record.stablehlo], weight=rule.weight, source_eqn=writer.id if writer else None)


def _line(text: tuple[str, ...], n: int) -> str:
    return text[n - 1].strip() if 0 < n <= len(text) else ""


def decision_items(program: ProgramRecord) -> list[DecisionItem]:
    """Items for every decision kind that occurs in the program, one per layer where the layer shows it."""
    pf = ProgramIndex.of(program)
    items = [make(rule, pf) for rule in decision_rules.values() for make in (_jaxpr_item, _stablehlo_item)]
    return [item for item in items if item is not None]


# Each spot item keeps its decision kind's weight times SPOT_SCALE (the "what for" items' weights: _decision_why).
SPOT_SCALE = 0.1
# And one whose answer is the listing's first line of its operation, times PLAIN_SCALE: tapping the first
# `transpose` finds it with no reading past the name (in a program with no transpose of its own), so that must
# not be the habit that pays; one where a lookalike comes first (your own `k.T`) needs the reading.
PLAIN_SCALE = 0.1


def _plain(d: DecisionItem, program: ProgramRecord) -> bool:
    """Whether a spot item's answer is the first line, in print order, of the operation on its answer line."""
    if d.layer == "jaxpr":
        primitive = program.eqns[d.eqn].primitive
        first = min(e.jaxpr_lines[0] for e in program.eqns if e.primitive == primitive)
    else:
        name = next(op.name for op in program.stablehlo_ops if op.line == d.answer_line)
        first = min(op.line for op in program.stablehlo_ops if op.name == name)
    return first in d.accepted_lines


def _why_items(pf: ProgramIndex) -> list[Item]:
    """One "what is this line for" item per equation a step files, per layer that shows it."""
    return [_why_item(got, e, line, layer, pf) for got, e, line, layer in _readings(pf)]


def _why_item(got, eqn: EqnFact, line: int, layer: str, pf: ProgramIndex) -> Item:
    step, key, facts = got
    keys = step.offered(pf)
    options = tuple(step.answers[k] for k in keys)
    right = keys.index(key)
    text = pf.jaxpr if layer == "jaxpr" else pf.stablehlo
    reasons = tuple("" if k == right else f"Not \u201c{options[k]}\u201d: {facts}; so the answer "
                    f"is \u201c{options[right]}\u201d." for k in range(len(keys)))
    rules = tuple("" if k == right else f"why-{keys[k]}" for k in range(len(keys)))
    where = "jaxpr" if layer == "jaxpr" else "StableHLO"
    return Item(
        question=step.question.format(line=line, layer=where), layer=layer, eqn=eqn.id, step=step.step,
        card=(str(eqn.id), "why"),
        answer=Choice(options, right, reasons, rules),
        feedback=f"Line {line}: `{_line(text, line)}`. {facts[0].upper()}{facts[1:]}; so the answer is "
                 f"\u201c{options[right]}\u201d.",
        context=(Lines(layer, 1, len(getattr(pf.record, layer).split("\n")), numbered=True),),
        facts={"source_eqn": eqn.id, "line": line, "why": key})


def _balanced(items: list[Item]) -> list[Item]:
    """Each question of a step (its answer, layer and line) shares its weight in a program, however many
    items ask it there (`_decision_why.question_weights`)."""
    def key(i: Item) -> tuple:
        return i.step, i.facts["why"], i.layer, i.facts["line"]
    count: dict[tuple, int] = {}
    for i in items:
        count[key(i)] = count.get(key(i), 0) + 1
    weight = question_weights(count)
    return [replace(i, weight=round(weight[key(i)] / count[key(i)], 3)) for i in items]


def step_of(kind: str) -> str:
    """The step a decision kind's spot item is asked under: the three rare kinds share `mark`, the step of
    their "what for" items, since none alone has the programs to stand as a step."""
    return next((s.step for s in why_steps.values() if s.step == kind), "mark")


@drill("decisions", number="03", title="the framework's hand",
       aim="Say what a line the framework wrote is for, and spot it: a broadcast, an upcast, a transpose, a mark.")
def decisions_pool(program: ProgramRecord) -> list[Item]:
    """Decision items for one program: "what is this line for" items, and spot-the-line ones. A spot item's
    card is the equation that wrote the line and the decision kind, whatever layer asks: finding jnp's
    broadcast in the jaxpr and in StableHLO is one skill; a "what for" item's is the equation and `why`."""
    out = []
    for d in decision_items(program):
        about = d.eqn if d.eqn is not None else d.source_eqn
        out.append(Item(
            question=d.question, layer=d.layer, eqn=d.eqn, step=step_of(d.kind),
            weight=d.weight * SPOT_SCALE * (PLAIN_SCALE if _plain(d, program) else 1.0),
            feedback=d.feedback,
            card=(str(about) if about is not None else "untraced", d.kind),
            answer=LinePick(d.answer_line, tuple(d.accepted_lines), d.explain),
            context=(Lines(d.layer, 1, len(d.shown[0].split("\n"))),),
            facts={"source_eqn": d.source_eqn, "decision": d.kind}))
    return out + _balanced(_why_items(ProgramIndex.of(program)))
