"""The x-ray (`XRay`): each equation linked to the StableHLO lines it became.

Attribution is exact by construction: the trace stage lowered the program with
every equation's name stack extended by a unique tag, so each operation's
location names the equation that emitted it. The printed text is parsed back with
the MLIR bindings for line numbers; its operations pair one to one, in order,
with the lowered module's (checked op by op).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from dumpgym.traced.facts import Facts
from dumpgym.record.schema import Group, LoweredModule, LoweredToNothing, StablehloOp, XrayStats
from dumpgym.ir.mlir import OpTree, ops_in_order, parse_lowered
from dumpgym.ir.stablehlo import asm_names, op_facts, read_lowered
from dumpgym.gcpause import with_collector_paused
from dumpgym.ir.tags import innermost_tag

# Operations that only give the module its shape: never attributed, never counted.
STRUCTURAL_OPS = frozenset({
    "builtin.module", "func.func", "func.return", "stablehlo.return", "sdy.return", "sdy.mesh",
})

# Why an equation with no operations of its own lowered to nothing (the page shows this).
NOTHING_REASONS = {
    "stop_gradient": "stop_gradient only blocks differentiation; its value passes through unchanged",
    "pvary": "pvary only marks a value as varying across devices for the type checker",
    "copy_p": "the copy is elided: values are immutable, so nothing needs copying",
    "optimization_barrier": "optimization_barrier is kept only as a boundary, with no arithmetic",
    # StableHLO has no key type: a typed PRNG key is lowered as its uint32 key data.
    "random_wrap": "random_wrap only retypes the key data as a key; StableHLO holds a key as that data",
    "random_unwrap": "random_unwrap only retypes a key as its key data; StableHLO holds a key as that data",
}


@dataclass(frozen=True)
class XRay:
    """Groups for every equation that emitted something, and what was left unmapped and why."""

    groups: tuple[Group, ...]
    ops: tuple[StablehloOp, ...]  # every op line of the plain StableHLO text, in order
    lowered_to_nothing: tuple[LoweredToNothing, ...]
    stats: XrayStats
    lowered: LoweredModule  # what MLIR read in the plain module besides its ops (the record's `lowered`)

    def to_json(self) -> dict:
        """The export's `xray`, `stablehlo_ops`, `lowered_to_nothing` and `xray_stats` fields."""
        return {
            "xray": [g.to_json() for g in self.groups],
            "stablehlo_ops": [op.to_json() for op in self.ops],
            "lowered_to_nothing": [row.to_json() for row in self.lowered_to_nothing],
            "xray_stats": self.stats.to_json(),
        }


@with_collector_paused
def build_xray(trace, facts: Facts) -> XRay:
    """Attribute every StableHLO op line of `trace.stablehlo` to the equations that emitted it."""
    from dumpgym.jax_internals import bare_location_name, location_line

    tagged = OpTree(trace.lowered.compiler_ir("stablehlo"))
    plain = parse_lowered(trace.stablehlo)  # in scope while its ops are read
    plain_ops = ops_in_order(plain)  # only their lines are read: MLIR's own walk is enough
    names, functions, holders = tagged.names, tagged.functions, tagged.holders
    if [op.name for op in plain_ops] != names:
        raise RuntimeError("the tagged lowering differs from the plain one; cannot attribute by construction")

    printed = asm_names(plain)
    ops = [StablehloOp(name, location_line(op.location), function, **op_facts(op, printed))
           for op, name, function in zip(plain_ops, names, functions)]
    eqn_of_tag, containers = facts.eqn_of_tag, facts.children
    owners: list[set[int]] = [set() for _ in ops]  # by op index: the equations it belongs to
    pending_constants = []
    calls_by_function: dict[str, list[int]] = defaultdict(list)
    untagged = []
    for i, t_op in enumerate(tagged.ops):
        location = t_op.location
        bare = bare_location_name(location)  # read without printing where it can be
        own = innermost_tag(str(location) if bare is None else bare)
        own = None if own is None else eqn_of_tag[own]
        name = names[i]
        if name == "stablehlo.constant" and (own is None or own in containers):
            # A literal is materialised where the enclosing body is lowered, so its location names
            # the body (an equation holding a sub-jaxpr, or none at the top), not the equation that
            # reads it. A constant a leaf equation's lowering emits names that equation, its owner
            # even when another reads it (`platform_index` lowers to the branch index a `case` reads).
            pending_constants.append((i, own))
        elif own is not None:
            owners[i].add(own)
        elif holders[i] is not None:
            untagged.append((i, holders[i]))
        if name == "func.call":
            calls_by_function[t_op.attributes["callee"].value].append(i)

    # Ops without a tag of their own: inside a region they belong to its holder;
    # in a private function body, to the equations that call the function.
    for i, holder in untagged:
        owners[i] |= owners[holder]
    _inherit_from_calls(ops, owners, calls_by_function)
    for i, holder in untagged:  # again: a holder may have just inherited its owners from a call
        owners[i] |= owners[holder]
    # A constant of a body belongs to its first user (or to its own mark when nothing reads it).
    index_of = {op: i for i, op in enumerate(tagged.ops)} if pending_constants else {}
    for i, own in pending_constants:
        users = sorted(index_of[u.owner] for u in tagged.ops[i].result.uses if u.owner in index_of)
        first = next((u for u in users if owners[u]), None)
        if first is not None:
            owners[i] |= owners[first]
        elif own is not None:
            owners[i].add(own)

    return _assemble(trace, facts, ops, owners, read_lowered(plain))


def _inherit_from_calls(ops, owners, calls_by_function):
    """Give each private function's untagged ops the owners of every call to that function."""
    inside_called = [i for i, op in enumerate(ops)
                     if op.function in calls_by_function and op.name not in STRUCTURAL_OPS]
    changed = True
    while changed:
        changed = False
        for i in inside_called:
            if owners[i]:
                continue
            for call in calls_by_function[ops[i].function]:
                if owners[call] - owners[i]:
                    owners[i] |= owners[call]
                    changed = True


def _assemble(trace, facts: Facts, ops: list[StablehloOp], owners, lowered: LoweredModule) -> XRay:
    own_lines: dict[int, set[int]] = defaultdict(set)
    op_lines = set()
    for op, own in zip(ops, owners):
        if op.name in STRUCTURAL_OPS:
            continue
        op_lines.add(op.line)
        for eqn in own:
            own_lines[eqn].add(op.line)

    groups, nothing = [], []
    containers = facts.children
    for eqn in facts.eqns:
        if eqn.id not in containers:  # most equations hold nothing: their own lines are the group's
            hlo = own_lines.get(eqn.id)
            if hlo:
                first, last = eqn.jaxpr_lines
                groups.append(Group(eqn.id, tuple(range(first, last + 1)), tuple(sorted(hlo))))
            else:
                nothing.append(LoweredToNothing(eqn.id, _why_nothing(eqn, facts)))
            continue
        family = [eqn.id, *facts.descendants(eqn.id)]
        hlo = set().union(*(own_lines.get(e, ()) for e in family))
        if not hlo:
            nothing.append(LoweredToNothing(eqn.id, _why_nothing(eqn, facts)))
            continue
        jaxpr = set()
        for e in family:
            first, last = facts.eqns[e].jaxpr_lines
            jaxpr.update(range(first, last + 1))
        groups.append(Group(eqn.id, tuple(sorted(jaxpr)), tuple(sorted(hlo))))

    attributed = {line for g in groups for line in g.stablehlo_lines}
    jaxpr_mapped = {line for g in groups for line in g.jaxpr_lines}
    stats = XrayStats(
        equations=len(facts.eqns),
        mapped_equations=len(groups),
        jaxpr_lines=len(trace.jaxpr.splitlines()),
        mapped_jaxpr_lines=len(jaxpr_mapped),
        stablehlo_lines=len(trace.stablehlo.splitlines()),
        stablehlo_op_lines=len(op_lines),
        mapped_stablehlo_op_lines=len(attributed & op_lines),
    )
    return XRay(tuple(groups), tuple(o for o in ops if o.name not in STRUCTURAL_OPS), tuple(nothing), stats, lowered)


def _why_nothing(eqn, facts: Facts) -> str:
    if eqn.id in facts.dead:
        return "its result is never used, so lowering dropped it as dead code"
    if eqn.primitive in NOTHING_REASONS:
        return NOTHING_REASONS[eqn.primitive]
    if eqn.primitive == "convert_element_type" and eqn.inputs and eqn.inputs[0].dtype == eqn.outputs[0].dtype:
        return "a convert to the dtype it already has only drops the weak type; nothing to compute"
    if eqn.primitive == "integer_pow" and eqn.params.get("y") == 1:
        return "x**1 is x itself: lowering uses its input as it is"
    return "no operation carries its mark: lowering folded it into its neighbours"
