"""A dumped jaxpr's equations linked to the StableHLO op lines they emitted, by structure.

JAX lowers a jaxpr's equations one after another, a sub-jaxpr's (a `jit`'s, a loop's body, a cond's
branches) where its container is lowered, and names each op after the primitive that emitted it:
the last name of its name stack (`jit(f)/dot_general`; a `jit` call's `jit(g)`, wrapped in the
transforms it went through, `jvp(jit(g))`). So, walking the StableHLO in that order (a private
function's ops where its first call is), an equation's ops are one run of ops carrying one name
stack and location (a container's run stays open across its body's ops), and the n-th run of a
primitive is the n-th equation of it that emitted anything. A primitive lowered through others'
(`mlir.lower_fun`: `x ** -2` as `mul` and `div`) names its ops after those, so its equation is one that
their runs may be paired with too.

Which equations emitted nothing (a no-op conversion, dead code the dump still prints), and which runs
came from no equation of the jaxpr (a scan's counter), the text does not say; so the runs of a
primitive are paired with its equations by every largest order-keeping pairing in which a run's
ops can make the equation's outputs (one of them yields an output's kind of number and shape), and
a run is linked only where all those pairings give it the same equation, inside the equation its
holder is linked to. A run left undecided inside a container (a `jit`'s function, a loop's body) is in
the container's group, which holds its body's lines, and in no equation's of the body: the group says
no more than the text does. A run no equation of its holder's body can have made (a scan's counter, the
`dynamic_slice` that reads a scan's input, outside the call of its body) is its holder's, as a traced
program's ops are, and so are the runs at a scan's place that feed its `while` (its outputs' buffers);
a constant is its first user's emitted after it. Anything else stays unlinked and counted: never a guess.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from dumpgym.dumps.stablehlo import DumpOp
from dumpgym.record.schema import EqnFact, Group

# What a name names, past the transforms around it: a jit call's `("jit", name)`, else the primitive.
_CALLS = ("jit", "pjit")
# The primitives whose equations a name of a run may be: its own, and those whose lowering uses it.
_LOWERED_AS = {"while": ("while", "scan"), "jit": ("pjit", "jit", "closed_call", "core_call")}
# Cells of the pairing table beyond which a primitive's runs are left unlinked (it costs their product).
_MAX_CELLS = 4_000_000
# The one op each of these primitives lowers to (beside broadcasts and conversions of its operands, emitted
# before it): a run of one name and place holding several of these ops is that many equations' (three
# `tanh`s of a Python loop, the `mul`s of one `jax.nn.gelu` call), each ending at its op.
_ONE_OP = {
    "add": "add", "add_any": "add", "sub": "subtract", "mul": "multiply", "div": "divide", "max": "maximum",
    "min": "minimum", "dot_general": "dot_general", "pow": "power", "rem": "remainder", "and": "and", "or": "or", "xor": "xor", "not": "not", "neg": "negate",
    "exp": "exponential", "log": "log", "tanh": "tanh", "sin": "sine", "cos": "cosine", "sqrt": "sqrt",
    "rsqrt": "rsqrt", "abs": "abs", "sign": "sign", "floor": "floor", "ceil": "ceil", "logistic": "logistic",
    "log1p": "log_plus_one", "expm1": "exponential_minus_one", "select_n": "select", "eq": "compare",
    "ne": "compare", "lt": "compare", "le": "compare", "gt": "compare", "ge": "compare",
    "convert_element_type": "convert", "atan2": "atan2", "is_finite": "is_finite", "clamp": "clamp",
    "slice": "slice", "pad": "pad", "concatenate": "concatenate", "reshape": "reshape", "squeeze": "reshape",
    "transpose": "transpose", "rev": "reverse", "iota": "iota", "broadcast_in_dim": "broadcast_in_dim",
    "dynamic_slice": "dynamic_slice", "dynamic_update_slice": "dynamic_update_slice",
}
# Primitives lowered as a chain of ops each reading the one before (`integer_pow`'s products): two equations
# of one on one line (`x ** 3`, `x ** 2` of `jax.nn.gelu`) are two chains, the second not reading the first.
_CHAINED = frozenset({"integer_pow"})
# Primitives JAX lowers, for some params, through the primitives of their implementation (`mlir.lower_fun`),
# whose ops carry those primitives' names at the equation's place, each name once: `x ** -2` as `mul`,
# `broadcast_in_dim` (a literal 1) and `div`; a gather that fills what is out of bounds (`take_along_axis`'s) as
# the mask's `ge`, `le`, `and`, `reduce_and` and the `select_n` that applies it (its broadcasts, of which it makes
# several, are left to the pairing of broadcasts). primitive -> (whether its params lower so, the names).
_LOWERED_THROUGH = {
    "integer_pow": (lambda params: params.get("y") == -2, ("mul", "broadcast_in_dim", "div")),
    "gather": (lambda params: str(params.get("mode", "")).endswith("FILL_OR_DROP"),
               ("ge", "le", "and", "reduce_and", "select_n")),
}
# Reductions, whose reducer's ops may carry the reduction's name once more (`reduce_and/reduce_and/and`): that
# region is the reduction's own run, not another equation's.
_REDUCING = ("reduce_", "argmax", "argmin", "cum")
# Containers whose lowering emits ops of its own inside its stack (a scan's counter and its compare, the
# slices that read and write its sequences: `while/body/add`), beside the call of its body (`closed_call`),
# under which every op is a body equation's. Elsewhere (a `jit`'s function) an op no equation of the body
# names came from one whose lowering names its ops otherwise (`random_bits` as threefry's): not linked.
_OWN_LOWERING = frozenset({"scan"})
_BODY_CALL = "closed_call"
# A container whose sub-jaxprs JAX lowers in another order than it prints them (params print sorted by name):
# a `while`'s `cond_jaxpr` is lowered into the loop's first region, before its `body_jaxpr`.
_LOWERED_FIRST = {"while": "cond_jaxpr"}
UNDECIDED = ("the order of its primitive's equations and op runs leaves it to more than one equation "
             "(one that emitted nothing, or a run no equation made, in between)")


@dataclass
class _Run:
    """Consecutive ops (in emission order) of one name stack and location: one equation's, or its lowering's."""

    name: str | tuple  # the primitive it names, or ("jit", function name)
    stack: str
    fine: tuple | None
    ops: list[DumpOp] = field(default_factory=list)
    holder: int | None = None  # the run it sits inside (a container's), by index
    eqn: int | None = None
    ended: bool = False  # it holds the one op its primitive lowers to (`_ONE_OP`): what follows is another's
    partial: bool = False  # of a `_ONE_OP` primitive, without its op: part of an equation's ops, not paired
    made: int = 0  # of a `_CHAINED` primitive, the walk indices of its ops as a bit set (what reads them)


@dataclass
class StructureLinks:
    """Each equation's StableHLO op lines (a container's own; `groups` adds its body's), and what was left."""

    lines: dict[int, set[int]]  # equation -> the op lines it emitted itself
    undecided: int  # op runs left unlinked because their equation could not be decided
    groups: tuple[Group, ...]
    owner: dict[int, int]  # StableHLO op line (not a constant) -> the equation that emitted it
    held: dict[int, set[int]] = field(default_factory=dict)  # container -> body lines of no known equation of it
    # A top-level equation -> its name stack, as a trace's equation holds it (`transpose(jvp())`), read from the
    # full stack of the first op run linked to it (`jit(f)/transpose(jvp())/dot_general`).
    name_stacks: dict[int, str] = field(default_factory=dict)


def link_equations(eqns: tuple[EqnFact, ...], ops: list[DumpOp],
                   held_in: dict[int, str] | None = None) -> StructureLinks:
    """Link `eqns` (read from the dumped jaxpr) to `ops` (the module's StableHLO ops) by structure; `held_in`
    (`ir/jaxpr_text.py`) names the param of its container each inner equation sits in."""
    order = _emission_order(ops)
    runs, constants = _runs(order)
    children: dict[int | None, list[int]] = defaultdict(list)
    for e in eqns:
        children[e.parent].append(e.id)
    for container, inside in children.items():
        first = _LOWERED_FIRST.get(eqns[container].primitive) if container is not None else None
        if first is not None:  # stable: print order within each param's sub-jaxpr
            inside.sort(key=lambda e: (held_in or {}).get(e) != first)
    emitted = _eqn_order(children)
    descendants = _descendants(children, eqns)
    by_name: dict = defaultdict(list)
    for i, run in enumerate(runs):
        if not run.partial:
            by_name[run.name].append(i)
    candidates = {name: [e for e in emitted if _names(eqns[e], name)] for name in {run.name for run in runs}}
    forced: dict[int, int] = {}
    for name, run_ids in by_name.items():
        forced.update(_forced(run_ids, candidates[name], runs, eqns))
    for i, run in enumerate(runs):  # holders come before what they hold
        held_by = runs[run.holder] if run.holder is not None else None
        holder = held_by.eqn if held_by is not None else None
        inside = descendants.get(holder, ()) if holder is not None else None
        eqn = forced.get(i)
        if eqn is not None and (inside is None or eqn in inside):
            run.eqn = eqn
        elif (holder is not None and eqns[holder].primitive in _OWN_LOWERING and held_by.name != _BODY_CALL
              and not any(_names(eqns[e], run.name) and _fits(eqns[e], run) for e in inside)):
            run.eqn = holder  # no equation of its holder's body makes it: the holder's lowering did
    _before_own_loops(runs, eqns)
    undecided = sum(1 for run in runs if run.eqn is None and candidates[run.name])
    lines: dict[int, set[int]] = defaultdict(set)
    owner: dict[int, int] = {}
    position = {op.index: k for k, (op, _stack) in enumerate(order)}
    run_of = {op.index: i for i, run in enumerate(runs) for op in run.ops}
    for op, users in constants:
        # Its first user emitted after it: what reads it through a private function's arguments may have been
        # emitted before, at that function's first call, by another equation.
        at = position[op.index]
        first = min((position[u] for u in users if position.get(u, -1) > at and u in run_of), default=None)
        eqn = runs[run_of[order[first][0].index]].eqn if first is not None else None
        if eqn is not None:  # in the x-ray; not an owner an HLO constant may take (XLA shares constants)
            lines[eqn].add(op.line)
    held: dict[int, set[int]] = defaultdict(set)  # a container -> lines of its body no equation of it is known for
    name_stacks: dict[int, str] = {}
    for run in runs:
        if run.eqn is not None and eqns[run.eqn].parent is None and run.eqn not in name_stacks:
            stack = _own_stack(run)
            if stack is not None:
                name_stacks[run.eqn] = stack
        if run.eqn is not None:
            for op in run.ops:
                lines[run.eqn].add(op.line)
                owner.setdefault(op.line, run.eqn)
            continue
        up = run.holder
        while up is not None and runs[up].eqn is None:
            up = runs[up].holder
        if up is not None:  # some equation of that container's body made it: its group holds it, no child's does
            held[runs[up].eqn].update(op.line for op in run.ops)
    return StructureLinks(dict(lines), undecided, _groups(eqns, lines, descendants, held), owner, dict(held),
                          name_stacks)


def _before_own_loops(runs: list[_Run], eqns) -> None:
    """Give a scan the runs its lowering emits right before its `while` (the buffers its stacked outputs are
    written into: `broadcast_in_dim`s of zeros under the scan's own stack, at its place): unlinked runs
    beside that `while`, at the same place, each feeding the `while` (or a run between that does). Each run
    is looked at once: a stretch of unlinked runs of one holder and place, then what follows it."""
    i = 0
    while i < len(runs):
        run = runs[i]
        if run.eqn is not None or run.fine is None:
            i += 1
            continue
        j = i + 1
        while j < len(runs) and runs[j].eqn is None and runs[j].holder == run.holder and runs[j].fine == run.fine:
            j += 1
        loop = runs[j] if j < len(runs) else None
        if (loop is not None and loop.name == "while" and loop.holder == run.holder and loop.fine == run.fine
                and loop.eqn is not None and eqns[loop.eqn].primitive in _OWN_LOWERING):
            fed = 0
            for op in loop.ops:
                fed |= op.operands
            for k in range(j - 1, i - 1, -1):  # from the `while` back: what feeds it, or feeds what does
                before = runs[k]
                if (before.stack.rsplit("/", 1)[0] == loop.stack.rsplit("/", 1)[0]
                        and all(fed >> op.index & 1 for op in before.ops)):
                    before.eqn = loop.eqn
                    for op in before.ops:
                        fed |= op.operands
        i = j


def _own_stack(run: _Run) -> str | None:
    """A top-level equation's name stack from its run's full stack: what stands between the module's root and
    the run's name (`jit(f)/transpose(jvp())/dot_general` -> `transpose(jvp())`), the transforms wrapping a
    call's name kept empty (`jit(f)/jvp(jit(g))` -> `jvp()`); None where the stack does not read so."""
    parts = run.stack.split("/")
    own = f"jit({run.name[1]})" if isinstance(run.name, tuple) else run.name
    last = parts[-1]
    if len(parts) < 2:
        return None
    if last != own:
        at = last.rfind(own + ")")
        closing = last[at + len(own):] if at > 0 else ""
        if not closing or closing.strip(")"):
            return None
        return "/".join([*parts[1:-1], last[:at] + closing])
    return "/".join(parts[1:-1])


def _emission_order(ops: list[DumpOp]) -> list[tuple[DumpOp, str | None]]:
    """The ops as JAX emitted them, each with its name stack there: `main`'s in order, a private function's
    where its first call is (after the call), with the stack that call gives them."""
    by_function: dict[str, list[DumpOp]] = defaultdict(list)
    for op in ops:
        by_function[op.function].append(op)
    out, expanded = [], {"main"}
    work = [(iter(by_function.get("main", ())), None)]
    while work:
        ops_left, base = work[-1]
        op = next(ops_left, None)
        if op is None:
            work.pop()
            continue
        stack = _stack_at(op, base)
        out.append((op, stack))
        if op.callee and op.callee not in expanded and stack is not None:
            expanded.add(op.callee)
            work.append((iter(by_function.get(op.callee, ())), stack))
    return out


def _stack_at(op: DumpOp, base: str | None) -> str | None:
    """The op's full name stack under the call whose stack is `base` (None: in `main`)."""
    if base is not None:
        for stack in op.stacks:
            if stack == base or stack.startswith(base + "/"):
                return stack
    return op.stacks[0] if len(op.stacks) == 1 else None


def _runs(order) -> tuple[list[_Run], list[tuple[DumpOp, list[int]]]]:
    """The op runs in emission order, each held by the open run whose stack is a prefix of its own; and
    the constants, each with the indices of its users (a literal is made where its body is lowered, so
    its name stack names the body, not the equation that reads it)."""
    users: dict[int, list[int]] = defaultdict(list)
    for op, _stack in order:
        bits = op.operands
        while bits:
            low = bits & -bits
            users[low.bit_length() - 1].append(op.index)
            bits ^= low
    runs: list[_Run] = []
    constants = []
    constant_ids = 0  # the walk indices of the constants, as a bit set
    for op, _stack in order:
        if op.name == "stablehlo.constant":
            constant_ids |= 1 << op.index
    open_runs: list[int] = []
    for op, stack in order:
        name = _named(stack)
        if op.name == "stablehlo.constant":
            constants.append((op, users.get(op.index, [])))
            continue
        if name is None:
            continue  # named by no primitive (the module's own name: a sharding constraint on an argument)
        while open_runs and not (stack == runs[open_runs[-1]].stack
                                 or stack.startswith(runs[open_runs[-1]].stack + "/")):
            open_runs.pop()
        top = runs[open_runs[-1]] if open_runs else None
        if top is not None and top.stack == stack:
            if top.fine == op.fine and not top.ended and not _starts_chain(name, op, top, constant_ids):
                top.ops.append(op)
                if name in _CHAINED:
                    top.made |= 1 << op.index
                top.ended = op.name == _main_op(name)
                continue
            open_runs.pop()  # the same name at another place (or a next equation): a run beside it
        elif (top is not None and name == top.name and isinstance(name, str) and name.startswith(_REDUCING)
              and stack == f"{top.stack}/{name}"):
            top.ops.append(op)  # its reducer's region, under its own name again (`reduce_and/reduce_and`)
            continue
        runs.append(_Run(name, stack, op.fine, [op], open_runs[-1] if open_runs else None,
                         ended=op.name == _main_op(name), made=1 << op.index if name in _CHAINED else 0))
        open_runs.append(len(runs) - 1)
    for run in runs:
        run.partial = _main_op(run.name) is not None and not run.ended
    return runs, constants


def _starts_chain(name, op: DumpOp, run: _Run, constant_ids: int) -> bool:
    """Whether `op` starts another equation of a primitive lowered as a chain of ops, each reading the one
    before (`_CHAINED`: `x ** 3` is `multiply x, x` then `multiply` of that and `x`): it reads no op of the
    run, and something besides constants (a broadcast of a literal is the chain's too)."""
    if name not in _CHAINED:
        return False
    return not op.operands & run.made and bool(op.operands & ~constant_ids)


def _main_op(name) -> str | None:
    """The op that ends an equation's run of `name`: a `jit`'s call (a call the function makes without a name
    of its own carries the same stack), or the one op of a `_ONE_OP` primitive."""
    if isinstance(name, tuple):
        return "func.call"
    one = _ONE_OP.get(name)
    return f"stablehlo.{one}" if one else None


def _named(stack: str | None):
    """What the last name of a stack names: `jit(f)/jvp(jit(g))` -> ("jit", "g"), `jit(f)/tanh` -> "tanh";
    None for the module's own (`jit(f)`) or no stack."""
    if not stack or "/" not in stack:
        return None
    name = stack.rsplit("/", 1)[1]
    while name.endswith(")") and "(" in name:
        word, inner = name.split("(", 1)
        inner = inner[:-1]
        if word in _CALLS:
            return ("jit", inner)
        if not inner:
            return None
        name = inner
    return name


def _names(eqn: EqnFact, name) -> bool:
    """Whether a run named `name` may be `eqn`'s."""
    if isinstance(name, tuple):
        return eqn.primitive in _LOWERED_AS["jit"] and eqn.params.get("name") == name[1]
    if eqn.primitive in _LOWERED_AS.get(name, (name,)):
        return True
    through = _LOWERED_THROUGH.get(eqn.primitive)
    return through is not None and through[0](eqn.params) and name in through[1]


def _kind(dtype: str) -> str:
    if dtype == "bool":
        return "bool"
    for prefix, kind in (("uint", "unsigned"), ("int", "signed"), ("complex", "complex")):
        if dtype.startswith(prefix):
            return kind
    return "float"


def _fits(eqn: EqnFact, run: _Run) -> bool:
    """Whether the run's ops can make the equation's outputs: one of them yields one of the outputs' kind
    of number and shape (where the text gives both; a typed key's data has dimensions of its own)."""
    return _can_make(_yields(run), _wanted(eqn))


def _wanted(eqn: EqnFact) -> frozenset | None:
    """The equation's outputs as (kind of number, *shape), or None where one is a typed key's."""
    if not eqn.outputs or any("<" in o.dtype for o in eqn.outputs):
        return None
    return frozenset((_kind(o.dtype), *o.shape) for o in eqn.outputs)


def _yields(run: _Run) -> frozenset | None:
    shown = frozenset(op.dims for op in run.ops if op.dims is not None)
    return shown or None


def _can_make(yields: frozenset | None, wanted: frozenset | None) -> bool:
    return yields is None or wanted is None or not yields.isdisjoint(wanted)


def _forced(run_ids: list[int], eqn_ids: list[int], runs: list[_Run], eqns) -> dict[int, int]:
    """The runs that every largest order-keeping pairing with the equations gives the same equation."""
    import numpy as np

    n, m = len(eqn_ids), len(run_ids)
    if not n or not m or n * m > _MAX_CELLS:
        return {}
    name = runs[run_ids[0]].name
    # An equation lowered through other primitives (`_LOWERED_THROUGH`) makes its outputs in one of those runs
    # at most: the others may yield anything.
    made_by = [isinstance(name, tuple) or eqns[e].primitive in _LOWERED_AS.get(name, (name,)) for e in eqn_ids]
    # Whether equation i may be paired with run j, from the few distinct outputs on either side.
    yields, wanted = {}, {}
    run_kind = np.array([yields.setdefault(_yields(runs[r]), len(yields)) for r in run_ids], dtype=np.intp)
    eqn_kind = np.array([wanted.setdefault(_wanted(eqns[e]) if direct else None, len(wanted))
                         for e, direct in zip(eqn_ids, made_by)], dtype=np.intp)
    table = np.array([[_can_make(y, w) for y in yields] for w in wanted], dtype=bool)
    fits = table[eqn_kind][:, run_kind]
    # before[i, j]: most pairs among the first i equations and j runs; after[i, j]: among the rest. A row is
    # the running maximum of what the row above allows (keep its count, or pair one more where it fits).
    before = np.zeros((n + 1, m + 1), dtype=np.int32)
    for i in range(n):
        row = before[i]
        np.maximum.accumulate(np.maximum(row[1:], row[:-1] + fits[i]), out=before[i + 1, 1:])
    after = np.zeros((n + 1, m + 1), dtype=np.int32)
    for i in range(n - 1, -1, -1):
        nxt = after[i + 1]
        step = np.maximum(nxt[:-1], nxt[1:] + fits[i])
        after[i, :-1] = np.maximum.accumulate(step[::-1])[::-1]
    best = before[n, m]
    left_out = ((before[:, :m] + after[:, 1:]) == best).any(axis=0)  # some largest pairing leaves run j out
    paired = fits & ((before[:n, :m] + 1 + after[1:, 1:]) == best)
    count = paired.sum(axis=0)
    return {run_ids[j]: eqn_ids[int(paired[:, j].argmax())]
            for j in np.flatnonzero((count == 1) & ~left_out).tolist()}


def _eqn_order(children: dict) -> list[int]:
    """Equation ids in emission order: each container's body right after it (a hoisted body is printed
    before its caller, but lowered where it is called)."""
    out, work = [], list(reversed(children.get(None, [])))
    while work:
        e = work.pop()
        out.append(e)
        work.extend(reversed(children.get(e, [])))
    return out


def _descendants(children: dict, eqns) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for e in reversed(_eqn_order(children)):
        out[e] = set(children.get(e, ()))
        for c in children.get(e, ()):
            out[e] |= out.get(c, set())
    return out


def _groups(eqns, lines: dict[int, set[int]], descendants: dict[int, set[int]], held: dict[int, set[int]]) -> tuple[Group, ...]:
    """One group per equation that emitted something: a container's holds its body's lines too (jaxpr and
    StableHLO), as a traced program's do, with those of its body whose equation is not known (`held`)."""
    out = []
    for e in eqns:
        family = [e.id, *sorted(descendants.get(e.id, ()))]
        hlo = set().union(*(lines.get(f, ()) for f in family), *(held.get(f, ()) for f in family))
        if not hlo:
            continue
        jaxpr = set()
        for f in family:
            first, last = eqns[f].jaxpr_lines
            jaxpr.update(range(first, last + 1))
        out.append(Group(e.id, tuple(sorted(jaxpr)), tuple(sorted(hlo))))
    return tuple(out)
