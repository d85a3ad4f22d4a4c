"""The decisions drill's "what is this line for" questions: a table of steps, each a small closed set of
answers (what the line does, and who wrote it), and the function that files one equation under one.

Spotting the framework's line by its operation (a `broadcast_in_dim`, a `convert_element_type`) needs no
reading: the operation's name is enough. These items name a line and ask what it is for, among every
answer its step has; telling a keepdims broadcast from rank promotion, jnp's upcast for a sum from your
own astype or a narrowing back, autodiff's transpose from einsum's or your own, takes reading the
line's avals and params and what reads its result. Each answer is computed from the record's facts by
the rules in `_decision_rules.py` (`reading`); the options are the step's whole set, in one order, so
they tell nothing about the line.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

from dumpgym.drills._avals import axis_list, bits, is_float, short
from dumpgym.drills._decision_rules import _accumulator, _mask_compare, transpose_author
from dumpgym.drills._program_index import ProgramIndex
from dumpgym.record.primitives import COLLECTIVES, REMATS
from dumpgym.record.schema import EqnFact, Literal


@dataclass(frozen=True)
class WhyStep:
    """One step of "what is this line for": the primitives it asks about, its StableHLO ops, its answers
    (key -> option text, in the order the options show), the question, the function that files an
    equation under an answer (None: not asked) with a sentence of the facts that decide it, each
    question's weight in one program (`weight`), and the answers the rule can give in a program (`offered`)."""

    step: str
    primitives: frozenset[str]
    hlo_ops: frozenset[str]
    answers: dict[str, str]
    question: str
    reading: Callable[[EqnFact, ProgramIndex], tuple[str, str] | None]
    # The answers `reading` can give in a program (None: all of them); the options are those, in the step's order.
    possible: Callable[[ProgramIndex], frozenset[str]] | None = None

    def offered(self, pf: ProgramIndex) -> list[str]:
        """The answer keys a program's items offer as options: those the step's rule can give there, in order.
        An answer the rule never gives in the program is no option: a reader who strikes it has read no line."""
        can = self.possible(pf) if self.possible is not None else self.answers
        return [k for k in self.answers if k in can]

    def weight(self, key: str, layer: str, line: int) -> float:
        """What one program's items of answer `key` asked of `line` of `layer` weigh together: SHARE over the
        number of distinct questions (a layer and a line) the built-in programs ask with that answer, then
        over the built-in programs that ask that very question (`builtin_asked`). So over the built-in pool
        every answer of a step is about equally often right (a blind reader's usual answer is no better than
        a guess), and a question that several programs ask word for word with one answer (the attention
        family's own `k.T` on line 2) is one question, not a habit that pays: a reader who remembers it from
        one program knows it in the next without reading. A question or answer no built-in program gives
        weighs as if one did."""
        questions = _questions().get((self.step, key), 0)
        return SHARE / max(1, questions) / max(1, builtin_asked().get((self.step, key, layer, line), 0))


# What each answer of a step weighs over the whole built-in pool, on the scale of the spot items' weights.
SHARE = 8.0


def question_weights(questions) -> dict[tuple[str, str, str, int], float]:
    """What each of one program's distinct questions (step, answer key, layer, line) weighs. One a built-in
    program asks: `WhyStep.weight`. The program's own (no built-in program asks them, as an added program's):
    together, per step, what they would weigh as one more program of the built-in pool, each answer SHARE
    over the built-in questions and the program's own; then split evenly over the answers they give, and
    each answer's part over its questions. A deep program asks hundreds of one answer (a 12-layer GPT's
    `placement` broadcasts, its matmul gradients' transposes): weighed by the built-in counts alone, that
    answer held half its step's weight in the program, and the option in its place was a blind reader's pick."""
    out, own = {}, {}
    for q in questions:
        if builtin_asked().get(q, 0):
            out[q] = why_steps[q[0]].weight(*q[1:])
        else:
            own.setdefault(q[0], {}).setdefault(q[1], []).append(q)
    for step, by_key in own.items():
        total = sum(SHARE * len(qs) / (_questions().get((step, key), 0) + len(qs)) for key, qs in by_key.items())
        for qs in by_key.values():
            out.update((q, total / len(by_key) / len(qs)) for q in qs)
    return out


why_steps: dict[str, WhyStep] = {}


def why_step(step: str, primitives, hlo_ops, question: str, answers: dict[str, str], possible=None):
    """Register `reading(eqn, pf) -> (answer key, facts sentence) | None` as a step's filing rule; `answers`
    maps each answer key to its option text, `possible(pf)` gives the keys the rule can give in a program."""
    def register(reading):
        why_steps[step] = WhyStep(step, frozenset(primitives), frozenset(hlo_ops),
                                  dict(answers), question, reading, possible)
        return reading
    return register


@why_step("hidden-broadcast", {"broadcast_in_dim"}, {"stablehlo.broadcast_in_dim"},
          "Line {line} of the {layer} broadcasts: what does that broadcast do?", {
              "fill": "fills a literal constant out to a whole array",
              "scalar": "spreads one scalar value over every element",
              "keepdims": "adds a trailing size-one axis, so a reduced row lines up",
              "promotion": "adds a leading size-one axis, NumPy rank promotion",
              "placement": "places every operand axis inside a bigger shape",
          })
def _broadcast(eqn: EqnFact, pf: ProgramIndex):
    out, x, dims = eqn.outputs[0], eqn.inputs[0], eqn.ints("broadcast_dimensions")
    if dims is None:
        return None
    k, r = len(dims), out.rank
    new = [d for i, d in enumerate(out.shape) if i not in dims]
    what = f"the literal {x.literal}" if isinstance(x, Literal) else str(x)
    facts = f"it takes {what} to {out} with broadcast_dimensions={axis_list(dims)}"
    if isinstance(x, Literal):
        return "fill", facts
    if x.rank == 0:
        return "scalar", facts
    if set(new) == {1} and tuple(dims) == tuple(range(k)):
        return "keepdims", facts + f" (the new axis {r - 1} has size 1)"
    if set(new) == {1} and tuple(dims) == tuple(range(r - k, r)):
        return "promotion", facts + " (the new axis 0 has size 1)"
    return "placement", facts


@why_step("upcast", {"convert_element_type"}, {"stablehlo.convert"},
          "Line {line} of the {layer} converts a dtype: what is the conversion for?", {
              "accumulate": "widens a float so a reduction adds up in more bits",
              "astype": "widens a float that no reduction reads: your own cast",
              "narrow": "narrows a float back to fewer bits after the math",
              "kind": "changes kind, between bool, integer and float",
          })
def _convert(eqn: EqnFact, pf: ProgramIndex):
    if not eqn.input_avals or len(eqn.outputs) != 1:
        return None
    src, out = eqn.input_avals[0].dtype, eqn.outputs[0].dtype
    cast = f"it turns {short(src)} into {short(out)}"
    if not (is_float(src) and is_float(out)):
        return "kind", cast
    if bits(out) < bits(src):
        return "narrow", cast
    if bits(out) == bits(src):
        return None
    then = _accumulator(eqn, pf)
    if then is not None:
        return "accumulate", cast + f", and the {then.primitive} on {pf.cite(then.jaxpr_lines[0], 'jaxpr line')} reads it"
    return "astype", cast + ", and no reduction in the same jaxpr reads it"


@why_step("transpose", {"transpose"}, {"stablehlo.transpose"},
          "Line {line} of the {layer} transposes: who wrote that transpose, and why?", {
              "matmul-grad": "autodiff, turning a matmul gradient to the operand's shape",
              "einsum": "einsum, putting a product's axes in the order of its spec",
              "undo-T": "autodiff, sending a cotangent back through a `.T` of yours",
              "user": "you: a transpose your own code spelled, of a value it named",
          # Without the program's source (a dump's record) `transpose_author` says autodiff or nothing.
          }, possible=lambda pf: frozenset(
              ("matmul-grad", "einsum", "undo-T", "user") if pf.record.source else ("matmul-grad", "undo-T")))
def _transpose(eqn: EqnFact, pf: ProgramIndex):
    author = transpose_author(eqn, pf)
    made_by = pf.producer(eqn)
    perm = axis_list(eqn.ints("permutation") or ())
    facts = f"its permutation is {perm}"
    if made_by is not None:
        facts += f" and its operand comes from the {made_by.primitive} on {pf.cite(made_by.jaxpr_lines[0], 'jaxpr line')}"
    else:
        facts += " and its operand is an input, not a product"
    if author == "einsum":
        return "einsum", facts + ", in a program that calls einsum and no autodiff"
    if author == "autodiff":
        return ("undo-T" if made_by is not None and made_by.primitive == "transpose" else "matmul-grad"), (
            facts + ", in a program that differentiates")
    if author == "user":
        return "user", facts
    return None


@why_step("mark", {"iota", *REMATS, *COLLECTIVES}, {
    "stablehlo.iota", "stablehlo.optimization_barrier", "stablehlo.all_reduce", "stablehlo.all_gather",
    "stablehlo.all_to_all", "stablehlo.collective_permute", "stablehlo.reduce_scatter",
    "stablehlo.collective_broadcast"},
          "Line {line} of the {layer}: what did the framework write there, and for what?", {
              "iota-mask": "numbers positions so a comparison can build a mask",
              "remat": "marks a region for recomputing in the backward pass",
              "collective": "combines or moves data between the devices",
          })
def _mark(eqn: EqnFact, pf: ProgramIndex):
    if eqn.primitive == "iota":
        cmp = _mask_compare(eqn, pf)
        if cmp is None:
            return None
        return "iota-mask", (f"it is an iota along axis {eqn.param('dimension')}, and the {cmp.primitive} on "
                             f"{pf.cite(cmp.jaxpr_lines[0], 'jaxpr line')} compares it with other positions, making a bool mask")
    if eqn.primitive in REMATS:
        return "remat", f"it is `{eqn.primitive}`, the mark jax.checkpoint writes around a region"
    return "collective", f"it is `{eqn.primitive}`, an exchange between devices over a mesh axis"


@functools.cache
def builtin_spread() -> dict[tuple[str, str], int]:
    """(step, answer key) -> how many built-in programs (traced variants counted) give that answer, read from
    the built-in corpus by the steps' own filing rules, once per process: kept with the built-in items
    (`_stored.BuiltinStore`), else counted over the built-in records the process has parsed once."""
    from dumpgym.drills._stored import builtin_corpus, builtin_store

    index = builtin_store().index()
    if index is not None:
        return {(step, key): n for step, key, n in index["spread"]}
    return count_spread(builtin_corpus().programs)


def count_spread(programs) -> dict[tuple[str, str], int]:
    """(step, answer key) -> how many of `programs` (typed records) give that answer."""
    spread: dict[tuple[str, str], int] = {}
    for program in programs:
        pf = ProgramIndex.of(program)
        given = {(got[0].step, got[1]) for got in map(lambda e: reading_of(e, pf), pf.running()) if got}
        for key in given:
            spread[key] = spread.get(key, 0) + 1
    return spread


@functools.cache
def builtin_asked() -> dict[tuple[str, str, str, int], int]:
    """(step, answer key, layer, line) -> how many built-in programs (traced variants counted) ask that line
    of that layer and file it under that answer; kept with the built-in items like `builtin_spread`."""
    from dumpgym.drills._stored import builtin_corpus, builtin_store

    index = builtin_store().index()
    if index is not None:
        return {(step, key, layer, line): n for step, key, layer, line, n in index["asked"]}
    return count_asked(builtin_corpus().programs)


@functools.cache
def _questions() -> dict[tuple[str, str], int]:
    """(step, answer key) -> how many distinct questions (a layer and a line) the built-in programs ask with it."""
    out: dict[tuple[str, str], int] = {}
    for step, key, _, _ in builtin_asked():
        out[(step, key)] = out.get((step, key), 0) + 1
    return out


def count_asked(programs) -> dict[tuple[str, str, str, int], int]:
    """(step, answer key, layer, line) -> how many of `programs` (typed records) ask it (`asked`)."""
    out: dict[tuple[str, str, str, int], int] = {}
    for program in programs:
        for key in set(asked(ProgramIndex.of(program))):
            out[key] = out.get(key, 0) + 1
    return out


def reading_of(eqn: EqnFact, pf: ProgramIndex) -> tuple[WhyStep, str, str] | None:
    """The step that asks about `eqn`, the answer it files it under and the facts that decide it, or None."""
    for step in why_steps.values():
        if eqn.primitive in step.primitives:
            got = step.reading(eqn, pf)
            return (step, *got) if got is not None else None
    return None


def readings(pf: ProgramIndex) -> list[tuple]:
    """Each "what is this line for" question of the program: (the step's reading of the equation, the
    equation, the line, the layer), once per equation a step files, per layer that shows it."""
    out = []
    for e in pf.running():
        got = reading_of(e, pf)
        if got is not None:
            out.append((got, e, e.jaxpr_lines[0], "jaxpr"))
    done: set[int] = set()
    for line, name in pf.ops:
        step = next((s for s in why_steps.values() if name in s.hlo_ops), None)
        if step is None:
            continue
        owners = [e for e in (pf.by_id(i) for i in pf.owners.get(line, ())) if e is not None]
        mine = [e for e in owners if e.primitive in step.primitives]
        writer = min(mine, key=lambda e: (e.jaxpr_lines[1] - e.jaxpr_lines[0], -e.id), default=None)
        got = reading_of(writer, pf.on_stablehlo) if writer is not None and writer.id not in done else None
        if got is not None and got[0] is step:
            done.add(writer.id)
            out.append((got, writer, line, "stablehlo"))
    return out


def asked(pf: ProgramIndex) -> list[tuple[str, str, str, int]]:
    """What each "what is this line for" item of the program asks and answers: (step, answer key, layer, line)."""
    return [(got[0].step, got[1], layer, line) for got, _, line, layer in readings(pf)]
