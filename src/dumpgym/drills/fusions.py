"""The fusion drill: which equations did XLA fuse into this fusion? (choose the set)

Computed from the compiled layer's attribution (`program.hlo.fusions`): the answer is
the set of equations whose tagged instructions ended up inside the fusion's computation.
Wrong sets come from named misreadings of the same compiled program.
"""
from __future__ import annotations

from dumpgym.drills import drill
from dumpgym.drills._avals import choice_item
from dumpgym.record import CompiledLayer, EqnFact, ProgramRecord


def _describe(program: ProgramRecord, eqns) -> str:
    """A set of equations as the reader sees them: `primitive (line N)`, in jaxpr order."""
    return ", ".join(_named(program.eqns[e]) for e in sorted(eqns))


def _named(eqn: EqnFact) -> str:
    return f"{eqn.primitive} (line {eqn.jaxpr_lines[0]})"


def _leaves(program: ProgramRecord, eqns) -> set[int]:
    """Drop containers (jit, remat2, …) whose body is in the set: the set names what computes."""
    eqns = set(eqns)
    parents = {program.eqns[e].parent for e in eqns}
    return {e for e in eqns if e not in parents}


@drill("fusions", number="05", title="what XLA fused",
       aim="Name the equations XLA merged into one fusion of the compiled program.")
def fusion_items(program: ProgramRecord) -> list[dict]:
    """One item per fusion that absorbed two or more equations."""
    hlo = program.hlo
    if hlo is None:
        return []
    fusions = [f for f in hlo.fusions if len(_leaves(program, f.eqns)) >= 2]
    unfused_neighbours = _neighbours(program, hlo)
    items = []
    for fusion in fusions:
        answer = _leaves(program, fusion.eqns)
        wrong: list[tuple[str, str, str]] = []
        seen = {frozenset(answer)}

        def offer(candidate: set[int], rule: str, reason: str):
            if candidate and frozenset(candidate) not in seen:
                seen.add(frozenset(candidate))
                wrong.append((_describe(program, candidate), rule, reason))

        last = max(answer, key=lambda e: program.eqns[e].jaxpr_lines[0])
        offer(answer - {last}, "stopped-early",
              "the fusion runs to the end of the chain: XLA kept fusing elementwise work past where this set stops")
        for e, went in unfused_neighbours[fusion.name][:1]:
            offer(answer | {e}, "fused-a-neighbour",
                  f"{_named(program.eqns[e])} sits next to this chain but was not fused into it: {went}")
        for other in hlo.fusions:
            if other.name != fusion.name:
                offer(_leaves(program, other.eqns), "another-fusion",
                      f"that is what {other.name} absorbed, a different fusion")
        if len(wrong) < 2:
            continue
        items.append({
            "eqn": None,
            "question": f"Which equations did XLA fuse into {fusion.name} (compiled HLO line {fusion.line})?",
            "fusion": fusion.name,
            "hlo_line": fusion.line,
            **choice_item(_describe(program, answer), wrong[:3], program.slug, fusion.name),
        })
    return items


def _neighbours(program: ProgramRecord, hlo: CompiledLayer) -> dict[str, list[tuple[int, str]]]:
    """For each fusion: equations adjacent in the jaxpr to its set that XLA placed elsewhere, and where."""
    fusion_of: dict[int, list[str]] = {}
    for fusion in hlo.fusions:
        for e in fusion.eqns:
            fusion_of.setdefault(e, []).append(fusion.name)
    own_instruction: dict[int, str] = {}
    fused_bodies = {i.computation for i in hlo.instructions if i.computation.startswith(("fused", "wrapped"))}
    for ins in hlo.instructions:
        if ins.opcode not in ("fusion", "parameter") and ins.computation not in fused_bodies:
            for e in ins.eqns:
                own_instruction.setdefault(e, ins.name)
    eqns = program.eqns
    out: dict[str, list[tuple[int, str]]] = {}
    for fusion in hlo.fusions:
        members = set(fusion.eqns)
        near = sorted({i + d for i in members for d in (-1, 1)} - members)
        found = []
        for e in near:
            # A container's work is its body's: the body's equations are the neighbours to name.
            if not 0 <= e < len(eqns) or eqns[e].has_subjaxpr:
                continue
            others = [f for f in fusion_of.get(e, ()) if f != fusion.name]
            if others:
                found.append((e, f"XLA put it in %{others[0]}, a different fusion"))
            elif e in own_instruction:
                found.append((e, f"XLA gave it an instruction of its own, %{own_instruction[e]}"))
        out[fusion.name] = found
    return out
