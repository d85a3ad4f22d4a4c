"""Stage three, second half: the compiled HLO layer, its fusions, and which equations each holds.

XLA compiles the tagged lowering from the trace stage; its instructions keep the
tags in `metadata={op_name=...}`, so attribution is exact wherever XLA kept the
metadata (`via` "tag"). Where XLA dropped it, the equation is inferred from dataflow
when that leaves no doubt (`via` "inferred"): the compiled graph says which tagged
equations an instruction reads and feeds, the jaxpr says which equations lie between
them. Instructions of reducer regions take their holder's equations ("region"); the
rest is XLA's own plumbing ("none").

The text shown is XLA's compile of the plain lowering, with source locations off
(`jax_traceback_in_locations_limit=0`, on a copy of the jaxpr, so JAX's caches for
the user's function are untouched) so that it does not depend on where the package is
installed. The two compiles are paired instruction by instruction (names and opcodes
must agree).

The HLO Python bindings give computations, instruction names, opcodes, operands and
users, but not metadata, called computations or parameter numbers: those are read from
each instruction's own printed form (`HloInstruction.to_string()`), and which
instruction is a computation's ROOT from the compiled text; nothing else is read from text.
"""
from __future__ import annotations

import platform
import re
from collections import defaultdict
from pathlib import Path

from dumpgym.facts import Facts
from dumpgym.record import VIAS, CompiledLayer, Fusion, HloStats, Instruction
from dumpgym.trace import innermost_tag, lower_copy

_CALLS_RE = re.compile(r"\bcalls=%([\w.\-]+)")
_TO_APPLY_RE = re.compile(r"\bto_apply=%([\w.\-]+)")
_PARAMETER_RE = re.compile(r"\bparameter\((\d+)\)")


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

    lines, roots = _definition_lines(text)
    graph = _Graph(tagged_list, roots, _entry_name(text), facts.eqn_of_tag)
    eqns, via = attribute(graph, facts, trace.closed_jaxpr)

    instructions, fusions = [], []
    for computation, instruction in tagged_list:
        name = instruction.name
        if graph.opcode[name] == "fusion":
            fusions.append(Fusion(lines[name], name, _fusion_kind(instruction.to_string()), tuple(sorted(eqns[name]))))
        instructions.append(Instruction(lines[name], name, graph.opcode[name], computation,
                                        tuple(sorted(eqns[name])), via[name]))
    instructions.sort(key=lambda i: i.line)
    fusions.sort(key=lambda f: f.line)

    by_eqn: dict[int, set[int]] = defaultdict(set)
    for ins in instructions:
        for e in ins.eqns:
            by_eqn[e].add(ins.line)
    for e in list(by_eqn):  # a container owns what its descendants became
        for ancestor in _ancestors(facts, e):
            by_eqn[ancestor] |= by_eqn[e]
    entry = graph.entry
    arguments = {n for n, c in graph.computation.items()
                 if c == entry and graph.opcode[n] == "parameter" and graph.has_op_name[n]}
    count = {kind: sum(1 for i in instructions if i.via == kind) for kind in VIAS}
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
            with_op_name=sum(graph.has_op_name.values()),
            arguments=len(arguments),  # entry parameters, whose op_name is the argument's name
            attributed=sum(1 for i in instructions if i.eqns),
            # instructions naming a source op that we could not tie to an equation (should be 0)
            unattributed_with_op_name=sum(
                1 for i in instructions if graph.has_op_name[i.name] and not i.eqns and i.name not in arguments
            ),
            compiler_own=count["none"],
            fusions=len(fusions),
            by_tag=count["tag"],
            inferred=count["inferred"],
            in_regions=count["region"],
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


# ---------------------------------------------------------------------------------------------
# Attribution: each instruction's equations, and how they are known (`via`).

# Plumbing XLA adds around the work: never an equation's own, whatever its neighbours.
_PLUMBING = frozenset({
    "parameter", "constant", "tuple", "gettupleelement", "copy", "copystart", "copydone", "bitcast",
    "optimizationbarrier", "afterall", "adddependency", "domain",
})
# Ops that only move or replicate data: with no equation of their own kind nearby, they serve
# the one equation they feed (a transpose laying out a dot's operand, a broadcast of its input).
DATA_MOVEMENT = frozenset({
    "transpose", "broadcast", "reshape", "slice", "dynamicslice", "pad", "concatenate", "reverse", "iota",
})
# Which primitives an opcode can compute, where the names differ (else the opcode's own name).
_PRIMITIVES_OF = {
    "dot": {"dot_general"}, "convolution": {"conv_general_dilated"},
    "convert": {"convert_element_type"}, "broadcast": {"broadcast_in_dim"},
    "reshape": {"reshape", "squeeze", "expand_dims", "broadcast_in_dim"},
    "add": {"add", "add_any"}, "subtract": {"sub"}, "multiply": {"mul", "integer_pow", "square"},
    "divide": {"div"}, "maximum": {"max"}, "minimum": {"min"}, "negate": {"neg"},
    "exponential": {"exp", "exp2"}, "exponentialminusone": {"expm1"}, "logplusone": {"log1p"},
    "compare": {"eq", "ne", "lt", "le", "gt", "ge"}, "select": {"select_n"},
    "reduce": {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or",
               "argmax", "argmin"},
    "dynamicslice": {"dynamic_slice"}, "dynamicupdateslice": {"dynamic_update_slice"},
    "reverse": {"rev"}, "power": {"pow"}, "roundnearestafz": {"round"}, "roundnearesteven": {"round"},
    "allreduce": {"psum", "psum_invariant"}, "scatter": {"scatter", "scatter_add", "scatter-add"},
}


def computes(opcode: str, primitive: str) -> bool:
    """Whether an instruction of this opcode can be (part of) an equation of this primitive."""
    return primitive in _PRIMITIVES_OF.get(opcode, {opcode})


class _Graph:
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
            self.calls[name] = _CALLS_RE.findall(printed)
            self.members[computation].append(name)
            for region in _TO_APPLY_RE.findall(printed):
                self.holders[region].append(name)
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
        out: set[int] = set()
        arguments: set[int] = set()
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
            elif self.own(cur) is not None:
                out.add(self.own(cur))
            else:
                stack += self.operands[cur]
        return out, arguments


def attribute(graph: _Graph, facts: Facts, closed_jaxpr) -> tuple[dict[str, set[int]], dict[str, str]]:
    """Each instruction's equations and `via`: its tag; else inferred by dataflow where that is
    unambiguous; a region's its holder's; else XLA's own."""
    flow = _Dataflow(facts, closed_jaxpr, sum(1 for n in graph.param_number if graph.computation[n] == graph.entry))
    eqns: dict[str, set[int]] = {}
    via: dict[str, str] = {}
    for name, opcode in graph.opcode.items():
        if opcode == "fusion" or name in graph.region_of:
            continue
        if graph.own(name) is not None:
            eqns[name], via[name] = {graph.own(name)}, "tag"
        elif opcode not in _PLUMBING:
            found = _infer(graph, flow, facts, name)
            eqns[name], via[name] = found, ("inferred" if found else "none")
        else:
            eqns[name], via[name] = set(), "none"
    _merged_equations(graph, flow, facts, eqns, via)
    _common_subexpressions(flow, eqns)
    # A reducer or comparator region computes its holder's equations. Twice, for a region applied
    # inside another region, whose holder is known only after the first pass.
    for _ in range(2):
        for region, holders in graph.holders.items():
            held = set().union(*(eqns.get(h, set()) for h in holders))
            for name in graph.members[region]:
                own = {graph.tag[name]} if graph.tag[name] is not None else set()
                eqns[name] = held | own
                via[name] = "region" if eqns[name] else "none"
    for name, opcode in graph.opcode.items():
        if opcode == "fusion":
            eqns[name], via[name] = _fusion_equations(graph, name, eqns, via)
    return eqns, via


def _fusion_equations(graph: _Graph, fusion: str, eqns, via) -> tuple[set[int], str]:
    """The equations any instruction of a fusion's computation (and what it calls) computes, and the
    strongest way one of them is known."""
    found: set[int] = set()
    kinds: set[str] = set()
    seen: set[str] = set()
    stack = list(graph.calls[fusion])
    while stack:
        computation = stack.pop()
        if computation in seen:
            continue
        seen.add(computation)
        for name in graph.members[computation]:
            found |= eqns.get(name, set())
            kinds.add(via.get(name, "none"))
            stack += graph.calls[name]
    kind = next((k for k in ("tag", "region", "inferred") if k in kinds), "none") if found else "none"
    return found, ("tag" if kind == "region" else kind)


def _infer(graph: _Graph, flow: "_Dataflow", facts: Facts, name: str) -> set[int]:
    """The equations an untagged instruction computes, if its neighbours in the compiled graph and
    the jaxpr's dataflow between them leave no doubt; else nothing."""
    opcode = graph.opcode[name]
    before, arguments = graph.before(name)
    after = graph.after(name)
    # Equations downstream of this instruction's sources, and not upstream of any of them.
    between = {e for e in flow.leaves - before if flow.follows(e, before, arguments)}
    between -= set().union(*(flow.ancestors[u] for u in before))
    found: set[int] = set()
    for d in sorted(after):
        kind = {e for e in (flow.ancestors[d] | {d}) & between if computes(opcode, facts.eqns[e].primitive)}
        if len(kind) > 1:
            return set()  # more than one equation could be this one
        found |= kind
    if not after:  # its result leaves the program
        kind = {e for e in between if computes(opcode, facts.eqns[e].primitive)}
        found = kind if len(kind) == 1 else set()
    if not found and opcode in DATA_MOVEMENT and len(after) == 1:
        found = set(after)  # lays out or replicates the one equation's operand
    return found


def _merged_equations(graph: _Graph, flow: "_Dataflow", facts: Facts, eqns, via) -> None:
    """Add an equation no instruction computes to the tagged instruction that does its work.

    Where an equation feeds only one other (a `broadcast_in_dim` to [1,N] before an `add`), XLA
    often merges the two into one instruction that keeps only the consumer's tag: the broadcast
    of the bias that `add` emitted. That instruction computes the equation too if it is, in its
    computation, the only instruction of the consumer that can, and it reads what the equation
    reads. XLA may repeat the work in several fusions: each copy computes it."""
    placed = set().union(*eqns.values())
    for e in sorted(flow.leaves - placed - facts.dead):
        consumers = flow.consumers[e]
        if len(consumers) != 1:
            continue
        (d,) = consumers
        fits = [n for n, found in eqns.items() if via[n] == "tag" and found == {d}
                and computes(graph.opcode[n], facts.eqns[e].primitive)
                and not computes(graph.opcode[n], facts.eqns[d].primitive)]
        per_computation = defaultdict(list)
        for n in fits:
            per_computation[graph.computation[n]].append(n)
        if not fits or any(len(v) > 1 for v in per_computation.values()):
            continue
        if all(flow.reads(e, *graph.before(n)) for n in fits):
            for n in fits:
                eqns[n] = eqns[n] | {e}


def _common_subexpressions(flow: "_Dataflow", eqns) -> None:
    """An equation no instruction computes, doing exactly the work of one that has instructions
    (the same primitive, params and inputs: XLA kept one copy), is computed by those instructions."""
    placed = set().union(*eqns.values())
    twins = defaultdict(set)
    for e, first in flow.same_work.items():
        twins[first].add(e)
    for group in twins.values():
        missing = group - placed
        if missing and group & placed:
            for name, found in eqns.items():
                if found & group:
                    eqns[name] = found | missing


class _Dataflow:
    """Which equations feed which, through jit and other containers, over the equations that compute
    (no sub-jaxpr): `fed_by`, `consumers`, `ancestors`, and the program arguments each reads."""

    def __init__(self, facts: Facts, closed_jaxpr, entry_parameters: int):
        from jax.extend import core as jex

        jax_eqns = facts.jax_eqns
        sources: dict[int, list] = defaultdict(list)  # id(var) -> [("eqn", id, output) | ("arg", k) | var]
        invars = list(closed_jaxpr.jaxpr.invars)
        # Entry parameter k is argument k when XLA kept them all (jit drops unused ones otherwise).
        self.arguments_known = len(invars) == entry_parameters
        for k, v in enumerate(invars):
            sources[id(v)].append(("arg", k))
        self.leaves = set()
        for n, eqn in jax_eqns.items():
            subs = list(jex.jaxprs_in_params(eqn.params))
            if not subs:
                self.leaves.add(n)
                for k, v in enumerate(eqn.outvars):
                    sources[id(v)].append(("eqn", n, k))
            for sub in subs:
                _link(sources, sub.invars, eqn.invars)
                if len(sub.outvars) == len(eqn.outvars):
                    _link(sources, eqn.outvars, sub.outvars)
        memo: dict[int, frozenset] = {}

        def producers(var) -> frozenset:
            if isinstance(var, jex.Literal):
                return frozenset()
            key = id(var)
            if key not in memo:
                memo[key] = frozenset()  # a shared sub-jaxpr applied to its own result
                out: set = set()
                for s in sources.get(key, ()):
                    out |= {s} if isinstance(s, tuple) else producers(s)
                memo[key] = frozenset(out)
            return memo[key]

        read = {n: set().union(*(producers(v) for v in eqn.invars)) for n, eqn in jax_eqns.items()}
        self.fed_by = {n: {s[1] for s in r if s[0] == "eqn"} for n, r in read.items()}
        self.args_read = {n: {s[1] for s in r if s[0] == "arg"} for n, r in read.items()}
        self.same_work = _same_work(facts, producers)
        self.consumers: dict[int, set[int]] = defaultdict(set)
        for n in self.leaves:
            for p in self.fed_by[n]:
                self.consumers[p].add(n)
        self.ancestors: dict[int, set[int]] = {}
        self.upstream_args: dict[int, set[int]] = {}
        for n in jax_eqns:
            seen, stack = set(), list(self.fed_by[n])
            while stack:
                p = stack.pop()
                if p not in seen:
                    seen.add(p)
                    stack += self.fed_by[p]
            self.ancestors[n] = seen
            self.upstream_args[n] = set(self.args_read[n]).union(*(self.args_read[p] for p in seen))

    def follows(self, e: int, eqns: set[int], arguments: set[int]) -> bool:
        """Whether equation `e` depends on one of these equations or program arguments."""
        if not eqns and not arguments:
            return False  # made from constants alone: what it is cannot be told from its neighbours
        if self.ancestors[e] & eqns:
            return True
        return bool(arguments) and bool(self.upstream_args[e] & arguments if self.arguments_known
                                        else self.upstream_args[e])

    def reads(self, e: int, eqns: set[int], arguments: set[int]) -> bool:
        """Whether `e` reads exactly these equations' results and program arguments."""
        if self.fed_by[e] != eqns:
            return False
        return self.args_read[e] == arguments if self.arguments_known else bool(self.args_read[e]) == bool(arguments)


def _same_work(facts: Facts, producers) -> dict[int, int]:
    """For each equation that computes, the first equation (by id) doing exactly the same work:
    the same primitive and params on the same inputs (as XLA's common-subexpression pass sees it)."""
    from jax.extend import core as jex

    canonical: dict[int, int] = {}
    first_of: dict[tuple, int] = {}

    def key_of(n: int):
        eqn = facts.jax_eqns[n]
        inputs = []
        for v in eqn.invars:
            if isinstance(v, jex.Literal):
                inputs.append(("lit", repr(v.val), str(v.aval)))
                continue
            found = producers(v)
            if len(found) != 1:
                return None
            (src,) = found
            inputs.append(("eqn", canon(src[1]), src[2]) if src[0] == "eqn" else src)
        return (facts.eqns[n].primitive, repr(facts.eqns[n].params), tuple(inputs))

    def canon(n: int) -> int:
        if n not in canonical:
            canonical[n] = n  # while its inputs are keyed
            key = key_of(n)
            canonical[n] = first_of.setdefault(key, n) if key is not None else n
        return canonical[n]

    for n in sorted(facts.jax_eqns):
        if not list(jex.jaxprs_in_params(facts.jax_eqns[n].params)):
            canon(n)
    return canonical


def _link(sources, inner, outer) -> None:
    """Bind a sub-jaxpr's variables to the container's: one for one when they line up (from the end
    when the container has more, as `cond`'s index or `while`'s other constants), else each to all."""
    inner, outer = list(inner), list(outer)
    if len(inner) <= len(outer):
        for a, b in zip(inner, outer[len(outer) - len(inner):]):
            sources[id(a)].append(b)
    else:
        for a in inner:
            sources[id(a)].extend(outer)
