"""Stage three, second half: the compiled HLO layer, its fusions, and which equations each holds.

XLA compiles the tagged lowering from the trace stage; its instructions keep the
tags in `metadata={op_name=...}`, so attribution is exact wherever XLA kept the
metadata (`via` "tag"). Where XLA dropped it, the equation is inferred from dataflow
when that leaves no doubt (`via` "inferred"): the compiled graph says which tagged
equations an instruction reads and feeds, the jaxpr says which equations lie between
them. Instructions of reducer regions take their holder's equations ("region"); the
rest is XLA's own plumbing ("none"). This module compiles, `hlo_graph.py` reads the
graph, and `hlo_attribution.py` decides each instruction's equations from it.

The text shown is XLA's compile of the plain lowering, with source locations off
(`jax_traceback_in_locations_limit=0`, on a copy of the jaxpr, so JAX's caches for
the user's function are untouched) so that it does not depend on where the package is
installed. The two compiles are paired instruction by instruction (computations and
opcodes must agree). The tagged compile is never shown, so XLA generates its machine code
at optimization level 0 (the HLO passes are the same; the pairing checks it). The two compiles run at
once, each on a thread of its own (`start_compiles`), from as soon as the trace is lowered; the caller's
thread makes the facts, the x-ray and the attribution meanwhile.

The HLO Python bindings give computations, instruction names, opcodes, operands and
users, but not metadata, called computations or parameter numbers: those are read from
each instruction's own printed form (`HloInstruction.to_string()`), and which
instruction is a computation's ROOT from the compiled text. What the later stages need of the
module (result shapes and layouts, operands, computations, shardings, loop counters) is read here
too, once, by `hlo_facts.py`, and kept in the record.
"""
from __future__ import annotations

import platform
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import NamedTuple

from dumpgym.facts import Facts
from dumpgym.hlo_attribution import attribute, dataflow, enclosing
from dumpgym.hlo_facts import with_facts, xla_analyses
from dumpgym.hlo_graph import CompiledGraph, opcode_of
from dumpgym.record import VIAS, CompiledLayer, Fusion, HloStats, Instruction
from dumpgym.target import CPU, Target, compiled_for, retarget, topology_devices
from dumpgym.trace import lower_copy, with_collector_paused


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


@with_collector_paused  # a lowering builds the module's objects by the ten thousand (as `trace` pauses it for its own)
def start_compiles(trace, target: Target = CPU) -> Compiles:
    """XLA's tagged and plain compiles of `trace` for `target`, set going on threads of their own: the
    caller goes on (the facts, the x-ray) while XLA compiles, and hands them to `compile_layer`."""
    from dumpgym.jax_internals import require_hlo_bindings

    require_hlo_bindings()
    return Compiles(*_compile_pair(trace, target)())


def _compile_pair(trace, target: Target):
    """The function starting `target`'s two compiles of `trace` (given the tagged compile's options, or its default)."""
    return partial(_compile_for_topology, trace, target) if target.platform in ("tpu", "gpu") \
        else partial(_compile_for_cpu, trace)


# The layer builds the compiled graph and the instructions by the ten thousand and keeps them: with the
# garbage collector on, its walks of the whole heap (JAX's too) cost the GPT's add more than the layer's own work.
@with_collector_paused
def compile_layer(trace, facts: Facts, target: Target = CPU, compiles: Compiles | None = None) -> CompiledLayer:
    """The compiled HLO text, its instructions, fusions and per-equation lines, as the export carries them.

    `target` is this host's CPU (the default), a TPU topology (`Target("tpu", "v5e:2x2")`; needs libtpu)
    or a GPU (`Target("gpu", "h100")`; needs JAX's CUDA plugin). `compiles` are `start_compiles(trace,
    target)`'s, if the caller set them going; else they start here.
    """
    import jaxlib

    compiles = compiles if compiles is not None else start_compiles(trace, target)
    # Python's work of the layer, done while XLA compiles (and lets go of Python's lock): the jaxpr's
    # dataflow first, then, once the tagged compile is done (it is the quicker), its graph and the
    # attribution, while the plain one still compiles.
    flow = dataflow(facts, trace.closed_jaxpr)
    tagged_compiled = compiles.tagged.result()
    tagged_list = list(_instructions(tagged_compiled.runtime_executable().hlo_modules()[0]))
    tagged_text = tagged_compiled.as_text()
    graph = CompiledGraph(tagged_list, _definition_lines(tagged_text)[1], _entry_name(tagged_text), facts.eqn_of_tag)
    eqns, via = attribute(graph, facts, trace.closed_jaxpr, flow)
    plain_compiled = compiles.plain.result()
    about = compiles.about
    plain = plain_compiled.runtime_executable().hlo_modules()[0]
    text = plain_compiled.as_text()

    plain_list = list(_instructions(plain))
    if _pairing(tagged_list) != _pairing(plain_list):
        # Never seen: the tagged compile's optimization level changed XLA's HLO passes. Both again, at JAX's defaults.
        again = Compiles(*_compile_pair(trace, target)({}))
        tagged_list, about, graph = list(_instructions(again.tagged.result().runtime_executable().hlo_modules()[0])), \
            again.about, None
        if _pairing(tagged_list) != _pairing(plain_list):
            raise RuntimeError("the tagged and plain compiles differ; cannot attribute compiled HLO by construction")
    # XLA names the results of a call it inlines after the call's location, which a tag may be
    # (threefry's rolled loop on CPU): the tagged name stands for the plain one the text prints.
    shown = {t.name: p.name for (_, t), (_, p) in zip(tagged_list, plain_list)}

    lines, roots = _definition_lines(text)
    tagged_name = {p: t for t, p in shown.items()}
    # The graph was read with the tagged compile's own ROOTs and entry; the layer is the plain text's: the
    # two pair, so they agree, and where they would not, the graph is read again with the plain text's.
    if graph is None or graph.roots != {tagged_name[r] for r in roots} or graph.entry != _entry_name(text):
        graph = CompiledGraph(tagged_list, {tagged_name[r] for r in roots}, _entry_name(text), facts.eqn_of_tag)
        eqns, via = attribute(graph, facts, trace.closed_jaxpr, flow)

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
        # A fusion holds only the work its body does: a copy XLA wrapped under a dot's tag holds nothing.
        unattributed += graph.tag[name] is not None and not eqns[name] and graph.opcode[name] != "fusion"
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
        **xla_analyses(plain_compiled),
    )


# The tagged compile is read for its graph and metadata only, never shown: XLA's optimization level for
# the machine code it generates (LLVM's) leaves the HLO passes, and so the optimized module, as they are,
# and costs the pair about a quarter of that compile's time. The pairing with the plain compile, which
# keeps JAX's defaults and is the text shown, checks it instruction by instruction.
_TAGGED_OPTIONS = {"xla_backend_optimization_level": 0}


class Compiles(NamedTuple):
    """A target's two compiles under way (`concurrent.futures.Future`s of `jax.stages.Compiled`), and
    what the record says compiled them."""

    tagged: Future
    plain: Future
    about: dict


def _compile_for_cpu(trace, tagged_options=_TAGGED_OPTIONS):
    """The tagged and plain compiles for this host's CPU, under way, and what the record says compiled them."""
    import jax

    from dumpgym.jax_internals import no_traceback_locations

    def lower_plain():
        # Source locations off, so the text names no file of the machine that built it; lowering a
        # copy keeps that setting out of JAX's lowering cache for the user's own function.
        with no_traceback_locations():
            return lower_copy(trace.jax_traced)

    return (*_compile_both(trace.lowered, lower_plain, tagged_options),
            {"backend": jax.devices()[0].platform, "host": host(), "host_id": host_id()})


def _compile_both(tagged, plain, tagged_options) -> tuple[Future, Future]:
    """XLA's compiles of the tagged and the plain lowerings, set going at once, each on a thread of its
    own: XLA compiles on one core and lets go of Python's lock meanwhile, so on two cores the pair takes
    about the time of one (most of `add --hlo` for a big model), and the caller's thread is free for
    Python's work. The tagged one with `tagged_options`, the plain one with JAX's defaults. `plain` is
    a `Lowered`, or a function making it: then it is lowered here while the tagged one already compiles."""
    pool = ThreadPoolExecutor(max_workers=2)
    try:
        tagged_compiled = pool.submit(tagged.compile, compiler_options=tagged_options)
        plain_compiled = pool.submit((plain() if callable(plain) else plain).compile)
    finally:
        pool.shutdown(wait=False)  # the threads end when their compile does
    return tagged_compiled, plain_compiled


def _pairing(instructions) -> list[tuple[str, str]]:
    """(computation, opcode) of each instruction of a compile, in order: what the two compiles must share."""
    return [(c, opcode_of(i)) for c, i in instructions]


def _compile_for_topology(trace, target: Target, tagged_options=_TAGGED_OPTIONS):
    """The tagged and plain compiles for a TPU topology (libtpu) or GPUs (the CUDA plugin), with none
    attached, under way, and what the record says compiled them.

    The traced jaxpr is lowered again (tagged as the trace stage tags it, and plain) with every mesh
    and sharding moved onto the topology's devices, under its first chip as the default device, as
    `jax.jit(f).lower(*args).compile()` on that TPU or GPU would. The text depends on the topology and
    the compiler's (and jaxlib's) version only, so `host` is empty and `host_id` digests those.
    """
    import jax
    from jax.extend import core as jex

    from dumpgym.jax_internals import lower_with_jaxpr, no_traceback_locations, with_source_info
    from dumpgym.trace import TAG, map_jaxpr_eqns

    topology = target.topology_for(devices_needed(trace))
    devices = topology_devices(topology)
    memo: dict = {}

    def move(value):
        return retarget(value, devices, memo)

    tag_of = {id(eqn): k for k, eqn in enumerate(trace.tagged_eqns)}

    def tagged_eqn(eqn, params):
        return with_source_info(eqn, {k: move(v) for k, v in params.items()}, name=f"{TAG}{tag_of[id(eqn)]}",
                                traceback=None)

    def plain_eqn(eqn, params):
        return eqn.replace(params={k: move(v) for k, v in params.items()})

    closed = trace.closed_jaxpr

    def lowered(rewrite):
        return lower_with_jaxpr(trace.jax_traced, jex.ClosedJaxpr(map_jaxpr_eqns(closed.jaxpr, rewrite), closed.consts),
                                move)

    with jax.default_device(devices[0]):
        tagged = lowered(tagged_eqn)
        with no_traceback_locations():
            plain = lowered(plain_eqn)
        tagged, plain = _compile_both(tagged, plain, tagged_options)
    return tagged, plain, compiled_for(topology, devices[0])


def devices_needed(trace) -> int:
    """How many devices the program spans: its sharded arguments' and any mesh its equations name."""
    from jax.sharding import Mesh

    import jax

    sizes = [len(a.sharding.device_set) for a in jax.tree.leaves(trace.args)
             if getattr(a, "sharding", None) is not None]
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
