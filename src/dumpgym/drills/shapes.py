"""GYM·02, the shape oracle: what shape and dtype comes out of this equation?

The answer is the equation's output fact. The reader sees `shown`: the equation as the jaxpr
prints it, its output aval masked and its noise params dropped, then each operand's aval. An
equation is asked only when that needs inference: never when a param states the output
(`broadcast_in_dim`'s `shape`, `reshape`'s `new_sizes`, `iota`'s `shape`), and never when the
answer's text would show anywhere in `shown` (an output that is an operand's aval). Each wrong
option comes from a named misreading in `distractor_rules` (keyed by primitive), applied to this
equation's operands and params and to where it sits (a shard_map body is per device).

The learner types the aval (`Typed`, spelling `aval`): every computed misreading is a `misread` entry,
so a typed answer one of them gives gets that misreading's reason; `feedback` says what decides the
output (`_shape_feedback`).
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Iterator, Sequence

from dumpgym.drills import drill
from dumpgym.drills._shape_feedback import shape_feedback
from dumpgym.drills._op_shapes import OpShape, op_shapes
from dumpgym.drills.answer import Misreading as Misread, Typed
from dumpgym.drills.item import Item, Note
from dumpgym.drills._misreadings import (FILLER, GENERIC, NOWHERE, Misreading, Where, distractor_rules,
                                         misreadings, pick)
from dumpgym.record.dtypes import is_extended
from dumpgym.record.primitives import COLLECTIVES, COMPARISONS, REDUCTIONS
from dumpgym.record.schema import Aval, Binder, EqnFact, Literal, ProgramRecord, TextSpan

__all__ = ["FILLER", "GENERIC", "Misreading", "ShapesItem", "distractor_rules", "shapes_item", "shapes_items",
           "skill_of", "WEIGHTS"]

# A typed answer needs no options, but an item needs a named slip of its own to say why a wrong aval tempts.
MIN_OWN_MISREADINGS = 1
MAX_MISREADINGS = 8

# Primitives whose params print the output's shape: asking for it would be reading, not inferring.
STATES_THE_ANSWER = frozenset({"broadcast_in_dim", "reshape", "iota", "dynamic_slice", "full",
                               "random_bits", "rng_bit_generator", "rng_uniform"})
# Params that hold sizes: when one equals the output's shape, the line prints the answer (a slice from
# 0 with stride 1 has it as limit_indices). Other params can equal it by chance (axes=(2, 3) reducing
# a [2,3,2,2] to [2,3]) without saying anything about it.
SIZE_PARAMS = frozenset({"limit_indices", "slice_sizes", "new_sizes", "shape", "sizes"})
# Params that say nothing about the output: placement, caching, naming, accuracy, AD bookkeeping.
NOISE_PARAMS = frozenset({"compiler_options_kvs", "ctx_mesh", "in_shardings", "out_shardings", "donated_invars",
                          "inline", "keep_unused", "name", "in_layouts", "out_layouts", "out_sharding", "sharding",
                          "precision", "accuracy", "weak_type", "check_vma", "newly_manual_axes", "differentiated",
                          "policy", "prevent_cse", "out_dtype", "algorithm", "transpose_algorithm"})

SKILL_OF_PRIMITIVE = {
    "dot_general": "contraction", "transpose": "transpose", "concatenate": "concat",
    "slice": "slice-pad", "pad": "slice-pad", "dynamic_slice": "slice-pad", "dynamic_update_slice": "slice-pad",
    "split": "slice-pad", "gather": "gather-scatter", "scatter": "gather-scatter", "scatter-add": "gather-scatter",
    "scatter_add": "gather-scatter", "convert_element_type": "cast", "broadcast_in_dim": "broadcast",
    "reshape": "reshape", "squeeze": "reshape", "expand_dims": "reshape", "shard_map": "sharding",
    **{p: "reduction" for p in REDUCTIONS}, **{p: "comparison" for p in COMPARISONS},
    **{p: "sharding" for p in COLLECTIVES},
}
# Which skill names a container: the hardest thing its masked body asks for.
SKILL_ORDER = ("sharding", "contraction", "gather-scatter", "reduction", "concat", "slice-pad", "reshape",
               "transpose", "broadcast", "promotion", "comparison", "cast", "other", "none")
# How often the page asks an item, by skill: a cast or a comparison reads its dtype off one param or
# one rule, so they come up less; `none` (the output is an operand's aval) hardly at all.
WEIGHTS = {"none": 0.1, "cast": 0.25, "comparison": 0.5}


@dataclass(frozen=True)
class ShapesItem:
    """One shape-oracle question: `answer` is the output aval's text; `misread` maps each aval a named
    misreading gives to (rule, reason); `feedback` says what decides the answer."""

    eqn: int
    question: str
    answer: str
    misread: dict[str, tuple[str, str]]
    shown: list[str]
    skill: str
    weight: float
    jaxpr_lines: list[int]
    feedback: str

    def typed(self) -> Typed:
        """The item's answer form: the aval, typed, with each misreading's reason."""
        return Typed("aval", self.answer, misread={k: Misread(reason, rule) for k, (rule, reason) in self.misread.items()})


# -- the jaxpr text ---------------------------------------------------------------------------

class Listing:
    """A program's jaxpr lines, cut by what the record says each equation prints (`EqnFact.binders`,
    `printed_params`, `operand_names`, `body_binders`, read once in `ir/jaxpr.py`): no text is parsed here."""

    def __init__(self, jaxpr: str, eqns: Sequence[EqnFact], arguments: Sequence[Binder] = ()):
        self.lines = jaxpr.splitlines()
        self.children: dict[int, list[EqnFact]] = {}
        for e in eqns:
            if e.parent is not None:
                self.children.setdefault(e.parent, []).append(e)
        # Every name's types as its binders print them, in the listing's order (names repeat across bodies).
        bound = [*arguments, *(b for e in eqns for b in (*e.binders, *e.body_binders))]
        self.types: dict[str, list[Binder]] = {}
        self.bound_on: dict[int, list[Binder]] = {}  # each line's binders, left to right
        for b in sorted(set(bound), key=lambda b: (b.line, b.column)):
            self.types.setdefault(b.name, []).append(b)
            self.bound_on.setdefault(b.line, []).append(b)

    def param_name(self, entry: TextSpan) -> str:
        """The name of a printed `name=value` param."""
        return self.lines[entry.first - 1][entry.column:].partition("=")[0]

    def _cut(self, start: tuple[int, int], end: tuple[int, int], inner: dict[int, tuple[int, list[str]]]) -> str | None:
        """The text from (line, column) `start` to `end`, each `inner` equation's lines (first line -> (last
        line, its lines)) strictly between them put in place of its own; None where one crosses the cut."""
        (first, column), (last, stop) = start, end
        if first == last:
            return self.lines[first - 1][column:stop]
        out, n = [self.lines[first - 1][column:]], first + 1
        while n < last:
            if n in inner:
                hi, lines = inner[n]
                if hi >= last:
                    return None
                out += lines
                n = hi + 1
            else:
                out.append(self.lines[n - 1])
                n += 1
        out.append(self.lines[last - 1][:stop])
        return "\n".join(out)

    def text(self, eqn: EqnFact, answer: str, top: bool = True) -> str | None:
        """The equation's printed lines with noise params dropped and its binders masked (on top, all of
        them; in a body, those whose type prints `answer`); None when the record does not say how it prints."""
        first, last = eqn.jaxpr_lines
        if not eqn.outputs or len(eqn.binders) != len(eqn.outputs) or len(eqn.printed_params) == 1:
            return None
        if eqn.binders[-1].line != first:
            return None  # binders wrapped over lines: not asked
        inner = {}
        for child in self.children.get(eqn.id, ()):
            lo, hi = child.jaxpr_lines
            if first < lo and hi <= last:
                text = self.text(child, answer, top=False)
                if text is None:
                    return None
                inner[lo] = (hi, text.split("\n"))
        if top and eqn.printed_end and eqn.parent is not None:
            return None  # inside a body printed on one line: asked with its container
        one_line = top and eqn.printed_end  # the jaxpr is printed on one line: only this equation's part
        head, end = self.lines[first - 1], eqn.printed_end if one_line else len(self.lines[last - 1])
        start = eqn.binders[0].column if one_line else 0
        bare = end if first == last else len(head)  # no params: the head runs to the line's (or the equation's) end
        group = eqn.printed_params[0] if eqn.printed_params else TextSpan(first, bare, first, bare)
        prefix = head[:group.column if group.first == first else len(head)]
        equals = eqn.binders[-1].type_span[1]  # the head's ` = `: what is bound before it is masked
        for b in reversed(self.bound_on.get(first, ())):
            if start <= b.column < equals and (top or b.aval_text == answer):
                at, stop = b.type_span
                prefix = prefix[:at] + "?" + prefix[stop:]
        prefix = prefix[start:]
        tail = self._cut((group.last, group.end), (last, end), inner)
        if not eqn.printed_params:
            return None if tail is None else prefix + tail
        kept = [self._cut((e.first, e.column), (e.last, e.end), inner) for e in eqn.printed_params[1:]
                if self.param_name(e) not in NOISE_PARAMS]
        if tail is None or None in kept:
            return None
        if not kept:
            return prefix + tail
        if group.first != group.last:
            indent = head[:len(head) - len(head.lstrip())]
            return prefix + "[\n" + "\n".join(f"{indent}  {e}" for e in kept) + f"\n{indent}]" + tail
        return prefix + "[" + " ".join(kept) + "]" + tail

    def operands(self, eqn: EqnFact) -> list[str] | None:
        """The equation's operands as printed after its params; None if the record holds none for its inputs."""
        return list(eqn.operand_names) if eqn.operand_names or not eqn.inputs else None

    def operand_block(self, eqn: EqnFact, names: list[str]) -> str:
        """Each operand as `name:type` (the type as its binder prints it), literals as printed: `a:bf16[64,128]  0.5:bf16[]`."""
        out = []
        for name, x in zip(names, eqn.inputs):
            if isinstance(x, Literal) or ":" in name:
                out.append(name)
                continue
            printed = [b.type for b in self.types.get(name, ()) if b.aval_text == str(x)]
            out.append(f"{name}:{printed[0] if printed else x}")
        return "  ".join(out)


# -- skill, weight, where ---------------------------------------------------------------------

def skill_of(eqn: EqnFact, body: Sequence[EqnFact] = ()) -> str:
    """What a reader must infer for this equation's output; for a container, the hardest of its `body` (the masked equations)."""
    if eqn.primitive in SKILL_OF_PRIMITIVE:
        return SKILL_OF_PRIMITIVE[eqn.primitive]
    if eqn.has_subjaxpr:
        return min((skill_of(e) for e in body), key=SKILL_ORDER.index, default="none")
    out, ins = eqn.outputs[0], eqn.input_avals
    if any(out.same(x) for x in ins):
        return "none"
    if all(out.shape != x.shape for x in ins):
        return "broadcast"
    return "promotion" if all(out.dtype != x.dtype for x in ins) else "other"


def _shard_map_of(eqn: EqnFact, eqns: tuple[EqnFact, ...]) -> EqnFact | None:
    while eqn.parent is not None:
        eqn = eqns[eqn.parent]  # ids follow print order (the record checks it)
        if eqn.primitive == "shard_map":
            return eqn
    return None


def where_of(program: ProgramRecord, listing: Listing, eqn: EqnFact) -> Where:
    """Where the equation sits: the program's mesh, and inside a shard_map body, its operands' global avals."""
    mesh = dict(program.mesh or {})
    outer = _shard_map_of(eqn, program.eqns)
    if outer is None:
        return Where(mesh=mesh)
    invars = [b.name for b in outer.body_binders]
    global_of = {n: g for n, g in zip(invars, outer.inputs) if isinstance(g, Aval)}
    names = listing.operands(eqn) or []
    glob = tuple(global_of[n] if n in global_of and not global_of[n].same(x) else None
                 for n, x in zip(names, eqn.input_avals))
    return Where(mesh=mesh, in_body=True, operands_global=glob)


# -- the item ---------------------------------------------------------------------------------

def _body_misreadings(body: Sequence[EqnFact], answer: Aval, where: Where) -> Iterator[Misreading]:
    """A container's misreadings that come from the masked body equations that make its result."""
    for e in sorted(body, key=lambda e: SKILL_ORDER.index(skill_of(e))):
        if e.outputs and e.outputs[0].same(answer):
            for fn in distractor_rules.get(e.primitive, ()):
                found = fn(e, answer, where)
                if found is not None:
                    yield Misreading(fn.__name__.replace("_", "-"), found[0], f"in the body's {e.primitive}: {found[1]}")


def _hidden_size(listing: Listing, body: Sequence[EqnFact]) -> bool:
    """Whether a masked body equation's output is set by a size param its printed line leaves out (the
    printer writes `broadcast_in_dim 0.0:f32[]` without `shape=`): then nothing shown decides the answer."""
    for e in body:
        if e.primitive in STATES_THE_ANSWER and SIZE_PARAMS & e.params.keys():
            printed = {listing.param_name(p) for p in e.printed_params[1:]}
            if not SIZE_PARAMS & e.params.keys() & printed:
                return True
    return False


def shapes_item(eqn: EqnFact, jaxpr: str, seed: str = "", where: Where = NOWHERE,
                listing: Listing | None = None) -> ShapesItem | None:
    """The shape-oracle item for one equation, or None when it has no single output, when its params
    or operands show the answer (or nothing shown decides it), when it works on typed PRNG keys itself
    (random_wrap, random_bits), or when it has no misreading of its own."""
    if len(eqn.outputs) != 1 or eqn.primitive in STATES_THE_ANSWER:
        return None
    if not eqn.has_subjaxpr and any(is_extended(x.dtype) for x in (*eqn.input_avals, *eqn.outputs)):
        return None  # a PRNG key primitive: its shapes follow the key data's layout, which no misreading rule knows
    answer, listing = eqn.outputs[0], listing or Listing(jaxpr, [eqn])
    if answer.rank and any(eqn.params[k] == list(answer.shape) for k in SIZE_PARAMS & eqn.params.keys()):
        return None  # e.g. a slice from 0 with stride 1: limit_indices is the answer
    printed, names = listing.text(eqn, str(answer)), listing.operands(eqn)
    if printed is None or names is None or (eqn.has_subjaxpr and "{ lambda" not in printed):
        return None  # unreadable, or a body hoisted into a `let` block that the equation's lines do not hold
    shown = [textwrap.dedent(printed), listing.operand_block(eqn, names)]
    if any(str(answer) in block or "…" in block for block in shown):
        return None
    # The body equations whose binders were masked: what a container's reader must work out.
    body = [c for c in listing.children.get(eqn.id, ()) if len(c.outputs) == 1 and c.outputs[0].same(answer)]
    if _hidden_size(listing, [e for e in _descendants(listing, eqn) if len(e.outputs) == 1 and e.outputs[0].same(answer)]):
        return None
    inner = _body_misreadings(body, answer, where) if eqn.primitive != "shard_map" else iter(())
    wrong = pick(iter([*inner, *misreadings(eqn, answer, where)]), answer, limit=MAX_MISREADINGS)
    if sum(w.rule not in FILLER for w in wrong) < MIN_OWN_MISREADINGS:
        return None
    skill = skill_of(eqn, body)
    return ShapesItem(
        eqn=eqn.id,
        question=f"What shape and dtype comes out of this {eqn.primitive}? Type its aval.",
        answer=str(answer), misread={str(w.aval): (w.rule, w.reason) for w in wrong},
        shown=shown, skill=skill, weight=WEIGHTS.get(skill, 1.0),
        jaxpr_lines=list(eqn.jaxpr_lines), feedback=shape_feedback(eqn, answer),
    )


def _descendants(listing: Listing, eqn: EqnFact) -> list[EqnFact]:
    """Every equation printed inside a container's body, nested bodies included."""
    out = []
    for child in listing.children.get(eqn.id, ()):
        out += [child, *_descendants(listing, child)]
    return out


@drill("shapes", number="02", title="shape on sight",
       aim="Say what comes out of one equation: every dimension and the dtype.")
def shapes_items(program: ProgramRecord) -> list[Item]:
    """A shape-oracle item for every equation whose output the reader must infer from what is shown.
    Its card is the equation: one question per equation. Its context is computed text (the equation
    masked, its operands), not a listing's lines. A record without equations (a dump without a jaxpr) is
    asked of its StableHLO ops and compiled instructions instead (`_op_shapes`), each op's card its line."""
    if not program.eqns:  # a dump without a jaxpr: the ops of its layers whose line decides their output
        return [_op_item(s) for s in op_shapes(program)]
    listing = Listing(program.jaxpr, program.eqns, program.arg_binders)
    made = (shapes_item(e, program.jaxpr, program.slug, where_of(program, listing, e), listing)
            for e in program.eqns)
    return [Item(question=s.question, layer="jaxpr", eqn=s.eqn, skill=s.skill, weight=s.weight, card=(s.eqn,),
                 jaxpr_lines=tuple(s.jaxpr_lines), context=tuple(Note(b) for b in s.shown), answer=s.typed(),
                 feedback=s.feedback)
            for s in made if s is not None]


def _op_item(s: OpShape) -> Item:
    """The pool's item for one op's shape question (no equation: its card is the op's layer and line)."""
    form = Typed("aval", str(s.answer), misread={k: Misread(reason, rule) for k, (rule, reason) in s.misread.items()})
    return Item(question=f"What shape and dtype comes out of this {s.op}? Type its aval (as f32[4,8]).",
                layer=s.layer, skill=s.skill, weight=WEIGHTS.get(s.skill, 1.0), card=(f"{s.layer}-{s.line}",),
                context=tuple(Note(b) for b in s.shown), answer=form, feedback=s.feedback,
                facts={"line": s.line, "op": s.op, "operands": [str(a) for a in s.operands],
                       "attribute": list(s.attribute)})
