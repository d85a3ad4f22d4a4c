"""The x-ray of a dumped module: jaxpr <-> StableHLO <-> HLO, linked by what the dumped texts carry.

A StableHLO op's location holds its name stack (`jit(f)/tanh`) and the source file and line of its
innermost frame; XLA copies both into each HLO instruction's `op_name` and `stack_frame_id`. An
HLO instruction's candidates are the StableHLO ops that carry its name stack and line, narrowed
by the two graphs' dataflow (`dumps/dataflow.py`). It is linked to one equation's ops where one op
is left, or the text proves one equation made all that are left (the jaxpr has one equation of
the primitive and the StableHLO one location for it); otherwise to the group, with the reason.
A jaxpr equation is linked to the op lines it emitted by structure (`dumps/structure.py`), at its first
line; where the jaxpr text cannot be read whole, to its primitive's key when that pairing is one-to-one
and in print order (a jaxpr without sub-jaxprs, whose StableHLO has only `main`). Every link not drawn is
counted with its reason. Nothing here imports JAX; jaxlib's MLIR and HLO bindings read the texts.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from dumpgym.dumps.dataflow import narrow
from dumpgym.ir.dataflow import (combined, entry_dependence, entry_results, hlo_dims, hlo_inputs, hlo_signature,
                                  loop_carried)
from dumpgym.ir.hlo_graph import definition_lines, reducer_regions
from dumpgym.ir.parse import hlo_op_names, jaxpr_equations, parse_hlo
from dumpgym.dumps.stablehlo import DumpOp, stablehlo_ops
from dumpgym.dumps.structure import link_equations
from dumpgym.ir.jaxpr_text import read_jaxpr
from dumpgym.dumps.folder import DumpModule

@dataclass(frozen=True)
class HloLink:
    """One HLO instruction and the StableHLO lines it came from (empty: not linked, `why` says why)."""

    line: int
    name: str
    opcode: str
    op_name: str | None
    stablehlo_lines: tuple[int, ...]
    why: str = ""  # why it is not linked
    # Set when the linked ops may be several equations' (`why` of the group): the instruction came from
    # one of them, the text cannot say which.
    group: str = ""


@dataclass
class ModuleXray:
    """A dumped module's layers as shown (StableHLO without its location tables) and the links between them."""

    stablehlo: str | None
    jaxpr_links: dict[int, tuple[int, ...]] = field(default_factory=dict)  # jaxpr line -> StableHLO lines
    jaxpr_unlinked: Counter = field(default_factory=Counter)  # why -> equations
    hlo: dict[str, list[HloLink]] = field(default_factory=dict)  # layer -> one per instruction
    sources: dict[str, bool] = field(default_factory=dict)  # source file -> exists on this machine
    notes: list[str] = field(default_factory=list)

    def groups(self) -> tuple[list[dict], dict[str, list[int]]]:
        """The links as the page's hover reads them: one group per set of StableHLO ops one equation made
        (`{"eqn", "jaxpr_lines", "stablehlo_lines"}`), and the optimised HLO lines of each (`lines_by_eqn`)."""
        ids: dict[tuple[int, ...], int] = {}
        jaxpr: dict[int, list[int]] = defaultdict(list)
        hlo: dict[int, list[int]] = defaultdict(list)
        for line, lines in sorted(self.jaxpr_links.items()):
            jaxpr[ids.setdefault(lines, len(ids))].append(line)
        for link in self.hlo.get("hlo_after", ()):
            if link.stablehlo_lines:
                hlo[ids.setdefault(link.stablehlo_lines, len(ids))].append(link.line)
        groups = [{"eqn": i, "jaxpr_lines": jaxpr.get(i, []), "stablehlo_lines": list(lines)}
                  for lines, i in ids.items()]
        return groups, {str(i): lines for i, lines in hlo.items()}

    def unlinked(self, layer: str) -> Counter:
        """Instructions of `layer` that carry an op_name but were not linked, by reason."""
        return Counter(link.why for link in self.hlo.get(layer, ()) if link.op_name and not link.stablehlo_lines)

    def coverage(self, layer: str) -> tuple[int, int, int]:
        """(linked to one equation's ops, linked to a group of ops, carrying a full name stack) instructions of `layer`."""
        named = [link for link in self.hlo.get(layer, ()) if link.op_name and link.why != _NOT_A_STACK]
        return (sum(1 for link in named if link.stablehlo_lines and not link.group),
                sum(1 for link in named if link.group), len(named))

    def groups_of(self, layer: str) -> Counter:
        """Instructions of `layer` linked to a group of ops (maybe several equations'), by reason."""
        return Counter(link.group for link in self.hlo.get(layer, ()) if link.group)


_NOT_A_STACK = ("its op_name is not a full name stack (an argument's name, a reducer's parameter, "
                "or inside a computation XLA has not inlined)")


NO_OP_CARRIES_IT = "no StableHLO op carries its name stack and source line"


_INSIDE_A_CALL = ("its op_name is a call's: XLA inlined the function and gave it the call's name stack, "
                  "so it came from one of the function's ops")


_OTHER_NUMBERS = ("no StableHLO op with its name stack and line yields its kind of number (an integer where "
                  "they yield floats): XLA gave it the metadata of ops it did not come from")


_A_COPY = ("a copy XLA made (a layout or a buffer's place changed): XLA gives some copies their operand's "
           "metadata and others none, so its op_name names no op it came from")


_COMBINED = ("XLA combined the collectives of several ops into it and kept one's metadata: it came from all of "
             "them (linked to what its operands are linked to)")

# What a fusion that only copies holds besides its parameters (`wrapped_copy`: a copy XLA wrapped alone).
_COPYING = frozenset({"copy", "bitcast"})


def _a_copy(name: str, opcodes: dict[str, str], fused: dict) -> bool:
    """Whether an HLO instruction is a copy XLA made: a `copy`, or a fusion holding only copies."""
    if opcodes[name] == "copy":
        return True
    held = {opcodes[m] for m in fused[name].members} - {"parameter"} if name in fused else set()
    return bool(held) and held <= _COPYING


def _made_for(linked: list, key_of: dict) -> set[int]:
    """The ops of `linked` that are not an operand made for another of them: a broadcast carrying the
    name stack of another primitive (`.../div`) and feeding an op of the same key is that op's
    equation's own (a lowering broadcasts a scalar operand for its op; two equations do not share one)."""
    used_by_key: dict = {}  # each key's ops' operands, as one bit set
    for c in linked:
        key = key_of.get(c.index)
        used_by_key[key] = used_by_key.get(key, 0) | c.operands
    out = set()
    for op in linked:
        key = key_of.get(op.index)
        made = (op.name == "stablehlo.broadcast_in_dim" and key is not None
                and _primitive(key[0]) != "broadcast_in_dim" and used_by_key[key] >> op.index & 1)
        if not made:
            out.add(op.index)
    return out


_EQUAL = ("other ops with its name stack and line compute the same from the same arguments and constants: XLA "
          "merges equal computations into one instruction, which keeps the metadata of one of them")


def _with_equal(linked: list, found: list) -> tuple[list, bool]:
    """`linked` and the ops of `found` that compute what one of them computes from the same arguments and
    constants (a broadcast of 0.5 in each of two layers, of Adam's bias correction for each leaf) or from the
    same values (the two `x - mean` of a layer norm), and whether there were any, beside them or among them:
    the instruction may be theirs."""
    equal = {value for op in linked for value in (op.content, op.number) if value is not None}
    have = {op.index for op in linked}
    more = [op for op in found if op.index not in have and (op.content in equal or op.number in equal)]
    numbers = [op.number for op in linked if op.number is not None]
    return linked + more, bool(more) or len(set(numbers)) < len(numbers)


def _shared_contents(ops) -> frozenset:
    """What two or more ops compute alike from arguments and constants (`DumpOp.content`): XLA may merge them."""
    counts = Counter(op.content for op in ops if op.content is not None)
    return frozenset(content for content, n in counts.items() if n > 1)


def _made_by_users(found: list, signature: tuple | None, users: list[str], by_name: dict) -> tuple[int, ...]:
    """The op lines of a constant XLA made in lowering an op (the coefficients of `erf_inv`'s polynomial), where
    that is known: it holds a value no constant its name stack names holds (their values all read), and every
    instruction that uses it is linked to the same one op among the ops that name stack reaches. Else nothing."""
    constants = [op for op in found if op.name == "stablehlo.constant"]
    if signature is None or not constants or any(op.signature is None or op.signature == signature for op in constants):
        return ()
    linked = {by_name[u].stablehlo_lines if u in by_name and not by_name[u].group else () for u in users}
    lines = next(iter(linked)) if len(linked) == 1 else ()
    return lines if lines and set(lines) <= {op.line for op in found} else ()


def _maker(name: str, inputs: dict[str, list[str]], named: dict) -> str | None:
    """The instruction that made the element a get-tuple-element takes (`inputs` names it), past what carries
    no metadata and reads one value (a convert, a fused parameter)."""
    element, seen = inputs.get(name, [None])[0], {name}
    while element is not None and element not in named and element not in seen and len(inputs.get(element, ())) == 1:
        seen.add(element)
        element = inputs[element][0]
    return element if element not in seen else None


def _is_stack(op_name: str) -> bool:
    return "/" in op_name or "(" in op_name


def _primitive(name_stack: str) -> str:
    return name_stack.rsplit("/", 1)[-1]


def _jaxpr_eqns(text: str) -> list[tuple[int, str]]:
    """(line, primitive) of each printed equation of a jaxpr."""
    return jaxpr_equations(text)


def xray_module(module: DumpModule) -> ModuleXray:
    """Link a dumped module's layers; a module without StableHLO has nothing to link through."""
    if "stablehlo" not in module.files:
        return ModuleXray(None, notes=["the folder has no StableHLO for this module, so its layers cannot be linked"])
    shown, ops = stablehlo_ops(module)
    out = ModuleXray(shown)
    keys: dict[tuple, list[DumpOp]] = defaultdict(list)  # (full stack, frame with columns) -> its ops
    for op in ops:
        for stack in op.stacks:
            if _is_stack(stack):
                keys[(stack, op.fine)].append(op)
    by_line: dict[tuple, list[tuple]] = defaultdict(list)  # (full stack, file and line) -> keys
    by_stack: dict[str, list[tuple]] = defaultdict(list)
    by_primitive: dict[str, list[tuple]] = defaultdict(list)  # primitive -> its keys, in print order
    for key in keys:
        by_line[(key[0], key[1][:2] if key[1] else None)].append(key)
        by_stack[key[0]].append(key)
        by_primitive[_primitive(key[0])].append(key)
    eqns = _jaxpr_eqns(module.text("jaxpr")) if "jaxpr" in module.files else None
    decided = _decided_keys(keys, by_primitive, eqns)
    read = read_jaxpr(module.text("jaxpr")) if eqns is not None else None
    facts = read.eqns if read is not None else None
    if facts:  # by structure (`dumps/structure.py`): each equation's own op lines, at its first line
        links = link_equations(facts, ops, read.held_in)
        for e, lines in sorted(links.lines.items()):
            out.jaxpr_links.setdefault(facts[e].jaxpr_lines[0], tuple(sorted(lines)))
        missing = len(facts) - len(links.lines)
        if missing:
            out.jaxpr_unlinked["emitted no op of its own, or its ops are not told apart from another equation's "
                               "by the order of its primitive's equations and op runs"] += missing
    elif eqns is not None:
        _link_jaxpr(out, module.text("jaxpr"), eqns, keys, by_primitive, decided, ops)
    else:
        out.notes.append("no jaxpr in the folder for this module: a name stack shared by two ops of one kind "
                         "is not linked, and the jaxpr layer is not shown")
    for layer in ("hlo_before", "hlo_after"):
        if layer in module.files:
            out.hlo[layer] = _link_hlo(module, layer, ops, keys, by_line, by_stack, decided)
    frames = {op.frame[0] for op in ops if op.frame}
    from pathlib import Path

    out.sources = {name: Path(name).is_file() for name in sorted(frames)}
    if ops and all(op.frame is None for op in ops if op.stacks):
        out.notes.append("the StableHLO carries no source lines (JAX older than 0.4.36?): links use name stacks alone")
    return out


# A name in a name stack that is not its equation's primitive: the lowering of these primitives names
# its ops so (a `scan` lowers to a `while` whose ops carry `.../while`).
_NAMED_BY_LOWERING = {"while": ("while", "scan")}


def _decided_keys(keys, by_primitive, eqns) -> dict[tuple, str]:
    """Each key -> "" where the text proves one equation made all its ops, else why it may hold several.

    Proof is one of: the key has a single op; or the jaxpr has one equation of the primitive (of the
    primitives whose lowering names it, `_NAMED_BY_LOWERING`) and the StableHLO one location of it.
    Anything else (a Python loop, or one library call making four `mul`s on one line) may be several
    equations: links to it are drawn as links to the group, unless dataflow tells its ops apart."""
    counts = Counter(p for _line, p in eqns) if eqns is not None else None
    out = {}
    for key, key_ops in keys.items():
        primitive = _primitive(key[0])
        n = sum(counts.get(p, 0) for p in _NAMED_BY_LOWERING.get(primitive, (primitive,))) if counts else 0
        if len(key_ops) == 1:
            out[key] = ""
        elif counts is not None and n == 1 and len(by_primitive[primitive]) == 1:
            out[key] = ""
        elif counts is not None:
            out[key] = (f"{n} {primitive} equation(s) in the jaxpr, "
                        f"{len(by_primitive[primitive])} {primitive} source location(s) in the StableHLO")
        else:
            out[key] = f"{len(key_ops)} ops share one name stack and source location, and the folder has no jaxpr"
    return out


def _link_jaxpr(out: ModuleXray, text: str, eqns, keys, by_primitive, decided, ops) -> None:
    nested = text.count("{ lambda") > 1
    functions = {op.function for op in ops}
    by_primitive_eqns: dict[str, list[int]] = defaultdict(list)
    for line, primitive in eqns:
        by_primitive_eqns[primitive].append(line)
    for primitive, lines in by_primitive_eqns.items():
        primitive_keys = by_primitive.get(primitive, [])
        if not primitive_keys:
            out.jaxpr_unlinked["no StableHLO op carries its primitive's full name stack (lowered to nothing, "
                               "or inside a call)"] += len(lines)
            continue
        if len(lines) != len(primitive_keys) or any(decided[k] for k in primitive_keys):
            out.jaxpr_unlinked["its primitive's equations and StableHLO locations do not pair one to one"] += len(lines)
            continue
        if len(lines) > 1 and (nested or functions != {"main"}):
            out.jaxpr_unlinked["several equations of its primitive, in nested jaxprs: print order is not "
                               "emission order"] += len(lines)
            continue
        for line, key in zip(lines, primitive_keys):
            out.jaxpr_links[line] = tuple(sorted({op.line for op in keys[key]}))


# A reduction's combiner region: XLA keeps one copy of equal regions for several reducers, so the tag its
# instructions carry names one of them, not the one that applies it (docs/corpus.md, rule 5). Not linked.
# It is linked, as a group, to what the reducers that apply it are linked to.
_REDUCERS = frozenset({"stablehlo.reduce", "stablehlo.reduce_window", "stablehlo.scatter", "stablehlo.select_and_scatter",
                       "stablehlo.all_reduce", "stablehlo.reduce_scatter", "stablehlo.sort"})
_IN_A_REGION = "in a reducer's region, which XLA may share among reducers: linked to the reducers that apply it"
_NO_REDUCER = "in a reducer's region, whose reducers are not linked"


def _link_hlo(module: DumpModule, layer: str, ops, keys, by_line, by_stack, decided) -> list[HloLink]:
    text = module.text(layer)
    hlo = parse_hlo(text, module.files[layer])
    lines = definition_lines(text)[0]
    # instruction -> (op_name, file and line); -> file, line and first column of its frame. Not the last
    # column: XLA's table keeps one location per function, line and first column, the first it met (`a * b`
    # and `a * b * c` are one), so that column names one of the ops that start there.
    named, columns = {}, {}
    for _c, name, op_name, frame in hlo_op_names(hlo, columns=True):
        named[name] = op_name, frame[:2] if frame else None
        if frame and len(frame) == 5:
            columns[name] = frame[:3]
    regions: dict[str, list[str]] = defaultdict(list)  # region -> the instructions that apply it
    for caller, region in reducer_regions(text):
        regions[region].append(caller)
    rows, candidates, opcodes, dims, signatures, inside_a_call, merged = [], {}, {}, {}, {}, set(), set()
    users_of: dict[str, list[str]] = {}  # a constant -> the instructions that use it
    taken_from: dict[str, str] = {}  # a get-tuple-element -> the instruction whose element it takes
    combined_ops: dict[str, tuple[list, list[str]]] = {}  # a combined collective -> (its ops, its operands)
    inputs, fused = hlo_inputs(hlo)
    for computation in hlo.computations():
        for instruction in computation.instructions():
            opcodes[instruction.name] = str(instruction.opcode).removeprefix("HloOpcode.k").lower()
    for computation in hlo.computations():
        for instruction in computation.instructions():
            name = instruction.name
            dims[name], signatures[name] = hlo_dims(instruction), hlo_signature(instruction)
            if name not in lines:
                continue
            op_name, frame = named.get(name, (None, None))
            why, found_keys = "", []
            if op_name is None:
                why = "no op_name: made by XLA"
            elif computation.name in regions:
                why = computation.name  # linked below, once its reducers are
            elif not _is_stack(op_name):
                why = _NOT_A_STACK
            elif _a_copy(name, opcodes, fused):
                why = _A_COPY
            elif ";" in op_name:  # XLA merged instructions of several ops and joined their op_names
                found_keys = [key for part in op_name.split(";") for key in by_stack.get(part, [])]
                merged.add(name)
                why = "" if found_keys else NO_OP_CARRIES_IT
            else:
                if frame is None:  # an HLO without stack frames (JAX before 0.9): the name stack alone
                    found_keys = by_stack.get(op_name, [])
                else:  # ops in a private function have no file location of their own: the stack alone then
                    found_keys = by_line.get((op_name, frame)) or by_line.get((op_name, None), [])
                calls_only = found_keys and all(op.name == "func.call" for key in found_keys for op in keys[key])
                if not found_keys:
                    why = NO_OP_CARRIES_IT
                else:
                    found_ops = list({op.index: op for key in found_keys for op in keys[key]}.values())
                    if calls_only and opcodes[name] != "call":
                        # XLA inlined the function and gave what had no metadata of its own the call's.
                        callees = {op.callee for op in found_ops}
                        found_ops = [op for op in ops if op.function in callees]
                        inside_a_call.add(name)
                    if dims[name] and all(op.dims for op in found_ops) and \
                            not any(op.dims[0] == dims[name][0] for op in found_ops):
                        why = _OTHER_NUMBERS
                    elif combined(instruction):  # linked below, once what it combines is
                        combined_ops[name] = (found_ops, [o.name for o in instruction.operands()])
                    else:
                        candidates[name] = found_ops
            rows.append((name, op_name, why, found_keys))
            if opcodes[name] == "constant":
                users_of[name] = [u.name for u in instruction.users()]
            elif opcodes[name] == "gettupleelement":
                taken_from[name] = instruction.operands()[0].name
    # A get-tuple-element of a multi-output fusion takes the value one fused instruction made, but XLA names every
    # element after the fusion (the element `_rotary(k)`'s subtraction made carries `_rotary(q)`'s name stack): it
    # is the op of what made its element, followed through what carries no metadata (a convert).
    # Where that instruction is linked otherwise (XLA merged it from several ops' instructions), it is linked so.
    made_by, made_elsewhere = {}, {}
    for name, tuple_ in taken_from.items():
        if tuple_ in fused and opcodes.get(fused[tuple_].root) == "tuple":
            element = _maker(name, inputs, named)
            if element in named and element not in candidates:
                made_elsewhere[name] = element
                candidates.pop(name, None)
            elif element in candidates and name in candidates:
                made_by[name] = element
                candidates[name] = candidates[element]
                if element in inside_a_call:
                    inside_a_call.add(name)
                if element in columns:
                    columns[name] = columns[element]
                else:
                    columns.pop(name, None)
    narrowed = narrow(candidates, opcodes, dims, signatures, inputs, fused, entry_dependence(hlo, text, inputs),
                      entry_results(hlo, text, inputs, named), _shared_contents(ops), loop_carried(hlo),
                      {name: columns[name] for name in candidates if name in columns and name not in inside_a_call},
                      taken_from, made_by)
    key_of = {op.index: key for key, key_ops in keys.items() for op in key_ops}
    links = []
    for name, op_name, why, found_keys in rows:
        found, group = (), ""
        if name in merged and found_keys:
            found = tuple(sorted({op.line for key in found_keys for op in keys[key]}))
            group = "XLA merged it from instructions of several ops (its op_name joins their name stacks with ';')"
        elif name in combined_ops:
            found, group = (), _COMBINED  # its operands' ops, once they are linked
        elif name in candidates:
            linked, equal = _with_equal(narrowed[name], candidates[name])
            found = tuple(sorted({op.line for op in linked}))
            held = {key_of[op.index] for op in linked if op.index in key_of} or set(found_keys)
            if equal:
                group = _EQUAL
            elif len(_made_for(linked, key_of)) == 1:
                group = ""
            elif name in inside_a_call:
                group = _INSIDE_A_CALL
            elif len(held) > 1:
                group = ("its name stack and line stand for several StableHLO locations, which neither its columns nor "
                         "the dataflow tell apart")
            else:
                group = decided[next(iter(held))]
        links.append(HloLink(lines[name], name, opcodes[name], op_name, found, why, group))
    by_name = {link.name: link for link in links}
    for i, link in enumerate(links):
        if link.name in users_of and link.group and link.name in candidates:
            lines_of = _made_by_users(candidates[link.name], signatures[link.name], users_of[link.name], by_name)
            if lines_of:
                links[i] = by_name[link.name] = HloLink(link.line, link.name, link.opcode, link.op_name, lines_of)
    for i, link in enumerate(links):
        if link.name in combined_ops:
            own, operands = combined_ops[link.name]
            found = tuple(sorted({n for o in operands if o in by_name for n in by_name[o].stablehlo_lines}
                                 | {op.line for op in own}))
            links[i] = by_name[link.name] = HloLink(link.line, link.name, link.opcode, link.op_name, found, "",
                                                   _COMBINED)
    for i, link in enumerate(links):
        if link.name in made_elsewhere and made_elsewhere[link.name] in by_name:
            maker = by_name[made_elsewhere[link.name]]
            links[i] = by_name[link.name] = HloLink(link.line, link.name, link.opcode, link.op_name,
                                                   maker.stablehlo_lines, maker.why, maker.group)
    # The StableHLO ops that hold a reducer's region, each with its region's ops (what links to it).
    holders = [op for op in ops if op.name in _REDUCERS]
    on_line = defaultdict(list)
    for op in ops:
        on_line[op.line].append(op)
    reducers = [[h] + [op for op in on_line[h.line] if h.upstream >> op.index & 1] for h in holders]
    for i, link in enumerate(links):
        if link.why in regions:
            callers = [by_name[caller] for caller in regions[link.why] if caller in by_name]
            found = tuple(sorted({n for caller in callers for n in caller.stablehlo_lines}))
            # One reducer's ops, said exactly by every reducer that applies the region: its holder's.
            one = all(c.stablehlo_lines and not c.group and c.stablehlo_lines == callers[0].stablehlo_lines
                      for c in callers)
            if not found and len(reducers) == 1:
                # The module has one reducer (XLA's own, such as a reduce-window it made, carry no
                # metadata): every region came from it.
                found, one = tuple(sorted({op.line for op in reducers[0]})), True
            links[i] = (HloLink(link.line, link.name, link.opcode, link.op_name, found, "",
                                "" if one else _IN_A_REGION) if found
                        else HloLink(link.line, link.name, link.opcode, link.op_name, (), _NO_REDUCER, ""))
    links.sort(key=lambda link: link.line)
    return links
