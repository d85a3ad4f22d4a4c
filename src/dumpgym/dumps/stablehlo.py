"""The StableHLO ops of a dumped module, each with what links it: its line in the StableHLO as shown
(printed without locations), its name stacks made whole as XLA makes them when it inlines a private
function or a region, the file, line and columns of its frame, and its place in the dataflow.

Read through jaxlib's MLIR bindings (`ir/parse.py`: `located_ops`); `dumps/xray.py` links HLO instructions and jaxpr
equations to these ops.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from dumpgym.ir.dataflow import op_signature, result_dims, stablehlo_ancestors, value_contents
from dumpgym.ir.parse import located_ops
from dumpgym.dumps.folder import DumpModule

# Ops that only hold a module together: no equation emits them.
STRUCTURAL = frozenset({"builtin.module", "func.func", "func.return", "stablehlo.return", "sdy.return",
                        "sdy.mesh"})


@dataclass
class DumpOp:
    """A StableHLO op of a dump: its line as shown, its full name stacks, its frame and its place in the dataflow."""

    name: str
    line: int
    function: str
    stacks: tuple[str, ...]  # its full name stacks: one per call of the private function it sits in
    frame: tuple[str, int] | None  # file and line of its innermost frame (what HLO's stack frames keep)
    fine: tuple | None  # that frame with its columns (what tells two equations on one line apart)
    callee: str | None = None  # for a `func.call`: the function it calls
    index: int = -1  # its place in the module's pre-order walk (structural ops counted)
    upstream: int = 0  # the walk indices of every op upstream of it, as a bit set (`dump_dataflow`)
    within: int = 0  # and of those upstream of it within one pass of each loop around it
    operands: int = 0  # the walk indices of the ops whose results are its operands, as a bit set
    operands2: int = 0  # and of their operands
    arguments: int = 0  # the numbers of `main`'s arguments upstream of it, as a bit set
    results: int = 0  # the numbers of `main`'s results downstream of it, as a bit set
    content: int | None = None  # what it computes, where that is from arguments and constants alone (`value_contents`)
    number: int | None = None  # what it computes from the values it reads, as `value_contents` numbers it
    dims: tuple | None = None  # its one result's kind of number and shape (None: several, or not a tensor)
    signature: tuple | None = None  # a slice's or pad's operand shape and attributes (`op_signature`)
    facts: dict = field(default_factory=dict)  # what the record keeps of it beside its name and line (`op_facts`)


def stablehlo_ops(module: DumpModule) -> tuple[str, list[DumpOp]]:
    """The StableHLO as shown (printed without locations) and its ops, each with its line there and its keys."""
    path = module.files["stablehlo"]
    shown, keyed, lines, walked, facts, dumped = located_ops(module.text("stablehlo"), path)  # `dumped` holds the ops
    ops = _full_stacks(keyed, lines)
    upstream, operands, operands2, arguments, results, within = stablehlo_ancestors(walked)
    contents, numbers = value_contents(walked)
    for op in ops:
        op.upstream, op.operands, op.operands2 = upstream[op.index], operands[op.index], operands2[op.index]
        op.within = within[op.index]
        op.arguments, op.results, op.content = arguments[op.index], results[op.index], contents[op.index]
        op.number = numbers[op.index]
        op.dims = result_dims(walked[op.index])
        op.signature = op_signature(walked[op.index])
        op.facts = facts[op.index]
    del dumped  # read to the end: the ops may go with it
    return shown, ops


def _full_stacks(keyed: list, lines: list) -> list[DumpOp]:
    """Each op with its name stacks as XLA spells them: a stack that does not start at the module's root
    (`jit(f)`) is relative to the op holding its region (`sdy.manual_computation`), or to each call of
    the private function it sits in (`jit(f)/while/body/closed_call` + `/add`)."""
    holder: list[int | None] = []
    last_at: dict[int, int] = {}
    for i, (*_rest, depth) in enumerate(keyed):
        holder.append(last_at.get(depth - 1))
        last_at[depth] = i
    main_stacks = [k[1] for k, (_n, _l, function) in zip(keyed, lines) if function == "main" and k[1]]
    roots = Counter(stack.split("/", 1)[0] for stack in main_stacks if "(" in stack.split("/", 1)[0])
    root = roots.most_common(1)[0][0] if roots else None
    calls_to = defaultdict(list)
    for i, k in enumerate(keyed):
        if k[4]:
            calls_to[k[4]].append(i)
    memo: dict[int, tuple[str, ...]] = {}

    def full(i: int, seen: frozenset = frozenset()) -> tuple[str, ...]:
        if i in memo:
            return memo[i]
        if i in seen:
            return ()
        own = keyed[i][1]
        if own is None or root is None:
            out = ()
        elif own == root or own.startswith(root + "/"):
            out = (own,)
        else:
            h = holder[i]
            if h is not None and keyed[h][0] != "func.func":
                bases = full(h, seen | {i})
                held = keyed[h][1]
                if held and own.startswith(held + "/"):
                    # Relative to what holds its holder, not to the holder: a loop's body in a private
                    # function is `while/body/...` beside its `while`.
                    bases = tuple(b.removesuffix("/" + held) if b != held else "" for b in bases)
            else:
                function = lines[i][2]
                bases = tuple(b for c in calls_to.get(function, ()) for b in full(c, seen | {i}))
            out = tuple(dict.fromkeys(_join(b, own) for b in bases))
        memo[i] = out
        return out

    return [DumpOp(name, line, function, full(i), frame, fine, callee, i)
            for i, ((name, _stack, frame, fine, callee, _depth), (_n, line, function)) in enumerate(zip(keyed, lines))
            if name not in STRUCTURAL]


def _join(prefix: str, own: str) -> str:
    if not own:  # a call made without a name of its own (jit(_uniform) calling threefry2x32)
        return prefix
    return f"{prefix}/{own}" if prefix else own
