"""The fusion drill: which equations did XLA fuse into this fusion? Read from its fused computation.

Each item shows what the reader needs to work it out: which compile this is (XLA's CPU backend
on the recorded host), the fusion's call line and the body of the computation it calls, and the
jaxpr. The answer comes from the compiled layer's attribution (`program.compiled`): the equations any
of whose instructions, tagged or inferred, sit in the fused computation. A fusion of at most six
equations asks for the set; a larger one asks which equation is NOT in it. Wrong options and
their reasons are what this compile did with the equations named, never general rules of XLA.
"""
from __future__ import annotations

import functools

from dataclasses import dataclass

from dumpgym.drills import drill
from dumpgym.drills._avals import choice_item
from dumpgym.drills._tpu import Listing, which_compile
from dumpgym.drills.item import Item, Lines, Note, choice
from dumpgym.opcodes import DATA_MOVEMENT, computes
from dumpgym.record import CompiledLayer, EqnFact, Fusion, ProgramRecord

MAX_SET = 6  # the largest set of equations an option lists
_VIA_RANK = {"tag": 0, "inferred": 1, "region": 2, "none": 3}


def _named(eqn: EqnFact) -> str:
    return f"{eqn.primitive} (line {eqn.jaxpr_lines[0]})"


def _layer_words(hlo: CompiledLayer) -> str:
    """How a question names the listing: the CPU's as before, the TPU's by its target."""
    return "TPU compiled HLO" if hlo.backend == "tpu" else "compiled HLO"


def _describe(program: ProgramRecord, eqns) -> str:
    """A set of equations as the reader sees them: `primitive (line N), …`, in jaxpr line order."""
    return ", ".join(_named(program.eqns[e]) for e in sorted(eqns, key=lambda e: program.eqns[e].jaxpr_lines[0]))


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
        """The instructions (fusions aside) that compute each equation, in print order."""
        out: dict[int, list] = {}
        for i in self.hlo.instructions:
            if i.opcode != "fusion":
                for e in i.eqns:
                    out.setdefault(e, []).append(i)
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
            return (i.opcode == "parameter", _VIA_RANK[i.via], kind, len(i.eqns), i.line)

        return sorted(found, key=rank)

    def where_else(self, e: int, fusion: Fusion) -> str:
        """Where this compile put an equation that is not in `fusion`, in words ("" if nowhere)."""
        others = [f for f in self._fusions_of.get(e, ()) if f.name != fusion.name]
        named = _named(self.program.eqns[e])
        if others:
            more = f" (and {len(others) - 1} more)" if len(others) > 1 else ""
            return f"{named} stayed outside: this compile put it in %{others[0].name} (HLO line {others[0].line}){more}"
        own = self._own.get(e, [])
        if not own:
            return ""
        users = self.users(own[0])
        if len(users) > 1:
            return (f"{named} stayed outside: it is %{own[0].name} (HLO line {own[0].line}), which feeds "
                    f"{len(users)} instructions ({', '.join('%' + u.name for u in users[:3])})")
        return (f"{named} stayed outside: this compile gave it an instruction of its own, "
                f"%{own[0].name} (HLO line {own[0].line})")

    def inside(self, e: int, fusion: Fusion) -> str:
        """Why equation `e` is in `fusion`, in words: the body instruction that computes it."""
        ins = self.computing(e, self.body(fusion.line))
        named = _named(self.program.eqns[e])
        if not ins:
            return f"{named} is in %{fusion.name}"
        how = " (XLA dropped its metadata; the dataflow says it is this equation)" if ins[0].via == "inferred" else ""
        eqn = self.program.eqns[e]
        twins = [t for t in ins[0].eqns if t != e and self.program.eqns[t].primitive == eqn.primitive]
        if twins:
            how += (f"; so does {_named(self.program.eqns[twins[0]])}: the two do the same work on the same "
                    "input, and this compile kept one copy")
        return f"{named} is inside: %{ins[0].name} (HLO line {ins[0].line}) in %{ins[0].computation} computes it{how}"


def _context(c: _Compile, layer: str, fusion: Fusion) -> tuple:
    """What the page shows: which compile, the fusion's call line, its computations, the whole jaxpr
    (references into the listings, not copies)."""
    bodies = [Lines(layer, *c.computations[n]) for n in c.body(fusion.line)]
    return (Note(which_compile(c.hlo)), Lines(layer, fusion.line, fusion.line, strip=True), *bodies,
            Lines("jaxpr", 1, len(c.program.jaxpr.split("\n"))))


# Programs with many look-alike fusions (an unrolled scan) should not crowd out the others.
@drill("fusions", number="05", title="what XLA fused",
       aim="Name the equations XLA merged into one fusion of the compiled program.",
       per_program=4, cap_by=("layer",))
def fusion_items(program: ProgramRecord) -> list[Item]:
    """One item per fusion that computes two or more equations, in each CPU compile, then each TPU one.
    Its card names the compile's target and the fusion: the CPU's and the TPU's fusion of one name
    are different questions. A GPU's fusions are not asked yet: its attribution is not checked
    against a fresh compile."""
    layers = [*program.layers("cpu").items(), *program.layers("tpu").items()]
    return [item for target, hlo in layers for item in _layer_items(program, target, hlo)]


def _layer_items(program: ProgramRecord, layer: str, hlo: CompiledLayer) -> list[Item]:
    if not hlo.has_facts:
        return []
    c = _Compile(hlo=hlo, program=program)
    items = []
    for fusion in hlo.fusions:
        answer = _leaves(program, fusion.eqns)
        if len(answer) < 2:
            continue
        made = _set_item(c, fusion, answer) if len(answer) <= MAX_SET else _not_in_item(c, fusion, answer)
        if made:
            # The CPU's card is the drills/1 family (`fusions/SLUG/NAME/`), so saved progress carries over.
            card = (fusion.name,) if layer == "cpu" else (fusion.name, layer)
            items.append(Item(question=made["question"], answer=choice(made), context=_context(c, layer, fusion),
                              card=card, layer=layer, facts={"fusion": fusion.name, "hlo_line": fusion.line}))
    return items


def _neighbours(c: _Compile, fusion: Fusion, answer: set[int]) -> list[tuple[int, str]]:
    """Equations next to the fusion's in jaxpr order that this compile put elsewhere, and where."""
    order, place = c.order
    near = []
    for k in sorted(place[e] for e in answer if e in place):  # the members in jaxpr order, as they are read
        near += [order[j] for j in (k - 1, k + 1) if 0 <= j < len(order) and order[j] not in answer]
    out = []
    for e in dict.fromkeys(near):
        where = c.where_else(e, fusion)
        if where:
            out.append((e, where))
    return out


def _set_item(c: _Compile, fusion: Fusion, answer: set[int]) -> dict | None:
    program = c.program
    wrong: list[tuple[str, str, str]] = []
    seen = {frozenset(answer)}

    def offer(candidate: set[int], rule: str, reason: str):
        if candidate and len(candidate) <= MAX_SET and frozenset(candidate) not in seen:
            seen.add(frozenset(candidate))
            wrong.append((_describe(program, candidate), rule, reason))

    by_line = sorted(answer, key=lambda e: program.eqns[e].jaxpr_lines[0])
    offer(answer - {by_line[-1]}, "stopped-early", c.inside(by_line[-1], fusion))
    for e, where in _neighbours(c, fusion, answer)[:1]:
        offer(answer | {e}, "fused-a-neighbour", where)
    offer(answer - {by_line[0]}, "started-late", c.inside(by_line[0], fusion))
    for other in c.hlo.fusions:
        if len(wrong) >= 3:  # three wrong options are asked: the rest would be made and dropped
            break
        if other.name != fusion.name:
            offer(_leaves(program, other.eqns), "another-fusion",
                  f"that is what %{other.name} (HLO line {other.line}) computes, a different fusion")
    if len(wrong) < 2:
        return None
    return {
        "question": f"Which equations did XLA fuse into %{fusion.name} ({_layer_words(c.hlo)} line {fusion.line})?",
        **choice_item(_describe(program, answer), wrong[:3], program.slug, fusion.name),
    }


def _not_in_item(c: _Compile, fusion: Fusion, answer: set[int]) -> dict | None:
    program = c.program
    outside = _neighbours(c, fusion, answer)
    if not outside:
        return None
    odd, _where = outside[0]
    line = program.eqns[odd].jaxpr_lines[0]
    # The members nearest the outsider in the jaxpr are the ones a reader is likeliest to doubt.
    members = sorted(answer, key=lambda e: (abs(program.eqns[e].jaxpr_lines[0] - line), e))[:3]
    wrong = [(_named(program.eqns[m]), "missed-a-member", c.inside(m, fusion)) for m in members]
    return {
        "question": (f"%{fusion.name} ({_layer_words(c.hlo)} line {fusion.line}) computes {len(answer)} equations. "
                     "Which of these is NOT one of them?"),
        **choice_item(_named(program.eqns[odd]), wrong, program.slug, fusion.name),
    }
