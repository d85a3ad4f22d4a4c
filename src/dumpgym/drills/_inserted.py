"""The partitioner drill's `inserted` step: which collectives did the partitioner add for this dot_general?

Asked of the dot_generals that jit's partitioner placed (not those inside a shard_map body, whose
collectives the user wrote), on the TPU compile. The answer is read from the compiled layer's
attribution: a collective instruction (`all-gather`, `all-reduce`) whose equation is the dot, or a
fusion made for the dot whose called computation XLA named `all-reduce-scatter` (TPU's fused
reduce-scatter). Collectives XLA added for a dot carry the dot's own equation tag in their
`op_name`, which is how they are attributed.
"""
from __future__ import annotations

from dumpgym.drills._avals import choice_item
from dumpgym.drills._tpu import Listing, which_compile
from dumpgym.record import CompiledLayer, ProgramRecord

NONE, GATHER, REDUCE, SCATTER = "none", "all-gather", "all-reduce", "reduce-scatter"
# The catalogue of answers: a set of collective kinds, and how an option says it.
LABELS = {
    frozenset(): "none: each device's blocks of its operands suffice",
    frozenset({GATHER}): "an all-gather of an operand, before it",
    frozenset({REDUCE}): "an all-reduce of its partial results, after it",
    frozenset({SCATTER}): "a reduce-scatter of its partial results, after it",
    frozenset({GATHER, REDUCE}): "an all-gather before it and an all-reduce after it",
}
_OPCODES = {"allgather": GATHER, "allreduce": REDUCE, "reducescatter": SCATTER}


def inserted(program: ProgramRecord, hlo: CompiledLayer) -> dict[int, dict[str, list[str]]]:
    """For each dot_general the partitioner placed: the collectives the TPU compile `hlo` runs for it, by
    kind, with the instructions that do it (an empty dict: none)."""
    listing = Listing(hlo)
    dots = {e.id for e in program.eqns if e.primitive == "dot_general"
            and not any(a.primitive == "shard_map" for a in program.ancestors(e))}
    found: dict[int, dict[str, list[str]]] = {d: {} for d in dots}
    for ins in hlo.instructions:
        kind = _OPCODES.get(ins.opcode)
        if ins.opcode == "fusion" and any(c.startswith("all-reduce-scatter") for c in listing.body(ins.line)):
            kind = SCATTER
        if kind is None or ins.via != "tag":
            continue
        for e in ins.eqns:
            if e in found:
                found[e].setdefault(kind, []).append(f"%{ins.name}")
    return found


def _says(kinds: dict[str, list[str]]) -> str:
    """What the compile really runs for the dot, in words, naming its instructions."""
    if not kinds:
        return "no collective in this compile carries this dot_general's tag: it runs on each device's blocks"
    return "this compile runs " + " and ".join(f"{kind} ({', '.join(names[:2])})" for kind, names in sorted(kinds.items()))


def _misreading(wrong: frozenset, right: frozenset) -> str:
    if not wrong:
        return "missed-collective"
    if not right:
        return "invented-collective"
    if wrong < right:
        return "half-of-it"
    if right < wrong:
        return "one-too-many"
    if (GATHER in wrong) != (GATHER in right):
        return "gather-for-reduce" if GATHER in wrong else "reduce-for-gather"
    return "scatter-for-reduce" if SCATTER in wrong else "reduce-for-scatter"


def inserted_items(program: ProgramRecord, target: str, hlo: CompiledLayer, mesh_note: str) -> list[dict]:
    """One item per dot_general the partitioner placed in the TPU compile `hlo` (compile target
    `target`) whose collectives the catalogue can say."""
    lines = program.jaxpr.splitlines()
    items = []
    for eqn_id, kinds in sorted(inserted(program, hlo).items()):
        right = frozenset(kinds)
        if right not in LABELS:
            continue
        eqn = program.eqns[eqn_id]
        first, last = eqn.jaxpr_lines
        others = sorted((k for k in LABELS if k != right), key=lambda k: (len(k ^ right), sorted(k)))[:3]
        wrong = [(LABELS[k], _misreading(k, right), f"Not {LABELS[k].split(',')[0]}: {_says(kinds)}.") for k in others]
        items.append({
            "eqn": eqn_id, "layer": target, "step": "inserted", "jaxpr_lines": [first, last],
            "question": (f"The partitioner compiled the dot_general on jaxpr line {first} for the whole mesh. "
                         "Which collectives did it add for it?"),
            "shown": [which_compile(hlo), mesh_note, _arguments(program), "\n".join(lines[first - 1:last])],
            **choice_item(LABELS[right], wrong, program.slug, "inserted", eqn_id),
        })
    return items


def _arguments(program: ProgramRecord) -> str:
    """The program's arguments with how each arrives sharded, as the reader starts from."""
    specs = program.in_specs or [[] for _ in program.args]
    def spec(p) -> str:
        return "P(" + ", ".join("None" if a is None else repr(a if isinstance(a, str) else tuple(a)) for a in p) + ")"
    return "\n".join(f"argument {k}: {arg} sharded {spec(p)}" for k, (arg, p) in enumerate(zip(program.args, specs)))
