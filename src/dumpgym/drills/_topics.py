"""What an item is about, among the parts of real training dumps: sharding, loops, remat, the backward pass.

An item's topic comes from its kind when the kind is about one of them (the partitioner, loops,
the backward pass), else from its equation: the equation itself or any container around it.
Issue "The dumps of real training" asks these topics to be at least a quarter of the pool.
"""
from __future__ import annotations

from dumpgym.record.primitives import COLLECTIVES, LOOPS, REMATS, SHARDING
from dumpgym.record.schema import ProgramRecord

KIND_TOPICS = {"partitioner": "sharding", "loops": "loops", "backward": "backward"}
TOPICS = ("sharding", "loops", "remat", "backward")


# Compiled opcodes that are a loop, a branch or a collective whatever equation they came from.
_COMPILED = {"while": "loops", "conditional": "loops", "allreduce": "sharding", "allgather": "sharding",
             "reducescatter": "sharding", "alltoall": "sharding", "collectivepermute": "sharding"}


def topic(item: dict, program: ProgramRecord) -> str | None:
    """The training topic of one pool item, or None when it is about none of them."""
    if item["drill"] in KIND_TOPICS:
        return KIND_TOPICS[item["drill"]]
    if isinstance(item.get("eqn"), int):
        return _eqn_topic(item["eqn"], program)
    layer = program.compiled.get(item["layer"]) if isinstance(item.get("layer"), str) else None
    line = item.get("facts", {}).get("hlo_line")
    if layer is None or not isinstance(line, int):
        return None
    ins = next((i for i in layer.instructions if i.line == line), None)
    if ins is None:
        return None
    found = [t for t in (_COMPILED.get(ins.opcode), *(_eqn_topic(e, program) for e in ins.computed_eqns)) if t]
    return min(found, key=TOPICS.index) if found else None


def _primitive_topic(primitive: str) -> str | None:
    if primitive in COLLECTIVES or primitive in SHARDING:
        return "sharding"
    if primitive in LOOPS:
        return "loops"
    return "remat" if primitive in REMATS else None


def _eqn_topic(eqn_id: int, program: ProgramRecord) -> str | None:
    """The topic of an equation: its own primitive's, a container's around it, or the backward pass's."""
    eqn = program.eqns[eqn_id]
    found = [t for t in map(_primitive_topic, (e.primitive for e in (eqn, *program.ancestors(eqn)))) if t]
    if program.in_backward(eqn):
        found.append("backward")
    return min(found, key=TOPICS.index) if found else None


def shares(pool: dict, programs: dict[str, ProgramRecord]) -> dict[str, tuple[int, float]]:
    """(items, summed weight) per topic, and under "all" the pool's totals."""
    out = {t: (0, 0.0) for t in (*TOPICS, "all")}
    for item in pool["items"]:
        for key in ("all", topic(item, programs[item["program"]])):
            if key is not None:
                n, w = out[key]
                out[key] = (n + 1, w + item["weight"])
    return out
