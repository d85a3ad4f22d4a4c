"""Dataflow for a dumped module's x-ray: which StableHLO op each HLO instruction came from, where its
name stack and source line leave several.

Several StableHLO ops can share one name stack and line (the four `mul`s of one `jax.nn.gelu` call,
three `tanh`s of a Python loop), so its name stack and line alone link an instruction to the group. The
first column of its stack frame, where XLA's source tables keep it, tells ops of one line apart, but XLA may
give an instruction it rewrote a neighbour's metadata: it is read last, only where the graphs agree. The
graphs tell them apart: if instruction `j` feeds instruction `i` (directly, or through
instructions without a name stack, fusion parameters, calls and loops), the op `i` came from must
be downstream of the op `j` came from. Each instruction starts with the ops its metadata allows (of
its own kind where its opcode names one, computed from the same entry parameters where some are:
layer 1's ops are computed from layer 1's weights, layer 0's are not; and flowing into the same results
where some do: layer 1's backward ops flow into layer 1's gradients, layer 0's do not; where none does,
into more, as a copy XLA made unseen reaches part of its op's), and a candidate is
dropped while some neighbour has no candidate it can sit beside. An instruction left with one op is linked
to that op. Last, where several ops of one name stack, line and column are left (a function called twice on
one line: every op of its backward pass is downstream of every op of its forward), what they read next
decides: an instruction keeps those of its ops that read the op of an instruction feeding it, or that the op
of an instruction it feeds reads, where some do and some do not; what that leaves narrows its neighbours as
before. Where an edge leaves an instruction no candidate at all, XLA rewrote the graph there beyond what the rule
assumes (merged a common subexpression, turned a divide into a multiply): both ends of that edge
keep every candidate and say nothing of their neighbours, and what their candidates pruned is undone. A fusion
is the op of the fused instruction whose metadata XLA gave it, which is not always its root (an
output fusion carries its matmul's); a get-tuple-element takes the one element it names, and one of a
multi-output fusion is the op of what made its element (`made_by`), whatever its own metadata.

Both graphs are read by `ir/dataflow.py`; this module only reasons over what it read.
"""
from __future__ import annotations

from collections import defaultdict, deque

from dumpgym.ir.dataflow import Fused, hlo_opcode

# HLO opcodes whose instruction never splits into a chain of its own kind: when one such instruction
# feeds another of the same opcode, they came from two ops, the feeding one upstream.
_ELEMENTWISE = frozenset({
    "abs", "add", "and", "atan2", "cbrt", "ceil", "compare", "cosine", "divide", "dot", "exponential",
    "exponential-minus-one", "floor", "log", "log-plus-one", "logistic", "maximum", "minimum", "multiply",
    "negate", "not", "or", "power", "remainder", "round-nearest-afz", "round-nearest-even", "rsqrt", "select",
    "sign", "sine", "sqrt", "subtract", "tan", "tanh", "xor"})

# Opcodes XLA moves across a neighbour that is not elementwise (a negate past a reduction: `reduce(-x)` is
# `-reduce(x)`): where one feeds such an instruction, or is fed by one, their ops stand either way round.
_MOVED = frozenset({"negate"})


# What XLA makes of a matmul it rewrites (into a multiply and a reduction, or a matmul of batch dimensions
# first whose result it transposes back), and the matmul's own opcodes.
_OUTER = frozenset({"broadcast", "multiply", "transpose"})
_MATMUL = frozenset({"dot", "convolution"})
# What carries a value it reads, or part of it, unchanged.
_CARRIERS = frozenset({"bitcast", "copy", "fusion", "reshape", "slice", "transpose"})


def _moved(a: str, b: str) -> bool:
    return (a in _MOVED and b not in _ELEMENTWISE) or (b in _MOVED and a not in _ELEMENTWISE)


def narrow(candidates: dict[str, list], opcodes: dict[str, str], dims: dict[str, tuple | None],
           signatures: dict[str, tuple | None], inputs: dict[str, list[str]], fused: dict[str, Fused],
           arguments: dict[str, int] | None = None, results: dict[str, int] | None = None,
           shared: frozenset = frozenset(), carried: frozenset | set = frozenset(),
           columns: dict[str, tuple] | None = None, taken_from: dict[str, str] | None = None,
           made_by: dict[str, str] | None = None) -> dict[str, list]:
    """Each keyed instruction's candidate ops (with `.name`, `.index`, `.upstream`, `.arguments` and `.results`,
    the bit sets of `stablehlo_ancestors`, and `.content`), narrowed by dataflow; `arguments`: each
    instruction's entry parameters upstream (`entry_dependence`), and `results`: the entry results
    downstream of it and its copies (`entry_results`), where the text names its entry computation;
    `shared`: what two ops anywhere compute alike (`DumpOp.content`), which XLA may merge. Where an
    edge leaves some instruction no candidate, both its ends are left out of the narrowing (they keep
    every candidate), and what rested on them is undone."""
    # A concatenation none of whose candidates is one (or a fusion of it) XLA made to join several ops'
    # values (the operands of two matmuls that read one value, merged into one matmul): it carries one of
    # those ops' metadata, which one the text does not say. So does the matmul XLA merged.
    joins = {name for name, ops in candidates.items()
             if opcodes.get(fused[name].root if name in fused else name) == "concatenate"
             and not any(hlo_opcode(op.name) == "concatenate" for op in ops)}
    joins |= _merged_matmuls(candidates, opcodes, inputs, joins)
    # What feeds a join reaches through it what the join's other ops reach.
    feeding, pending = set(), [k for name in joins for k in inputs.get(name, ())]
    while pending:
        k = pending.pop()
        if k not in feeding:
            feeding.add(k)
            pending.extend(inputs.get(k, ()))
    cands = {}
    for name, ops in candidates.items():
        # Of its own kind, and then of its own shape and kind of number, where some candidates are.
        own = [op for op in ops if hlo_opcode(op.name) == opcodes[name]]
        # A broadcast, multiply or transpose of a matmul's metadata is XLA's rewrite of the matmul (one with a
        # dimension of size 1 into a multiply and a reduction; one whose batch dimensions are not first into
        # one that has them first and a transpose): its shape is the rewrite's, not the matmul's, and may be
        # another layer's matmul's by chance.
        shaped = bool(own) or opcodes[name] not in _OUTER or not all(hlo_opcode(op.name) in _MATMUL for op in ops)
        # A get-tuple-element's shape is its element's: where that instruction carries other metadata (a
        # multi-output fusion's member), the shape tells nothing of the op the get-tuple-element's names.
        element = inputs.get(name, [None])[0] if opcodes[name] == "gettupleelement" else None
        if element is not None and (element not in candidates
                                    or {op.index for op in candidates[element]} != {op.index for op in ops}):
            shaped = False
        own = own or list(ops)
        if dims[name] is not None and shaped:
            own = [op for op in own if op.dims and op.dims[0] == dims[name][0]] or own
            # XLA folds the transpose after a matmul into it (it swaps its operands, or a TPU convolution writes
            # its result's dimensions in any order): a matmul's shape is its op's up to their order.
            same = (lambda d: sorted(d[1:]) == sorted(dims[name][1:])) if opcodes[name] in _MATMUL \
                else (lambda d: d == dims[name])
            own = [op for op in own if op.dims and same(op.dims)] or own
        if signatures.get(name) is not None and shaped:  # and then of its own bounds or widths
            own = [op for op in own if op.signature == signatures[name]] or own
        if arguments is not None and arguments[name]:  # and then of the entry parameters it is computed from
            # (an op of a private function called twice is computed from both calls' arguments: kept)
            exact = [op for op in own if op.arguments == arguments[name] or len(op.stacks) > 1]
            # None computed from the same: XLA may have merged two ops that read one value (a matmul by a router's
            # weights and one by an expert's, of one input, made one matmul and sliced), so the instruction reads
            # more than its op; of the ops computed from some of what it is, those from the most. Not a broadcast:
            # made anew at each use, one XLA merged is computed from what each of its ops' uses is.
            within = [op for op in own if op.arguments and op.arguments & arguments[name] == op.arguments
                      and opcodes[name] != "broadcast"]
            most = max((bin(op.arguments).count("1") for op in within), default=0)
            own = exact or [op for op in within if bin(op.arguments).count("1") == most] or own
        if results is not None and results[name]:  # and then of the results it flows into (its copies' together)
            own = _of_results(own, results[name], opcodes[name], name in joins, name in feeding)
        cands[name] = own
    heroes = {name: hero for name in fused if name in cands and (hero := _hero(name, fused[name], candidates))}
    # A fusion that carries another fused instruction's metadata than its root's (an output fusion's matmul)
    # is that instruction's op and says nothing of its neighbours: what uses it is judged against its root.
    # One that carries its root's is its root's op, judged as an instruction of its own.
    elsewhere = {name for name in fused if heroes.get(name) != fused[name].root}
    # A get-tuple-element that carries other metadata than the element it takes (a multi-output fusion's: a
    # reduction's, where the element is a matmul's) is its element's value under another op's name: it says
    # nothing of its neighbours, what it feeds is judged against its element, and its own shape, parameters
    # and results are its element's: it keeps every op its metadata names, or, where that is the metadata of
    # the tuple it takes the element of (`taken_from`: XLA names a multi-output fusion's elements after it),
    # the ops that tuple keeps.
    # One whose candidates are those of what made its element (`made_by`) is that instruction's op.
    made_by = made_by or {}
    renamed = {name for name in cands if name in made_by or (
        opcodes[name] == "gettupleelement" and _renamed(name, inputs, candidates, columns or {}))}
    edges, same = [], set()  # (j, i): keyed instruction j feeds keyed instruction i; those of one op
    for name in renamed:
        cands[name] = list(candidates[name])
        tuple_ = (taken_from or {}).get(name)
        if made_by.get(name) in cands:
            edges.append((made_by[name], name))
            same.add((made_by[name], name))
        elif tuple_ in cands and {op.index for op in candidates[tuple_]} == {op.index for op in candidates[name]} \
                and (columns or {}).get(tuple_) == (columns or {}).get(name):
            edges.append((tuple_, name))
            same.add((tuple_, name))
    for i in cands:
        if i in renamed:
            continue
        if i in elsewhere:
            edges += [(heroes[i], i)] if i in heroes else []
            continue
        # Within one pass of each loop: what a loop's body hands round (`carried`) joins two passes, in which
        # every op of the body is upstream of every other.
        seen, pending = {i}, [k for k in inputs.get(i, ()) if (i, k) not in carried]
        while pending:
            j = pending.pop()
            if j in seen:
                continue
            seen.add(j)
            if j in cands and j not in elsewhere and j not in renamed:
                edges.append((j, i))
            elif j in elsewhere:  # its value is its fused root's
                pending.append(fused[j].root)
            elif j in inputs:
                pending.extend(k for k in inputs[j] if (j, k) not in carried)
    # How `j`'s op must stand to `i`'s: upstream ("<"), upstream or the same op ("<="), either way ("~"),
    # the same op ("="):
    # a fusion and the fused instruction whose metadata it carries came from one op, or an operand
    # ("operand"): a broadcast of constants or arguments is made where it is used, so it feeds its user's
    # op directly.
    # So is a broadcast that is its user's operand in the text (or a fused parameter's that stands for it).
    sources = set(cands) - {i for _j, i in edges}  # no instruction with a name stack upstream
    relation = {}
    for j, i in edges:
        if heroes.get(i) == j or (j, i) in same:
            relation[(j, i)] = "="
        elif opcodes[j] == "broadcast" and (j in sources or _operand_of(j, i, inputs, opcodes, carried)):
            relation[(j, i)] = "operand"
        elif _moved(opcodes[j], opcodes[i]):
            relation[(j, i)] = "~"
        elif opcodes[i] == opcodes[j] and opcodes[i] in _ELEMENTWISE:
            relation[(j, i)] = "<"
        else:
            relation[(j, i)] = "<="

    # An instruction that may be XLA's merge of equal computations (one of its candidates computes from
    # arguments and constants what another op anywhere computes: each layer's 1/128) is any of them: its
    # edges say nothing of which op its neighbours came from.
    # So is one computed from constants alone where none of its candidates is (a reciprocal XLA folded,
    # merged module-wide).
    # So is a join XLA made of several ops' values (`joins`): what feeds it is each of those ops'.
    merged = joins | {name for name, ops in cands.items() if any(op.content in shared for op in ops) or (
        arguments is not None and not arguments[name] and all(op.content is None for op in ops))}
    edges = [e for e in edges if not (merged & set(e)) or relation[e] == "="]
    kept, rewritten = _consistent(cands, edges, relation)
    if columns:
        kept = _by_columns(kept, {name: column for name, column in columns.items() if name not in joins},
                           [e for e in edges if not rewritten & set(e)], relation)
    alike: dict[int, int] = defaultdict(int)  # what an op computes from the values it reads -> the ops that do, as bits
    for ops in candidates.values():
        for op in ops:
            if op.number is not None:
                alike[op.number] |= 1 << op.index
    kept = _by_neighbours(kept, [e for e in edges if not rewritten & set(e)], relation, alike)
    # A multi-output fusion none of whose members alone carries its metadata (of a matmul and the multiply and
    # reduction XLA made of another, all with one name stack) came from one of those members' ops:
    # which one, the text does not say, so it keeps what each of them kept.
    for name in fused:
        if name in kept and name not in heroes and opcodes.get(fused[name].root) == "tuple":
            members = _alike(name, fused[name], candidates)
            if len(members) > 1 and all(m in kept for m in members):
                held = {op.index for m in members for op in kept[m]}
                kept[name] = [op for op in candidates[name] if op.index in held] or kept[name]
    return kept


def _merged_matmuls(candidates: dict[str, list], opcodes: dict[str, str], inputs: dict[str, list[str]],
                    joins: set) -> set:
    """The matmuls XLA merged into one (two matmuls that read one value, of the concatenation it made of their
    other operands: the MLP's `gate` and `up` weights of one line, or the cotangents of both, for their
    weights' gradients), and what carries such a matmul's value under its metadata (a bitcast of it, the
    fusion it is the root of, a slice of it another fusion takes): each computes several ops' values and
    carries one of their metadata, which one the text does not say. A concatenation XLA made is one no op's
    metadata names (a parameter's name, or none), or one of `joins`."""
    out = {name for name in candidates if opcodes[name] in _MATMUL and any(
        opcodes.get(k) == "concatenate" and (k not in candidates or k in joins) for k in inputs.get(name, ()))}
    if not out:
        return out
    held = {name: {op.index for op in ops} for name, ops in candidates.items()}

    def reaches_a_join(name: str) -> bool:  # through what carries no op's metadata (fusion parameters)
        seen, pending = {name}, list(inputs.get(name, ()))
        while pending:
            k = pending.pop()
            if k in seen:
                continue
            seen.add(k)
            if k in out and held[k] == held[name]:
                return True
            if k not in candidates:
                pending.extend(inputs.get(k, ()))
        return False

    grown = True
    while grown:
        more = {name for name in candidates if name not in out and opcodes[name] in _CARRIERS and reaches_a_join(name)}
        out |= more
        grown = bool(more)
    return out


def _by_columns(kept: dict, columns: dict, edges: list, relation: dict) -> dict:
    """`kept` with each instruction's ops narrowed to those that start at the column its stack frame names
    (`columns`: file, line and first column, as XLA's source tables keep them), where some of its ops do, with
    what computes the same from the same values as one of them (XLA merges equal ops and keeps one's columns).
    XLA may give an instruction it rewrote a neighbour's metadata: where the ops so chosen at the two ends of
    an edge no longer stand to each other as the edge says, both ends keep what they had."""
    out = dict(kept)
    for name, column in columns.items():
        ops = kept.get(name)
        at = {op.index for op in ops or () if op.fine and op.fine[:3] == column}
        if at and len(at) < len(ops):
            alike = {op.number for op in ops if op.index in at and op.number is not None}
            out[name] = [op for op in ops if op.index in at or op.number in alike]
    touching = defaultdict(list)
    for edge in edges:
        touching[edge[0]].append(edge)
        touching[edge[1]].append(edge)
    pending = deque(e for e in edges if out[e[0]] is not kept[e[0]] or out[e[1]] is not kept[e[1]])
    while pending:
        j, i = edge = pending.popleft()
        keep_j, keep_i = _supported(out[j], out[i], relation[edge])
        if len(keep_j) == len(out[j]) and len(keep_i) == len(out[i]):
            continue
        for name in edge:
            if out[name] is not kept[name]:
                out[name] = kept[name]
                pending.extend(e for e in touching[name] if e != edge)
    return out


def _by_neighbours(kept: dict, edges: list, relation: dict, alike: dict) -> dict:
    """`kept` with the ops of an instruction left with several (of one name stack, line and column: `_rotary(q)`
    and `_rotary(k)`, one function's ops called twice on one line) narrowed to those next to its neighbours' ops:
    where an edge joins it to an instruction whose ops are an operand of some of its ops and of not all, or (for
    what it feeds) have some of its ops and not all as an operand, it keeps those (an operand's operand is not
    enough: XLA drops what computes nothing, a concatenation with an empty array, and then merges equal slices
    of another spelling, so that the op next to a neighbour's may be another than the instruction's).
    Everything of a backward pass is downstream of everything of the forward, so being upstream tells the
    backward of `_rotary(q)` from that of `_rotary(k)` nothing; what each reads next does. An op stands for every
    op that computes the same from the same values (`alike`: XLA merges them, one slice of two). What that narrows
    narrows its neighbours as the edges say. Where an edge is left with no pair, XLA rewrote the graph there
    beyond what the rule assumes: its ends keep what they had and say nothing of their neighbours, and the
    narrowing starts again without them; after a few such restarts, nothing is narrowed."""
    frozen: set = set()
    for _attempt in range(8):
        out, broken = _next_to(kept, [e for e in edges if not frozen & set(e)], relation, alike)
        if not broken:
            return out
        frozen |= broken
    return kept


def _next_to(kept: dict, edges: list, relation: dict, alike: dict) -> tuple[dict, set]:
    """`_by_neighbours`' narrowing over `edges`, and the ends of the edges it left with no pair."""
    touching = defaultdict(list)
    for edge in edges:
        touching[edge[0]].append(edge)
        touching[edge[1]].append(edge)
    out = dict(kept)

    def mask_of(ops) -> int:
        mask = 0
        for o in ops:
            mask |= alike[o.number] if o.number is not None else 0
            mask |= 1 << o.index
        return mask

    pending = deque(sorted({name for edge in edges for name in edge if len(kept[name]) > 1}))
    queued = set(pending)

    def narrowed(name, ops):
        out[name] = ops
        for edge in touching[name]:
            for other in edge:
                if other != name and len(out[other]) > 1 and other not in queued:
                    pending.append(other)
                    queued.add(other)

    while pending:
        name = pending.popleft()
        queued.discard(name)
        ops = out[name]
        for edge in touching[name]:
            j, i = edge
            if len(ops) < 2 or _chained(ops):
                break
            if relation[edge] not in ("<", "<="):  # not one op reading another's value
                continue
            if i == name:  # what feeds it: its ops that read one of j's ops next
                mask = mask_of(out[j])
                close = [c for c in ops if c.operands & mask]
            else:  # what it feeds: its ops that i's ops read next
                reached = 0
                for o in out[i]:
                    reached |= o.operands
                close = [c for c in ops if reached & mask_of([c])]
            if close and len(close) < len(ops):
                ops = close
        if len(ops) < len(out[name]):
            narrowed(name, ops)
        for edge in touching[name]:  # and what its ops allow its neighbours, as the edges say
            j, i = edge
            keep_j, keep_i = _supported(out[j], out[i], relation[edge])
            if not keep_j or not keep_i:
                return out, set(edge)
            for end, keep in ((j, keep_j), (i, keep_i)):
                if len(keep) < len(out[end]):
                    narrowed(end, keep)
    return out, set()


def _chained(ops: list) -> bool:
    """Whether one of `ops` reads another: XLA may have made one instruction of both (reassociated `x * a * b`
    into `x * (a * b)`), which then reads what the first of them read."""
    mask = 0
    for op in ops:
        mask |= 1 << op.index
    return any(op.operands & mask for op in ops)


def _renamed(name: str, inputs: dict[str, list[str]], candidates: dict[str, list], columns: dict) -> bool:
    """Whether a get-tuple-element takes an element keyed with other ops than its own, or with other columns."""
    element = inputs.get(name, [None])[0]
    return element in candidates and (
        {op.index for op in candidates[element]} != {op.index for op in candidates[name]}
        or columns.get(element, columns.get(name)) != columns.get(name))


def _operand_of(j: str, i: str, inputs: dict[str, list[str]], opcodes: dict[str, str], carried) -> bool:
    """Whether `j` is an operand of `i` in one pass: directly, or through the parameters that stand for it."""
    seen, pending = set(), [k for k in inputs.get(i, ()) if (i, k) not in carried]
    while pending:
        k = pending.pop()
        if k == j:
            return True
        if k not in seen and opcodes.get(k) == "parameter":
            seen.add(k)
            pending.extend(m for m in inputs.get(k, ()) if (k, m) not in carried)
    return False


def _of_results(ops: list, reached: int, opcode: str, joins: bool = False, feeds_a_join: bool = False) -> list:
    """Of `ops`, those that flow into the results `reached` (bits of main's results): the instruction's own
    and its copies' together. Their premise is that every copy XLA made of the op is found; one it split off
    unseen reaches only part of what the op reaches. So where none reaches the same, those that reach more
    (a part of one of them); and a broadcast, which XLA makes anew where each use is (its copies may differ
    in shape), keeps those that reach more beside those that reach the same: it decides nothing between them.
    Where several ops each reach part of them and together all, XLA may have merged what each made: those too.
    An op of a private function called twice reaches both calls' results: kept. A join XLA made of several ops'
    values (`joins`) reaches part of what each of them reaches; what feeds one (`feeds_a_join`) reaches through it
    what the join's other ops reach (the merged matmul of the MLP's two weight gradients: the `gate` branch's
    backward reaches `up`'s gradients), so where none reaches the same, those that reach part of its results
    beside those that reach more."""
    same = [op for op in ops if op.results == reached or len(op.stacks) > 1]
    wider = [op for op in ops if op.results & reached == reached and op.results != reached]
    if not same:
        # XLA also merges what two ops' rewrites made alike (one broadcast of a cotangent for both gradients of a
        # batched matmul XLA rewrote into multiplies): the ops that each reach part, together all, of its results
        # are as likely as one that reaches more. A concatenation XLA made joins several ops' values, each of
        # which may also flow elsewhere: those that reach part of its results, whatever else they reach.
        parts = [op for op in ops if op.results and (
            op.results & reached and op.results & reached != reached if joins
            else not op.results & ~reached)]
        together = 0
        for op in parts:
            together |= op.results
        if len(parts) > 1 and together & reached == reached:
            return [op for op in ops if op in parts or op in wider]
        if feeds_a_join:
            wider += [op for op in ops if op.results & reached and op not in wider]
        return wider or ops
    return same + wider if opcode == "broadcast" else same


def _hero(fusion: str, computation: Fused, candidates: dict[str, list]) -> str | None:
    """The fused instruction whose metadata XLA gave `fusion`: its root where that carries the same (a loop
    fusion), else the one member that does (an output fusion's convolution, a reduction), looking into
    nested fusions only where none of its own members does. None where it is not one instruction."""
    found = _alike(fusion, computation, candidates)
    return found[0] if len(found) == 1 else None


def _alike(fusion: str, computation: Fused, candidates: dict[str, list]) -> list[str]:
    """The fused instructions that carry `fusion`'s metadata: its root where that does, else its members that
    do, else its nested fusions' members that do."""
    same = {op.index for op in candidates[fusion]}

    def alike(names) -> list[str]:
        return [n for n in names if n != fusion and n in candidates and {op.index for op in candidates[n]} == same]

    if alike([computation.root]):
        return [computation.root]
    for names in (computation.members, computation.members + computation.nested):
        found = alike(names)
        if found:
            return found
    return []


def _supported(before: list, after: list, how: str) -> tuple[list, list]:
    """The candidates of an edge's two ends that have a partner at the other end: `after` (of the using
    instruction) those with an op of `before` standing to them as `how` says, and `before` those with a
    kept op of `after` they so stand to. Ops stand as: upstream ("<": a bit of the later op's `upstream`),
    upstream or the same op ("<="), the same op ("="), or an operand or an operand's operand ("operand":
    XLA merges chained broadcasts into one). Each side is read once against a bit set of the other's ops,
    not pair by pair: a layer repeated twelve times gives an instruction dozens of candidates."""
    before_at = {o.index for o in before}
    if how == "=":
        kept_after = [c for c in after if c.index in before_at]
        after_at = {c.index for c in kept_after}
        return [o for o in before if o.index in after_at], kept_after
    if how == "~":
        return _either_way(before, after)
    reach = (lambda c: c.operands | c.operands2) if how == "operand" else (lambda c: c.within)
    mask = 0
    for o in before:
        mask |= 1 << o.index
    # An op stands as "<=" to itself, and as "operand" (a broadcast XLA made for the op itself); as "<", never.
    same = how in ("<=", "operand")
    kept_after = [c for c in after if reach(c) & mask or (same and c.index in before_at)]
    reached, after_at = 0, set()
    for c in kept_after:
        reached |= reach(c)
        after_at.add(c.index)
    return [o for o in before if reached >> o.index & 1 or (same and o.index in after_at)], kept_after


def _either_way(before: list, after: list) -> tuple[list, list]:
    """`_supported` for "~": the ops of each side upstream of, downstream of or the same as an op of the other."""
    def kept(ours: list, theirs: list) -> list:
        mask, below, at = 0, 0, set()
        for o in theirs:
            mask |= 1 << o.index
            below |= o.within
            at.add(o.index)
        return [c for c in ours if c.within & mask or below >> c.index & 1 or c.index in at]

    return kept(before, after), kept(after, before)


def _consistent(cands, edges, relation) -> tuple[dict, set]:
    """The candidates left once every edge has a pair beside each kept one, and the ends of the broken edges. Where an edge leaves an
    instruction no candidate, XLA rewrote the graph there (merged a common subexpression, moved an op):
    neither end says anything of its neighbours, both keep all their candidates, and what rests on them
    is rewound: every instruction pruned by one of them, or by an instruction so pruned, starts again
    from its own candidates, and the edges that touch one are looked at again. What is left is what
    narrowing afresh without the broken edges gives (the narrowest candidates every kept edge allows are
    one, whatever the order), at the cost of what the break reached: restarting from scratch after each
    break cost a 12-layer train step's module of 32,000 instructions over 600 passes over every edge."""
    start = cands
    cands = dict(cands)
    rewritten: set = set()
    touching = defaultdict(list)
    for edge in edges:
        touching[edge[0]].append(edge)
        touching[edge[1]].append(edge)
    narrowed: set = set()  # instructions whose candidates differ from `start`
    used = defaultdict(set)  # instruction -> the instructions whose candidates pruned its own
    users = defaultdict(set)  # and back
    # In the edges' order, so that which edge is found broken does not depend on hashing.
    pending, queued = deque(edges), set(edges)
    while pending:
        j, i = edge = pending.popleft()
        queued.discard(edge)
        if j in rewritten or i in rewritten:
            continue
        keep_j, keep_i = _supported(cands[j], cands[i], relation[edge])
        if not keep_i or not keep_j:
            rewritten.update(edge)
            tainted = _resting_on(edge, narrowed, used, users)
            for name in tainted:
                cands[name] = start[name]
                for other in used.pop(name, ()):
                    users[other].discard(name)
            narrowed -= tainted
            for name in sorted(tainted - rewritten):  # sorted: the order does not hang on hashing
                for e in touching[name]:
                    if e not in queued and not rewritten & set(e):
                        pending.append(e)
                        queued.add(e)
            continue
        for name, keep, other in ((i, keep_i, j), (j, keep_j, i)):
            if len(keep) < len(cands[name]):
                cands[name] = keep
                narrowed.add(name)
                used[name].add(other)
                users[other].add(name)
                for e in touching[name]:
                    if e != edge and e not in queued:
                        pending.append(e)
                        queued.add(e)
    return cands, rewritten


def _resting_on(edge: tuple, narrowed: set, used: dict, users: dict) -> set:
    """The ends of a broken edge and every narrowed instruction whose narrowing rests on them: pruned by
    one of them, or by an instruction so pruned, and so on. Nothing else was pruned by way of the edge:
    an instruction pruned only by instructions holding their own candidates, or narrowed by what rests
    on nothing broken, keeps what it lost."""
    seen, todo = set(edge), list(edge)
    while todo:
        for name in users.get(todo.pop(), ()):
            if name in narrowed and name not in seen:
                seen.add(name)
                todo.append(name)
    return seen
