"""Which equations a fusion's body does the work of, judged from the compiled text and the record's rows
(docs/corpus.md, rule 7): an instruction's equations, less a dot_general it only serves. A dot's work is
done by a dot, a convolution, a kernel or nested fusion, or by the floating-point arithmetic XLA rewrote it
into, with the broadcasts that feed that multiply; the bitcasts, copies, constants, layout transposes and
the partitioner's integer index arithmetic and collectives around it carry its name but do none of it."""
from __future__ import annotations

import re

CONTRACTING = {"dot", "convolution", "customcall", "fusion"}
REWRITTEN = {"multiply", "reduce", "add", "convert", "reducewindow"}
_DTYPE = re.compile(r" = \(?([a-z0-9]+)\[")
_CALLS = re.compile(r"\bcalls=%([\w.\-]+)")


def _floating(line: str) -> bool:
    found = _DTYPE.search(line)
    return found is None or found.group(1).startswith(("f", "bf"))


def body(layer: dict, computation: str) -> list[dict]:
    """The rows of a computation's instructions and of every computation they call (text's `calls=`)."""
    lines = layer["text"].splitlines()
    members: dict[str, list[dict]] = {}
    for ins in layer["instructions"]:
        members.setdefault(ins["computation"], []).append(ins)
    out, stack, seen = [], [computation], set()
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        for ins in members.get(c, ()):
            out.append(ins)
            stack += _CALLS.findall(lines[ins["line"] - 1])
    return out


def listed(ins: dict) -> set[int]:
    """A row's equations: its own and those XLA folded into it (`absorbed`, absent from older records)."""
    return set(ins["eqns"]) | {a["eqn"] for a in ins.get("absorbed", ())}


def worked(layer: dict, eqns: list[dict], ins: dict) -> set[int]:
    """The equations among a row's whose work its instruction does."""
    lines = layer["text"].splitlines()
    dots = {e for e in listed(ins) if eqns[e]["primitive"] in ("dot_general", "conv_general_dilated")}
    if not dots:
        return listed(ins)
    opcode, line = ins["opcode"], lines[ins["line"] - 1]
    if opcode in CONTRACTING or (opcode in REWRITTEN and _floating(line)):
        return listed(ins)
    if opcode == "broadcast":
        users = [u for u in layer["instructions"] if ins["line"] in u.get("operands", ())]
        if any(u["opcode"] == "multiply" and _floating(lines[u["line"] - 1]) and dots & listed(u) for u in users):
            return listed(ins)
    return listed(ins) - dots


def fusion_work(layer: dict, eqns: list[dict], fusion: dict) -> tuple[set[int], set[int]]:
    """(the equations a fusion's body does the work of, every equation its body's rows list, folded ones too)."""
    (called,) = _CALLS.findall(layer["text"].splitlines()[fusion["line"] - 1])
    rows = body(layer, called)
    return set().union(*(worked(layer, eqns, i) for i in rows)), set().union(*(listed(i) for i in rows))
