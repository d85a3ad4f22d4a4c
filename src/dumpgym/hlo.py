"""Stage three, second half: the compiled HLO layer, its fusions, and which equations each holds.

XLA compiles the tagged lowering from the trace stage; its instructions keep the
tags in `metadata={op_name=...}`, so attribution is exact wherever XLA kept the
metadata. The text shown is XLA's compile of the plain lowering, with source
locations off (`jax_traceback_in_locations_limit=0`, on a copy of the jaxpr, so
JAX's caches for the user's function are untouched) so that it does not depend on
where the package is installed. The two
compiles are paired instruction by instruction (names and opcodes must agree).

The HLO Python bindings expose computations, instruction names and opcodes but not
metadata or called computations, so those two are read from each instruction's own
printed form (`HloInstruction.to_string()`); nothing else is read from text.
"""
from __future__ import annotations

import platform
import re
from collections import defaultdict
from pathlib import Path

from dumpgym.facts import Facts
from dumpgym.record import CompiledLayer, Fusion, HloStats, Instruction
from dumpgym.trace import innermost_tag, lower_copy

_CALLS_RE = re.compile(r"\bcalls=%([\w.\-]+)")
_TO_APPLY_RE = re.compile(r"\bto_apply=%([\w.\-]+)")


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields from /proc/cpuinfo (empty where there is none)."""
    fields: dict[str, str] = {}
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if not line.strip():
                break
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    return fields


def host() -> str:
    """What compiled it, in words for the page: the machine and the CPU model."""
    return f"{platform.machine()} {_cpuinfo().get('model name', '')}".strip()


def host_id() -> str:
    """A short digest of what XLA's CPU compiler targets (machine, CPU model and feature flags).

    XLA compiles for the host CPU, so two machines give the same compiled text only when this
    agrees; `corpus build --check` compares the compiled layer only then.
    """
    import hashlib

    info = _cpuinfo()
    flags = " ".join(sorted((info.get("flags") or info.get("Features") or platform.processor()).split()))
    what = "|".join((platform.machine(), info.get("model name", ""), flags))
    return hashlib.sha256(what.encode()).hexdigest()[:16]


def _instructions(module):
    """(computation name, HloInstruction) for every instruction of a compiled HloModule."""
    for computation in module.computations():
        for instruction in computation.instructions():
            yield computation.name, instruction


def _definition_lines(text: str) -> dict[str, int]:
    """The 1-based line on which each instruction `%name = ...` is printed."""
    out = {}
    for n, line in enumerate(text.splitlines(), start=1):
        head = line.strip().removeprefix("ROOT ")
        if head.startswith("%") and " = " in head:
            out.setdefault(head[1:].split(" = ", 1)[0], n)
    return out


def _opcode(instruction) -> str:
    return str(instruction.opcode).removeprefix("HloOpcode.k").lower()


def compile_layer(trace, facts: Facts) -> CompiledLayer:
    """The compiled HLO text, its instructions, fusions and per-equation lines, as the export carries them."""
    import jax
    import jaxlib

    tagged = trace.lowered.compile().runtime_executable().hlo_modules()[0]
    from dumpgym.jax_internals import no_traceback_locations

    # Source locations off, so the text names no file of the machine that built it; lowering a
    # copy keeps that setting out of JAX's lowering cache for the user's own function.
    with no_traceback_locations():
        plain_compiled = lower_copy(trace.jax_traced).compile()
    plain = plain_compiled.runtime_executable().hlo_modules()[0]
    text = plain_compiled.as_text()

    tagged_list = list(_instructions(tagged))
    plain_list = list(_instructions(plain))
    if [(c, i.name, _opcode(i)) for c, i in tagged_list] != [(c, i.name, _opcode(i)) for c, i in plain_list]:
        raise RuntimeError("the tagged and plain compiles differ; cannot attribute compiled HLO by construction")

    eqn_of_tag = facts.eqn_of_tag
    lines = _definition_lines(text)
    own: dict[str, set[int]] = {}
    calls: dict[str, list[str]] = {}
    applies: dict[str, list[str]] = {}
    metadata: dict[str, bool] = {}
    for computation, instruction in tagged_list:
        printed = instruction.to_string()
        meta = printed.split("metadata={", 1)[1] if "metadata={" in printed else ""
        tag_number = innermost_tag(meta)
        tag = eqn_of_tag[tag_number] if tag_number is not None else None
        own[instruction.name] = {tag} if tag is not None else set()
        metadata[instruction.name] = "op_name=" in meta
        calls[instruction.name] = _CALLS_RE.findall(printed)
        applies[instruction.name] = _TO_APPLY_RE.findall(printed)

    members = defaultdict(list)  # computation -> instruction names
    for computation, instruction in tagged_list:
        members[computation].append(instruction.name)
    # A reducer region (to_apply=) is part of the instruction that applies it: its untagged
    # parameters and combiner belong to that instruction's equation.
    for name in list(own):
        for region in applies[name]:
            for inner in members[region]:
                if not own[inner]:
                    own[inner] = set(own[name])

    def absorbed(computation: str, seen: set) -> set[int]:
        out: set[int] = set()
        if computation in seen:
            return out
        seen.add(computation)
        for name in members[computation]:
            out |= own[name]
            for callee in calls[name]:
                out |= absorbed(callee, seen)
        return out

    instructions, fusions = [], []
    for computation, instruction in tagged_list:
        name = instruction.name
        eqns = set(own[name])
        if _opcode(instruction) == "fusion":
            for callee in calls[name]:
                eqns |= absorbed(callee, set())
            fusions.append(Fusion(lines[name], name, _fusion_kind(instruction.to_string()), tuple(sorted(eqns))))
        instructions.append(Instruction(lines[name], name, _opcode(instruction), computation, tuple(sorted(eqns))))
    instructions.sort(key=lambda i: i.line)
    fusions.sort(key=lambda f: f.line)

    by_eqn: dict[int, set[int]] = defaultdict(set)
    for ins in instructions:
        for e in ins.eqns:
            by_eqn[e].add(ins.line)
    for e in list(by_eqn):  # a container owns what its descendants became
        for ancestor in _ancestors(facts, e):
            by_eqn[ancestor] |= by_eqn[e]
    entry = _entry_name(text)
    arguments = {i.name for c, i in tagged_list if c == entry and _opcode(i) == "parameter" and metadata[i.name]}
    return CompiledLayer(
        text=text,
        backend=jax.devices()[0].platform,
        jaxlib_version=jaxlib.__version__,
        host=host(),
        host_id=host_id(),
        instructions=tuple(instructions),
        fusions=tuple(fusions),
        lines_by_eqn={str(e): tuple(sorted(v)) for e, v in sorted(by_eqn.items())},
        stats=HloStats(
            instructions=len(instructions),
            with_op_name=sum(metadata.values()),
            arguments=len(arguments),  # entry parameters, whose op_name is the argument's name
            attributed=sum(1 for i in instructions if i.eqns),
            # instructions naming a source op that we could not tie to an equation (should be 0)
            unattributed_with_op_name=sum(
                1 for i in instructions if metadata[i.name] and not i.eqns and i.name not in arguments
            ),
            compiler_own=sum(1 for i in instructions if not i.eqns),
            fusions=len(fusions),
        ),
    )


def _entry_name(text: str) -> str:
    """The entry computation's name, from its `ENTRY %name (...)` header line."""
    for line in text.splitlines():
        if line.startswith("ENTRY %"):
            return line[len("ENTRY %"):].split(" ", 1)[0]
    return ""


def _fusion_kind(printed: str) -> str:
    for kind in ("kLoop", "kInput", "kOutput", "kCustom"):
        if f"kind={kind}" in printed:
            return kind
    return ""


def _ancestors(facts: Facts, eqn_id: int):
    for parent in facts.callers.get(eqn_id, ()):
        yield parent
        yield from _ancestors(facts, parent)
