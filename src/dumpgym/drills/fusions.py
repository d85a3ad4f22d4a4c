"""The fusion drill: which equations did XLA fuse into this fusion? (choose the set)

Computed from the compiled layer's attribution (`program["hlo"]["fusions"]`): the answer is
the set of equations whose tagged instructions ended up inside the fusion's computation.
Wrong sets come from named misreadings of the same compiled program.
"""
from __future__ import annotations

from dumpgym.drills import drill
from dumpgym.drills._avals import choice_item


def _describe(program: dict, eqns) -> str:
    """A set of equations as the reader sees them: `primitive (line N)`, in jaxpr order."""
    records = program["eqns"]
    return ", ".join(f"{records[e]['primitive']} (line {records[e]['jaxpr_lines'][0]})" for e in sorted(eqns))


def _leaves(program: dict, eqns) -> set[int]:
    """Drop containers (jit, remat2, …) whose body is in the set: the set names what computes."""
    eqns = set(eqns)
    parents = {program["eqns"][e]["parent"] for e in eqns}
    return {e for e in eqns if e not in parents}


@drill("fusions")
def fusion_items(program: dict) -> list[dict]:
    """One item per fusion that absorbed two or more equations."""
    hlo = program.get("hlo")
    if not hlo:
        return []
    fusions = [f for f in hlo["fusions"] if len(_leaves(program, f["eqns"])) >= 2]
    unfused_neighbours = _neighbours(program, hlo)
    items = []
    for fusion in fusions:
        answer = _leaves(program, fusion["eqns"])
        wrong: list[tuple[str, str, str]] = []
        seen = {frozenset(answer)}

        def offer(candidate: set[int], rule: str, reason: str):
            if candidate and frozenset(candidate) not in seen:
                seen.add(frozenset(candidate))
                wrong.append((_describe(program, candidate), rule, reason))

        last = max(answer, key=lambda e: program["eqns"][e]["jaxpr_lines"][0])
        offer(answer - {last}, "stopped-early",
              "the fusion runs to the end of the chain: XLA kept fusing elementwise work past where this set stops")
        for e, went in unfused_neighbours.get(fusion["name"], []):
            offer(answer | {e}, "fused-a-neighbour",
                  f"{program['eqns'][e]['primitive']} (line {program['eqns'][e]['jaxpr_lines'][0]}) sits next to "
                  f"this chain but was not fused into it: {went}")
            break
        for other in hlo["fusions"]:
            if other["name"] != fusion["name"]:
                offer(_leaves(program, other["eqns"]), "another-fusion",
                      f"that is what {other['name']} absorbed, a different fusion")
        if len(wrong) < 2:
            continue
        items.append({
            "eqn": None,
            "question": f"Which equations did XLA fuse into {fusion['name']} (compiled HLO line {fusion['line']})?",
            "fusion": fusion["name"],
            "hlo_line": fusion["line"],
            **choice_item(_describe(program, answer), wrong[:3], program["slug"], fusion["name"]),
        })
    return items


def _neighbours(program: dict, hlo: dict) -> dict[str, list[tuple[int, str]]]:
    """For each fusion: equations adjacent in the jaxpr to its set that XLA placed elsewhere, and where."""
    fusion_of: dict[int, list[str]] = {}
    for fusion in hlo["fusions"]:
        for e in fusion["eqns"]:
            fusion_of.setdefault(e, []).append(fusion["name"])
    own_instruction: dict[int, str] = {}
    fused_bodies = {i["computation"] for i in hlo["instructions"] if i["computation"].startswith(("fused", "wrapped"))}
    for ins in hlo["instructions"]:
        if ins["opcode"] not in ("fusion", "parameter") and ins["computation"] not in fused_bodies:
            for e in ins["eqns"]:
                own_instruction.setdefault(e, ins["name"])
    eqns = program["eqns"]
    out: dict[str, list[tuple[int, str]]] = {}
    for fusion in hlo["fusions"]:
        members = set(fusion["eqns"])
        near = sorted({i + d for i in members for d in (-1, 1)} - members)
        found = []
        for e in near:
            if not 0 <= e < len(eqns) or eqns[e]["primitive"] in ("jit", "remat2", "shard_map"):
                continue
            others = [f for f in fusion_of.get(e, []) if f != fusion["name"]]
            if others:
                found.append((e, f"XLA put it in %{others[0]}, a different fusion"))
            elif e in own_instruction:
                found.append((e, f"XLA gave it an instruction of its own, %{own_instruction[e]}"))
        out[fusion["name"]] = found
    return out
