"""Stage three, second half: the compiled HLO layer, its fusions, and which equations each holds.

XLA compiles the tagged lowering from the trace stage; its instructions keep the
tags in `metadata={op_name=...}`, so attribution is exact wherever XLA kept the
metadata (`via` "tag"). Where XLA dropped it, the equation is inferred from dataflow
when that leaves no doubt (`via` "inferred"): the compiled graph says which tagged
equations an instruction reads and feeds, the jaxpr says which equations lie between
them. Instructions of reducer regions take their holder's equations ("region"); the
rest is XLA's own plumbing ("none"). This module compiles and reads the graph;
`hlo_attribution.py` decides each instruction's equations from it.

The text shown is XLA's compile of the plain lowering, with source locations off
(`jax_traceback_in_locations_limit=0`, on a copy of the jaxpr, so JAX's caches for
the user's function are untouched) so that it does not depend on where the package is
installed. The two compiles are paired instruction by instruction (names and opcodes
must agree).

The HLO Python bindings give computations, instruction names, opcodes, operands and
users, but not metadata, called computations or parameter numbers: those are read from
each instruction's own printed form (`HloInstruction.to_string()`), and which
instruction is a computation's ROOT from the compiled text. What the later stages need of the
module (result shapes and layouts, operands, computations, shardings, loop counters) is read here
too, once, by `hlo_facts.py`, and kept in the record.
"""
from __future__ import annotations

import platform
import re
from collections import defaultdict
from pathlib import Path

from dumpgym.facts import Facts
from dumpgym.hlo_attribution import attribute, enclosing
from dumpgym.hlo_facts import CALLS_RE, TO_APPLY_RE, with_facts
from dumpgym.record import VIAS, CompiledLayer, Fusion, HloStats, Instruction
from dumpgym.target import CPU, Target, compiled_for, retarget, topology_devices
from dumpgym.trace import innermost_tag, lower_copy

_PARAMETER_RE = re.compile(r"\bparameter\((\d+)\)")
_LOOP_RE = re.compile(r"\b(?:body|condition)=%([\w.\-]+)")


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


def _definition_lines(text: str) -> tuple[dict[str, int], set[str]]:
    """The 1-based line on which each instruction `%name = ...` is printed, and the names printed as ROOT."""
    out, roots = {}, set()
    for n, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        head = stripped.removeprefix("ROOT ")
        if head.startswith("%") and " = " in head:
            name = head[1:].split(" = ", 1)[0]
            out.setdefault(name, n)
            if stripped.startswith("ROOT "):
                roots.add(name)
    return out, roots


def _opcode(instruction) -> str:
    return str(instruction.opcode).removeprefix("HloOpcode.k").lower()


def compile_layer(trace, facts: Facts, target: Target = CPU) -> CompiledLayer:
    """The compiled HLO text, its instructions, fusions and per-equation lines, as the export carries them.

    `target` is this host's CPU (the default), a TPU topology (`Target("tpu", "v5e:2x2")`; needs libtpu)
    or a GPU (`Target("gpu", "h100")`; needs JAX's CUDA plugin).
    """
    import jaxlib

    from dumpgym.jax_internals import require_hlo_bindings

    require_hlo_bindings()
    if target.platform in ("tpu", "gpu"):
        tagged_compiled, plain_compiled, about = _compile_for_topology(trace, target)
    else:
        tagged_compiled, plain_compiled, about = _compile_for_cpu(trace)
    tagged = tagged_compiled.runtime_executable().hlo_modules()[0]
    plain = plain_compiled.runtime_executable().hlo_modules()[0]
    text = plain_compiled.as_text()

    tagged_list = list(_instructions(tagged))
    plain_list = list(_instructions(plain))
    if [(c, _opcode(i)) for c, i in tagged_list] != [(c, _opcode(i)) for c, i in plain_list]:
        raise RuntimeError("the tagged and plain compiles differ; cannot attribute compiled HLO by construction")
    # XLA names the results of a call it inlines after the call's location, which a tag may be
    # (threefry's rolled loop on CPU): the tagged name stands for the plain one the text prints.
    shown = {t.name: p.name for (_, t), (_, p) in zip(tagged_list, plain_list)}

    lines, roots = _definition_lines(text)
    tagged_name = {p: t for t, p in shown.items()}
    graph = CompiledGraph(tagged_list, {tagged_name[r] for r in roots}, _entry_name(text), facts.eqn_of_tag)
    eqns, via = attribute(graph, facts, trace.closed_jaxpr)

    instructions, fusions, unattributed = [], [], 0
    for computation, instruction in tagged_list:
        name = instruction.name
        if shown[name] not in lines:
            continue  # inside an async computation the text prints folded into its `-start` (GPU's reduce-scatter)
        line = lines[shown[name]]
        if graph.opcode[name] == "fusion":
            fusions.append(Fusion(line, shown[name], _fusion_kind(instruction.to_string()), tuple(sorted(eqns[name]))))
        instructions.append(Instruction(line, shown[name], graph.opcode[name], computation,
                                        tuple(sorted(eqns[name])), via[name]))
        unattributed += graph.tag[name] is not None and not eqns[name]
    instructions.sort(key=lambda i: i.line)
    fusions.sort(key=lambda f: f.line)
    instructions, compiled_facts = with_facts(instructions, plain, text)

    by_eqn: dict[int, set[int]] = defaultdict(set)
    for ins in instructions:
        for e in ins.eqns:
            by_eqn[e].add(ins.line)
    for e in list(by_eqn):  # a container owns what its descendants became
        for ancestor in enclosing(facts, e):
            by_eqn[ancestor] |= by_eqn[e]
    entry = graph.entry
    arguments = {n for n, c in graph.computation.items()
                 if c == entry and graph.opcode[n] == "parameter" and graph.has_op_name[n]}
    count = {kind: sum(1 for i in instructions if i.via == kind) for kind in VIAS}
    return CompiledLayer(
        text=text,
        jaxlib_version=jaxlib.__version__,
        **about,
        instructions=tuple(instructions),
        fusions=tuple(fusions),
        lines_by_eqn={str(e): tuple(sorted(v)) for e, v in sorted(by_eqn.items())},
        stats=HloStats(
            instructions=len(instructions),
            with_op_name=sum(graph.has_op_name.values()),
            arguments=len(arguments),  # entry parameters, whose op_name is the argument's name
            attributed=sum(1 for i in instructions if i.eqns),
            # instructions whose op_name carries an equation's tag but that we could not tie to an
            # equation (should be 0); an op_name naming an argument (`x`, also on copies XLA makes of
            # it) or a kernel of XLA's (`online-softmax`) names no equation
            unattributed_with_op_name=unattributed,
            compiler_own=count["none"],
            fusions=len(fusions),
            by_tag=count["tag"],
            inferred=count["inferred"],
            in_regions=count["region"],
        ),
        **compiled_facts,
    )


def _compile_for_cpu(trace):
    """The tagged and plain compiles for this host's CPU, and what the record says compiled them."""
    import jax

    from dumpgym.jax_internals import no_traceback_locations

    tagged = trace.lowered.compile()
    # Source locations off, so the text names no file of the machine that built it; lowering a
    # copy keeps that setting out of JAX's lowering cache for the user's own function.
    with no_traceback_locations():
        plain = lower_copy(trace.jax_traced).compile()
    return tagged, plain, {"backend": jax.devices()[0].platform, "host": host(), "host_id": host_id()}


def _compile_for_topology(trace, target: Target):
    """The tagged and plain compiles for a TPU topology (libtpu) or GPUs (the CUDA plugin), with none
    attached, and what the record says compiled them.

    The traced jaxpr is lowered again (tagged as the trace stage tags it, and plain) with every mesh
    and sharding moved onto the topology's devices, under its first chip as the default device, as
    `jax.jit(f).lower(*args).compile()` on that TPU or GPU would. The text depends on the topology and
    the compiler's (and jaxlib's) version only, so `host` is empty and `host_id` digests those.
    """
    import jax
    from jax.extend import core as jex

    from dumpgym.jax_internals import lower_with_jaxpr, no_traceback_locations
    from dumpgym.trace import TAG, map_jaxpr_eqns

    topology = target.topology_for(devices_needed(trace))
    devices = topology_devices(topology)
    memo: dict = {}

    def move(value):
        return retarget(value, devices, memo)

    tag_of = {id(eqn): k for k, eqn in enumerate(trace.tagged_eqns)}

    def tagged_eqn(eqn, params):
        info = eqn.source_info
        info = info.replace(name_stack=info.name_stack.extend(f"{TAG}{tag_of[id(eqn)]}"), traceback=None)
        return eqn.replace(params={k: move(v) for k, v in params.items()}, source_info=info)

    def plain_eqn(eqn, params):
        return eqn.replace(params={k: move(v) for k, v in params.items()})

    closed = trace.closed_jaxpr

    def lowered(rewrite):
        return lower_with_jaxpr(trace.jax_traced, jex.ClosedJaxpr(map_jaxpr_eqns(closed.jaxpr, rewrite), closed.consts),
                                move)

    with jax.default_device(devices[0]):
        tagged = lowered(tagged_eqn).compile()
        with no_traceback_locations():
            plain = lowered(plain_eqn).compile()
    return tagged, plain, compiled_for(topology, devices[0])


def devices_needed(trace) -> int:
    """How many devices the program spans: its sharded arguments' and any mesh its equations name."""
    from jax.sharding import Mesh

    sizes = [len(a.sharding.device_set) for a in trace.args if getattr(a, "sharding", None) is not None]
    for eqn in trace.tagged_eqns:
        sizes += [v.size for v in eqn.params.values() if isinstance(v, Mesh)]
    return max((s for s in sizes if s), default=1)  # a jit of no mesh names an empty one


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


class CompiledGraph:
    """The tagged compile's instructions by name: opcode, operands and users (from the HLO bindings),
    the computations fusions call and reducers apply, and each instruction's own tag."""

    def __init__(self, tagged_list, roots: set[str], entry: str, eqn_of_tag):
        self.entry = entry
        self.roots = roots
        self.opcode, self.computation, self.operands, self.users = {}, {}, {}, {}
        self.tag: dict[str, int | None] = {}
        self.has_op_name: dict[str, bool] = {}
        self.calls: dict[str, list[str]] = {}
        self.param_number: dict[str, int] = {}
        self.members: dict[str, list[str]] = defaultdict(list)
        self.callers: dict[str, list[str]] = defaultdict(list)  # fused computation -> fusion instructions
        self.holders: dict[str, list[str]] = defaultdict(list)  # region -> instructions applying it
        self.loop_of: dict[str, str] = {}  # a while's body or condition computation -> the while
        for computation, instruction in tagged_list:
            name = instruction.name
            # Metadata, called computations and parameter numbers are not in the bindings: read
            # from the instruction's own printed form.
            printed = instruction.to_string()
            meta = printed.split("metadata={", 1)[1] if "metadata={" in printed else ""
            tag_number = innermost_tag(meta)
            self.tag[name] = eqn_of_tag[tag_number] if tag_number is not None else None
            self.has_op_name[name] = "op_name=" in meta
            self.opcode[name] = _opcode(instruction)
            self.computation[name] = computation
            self.operands[name] = [o.name for o in instruction.operands()]
            self.users[name] = [u.name for u in instruction.users()]
            self.calls[name] = CALLS_RE.findall(printed)
            self.members[computation].append(name)
            for region in TO_APPLY_RE.findall(printed):
                self.holders[region].append(name)
            for loop_computation in _LOOP_RE.findall(printed):
                self.loop_of[loop_computation] = name
            if self.opcode[name] == "fusion":
                for callee in self.calls[name]:
                    self.callers[callee].append(name)
            elif self.opcode[name] == "parameter":
                self.param_number[name] = int(_PARAMETER_RE.search(printed).group(1))
        self.params_of = {(self.computation[p], k): p for p, k in self.param_number.items()}
        self.region_of: dict[str, str] = {}  # instruction -> the region computation holding it (any depth)
        for region in self.holders:
            for name in self.members[region]:
                self.region_of[name] = region

    def own(self, name: str) -> int | None:
        """The equation an instruction's own tag names (fusions and region instructions: none)."""
        if self.opcode[name] == "fusion" or name in self.region_of:
            return None
        return self.tag[name]

    def after(self, name: str) -> set[int]:
        """The tagged equations this instruction's result reaches first, through untagged
        instructions and fusion bounds."""
        out: set[int] = set()
        seen, stack = {name}, [name]
        while stack:
            cur = stack.pop()
            steps: list[str] = []
            if cur in self.roots:  # a fused computation's result is its fusion's
                steps += self.callers.get(self.computation[cur], ())
            for user in self.users[cur]:
                if self.opcode[user] == "fusion":  # into the fused computation, at the matching parameter
                    callee = self.calls[user][0]
                    steps += [self.params_of[(callee, k)] for k, o in enumerate(self.operands[user])
                              if o == cur and (callee, k) in self.params_of]
                elif self.own(user) is not None:
                    out.add(self.own(user))
                else:
                    steps.append(user)
            for step in steps:
                if step not in seen:
                    seen.add(step)
                    stack.append(step)
        return out

    def before(self, name: str) -> tuple[set[int], set[int]]:
        """The tagged equations and the program arguments (entry parameter numbers) this
        instruction's operands come from, through untagged instructions and fusion bounds."""
        out, arguments, _loops = self.sources(name)
        return out, arguments

    def sources(self, name: str) -> tuple[set[int], set[int], set[int]]:
        """As `before`, and the equations of the while loops whose carried values it reads (a loop
        body's parameter is both the loop's input and the previous iteration's result)."""
        out: set[int] = set()
        arguments: set[int] = set()
        loops: set[int] = set()
        seen, stack = {name}, list(self.operands[name])
        while stack:
            cur = stack.pop()
            if cur in seen:
                continue
            seen.add(cur)
            op, comp = self.opcode[cur], self.computation[cur]
            if op == "fusion":
                stack += [r for r in self.members[self.calls[cur][0]] if r in self.roots]
            elif op == "parameter":
                if comp == self.entry:
                    arguments.add(self.param_number[cur])
                for fusion in self.callers.get(comp, ()):
                    stack.append(self.operands[fusion][self.param_number[cur]])
                if comp in self.loop_of and self.tag[self.loop_of[comp]] is not None:
                    loops.add(self.tag[self.loop_of[comp]])
            elif self.own(cur) is not None:
                out.add(self.own(cur))
            else:
                stack += self.operands[cur]
        return out, arguments, loops
