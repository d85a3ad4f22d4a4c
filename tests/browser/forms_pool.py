"""A small pool of the answer forms the kinds are moving to (`typed`, `axes`, `lines`), made from real pool
items and the corpus record, for the browser tests of the page's views while the kinds are converted on
other branches. Nothing here is an answer of its own: a typed aval is the shapes item's right option
(with its wrong options as the named misreadings), an axis set is the decoder item's right option read
against the equation's operand in the record, a line set is the jaxpr lines of the equations a fusion
computes, as the compiled layer records them."""
from __future__ import annotations

import copy
import re

from dumpgym.drills.answer import AxisSet, LineSet, Misreading, Typed, axes_key


def typed_from_shapes(item: dict) -> dict:
    """A shapes item, answered by typing its output's aval."""
    form = item["answer"]
    out = copy.deepcopy(item)
    right = form["options"][form["index"]]
    misread = {o: Misreading(r, u) for k, (o, r, u) in enumerate(zip(form["options"], form["reasons"], form["rules"]))
               if k != form["index"]}
    out["answer"] = Typed("aval", right, misread=misread).to_json()
    out["feedback"] = f"the output is {right}: {item['question']}"
    return out


def _axes_of(option: str) -> tuple[int, ...] | None:
    if option == "none":
        return ()
    m = re.fullmatch(r"ax(?:i|e)s ([0-9, ]+) \(sizes? [0-9, ]+\)", option)
    return tuple(int(a) for a in m[1].split(",")) if m else None


def axes_from_decoder(item: dict, record: dict) -> dict | None:
    """A decoder lhs/rhs-free item, answered by tapping the axes on the operand's shape (from the record)."""
    form = item["answer"]
    side = 0 if item["step"] == "lhs-free" else 1
    eqn = next(e for e in record["eqns"] if e["id"] == item["eqn"])
    dims = tuple(eqn["inputs"][side]["shape"])
    right = _axes_of(form["options"][form["index"]])
    if right is None:
        return None
    misread = {}
    for k, option in enumerate(form["options"]):
        axes = _axes_of(option)
        if k != form["index"] and axes is not None:
            misread[axes_key(axes)] = Misreading(form["reasons"][k], form["rules"][k])
    out = copy.deepcopy(item)
    out["answer"] = AxisSet(("lhs", "rhs")[side], dims, right, misread).to_json()
    out["feedback"] = f"{('lhs', 'rhs')[side]} is {dims}: its free axes are those neither contracted nor batch"
    return out


def lines_from_fusion(record: dict, target: str = "cpu") -> dict:
    """A fusions item of a line set: tap every line of the jaxpr that the fusion with most equations computes."""
    layer = record["compiled"][target]
    fusion = max(layer["fusions"], key=lambda f: len(f["eqns"]))
    by_id = {e["id"]: e for e in record["eqns"]}
    members = {by_id[i]["jaxpr_lines"][0]: by_id[i]["primitive"] for i in fusion["eqns"] if by_id[i]["parent"] is None}
    lines = sorted(members)
    explain = {str(n): f"`{members[n]}` on line {n} is one of the equations %{fusion['name']} computes" for n in lines}
    n = record["jaxpr"].count("\n") + 1
    return {"drill": "fusions", "program": record["slug"], "card": f"fusions/{record['slug']}/{fusion['name']}/lines",
            "eqn": None, "layer": "jaxpr", "step": "members", "weight": 1.0,
            "question": f"Tap every equation that %{fusion['name']} computes, then check.",
            "answer": LineSet(tuple(lines), explain).to_json(),
            "feedback": f"%{fusion['name']} holds the instructions of {len(lines)} top-level equations",
            "context": [{"layer": "jaxpr", "lines": [1, n]},
                        {"layer": target, "lines": [fusion["line"], fusion["line"]], "strip": True}]}


def forms_pool(pool: dict, corpus: dict) -> dict:
    """`pool`'s kinds, with only these items: shapes typed, decoder axes, fusions line sets (a few of each,
    from different programs), and the real decisions line items."""
    records = {p["slug"]: p for p in corpus["programs"]}
    items = pool["items"]
    typed = [typed_from_shapes(i) for i in items if i["drill"] == "shapes"][:12]
    axes = [a for i in items if i["drill"] == "decoder" and i.get("step") in ("lhs-free", "rhs-free")
            for a in [axes_from_decoder(i, records[i["program"]])] if a][:12]
    lines = [lines_from_fusion(records[s]) for s in ("mlp", "layernorm", "softmax", "rmsnorm")
             if s in records and records[s]["compiled"].get("cpu", {}).get("fusions")]
    decisions = [i for i in items if i["drill"] == "decisions"][:6]
    return {"schema": pool["schema"], "kinds": [k for k in pool["kinds"] if k["name"] in ("shapes", "decoder", "fusions", "decisions")],
            "items": typed + axes + lines + decisions}
