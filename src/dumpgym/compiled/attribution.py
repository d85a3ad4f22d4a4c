"""Each compiled instruction's equations, and how they are known (`via`).

An instruction whose own metadata names a tagged equation is that equation's ("tag"). Where XLA
dropped the metadata, the equation is inferred from dataflow when that leaves no doubt
("inferred"): the compiled graph says which tagged equations an instruction reads and feeds, the
jaxpr says which equations lie between them. Instructions of reducer regions take their holder's
equations ("region"); the rest is XLA's own plumbing ("none"). An equation XLA folded into another's
instruction (rules 2 and 3: it has no instruction of its own) is kept apart from that instruction's
own equations, as absorbed by it. A fusion holds the equations whose work its fused computation does,
folded ones too. Each way XLA merges, folds or splits equations that this relies on is
a named rule in docs/corpus.md ("How XLA's rewrites are attributed"), proven from the jaxpr here.
"""
from __future__ import annotations

import copy
from collections import defaultdict

from dumpgym.traced.facts import Facts
from dumpgym.ir.hlo_graph import CompiledGraph
from dumpgym.record.opcodes import DATA_MOVEMENT, computes
from dumpgym.record.primitives import COLLECTIVE_REDUCTIONS


# Plumbing XLA adds around the work: never an equation's own, whatever its neighbours.
_PLUMBING = frozenset({
    "parameter", "constant", "tuple", "gettupleelement", "copy", "copystart", "copydone", "bitcast",
    "optimizationbarrier", "afterall", "adddependency", "domain",
})


def attribute(graph: CompiledGraph, facts: Facts, closed_jaxpr, flow: "_Dataflow | None" = None
              ) -> tuple[dict[str, set[int]], dict[str, str], dict[str, dict[int, int]]]:
    """Each instruction's equations and `via`: its tag; else inferred by dataflow where that is
    unambiguous; a region's its holder's; else XLA's own. And, apart, the equations folded into it
    (rules 2 and 3: equation -> rule), which have no instruction of their own. A fusion's equations
    are all those whose work its body does, folded ones too. `flow`: the jaxpr's `dataflow`, if made already."""
    flow = (flow or dataflow(facts, closed_jaxpr)).entered_by(
        sum(1 for n in graph.param_number if graph.computation[n] == graph.entry))
    eqns: dict[str, set[int]] = {}
    via: dict[str, str] = {}
    fused = {c for n, op in graph.opcode.items() if op == "fusion" for c in graph.calls[n]}
    for name, opcode in graph.opcode.items():
        if opcode == "fusion" or name in graph.region_of:
            continue
        if graph.own(name) is not None:
            eqns[name], via[name] = {graph.own(name)}, "tag"
        elif opcode not in _PLUMBING and not (opcode == "customcall" and graph.computation[name] in fused):
            # An untagged custom-call inside a fusion is XLA's own (the bookkeeping of a TPU async
            # collective); one that stands alone may be a kernel XLA put in place of equations
            # (TPU's online-softmax), which dataflow can name.
            found = _infer(graph, flow, facts, name)
            eqns[name], via[name] = found, ("inferred" if found else "none")
        else:
            eqns[name], via[name] = set(), "none"
    _rewritten_reductions(graph, flow, facts, eqns, via)
    # Until the fusions are known, `eqns` holds the folded equations too (what each instruction's work
    # covers, as the rules and the fusions read it); `absorbed` says which of them were folded, by which rule.
    absorbed: dict[str, dict[int, int]] = defaultdict(dict)
    _merged_equations(graph, flow, facts, eqns, via, absorbed)
    _common_subexpressions(flow, eqns, absorbed)
    _collectives_by_combiner(graph, facts, eqns, via)
    # A reducer or comparator region computes its holders' equations, not the tag it carries: XLA keeps
    # one copy of equal regions for all the reducers applying them, tagged after the first (the own tag
    # stands only where no holder names an equation). Twice, for a region applied inside another
    # region, whose holder is known only after the first pass.
    for _ in range(2):
        for region, holders in graph.holders.items():
            held = set().union(*(eqns.get(h, set()) for h in holders))
            folded = {e: rule for h in holders for e, rule in absorbed.get(h, {}).items()}
            for name in graph.members[region]:
                own = {graph.tag[name]} if graph.tag[name] is not None else set()
                eqns[name] = held or own
                via[name] = "region" if eqns[name] else "none"
                absorbed[name] = folded if held else {}
    for name, opcode in graph.opcode.items():
        if opcode == "fusion":
            eqns[name], via[name] = _fusion_equations(graph, facts, name, eqns, via)
    for name, folded in absorbed.items():
        eqns[name] = eqns[name] - folded.keys()
    return eqns, via, {name: folded for name, folded in absorbed.items() if folded}


# Collectives that combine over a group with a combiner region: XLA may compile any of them as an all-reduce.
_COMBINING = COLLECTIVE_REDUCTIONS | frozenset({"reduce_scatter", "psum_scatter"})
_ALL_REDUCES = frozenset({"allreduce", "allreducestart"})


def _collectives_by_combiner(graph: CompiledGraph, facts: Facts, eqns, via) -> None:
    """Rule 8: an all-reduce that carries no tag, and that dataflow could not place, computes the one
    collective whose tag its combiner region carries (a TPU compiles a reduce_scatter as an untagged
    all-reduce and a dynamic-slice, and keeps the reduce_scatter's tag only on the combiner it lowered)."""
    for name, opcode in graph.opcode.items():
        if opcode not in _ALL_REDUCES or eqns.get(name) or name in graph.region_of:
            continue
        regions = [region for region, holders in graph.holders.items() if name in holders]
        tags = {graph.tag[m] for region in regions for m in graph.members[region] if graph.tag[m] is not None}
        if len(tags) == 1 and facts.eqns[next(iter(tags))].primitive in _COMBINING:
            eqns[name], via[name] = tags, "inferred"


# The primitives that contract (a matrix multiply, a convolution), and the opcodes that do a contraction's
# work: the contraction itself, or a kernel or fusion that holds one.
CONTRACTIONS = frozenset({"dot_general", "conv_general_dilated"})
_CONTRACTING = frozenset({"dot", "convolution", "customcall", "fusion"})
# The arithmetic XLA may rewrite a contraction into (a dot with a dimension of 1 becomes a broadcast
# times a multiply and a reduce; a GPU's split-K GEMM ends in a reduce of its partial sums).
_CONTRACTION_ARITHMETIC = frozenset({"multiply", "reduce", "add", "convert", "reducewindow"})


def _does_work(graph: CompiledGraph, facts: Facts, name: str, eqns) -> set[int]:
    """The equations among an instruction's whose work it does, rather than serves.

    Metadata is a hint: XLA gives a dot's tag to the bitcasts, copies, constants and layout transposes
    around it, and the partitioner to the index arithmetic and dynamic-slices that cut its operand to each
    device's shard; dataflow ties an untagged transpose to the dot whose operand it lays out. None of them
    multiplies: a contraction is done by a dot, a convolution, a kernel, or the floating-point arithmetic
    XLA rewrote it into (with the broadcasts feeding that multiply)."""
    found = eqns.get(name, set())
    contractions = {e for e in found if facts.eqns[e].primitive in CONTRACTIONS}
    if not contractions or _contracts(graph, name, contractions, eqns):
        return found
    return found - contractions


def _contracts(graph: CompiledGraph, name: str, contractions: set[int], eqns) -> bool:
    opcode = graph.opcode[name]
    if opcode in _CONTRACTING:
        return True
    if opcode in _CONTRACTION_ARITHMETIC:
        return graph.floating[name]
    if opcode == "broadcast":  # an operand of the multiply a contraction became
        return any(graph.opcode[u] == "multiply" and graph.floating[u] and eqns.get(u, set()) & contractions
                   for u in graph.users[name])
    return False


def _fusion_equations(graph: CompiledGraph, facts: Facts, fusion: str, eqns, via) -> tuple[set[int], str]:
    """The equations whose work some instruction of a fusion's computation (and what it calls, nested
    regions included) does, and the strongest way one of them is known."""
    found: set[int] = set()
    served: set[int] = set()
    kinds: set[str] = set()
    seen: set[str] = set()
    stack = list(graph.calls[fusion])
    while stack:
        computation = stack.pop()
        if computation in seen:
            continue
        seen.add(computation)
        for name in graph.members[computation]:
            served |= eqns.get(name, set())
            worked = _does_work(graph, facts, name, eqns)
            found |= worked
            if worked:
                kinds.add(via.get(name, "none"))
            stack += graph.calls[name]
    if not served and graph.tag[fusion] is not None:
        # A fusion XLA built around untagged instructions of its own (TPU's all-reduce-scatter, an
        # all-reduce and a dynamic-slice) carries the tag of the equation it was made for.
        return {graph.tag[fusion]}, "tag"
    kind = next((k for k in ("tag", "region", "inferred") if k in kinds), "none") if found else "none"
    return found, ("tag" if kind == "region" else kind)


def _infer(graph: CompiledGraph, flow: "_Dataflow", facts: Facts, name: str) -> set[int]:
    """The equations an untagged instruction computes, if its neighbours in the compiled graph and
    the jaxpr's dataflow between them leave no doubt; else nothing."""
    opcode = graph.opcode[name]
    before, arguments, loops = graph.sources(name)
    after = graph.after(name)
    # Equations downstream of this instruction's sources, and not upstream of any of them (as bits).
    between = flow.leaf_bits & ~bits_of(before) & flow.downstream(before, arguments)
    for u in before:
        between &= ~flow.ancestor_bits[u]
    if not before and not arguments and loops:
        # It reads only what a loop carries from one iteration to the next, so the jaxpr's order says
        # nothing of where it stands: any equation of that loop's body may be it.
        between = bits_of(e for e in flow.leaves if loops & set(enclosing(facts, e)))
    if opcode == "customcall":
        # A kernel XLA put in place of a stretch of the program (TPU's `online-softmax` for a
        # softmax between two matmuls): it computes every equation between what it reads and what
        # reads it.
        reaching = 0
        for d in after:
            reaching |= flow.ancestor_bits[d]
        return members(between if not after else between & reaching)
    found: set[int] = set()
    for d in sorted(after):
        kind = {e for e in members((flow.ancestor_bits[d] | 1 << d) & between)
                if computes(opcode, facts.eqns[e].primitive)}
        if len(kind) > 1 and not _composed(opcode, kind, flow):
            return set()  # more than one equation could be this one
        found |= kind
    if not after:  # its result leaves the program
        kind = {e for e in members(between) if computes(opcode, facts.eqns[e].primitive)}
        found = kind if len(kind) == 1 or _composed(opcode, kind, flow) else set()
    if found:
        return found
    if opcode in DATA_MOVEMENT and (len(after) == 1 or not (before or arguments or loops)):
        return set(after)  # lays out or replicates the operand of the one equation (or literal) it feeds
    if len(after) == 1 and opcode != "convert":
        # No equation between its sources and the one it feeds does this kind of work: it is part of
        # how XLA carried out that equation (the bounds check of a scatter's FILL_OR_DROP mode).
        # Converts are left out: XLA's own float-normalization round trips look the same.
        return set(after)
    return set()


def enclosing(facts: Facts, eqn_id: int):
    """The container equations (jit, scan, while, ...) around an equation, innermost first."""
    for parent in facts.callers.get(eqn_id, ()):
        yield parent
        yield from enclosing(facts, parent)


def _composed(opcode: str, kind: set[int], flow: "_Dataflow") -> bool:
    """Whether one data-moving instruction does the work of several equations in a row (two transposes
    XLA composed into one): each of them feeds the next."""
    if opcode not in DATA_MOVEMENT:
        return False
    chain = sorted(kind, key=lambda e: flow.ancestor_bits[e].bit_count())
    return all(flow.ancestor_bits[b] >> a & 1 for a, b in zip(chain, chain[1:]))


def _merged_equations(graph: CompiledGraph, flow: "_Dataflow", facts: Facts, eqns, via, absorbed) -> None:
    """Rule 2: add an equation no instruction computes to the tagged instruction that does its work
    (and to `absorbed`, as folded into it).

    Where an equation feeds only one other (a `broadcast_in_dim` to [1,N] before an `add`), XLA
    often merges the two into one instruction that keeps only the consumer's tag: the broadcast
    of the bias that `add` emitted. That instruction computes the equation too if it is, in its
    computation, the only instruction of the consumer that can, and it reads what the equation
    reads. XLA may repeat the work in several fusions: each copy computes it."""
    placed = set().union(*eqns.values())
    alone: dict[int, list] = defaultdict(list)  # equation -> the tagged instructions computing it and nothing else
    for n, found in eqns.items():
        if via[n] == "tag" and len(found) == 1:
            alone[next(iter(found))].append(n)
    folded = _folded(flow, facts, placed)  # `placed` stays as it is through the loop: computed once
    for e in sorted(flow.leaves - placed - facts.dead):
        consumers = flow.consumers[e]
        if len(consumers) != 1:
            continue
        (d,) = consumers
        while d not in placed and _identity(facts.eqns[d]) and len(flow.consumers[d]) == 1:
            (d,) = flow.consumers[d]  # through a stop_gradient, which lowers to nothing
        fits = [n for n in alone.get(d, ()) if eqns[n] == {d}
                and computes(graph.opcode[n], facts.eqns[e].primitive)
                and not computes(graph.opcode[n], facts.eqns[d].primitive)]
        per_computation = defaultdict(list)
        for n in fits:
            per_computation[graph.computation[n]].append(n)
        if not fits or any(len(v) > 1 for v in per_computation.values()):
            continue
        if all(flow.reads(e, *graph.before(n), through=folded) for n in fits):
            for n in fits:
                eqns[n] = eqns[n] | {e}
                absorbed[n][e] = 2


# What a reduction's result may pass through on its way back to the full shape, when XLA turns the pair
# into one reduce-window (sdpa's TPU compile: `reduce_max`, `max` with -inf, `broadcast_in_dim`,
# `stop_gradient`, then `sub`): shape changes, the identity of the gradient, and the combiner itself.
_BROADCAST_BACK = frozenset({"broadcast_in_dim", "reshape", "expand_dims", "squeeze", "stop_gradient"})
# A window's combiner (its region's root) -> the reduction it computes, and that reduction's elementwise twin.
_REDUCTION_OF_COMBINER = {"maximum": ("reduce_max", "max"), "minimum": ("reduce_min", "min"),
                          "add": ("reduce_sum", "add"), "multiply": ("reduce_prod", "mul")}


def _rewritten_reductions(graph: CompiledGraph, flow: "_Dataflow", facts: Facts, eqns, via) -> None:
    """A reduce-window that carries the tag of an equation it cannot compute is a reduction and the
    broadcast of its result, which XLA rewrote into one window spanning the reduced axis (each output
    element is its row's maximum); the tag is that of the equation reading the broadcast (sdpa's `sub`).

    Proven from the jaxpr: exactly one reduction of the window's combiner reads what the reduce-window
    reads, and between it and the tagged equation stand only shape changes, `stop_gradient` and the
    combiner against a constant. The reduce-window computes that reduction and what stands between
    (stop_gradient aside, which computes nothing), not the tagged equation."""
    combiner_of = {}
    for region, holders in graph.holders.items():
        root = next((n for n in graph.members[region] if n in graph.roots), None)
        for h in holders:
            combiner_of[h] = graph.opcode[root] if root is not None else None
    for name, opcode in graph.opcode.items():
        tagged = graph.own(name)
        if opcode != "reducewindow" or tagged is None or computes(opcode, facts.eqns[tagged].primitive):
            continue
        reduction, twin = _REDUCTION_OF_COMBINER.get(combiner_of.get(name), (None, None))
        sources = graph.before(name)
        candidates = [r for r in sorted(members(flow.ancestor_bits[tagged])) if r in flow.leaves
                      and facts.eqns[r].primitive == reduction and flow.reads(r, *sources)]
        if len(candidates) != 1:
            continue
        (r,) = candidates
        between = {e for e in members(flow.ancestor_bits[tagged]) if flow.ancestor_bits[e] >> r & 1} - {r}
        if not all(facts.eqns[e].primitive in _BROADCAST_BACK
                   or (facts.eqns[e].primitive == twin and facts.eqns[e].literals) for e in between):
            continue
        eqns[name] = {r} | {e for e in between if facts.eqns[e].primitive != "stop_gradient"}
        via[name] = "inferred"


def _identity(eqn) -> bool:
    """Whether an equation returns its input unchanged, so XLA drops it: a stop_gradient, a max against -inf,
    a min against +inf (sdpa's `max -inf` on the row max of its masked scores)."""
    if eqn.primitive == "stop_gradient":
        return True
    values = {x.literal for x in eqn.literals}
    return (eqn.primitive, len(eqn.arrays), values) in (("max", 1, {"-inf"}), ("min", 1, {"inf"}))


def _folded(flow: "_Dataflow", facts: Facts, placed: set[int]):
    """The equations XLA dropped as identities (no instruction computes them): what reads one reads its input."""
    return {e for e in flow.leaves - placed if _identity(facts.eqns[e])}


def _common_subexpressions(flow: "_Dataflow", eqns, absorbed) -> None:
    """Rule 3: an equation no instruction computes, doing exactly the work of one that has instructions
    (the same primitive, params and inputs: XLA kept one copy), is computed by those instructions, folded
    into them (`absorbed`)."""
    placed = set().union(*eqns.values())
    twins = defaultdict(set)
    for e, first in flow.same_work.items():
        twins[first].add(e)
    holding: dict[int, list] = defaultdict(list)  # equation -> the instructions computing it
    for name, found in eqns.items():
        for e in found:
            holding[e].append(name)
    # Groups are disjoint (each equation has one first), so what one group adds never makes an
    # instruction hold another group: the instructions holding a group are known before any is added to.
    for group in twins.values():
        missing = group - placed
        if missing and group & placed:
            for name in dict.fromkeys(n for e in sorted(group & placed) for n in holding[e]):
                eqns[name] = eqns[name] | missing
                absorbed[name].update(dict.fromkeys(missing, 3))


def dataflow(facts: Facts, closed_jaxpr) -> "_Dataflow":
    """Which equations feed which, as `attribute` reads it: the jaxpr's alone, so `compile_layer` makes it
    while XLA compiles."""
    return _Dataflow(facts, closed_jaxpr)


class _Dataflow:
    """Which equations feed which, through jit and other containers, over the equations that compute
    (no sub-jaxpr): `fed_by`, `consumers`, `ancestor_bits`, and the program arguments each reads.

    Closures over the whole graph are bit sets (a Python int, bit `n` for equation `n`): a program of
    7,000 equations has tens of millions of (equation, ancestor) pairs, which as sets of ints took
    seconds to build; as ints each union is a hundred machine words."""

    def __init__(self, facts: Facts, closed_jaxpr):
        from jax.extend import core as jex

        from dumpgym.jax_internals import jaxprs_in_params

        jax_eqns = facts.jax_eqns
        sources: dict[int, list] = defaultdict(list)  # id(var) -> [("eqn", id, output) | ("arg", k) | var]
        invars = list(closed_jaxpr.jaxpr.invars)
        self.arguments = len(invars)
        self.arguments_known = False  # until `entered_by` says how many the compile kept
        for k, v in enumerate(invars):
            sources[id(v)].append(("arg", k))
        self.leaves = set()
        for n, eqn in jax_eqns.items():
            subs = list(jaxprs_in_params(eqn.params))
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
        self.leaf_bits = bits_of(self.leaves)
        self.ancestor_bits, self._below = _closures(list(jax_eqns), self.fed_by)
        # Per program argument, every equation downstream of it; and downstream of any argument.
        self._below_arg: dict[int, int] = defaultdict(int)
        for n, args in self.args_read.items():
            for k in args:
                self._below_arg[k] |= 1 << n | self._below[n]
        self._below_any_arg = 0
        for below in self._below_arg.values():
            self._below_any_arg |= below

    def entered_by(self, entry_parameters: int) -> "_Dataflow":
        """This dataflow read against a compile whose entry takes `entry_parameters` parameters: entry
        parameter k is argument k when XLA kept them all (jit drops unused ones otherwise)."""
        out = copy.copy(self)
        out.arguments_known = self.arguments == entry_parameters
        return out

    def downstream(self, eqns: set[int], arguments: set[int]) -> int:
        """Every equation that depends on these equations or program arguments, as bits, at once (a big
        program asks this of a thousand instructions: one union per source, not a walk per equation)."""
        out = 0
        for e in eqns:
            out |= self._below.get(e, 0)
        if arguments and not self.arguments_known:
            out |= self._below_any_arg
        elif arguments:
            for k in arguments:
                out |= self._below_arg.get(k, 0)
        return out

    def reads(self, e: int, eqns: set[int], arguments: set[int], through: set[int] = frozenset()) -> bool:
        """Whether `e` reads exactly these equations' results and program arguments (looking through the
        equations `through`, which pass their input on)."""
        fed, args, stack = set(), set(self.args_read[e]), list(self.fed_by[e])
        while stack:
            p = stack.pop()
            if p in through:
                stack += self.fed_by[p]
                args |= self.args_read[p]
            else:
                fed.add(p)
        if fed != eqns:
            return False
        return args == arguments if self.arguments_known else bool(args) == bool(arguments)


def _closures(nodes: list[int], fed_by: dict[int, set[int]]) -> tuple[dict[int, int], dict[int, int]]:
    """Each equation's ancestors (everything it depends on, itself too when it lies on a cycle) and its
    descendants, by `fed_by`, as bit sets.

    A shared sub-jaxpr called twice links its variables to both calls, so the graph may have cycles: it
    is condensed into its strongly connected components, and each component's closure is one union
    over its neighbours', in dependency order, shared by its members."""
    component, members_of = _components(nodes, fed_by)
    preds: list[set[int]] = [set() for _ in members_of]
    for n in nodes:
        for p in fed_by[n]:
            if component[p] != component[n]:
                preds[component[n]].add(component[p])
    succs: list[set[int]] = [set() for _ in members_of]
    for c, ps in enumerate(preds):
        for p in ps:
            succs[p].add(c)
    own = [bits_of(m) for m in members_of]
    cyclic = [len(m) > 1 or any(n in fed_by[n] for n in m) for m in members_of]
    # `_components` numbers components so that each comes after every one it depends on.
    anc: list[int] = []
    for c in range(len(members_of)):
        bits = own[c] if cyclic[c] else 0
        for p in preds[c]:
            bits |= own[p] | anc[p]
        anc.append(bits)
    below: list[int] = [0] * len(members_of)
    for c in reversed(range(len(members_of))):
        bits = own[c] if cyclic[c] else 0
        for d in succs[c]:
            bits |= own[d] | below[d]
        below[c] = bits
    return {n: anc[component[n]] for n in nodes}, {n: below[component[n]] for n in nodes}


def bits_of(numbers) -> int:
    """A set of small non-negative ints (equation numbers) as a bit set: bit `n` for each `n`."""
    bits = 0
    for n in numbers:
        bits |= 1 << n
    return bits


def members(bits: int) -> set[int]:
    """The numbers a bit set holds (`bits_of`'s inverse), found by the string search of its binary digits."""
    digits = bin(bits)[:1:-1]  # least significant first, without the "0b"
    out, at = set(), digits.find("1")
    while at >= 0:
        out.add(at)
        at = digits.find("1", at + 1)
    return out


def _components(nodes: list[int], fed_by: dict[int, set[int]]) -> tuple[dict[int, int], list[set[int]]]:
    """Tarjan's strongly connected components of the graph `n -> fed_by[n]`, iteratively: each node's
    component number, and each component's members; a component comes after those it depends on."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    component: dict[int, int] = {}
    members: list[set[int]] = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(fed_by[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            n, edges = work[-1]
            for p in edges:
                if p not in index:
                    index[p] = low[p] = len(index)
                    stack.append(p)
                    on_stack.add(p)
                    work.append((p, iter(sorted(fed_by[p]))))
                    break
                if p in on_stack:
                    low[n] = min(low[n], index[p])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[n])
                if low[n] == index[n]:
                    found = set()
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        component[m] = len(members)
                        found.add(m)
                        if m == n:
                            break
                    members.append(found)
    return component, members


def _same_work(facts: Facts, producers) -> dict[int, int]:
    """For each equation that computes, the first equation (by id) doing exactly the same work:
    the same primitive and params on the same inputs (as XLA's common-subexpression pass sees it)."""
    from jax.extend import core as jex

    from dumpgym.jax_internals import jaxprs_in_params

    canonical: dict[int, int] = {}
    first_of: dict[tuple, int] = {}
    literals: dict = {}

    def key_of(n: int):
        eqn = facts.jax_eqns[n]
        inputs = []
        for v in eqn.invars:
            if isinstance(v, jex.Literal):
                inputs.append(_literal_key(v, literals))
                continue
            found = producers(v)
            if len(found) != 1:
                return None
            (src,) = found
            inputs.append(("eqn", canon(src[1]), src[2]) if src[0] == "eqn" else src)
        return (facts.eqns[n].primitive, _work_params(facts.eqns[n]), tuple(inputs))

    def canon(n: int) -> int:
        if n not in canonical:
            canonical[n] = n  # while its inputs are keyed
            key = key_of(n)
            canonical[n] = first_of.setdefault(key, n) if key is not None else n
        return canonical[n]

    for n in sorted(facts.jax_eqns):
        if not list(jaxprs_in_params(facts.jax_eqns[n].params)):
            canon(n)
    return canonical


def _literal_key(literal, memo: dict) -> tuple[str, str, str]:
    """A literal input as `_same_work` keys it: its value's repr and its aval, printed.

    NumPy prints a scalar slowly and a big program holds thousands of the same few (0.0, 1.0, -inf):
    `memo` keeps one print per type, dtype, shape, bit pattern, weak type and aval (a NumPy scalar, or an array,
    as JAX's own literal values are: what their print is made of)."""
    import numpy as np

    value = literal.val
    if not isinstance(value, (np.generic, np.ndarray)):
        return ("lit", repr(value), str(literal.aval))
    key = (type(value), value.dtype, value.shape, value.tobytes(), getattr(value, "weak_type", None), literal.aval)
    if key not in memo:
        memo[key] = ("lit", repr(value), str(literal.aval))
    return memo[key]


def _work_params(eqn) -> str:
    """An equation's params as far as they decide its result: a slice by the elements it selects, so
    that `x[:, 0:1:2]` and `x[:, 0:1]` (one element either way, whatever the stride) are the same work."""
    params = eqn.params
    if eqn.primitive == "slice" and params.get("start_indices") is not None:
        strides = params.get("strides") or [1] * len(params["start_indices"])
        picked = []
        for start, limit, stride in zip(params["start_indices"], params["limit_indices"], strides):
            count = len(range(start, limit, stride))
            picked.append((start if count else 0, count, stride if count > 1 else 1))
        return repr(("slice", tuple(picked)))
    return repr(params)


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
