"""The exact links of a module dumped without a jaxpr: each optimised instruction's one instruction of the HLO before
optimisations (`DumpFacts.before_links`), and its StableHLO ops where the x-ray links it to one op's (`stablehlo_links`),
only where the texts decide it.

XLA keeps an instruction's metadata through its passes: an optimised instruction carries the `op_name` and
`stack_frame_id` (file, line and columns) of what it came from. It is linked to an instruction before optimisations
only where exactly one of those carries its name stack and frame with an opcode it can have come from (its own; a
`bitcast` from a reshape, broadcast or transpose it relabels; a `convolution` or a `custom-call` from a `dot`, as a TPU
or a GPU writes one), of its own shape (a dot's and a relabel's aside), and no other instruction before optimisations
computes the same from the same values (XLA merges equal computations into one instruction keeping one's metadata,
so the other's line would be fused as well, unsaid). A layer's instructions named alike (a Python loop's, one
function called twice) link nowhere: the text does not decide which. Each reader is linear in its text.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict

from dumpgym.dumps.folder import DumpModule
from dumpgym.ir.dataflow import entry_dependence, entry_results, hlo_dims, hlo_inputs
from dumpgym.ir.hlo_graph import TO_APPLY_RE, definition_lines, opcode_of
from dumpgym.ir.parse import hlo_op_names, parse_hlo

# The opcodes before optimisations an optimised instruction of an opcode may have come from (else its own).
_MAY_BE = {"bitcast": frozenset({"bitcast", "reshape", "broadcast", "transpose"}),
           "convolution": frozenset({"convolution", "dot"}),
           "customcall": frozenset({"customcall", "dot"})}
# Opcodes whose result XLA may lay out otherwise than the instruction it came from (a dot computed in f32 or with its
# operands swapped; a relabel is a new shape by definition): their shape is not compared.
_ANY_SHAPE = frozenset({"bitcast", "convolution", "customcall", "dot"})
_NAME = re.compile(r"%[\w.\-]+")


def _instructions(hlo) -> dict[str, tuple[str, object]]:
    return {i.name: (c.name, i) for c in hlo.computations() for i in c.instructions()}


def value_numbers(hlo) -> dict[str, int]:
    """Each instruction's value number: two instructions share one where they compute the same from the same values
    as far as the text shows (opcode, type, attributes and operands' numbers; the computations they call or apply
    taken as equal, so that two reductions by equal regions are equal: where in doubt, equal)."""
    computations = {c.name for c in hlo.computations()}
    numbers: dict[str, int] = {}
    keys: dict[str, int] = {}
    for c in hlo.computations():
        for i in c.instructions():
            text = i.to_string().split(", metadata=", 1)[0].split(" = ", 1)[-1]
            if opcode_of(i) == "parameter":  # a computation's parameters are its own
                text = f"{c.name} {text}"

            def number(m, numbers=numbers):
                name = m.group(0)[1:]
                return "%computation" if name in computations else f"#{numbers.get(name, name)}"
            numbers[i.name] = keys.setdefault(_NAME.sub(number, text), len(keys))
    return numbers


def before_links(module: DumpModule) -> tuple[dict[str, int], tuple[int, ...]]:
    """Each optimised instruction's line (as a string) -> the one line of the HLO before optimisations it came from,
    where the texts decide it (above); instructions they leave undecided are not keys. Also the lines before
    optimisations some optimised instruction left undecided may have come from (its name stack, frame and opcode's):
    what they became is not all said by the links."""
    before_text, after_text = module.text("hlo_before"), module.text("hlo_after")
    before, after = parse_hlo(before_text, module.files["hlo_before"]), parse_hlo(after_text, module.files["hlo_after"])
    lines_before, lines_after = definition_lines(before_text)[0], definition_lines(after_text)[0]
    held_before, held_after = _instructions(before), _instructions(after)
    numbers = value_numbers(before)
    alike = Counter(numbers.values())
    by_key: dict[tuple, list] = defaultdict(list)
    named_before = _inlined(before, hlo_op_names(before, columns=True))
    for _c, name, op_name, frame in named_before:
        if frame is not None and name in lines_before:
            by_key[op_name, frame].append(held_before[name][1])
    named_after = hlo_op_names(after, columns=True)
    args_before, results_before = _flow(before, before_text, named_before)
    args_after, results_after = _flow(after, after_text, named_after)
    out, undecided = {}, set()
    for _c, name, op_name, frame in named_after:
        if frame is None or name not in lines_after:
            continue
        ins = held_after[name][1]
        opcode = opcode_of(ins)
        may_be = _MAY_BE.get(opcode, frozenset({opcode}))
        found = [b for b in by_key.get((op_name, frame), ()) if opcode_of(b) in may_be]
        maybe = found
        # Ops of one name stack and frame (a loop's layers) are told apart by the entry parameters they are computed
        # from and the entry results they flow into (the optimised instruction's copies together), as the x-ray tells
        # the StableHLO's: only those equal to the instruction's are kept
        # (where none is, XLA changed the loop's or the graph's shape there: all are, and nothing is decided).
        if len(found) > 1 and args_after.get(name):
            found = [b for b in found if args_before.get(b.name) == args_after[name]] or found
        if len(found) > 1 and results_after.get(name):
            found = [b for b in found if results_before.get(b.name) == results_after[name]] or found
        if len(found) != 1 or alike[numbers[found[0].name]] > 1 or (
                opcode not in _ANY_SHAPE and opcode_of(found[0]) not in _ANY_SHAPE and hlo_dims(ins) != hlo_dims(found[0])):
            undecided.update(lines_before[b.name] for b in maybe)
            continue
        out[str(lines_after[name])] = lines_before[found[0].name]
    return out, tuple(sorted(undecided))


def _inlined(hlo, named: list[tuple]) -> list[tuple]:
    """`hlo_op_names` with the op_names of a called function's instructions made whole, as XLA's inliner makes them:
    the call's op_name, `/`, their own (`.../while/body/closed_call` + `/dot_general`), where one `call` calls the
    function; a function called from several places keeps its own (it is several calls' ops: linked to none)."""
    own = {name: op_name for _c, name, op_name, _frame in named}
    callers: dict[str, list[tuple[str, str]]] = defaultdict(list)  # function -> (computation, call) that call it
    for c in hlo.computations():
        for i in c.instructions():
            if opcode_of(i) == "call" and (found := TO_APPLY_RE.search(i.to_string())):
                callers[found.group(1)].append((c.name, i.name))
    prefixes: dict[str, str] = {}

    def prefix(computation: str, depth: int = 0) -> str:
        if computation not in prefixes:
            calls = callers.get(computation, [])
            prefixes[computation] = ""
            if len(calls) == 1 and calls[0][1] in own and depth < 64:
                above = prefix(calls[0][0], depth + 1)
                prefixes[computation] = f"{above}/{own[calls[0][1]]}" if above else own[calls[0][1]]
        return prefixes[computation]
    return [(c, name, f"{prefix(c)}/{op_name}" if prefix(c) else op_name, frame) for c, name, op_name, frame in named]


def _flow(hlo, text: str, named) -> tuple[dict[str, int], dict[str, int]]:
    """Each instruction's entry parameters upstream and entry results downstream (of its copies together), as bit
    sets; empty where the text names no entry computation."""
    inputs, _fused = hlo_inputs(hlo)
    frames = {name: (op_name, frame[:2] if frame else None) for _c, name, op_name, frame in named}
    return (entry_dependence(hlo, text, inputs) or {}), (entry_results(hlo, text, inputs, frames) or {})


def stablehlo_links(links) -> dict[str, tuple[int, ...]]:
    """Each optimised instruction's line -> the StableHLO op lines the x-ray links it to, where the link is to one
    equation's ops (`dumps/xray.py`: no group), from its `HloLink`s."""
    return {str(link.line): tuple(link.stablehlo_lines) for link in links if link.stablehlo_lines and not link.group}
