"""The fusion drill: tap the jaxpr lines whose equations XLA fused into this fusion, read from its body.

Each item shows the program's jaxpr (the rows to tap), which compile this is, the fusion's call line and
the body of the computation it calls (with any it calls in turn). The answer is a set of lines (`lines`
form): the first line of each equation any of whose instructions, tagged or inferred, sit in the fused
computation, as the compiled layer's attribution (`program.compiled`) records them. A fusion is asked only
where its body does every answered equation's work: an equation credited to the fusion only through a
bitcast, a copy, a constant or a data move that cannot be its work (a transpose credited with a dot) is not
something the shown body decides, so that fusion is not asked. What a row's explanation says is what this
compile did with that equation, never a general rule of XLA.
"""
from __future__ import annotations

import functools

from dataclasses import dataclass

from dumpgym.drills import drill
from dumpgym.drills._dump_fusions import unlinked_fusion_items
from dumpgym.drills._tpu import Listing, which_compile
from dumpgym.drills.item import Item, Lines, LineSet, Note
from dumpgym.record.opcodes import DATA_MOVEMENT, computes
from dumpgym.record.primitives import REDUCTIONS
from dumpgym.record.schema import CompiledLayer, EqnFact, Fusion, ProgramRecord

MAX_SET = 16  # a fusion of more equations is not asked: tapping forty rows is a chore, not a reading
NEAR = 6  # at most this many rows outside the set are explained: the ones nearest its members
FEEDBACK_NAMES = 6  # the feedback names this many members, then counts the rest
# Instructions that do no equation's work: they pass, label or hold values.
PLUMBING = frozenset({"parameter", "constant", "bitcast", "copy", "tuple", "gettupleelement", "fusion"})
# Moving data between devices is no equation's arithmetic either.
COLLECTIVE_OPCODES = frozenset({"allgather", "allreduce", "alltoall", "collectivepermute", "reducescatter",
                                "allgatherstart", "allgatherdone", "allreducestart", "allreducedone",
                                "collectivepermutestart", "collectivepermutedone"})
# Primitives whose work is arithmetic over many elements: a data move or a relabelling credited with one of
# these (a transpose laying out a dot's operand) is not that work.
HEAVY = frozenset({"dot_general", "conv_general_dilated", "scan", "while", "cond", *REDUCTIONS})
# Primitives a bitcast can be the whole of: it relabels the same bytes with other dims.
RELABELS = frozenset({"reshape", "squeeze", "expand_dims", "broadcast_in_dim"})
_VIA_RANK = {"tag": 0, "inferred": 1, "region": 2, "none": 3}


def _named(eqn: EqnFact) -> str:
    return f"`{eqn.primitive}` on line {eqn.jaxpr_lines[0]}"


def _layer_words(hlo: CompiledLayer) -> str:
    """How a question names the listing: the CPU's as before, the TPU's and the GPU's by their backend."""
    return f"{hlo.backend.upper()} compiled HLO" if hlo.backend in ("tpu", "gpu") else "compiled HLO"


def _leaves(program: ProgramRecord, eqns) -> set[int]:
    """Drop containers (jit, remat2, …) whose body is in the set: the set names what computes."""
    eqns = set(eqns)
    parents = {program.eqns[e].parent for e in eqns}
    return {e for e in eqns if e not in parents}


@dataclass(frozen=True)
class _Compile(Listing):
    """One program's compiled text, read for the drill (`Listing`), and where its equations went."""

    program: ProgramRecord = None

    # Indexes made once per compile: a big program asks about a thousand fusions, each of a few equations.
    @functools.cached_property
    def _by_eqn(self) -> dict[int, list]:
        """The instructions (fusions aside) that compute each equation, in print order: an equation XLA
        folded into another's instruction (it has none of its own) is computed by that instruction."""
        out: dict[int, list] = {}
        for i in self.hlo.instructions:
            if i.opcode != "fusion":
                for e in i.computed_eqns:
                    out.setdefault(e, []).append(i)
        return out

    @functools.cached_property
    def _alike(self) -> dict[tuple, list[int]]:
        """The equations (with sources) doing each piece of work (`_work`), in order: equal work found once."""
        out: dict[tuple, list[int]] = {}
        for e in self.program.eqns:
            if e.sources:
                out.setdefault(_work(e), []).append(e.id)
        return out

    @functools.cached_property
    def _fusions_of(self) -> dict[int, list[Fusion]]:
        out: dict[int, list[Fusion]] = {}
        for f in self.hlo.fusions:
            for e in f.eqns:
                out.setdefault(e, []).append(f)
        return out

    @functools.cached_property
    def _own(self) -> dict[int, list]:
        """Per equation, its instructions outside every fused body (no fusion, no parameter), in print order."""
        outer = {i.computation for i in self.hlo.instructions if i.opcode == "fusion"}  # not fused bodies
        return {e: [i for i in found if i.opcode != "parameter" and i.computation in outer]
                for e, found in self._by_eqn.items()}

    @functools.cached_property
    def order(self) -> tuple[list[int], dict[int, int]]:
        """The equations that compute (no container), in jaxpr line order, and each one's place in it."""
        eqns = self.program.eqns
        order = sorted((e.id for e in eqns if not e.has_subjaxpr), key=lambda i: eqns[i].jaxpr_lines[0])
        return order, {e: k for k, e in enumerate(order)}

    def computing(self, e: int, computations) -> list:
        """The instructions of these computations that compute equation `e`, the likeliest first."""
        found = [i for i in self._by_eqn.get(e, ()) if i.computation in computations]
        primitive = self.program.eqns[e].primitive

        def rank(i):  # an instruction of the equation's own kind, tagged, computing it alone, first
            kind = 0 if computes(i.opcode, primitive) else 1 if i.opcode not in DATA_MOVEMENT else 2
            return (i.opcode == "parameter", _VIA_RANK[i.via], kind, len(i.computed_eqns), i.line)

        return sorted(found, key=rank)

    def where_else(self, e: int, fusion: Fusion) -> str:
        """Where this compile put an equation that is not in `fusion`, in words ("" if nowhere). The item
        shows the fusion and its body only, so the instruction is named, not cited by a line not on screen."""
        others = [f for f in self._fusions_of.get(e, ()) if f.name != fusion.name]
        named = _named(self.program.eqns[e])
        if others:
            more = f" (and {len(others) - 1} more)" if len(others) > 1 else ""
            return f"{named} stayed outside: this compile put it in %{others[0].name}{more}"
        own = self._own.get(e, [])
        if not own:
            return ""
        users = self.users(own[0])
        if len(users) > 1:
            return (f"{named} stayed outside: it is %{own[0].name}, which feeds "
                    f"{len(users)} instructions ({', '.join('%' + u.name for u in users[:3])})")
        return f"{named} stayed outside: this compile gave it an instruction of its own, %{own[0].name}"


def does_work(opcode: str, primitive: str) -> bool:
    """Whether an instruction of this opcode, credited with an equation of this primitive, does its work:
    computes it (or a rewrite of it: a multiply for a division by a constant, a convolution for a dot), or
    moves data for an equation that only moves data; never plumbing, nor a data move credited with a dot."""
    if computes(opcode, primitive):
        return True
    if opcode == "bitcast":
        return primitive in RELABELS
    if opcode in PLUMBING or opcode in COLLECTIVE_OPCODES:
        return False
    return opcode not in DATA_MOVEMENT or primitive not in HEAVY


def _unworked(c: _Compile, fusion: Fusion, answer: set[int]) -> list[int]:
    """The answered equations no instruction of the fusion's body does the work of (then it is not asked)."""
    body = set(c.body(fusion.line))
    out = []
    for e in answer:
        primitive = c.program.eqns[e].primitive
        if not any(i.computation in body and does_work(i.opcode, primitive) for i in c._by_eqn.get(e, ())):
            out.append(e)
    return out


def _work(e: EqnFact) -> tuple:
    """What an equation computes, as equal work is told apart: its parent, primitive, params and inputs."""
    params = repr(sorted(e.params.items()))
    if e.primitive == "slice" and e.param("strides"):  # the elements taken, however the strides are written
        params = repr([tuple(range(a, b, k)) for a, b, k in
                       zip(e.param("start_indices"), e.param("limit_indices"), e.param("strides"))])
    return (e.parent, e.primitive, params, e.sources, e.inputs)


def _twin_outside(c: _Compile, answer: set[int]) -> int | None:
    """An equation outside the set that does exactly a member's work (same primitive, params and inputs in
    the same jaxpr) and has no instruction of its own, or None. XLA keeps one copy of equal work, so the
    body computes both; where the attribution credits only one, what the reader should tap is not decided
    by what is shown (scan's TPU %slice_add_fusion.1, lines 52 and 58)."""
    eqns = c.program.eqns
    twins = (t for m in sorted(answer) if eqns[m].sources for t in c._alike.get(_work(eqns[m]), ()))
    return min((t for t in twins if t not in answer and not c._by_eqn.get(t)), default=None)


def _context(c: _Compile, layer: str, fusion: Fusion) -> tuple:
    """What the page shows: the whole jaxpr first (its rows are what is tapped), which compile, the fusion's
    call line and its computations (references into the listings, not copies)."""
    bodies = [Lines(layer, *c.computations[n], numbered=True) for n in c.body(fusion.line)]
    return (Lines("jaxpr", 1, len(c.program.jaxpr.split("\n"))), Note(which_compile(c.hlo)),
            Lines(layer, fusion.line, fusion.line, strip=True, numbered=True), *bodies)


# Programs with many look-alike fusions (an unrolled scan) should not crowd out the others.
@drill("fusions", number="05", title="what XLA fused",
       aim="Name the equations XLA merged into one fusion of the compiled program.",
       per_program=4, cap_by=("layer",))
def fusion_items(program: ProgramRecord) -> list[Item]:
    """One item per fusion that computes two or more equations, in each CPU compile, then each TPU one, then
    each GPU one (tests/test_hlo_fresh.py checks every layer's attribution against a fresh compile). Its card
    names the compile's target and the fusion: the CPU's, the TPU's and the GPU's fusion of one name are
    different questions."""
    if not program.eqns and program.dump is not None:  # a dump without a jaxpr: the layer it has (`_dump_fusions`)
        return unlinked_fusion_items(program)
    layers = [*program.layers("cpu").items(), *program.layers("tpu").items(), *program.layers("gpu").items()]
    return [item for target, hlo in layers for item in _layer_items(program, target, hlo)]


def _layer_items(program: ProgramRecord, layer: str, hlo: CompiledLayer) -> list[Item]:
    if not hlo.has_facts:
        return []
    c = _Compile(hlo=hlo, program=program)
    items = []
    for fusion in hlo.fusions:
        answer = _leaves(program, fusion.eqns)
        if not 2 <= len(answer) <= MAX_SET or _unworked(c, fusion, answer) or _twin_outside(c, answer) is not None:
            continue
        form = _line_set(c, fusion, answer)
        if form is None:
            continue
        # The CPU's card is the drills/1 family (`fusions/SLUG/NAME/`), so saved progress carries over.
        card = (fusion.name,) if layer == "cpu" else (fusion.name, layer)
        items.append(Item(
            question=(f"Tap the first jaxpr line of every equation XLA fused into %{fusion.name} "
                      f"({_layer_words(hlo)} line {fusion.line}), then submit."),
            answer=form, context=_context(c, layer, fusion), card=card, layer=layer, skill=fusion.kind,
            feedback=_feedback(c, fusion, answer),
            facts={"fusion": fusion.name, "hlo_line": fusion.line, "eqns": sorted(answer)}))
    return items


def _line_set(c: _Compile, fusion: Fusion, answer: set[int]) -> LineSet | None:
    """The rows to tap (each member's first line) and why each nearby row is in the set or not; None when a
    row would be both (an equation outside the fusion printed on a member's line)."""
    eqns = c.program.eqns
    rows = {eqns[e].jaxpr_lines[0]: e for e in answer}
    order, place = c.order
    if len(rows) < len(answer) or any(eqns[e].jaxpr_lines[0] in rows and e not in answer for e in order):
        return None
    explain = {str(n): _inside(c, e, fusion) for n, e in rows.items()}
    for e in answer:  # a member printed over several lines: its first line is the one that counts
        first, last = eqns[e].jaxpr_lines
        for n in range(first + 1, last + 1):
            explain[str(n)] = f"Part of line {first}'s equation."
    for e in {a.id for m in answer for a in c.program.ancestors(eqns[m])}:
        n = eqns[e].jaxpr_lines[0]
        explain.setdefault(str(n), f"Line {n} opens `{eqns[e].primitive}`: tap the equations inside it.")
    members = sorted(place[e] for e in answer if e in place)
    outside = [order[k] for k in range(members[0], members[-1] + 1) if order[k] not in answer]
    outside += [order[k] for k in (members[0] - 1, members[-1] + 1) if 0 <= k < len(order)]
    centre = (members[0] + members[-1]) / 2
    for e in sorted(dict.fromkeys(outside), key=lambda e: abs(place[e] - centre))[:NEAR]:
        n = eqns[e].jaxpr_lines[0]
        where = c.where_else(e, fusion) or (f"{_named(eqns[e])} is not in %{fusion.name}: no instruction of its "
                                            "body computes it")
        explain.setdefault(str(n), where + ".")
    return LineSet(tuple(rows), explain)


def _inside(c: _Compile, e: int, fusion: Fusion) -> str:
    """Why a row is in the set, in a few words: the body instruction that does its equation's work."""
    eqn = c.program.eqns[e]
    ins = next((i for i in c.computing(e, c.body(fusion.line)) if does_work(i.opcode, eqn.primitive)), None)
    if ins is None:
        return f"Line {eqn.jaxpr_lines[0]}, `{eqn.primitive}`, is in %{fusion.name}."
    twins = [t for t in ins.computed_eqns if t != e and c.program.eqns[t].primitive == eqn.primitive]
    also = (f"; it does line {c.program.eqns[twins[0]].jaxpr_lines[0]}'s too (the same work, kept once)"
            if twins else "")
    return f"Line {eqn.jaxpr_lines[0]}, `{eqn.primitive}`: %{ins.name} (HLO line {ins.line}) does it{also}."


def _feedback(c: _Compile, fusion: Fusion, answer: set[int]) -> str:
    """One line: which equations the body computes, each by the instruction that does its work."""
    eqns = c.program.eqns
    body = c.body(fusion.line)
    named = []
    for e in sorted(answer, key=lambda e: eqns[e].jaxpr_lines[0]):
        ins = next((i for i in c.computing(e, body) if does_work(i.opcode, eqns[e].primitive)), None)
        named.append(f"line {eqns[e].jaxpr_lines[0]} `{eqns[e].primitive}`" + (f" (%{ins.name})" if ins else ""))
    more = f", and {len(named) - FEEDBACK_NAMES} more" if len(named) > FEEDBACK_NAMES else ""
    return (f"%{fusion.name}'s body does the work of {len(answer)} equations: "
            f"{', '.join(named[:FEEDBACK_NAMES])}{more}.")
