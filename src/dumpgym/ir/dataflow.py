"""The dataflow of a dumped module's two graphs, as the texts and bindings give it: each StableHLO op's
ancestors, result dims and slice/pad signature (jaxlib's MLIR bindings: operands, block arguments,
regions), and each HLO instruction's inputs, fused computations and signature (XLA's HLO bindings for
operands; which computations an instruction calls, a parameter's number and a tuple index are not
reached by the bindings and are read from the printed instruction). `dumps/dataflow.py` narrows the
links with it."""
from __future__ import annotations

import functools
import re
from collections import defaultdict
from dataclasses import dataclass

from dumpgym.ir.hlo_graph import PARAMETER_RE

# The attributes that tell ops of one kind apart where XLA keeps them as the StableHLO op had them (a
# slice's bounds, a pad's widths): the MLIR attributes, in the order `hlo_signature` reads the HLO's.
_SIGNATURES = {"stablehlo.slice": ("start_indices", "limit_indices", "strides"),
               "stablehlo.pad": ("edge_padding_low", "edge_padding_high", "interior_padding")}


# Results of a region-holding op come from its regions' terminators; a private function's from its return.
_TERMINATORS = frozenset({"stablehlo.return", "func.return", "sdy.return"})
# StableHLO op name -> the HLO opcode it converts to, where the two names differ beyond `_` and `-`.
_OPCODE_OF = {"stablehlo.dot_general": "dot", "stablehlo.broadcast_in_dim": "broadcast",
              "stablehlo.case": "conditional", "func.call": "call", "stablehlo.exponential": "exponential",
              "stablehlo.round_nearest_even": "round-nearest-even", "stablehlo.count_leading_zeros": "clz",
              "stablehlo.dynamic_update_slice": "dynamic-update-slice"}
_CALLS = re.compile(r"\b(calls|to_apply|body|condition|true_computation|false_computation)=%([\w.\-]+)")
_BRANCHES = re.compile(r"\bbranch_computations=\{([^}]*)\}")
_TUPLE_INDEX = re.compile(r"\bindex=(\d+)")
# Collectives that XLA's combiners merge (one instruction for several ops' collectives, a tuple of their
# results, the metadata of one of them); an async pair's done takes its start's tuple.
_COMBINABLE = frozenset({"kAllReduce", "kAllGather", "kReduceScatter", "kAllReduceStart", "kAllGatherStart"})
_ARRAY_SHAPE = re.compile(r"([a-z]\w*)\[([\d,]*)\](?:\{[^}]*\})? ")


def result_dims(op) -> tuple | None:
    """The kind of number and the shape of an MLIR op's one result (`("float", 64, 32)`), where it has one
    and it is a ranked tensor."""
    from jaxlib.mlir import ir

    if len(op.results) != 1:
        return None
    try:
        tensor = ir.RankedTensorType(op.results[0].type)
    except ValueError:
        return None
    return (_number_kind(str(tensor.element_type)), *tensor.shape)


_SLICE_BOUNDS = re.compile(r"\bslice=\{([^}]*)\}")
_PADDING = re.compile(r"\bpadding=(-?[\d_x-]+)")


def op_signature(op) -> tuple | None:
    """A slice's or pad's operand shape and attributes, a constant's values, an iota's shape and dimension,
    from jaxlib's MLIR bindings (None for other ops)."""
    from jaxlib.mlir import ir

    if op.name == "stablehlo.constant" and "value" in op.attributes:
        try:
            text = str(op.attributes["value"])
        except TypeError:  # a value the bindings cannot cast (a complex constant): its values decide nothing
            return None
        end = text.rfind("> : ")  # `dense<[13, 15, 26, 6]> : tensor<4xui32>`
        return _constant_signature(text[len("dense<"):end]) if text.startswith("dense<") and end > 0 else None
    if op.name == "stablehlo.iota" and len(op.results) == 1:
        try:
            shape = tuple(ir.RankedTensorType(op.results[0].type).shape)
            return ("stablehlo.iota", shape, ir.IntegerAttr(op.attributes["iota_dimension"]).value)
        except (ValueError, KeyError):
            return None
    names = _SIGNATURES.get(op.name)
    if names is None or not op.operands:
        return None
    try:
        shape = tuple(ir.RankedTensorType(op.operands[0].type).shape)
        attributes = [tuple(ir.DenseI64ArrayAttr(op.attributes[n])) for n in names]
    except (ValueError, KeyError):
        return None
    return (op.name, shape, *(_slice_bounds(*attributes) if op.name == "stablehlo.slice" else attributes))


def _slice_bounds(starts, limits, strides) -> tuple:
    """A slice's bounds as what it takes, per dimension (start, count, stride): XLA drops the stride of a
    dimension it takes one element of, and the limit past the last element taken."""
    out = []
    for start, limit, stride in zip(starts, limits, strides):
        count = max(0, -(-(limit - start) // stride))
        out.append((start, count, stride if count > 1 else 1))
    return (tuple(out),)


def _constant_signature(values: str) -> tuple | None:
    """A constant's values as `op_signature` keeps them, from their printed list (`[13, 15, 26, 6]` as MLIR prints
    it, `{13, 15, 26, 6}` as HLO does): numbers to six significant digits (the two print floats to eight or
    nine), one where all are equal (a splat); None where they are not plain numbers (hex, complex, nested)."""
    out = []
    for word in values.strip("[]{} ").split(","):
        word = word.strip()
        if word in ("true", "false"):
            out.append(float(word == "true"))
            continue
        try:
            out.append(int(word))
            continue
        except ValueError:
            pass
        try:
            out.append(float(f"{float(word):.6g}"))
        except ValueError:
            return None
    if not out:
        return None
    return ("stablehlo.constant", tuple(out) if len(set(out)) > 1 else (out[0],))


_IOTA_DIMENSION = re.compile(r"\biota_dimension=(\d+)")


def hlo_signature(instruction) -> tuple | None:
    """The same for an HLO slice, pad, constant or iota, as `op_signature` spells it; the bindings do not reach
    the bounds, widths, values or dimension, so they are read from the printed instruction, and the operand's
    shape from its own."""
    opcode = _opcode(instruction)
    if opcode == "kConstant":
        text = instruction.to_string().split(", metadata=", 1)[0]
        start = text.find(" constant(")
        return _constant_signature(text[start + len(" constant("):text.rfind(")")]) if start > 0 else None
    if opcode == "kIota":
        dims, found = hlo_dims(instruction), _IOTA_DIMENSION.search(instruction.to_string().split(", metadata=", 1)[0])
        return ("stablehlo.iota", tuple(dims[1:]), int(found.group(1))) if dims and found else None
    if opcode not in ("kSlice", "kPad") or not instruction.operands():
        return None
    operand = hlo_dims(instruction.operands()[0])
    text = instruction.to_string().split(", metadata=", 1)[0]
    if operand is None:
        return None
    if opcode == "kSlice" and (m := _SLICE_BOUNDS.search(text)):
        bounds = [[int(n) for n in b.strip(" []").split(":")] for b in m.group(1).split(",")]
        return ("stablehlo.slice", operand[1:], *_slice_bounds(tuple(b[0] for b in bounds), tuple(b[1] for b in bounds),
                                                             tuple(b[2] if len(b) > 2 else 1 for b in bounds)))
    if opcode == "kPad" and (m := _PADDING.search(text)):
        widths = [[int(n) for n in w.split("_")] for w in m.group(1).split("x")]
        return ("stablehlo.pad", operand[1:], *(tuple(w[k] if len(w) > k else 0 for w in widths) for k in range(3)))
    return None


def hlo_dims(instruction) -> tuple | None:
    """The kind of number and the shape of an HLO instruction that yields one array (`f32[64,32]{1,0}`), from
    its printed form: the bindings do not reach an instruction's shape."""
    m = _ARRAY_SHAPE.match(instruction.to_string().split(" = ", 1)[-1])
    return (_number_kind(m.group(1)), *(int(d) for d in m.group(2).split(",") if d)) if m else None


def _number_kind(dtype: str) -> str:
    """float, signed, unsigned, bool or complex, as MLIR (`bf16`, `i32`, `ui32`, `i1`) or HLO (`s32`, `u32`,
    `pred`) spells the type: XLA may widen a float (bf16 to f32) but keeps its kind."""
    if dtype in ("i1", "pred"):
        return "bool"
    if dtype.startswith(("ui", "u")):
        return "unsigned"
    if dtype.startswith(("i", "s")):
        return "signed"
    if dtype.startswith("c") or dtype.startswith("complex"):
        return "complex"
    return "float"


@functools.lru_cache(maxsize=None)  # asked of every candidate of every instruction: a 12-layer step's millions
def hlo_opcode(op_name: str) -> str:
    """The HLO opcode a StableHLO op converts to (`stablehlo.dot_general` -> `dot`)."""
    return _OPCODE_OF.get(op_name) or op_name.split(".", 1)[-1].replace("_", "-")


def stablehlo_ancestors(walked: list) -> tuple[list[int], list[int], list[int], list[int], list[int], list[int]]:
    """For each op of a pre-order walk, the walk indices of every op upstream of it, of the ops whose
    results it takes as operands, and of their operands, as bit sets; the numbers of `main`'s
    arguments upstream of it, as a bit set (XLA's entry parameter `k` is `main`'s argument `k`);
    the numbers of `main`'s results downstream of it (the entry root's operand `k` is `main`'s result `k`);
    and the walk indices of the ops upstream of it within one pass of each loop around it (`within`).

    An op's inputs are its operands' defining ops; a block argument stands for the holding op's
    operands and what its regions return (a loop carries values round), a private function's
    argument for the operands of every call to it; a region-holding op's or a call's results for
    what its regions or its callee return."""
    from jaxlib.mlir import ir

    index = {op: i for i, op in enumerate(walked)}
    functions = {op.attributes["sym_name"].value: op for op in walked if op.name == "func.func"}
    main = functions.get("main")
    calls = defaultdict(list)
    for op in walked:
        if op.name == "func.call":
            calls[ir.FlatSymbolRefAttr(op.attributes["callee"]).value].append(op)

    def definers(op, carried: bool = True) -> set[int]:
        return {i for value in op.operands for i in defined_by(value, carried)}

    def defined_by(value, carried: bool = True) -> set[int]:
        owner = value.owner
        if not isinstance(owner, ir.Block):
            owner = owner.operation
            return {index[owner]} if owner in index else set()
        holder = owner.owner
        if holder is None:
            return set()
        holder = holder.operation  # a `FuncOp` view's `.name` is its symbol, not `func.func`
        if holder.name == "func.func":
            return {i for call in calls.get(holder.attributes["sym_name"].value, ()) for i in definers(call, carried)}
        # Only a loop hands its regions' results back to their arguments (`carried`: the pass before's).
        return definers(holder, carried) | (returned(holder) if carried and holder.name == "stablehlo.while" else set())

    def returned(holder) -> set[int]:
        """The terminators of `holder`'s regions: what they return is what it yields (an edge, not a walk)."""
        return {index[op] for region in holder.regions for block in region.blocks for op in block.operations
                if op.name in _TERMINATORS and op in index}

    def arguments(op, seen=frozenset()) -> int:
        """`main`'s arguments among `op`'s operands: directly, or as what a block argument of a region or
        a private function stands for (its holder's or its calls' operands)."""
        bits = 0
        for value in op.operands:
            owner = value.owner
            if not isinstance(owner, ir.Block) or owner.owner is None:
                continue
            holder = owner.owner.operation
            if holder == main:
                bits |= 1 << ir.BlockArgument(value).arg_number
            elif holder not in seen:
                if holder.name == "func.func":
                    stands_for = calls.get(holder.attributes["sym_name"].value, ())
                else:
                    stands_for = (holder,)
                for other in stands_for:
                    bits |= arguments(other, seen | {holder})
        return bits

    # A call's result is computed from its own operands by its callee's ops: upstream of it are those
    # ops and what is upstream of its operands, not of every call's (a private function's argument
    # stands for every call's operand, so its ops are computed from all of them).
    in_function: dict[str, int] = defaultdict(int)  # function -> its ops, as a bit set
    calls_in: dict[str, set] = defaultdict(set)  # function -> the functions it calls
    current = None
    for i, op in enumerate(walked):
        if op.name == "func.func":
            current = op.attributes["sym_name"].value
        elif current is not None:
            in_function[current] |= 1 << i
            if op.name == "func.call":
                calls_in[current].add(ir.FlatSymbolRefAttr(op.attributes["callee"]).value)

    @functools.lru_cache(maxsize=None)
    def body(function: str, seen: frozenset = frozenset()) -> int:
        bits = in_function.get(function, 0)
        for other in calls_in.get(function, ()):
            if other not in seen:
                bits |= body(other, seen | {function})
        return bits

    inputs, held, inputs_within = [], [0] * len(walked), []
    for k, op in enumerate(walked):
        structural = op.name in ("func.func", "builtin.module")
        found = definers(op) if not structural else set()
        found_within = definers(op, carried=False) if not structural else set()
        if op.regions and not structural:
            found |= returned(op)
            found_within |= returned(op)
        if op.name == "func.call":
            held[k] = body(ir.FlatSymbolRefAttr(op.attributes["callee"]).value)
        inputs.append(sorted(found))
        inputs_within.append(sorted(found_within))
    direct = [definers(op) for op in walked]
    operands = [sum(1 << i for i in found) for found in direct]
    operands2 = [0] * len(walked)
    for i, found in enumerate(direct):
        for j in found:
            operands2[i] |= operands[j]
    upstream = [0] * len(walked)
    args = [arguments(op) if op.name not in ("func.func", "builtin.module") else 0 for op in walked]
    changed = True
    while changed:  # a fixed point: loops make the graph cyclic
        changed = False
        for i, found in enumerate(inputs):
            bits, reached = upstream[i] | held[i], args[i]
            for j in found:
                bits |= upstream[j] | (1 << j)
                reached |= args[j]
            if bits != upstream[i] or reached != args[i]:
                upstream[i], args[i], changed = bits, reached, True
    within = upstream if inputs_within == inputs else _closure(inputs_within, held)  # the same without a loop
    # Downstream, a private function's argument stands for nothing: what flows out of a call flows back
    # to that call's operands alone, not to every call's (twelve layers calling `silu` stay twelve).
    local = [{i for value in op.operands if not _in_function(value) for i in defined_by(value)}
             if op.name not in ("func.func", "builtin.module") else set() for op in walked]
    for k, op in enumerate(walked):
        if op.regions and op.name not in ("func.func", "builtin.module"):
            local[k] |= returned(op)
        if op.name == "func.call":
            callee = functions.get(ir.FlatSymbolRefAttr(op.attributes["callee"]).value)
            local[k] |= returned(callee) if callee is not None else set()
    downstream = _downstream(dict(enumerate(local)), _main_results(main, index))
    return upstream, operands, operands2, args, [downstream[i] for i in range(len(walked))], within


def _closure(inputs: list[list[int]], held: list[int]) -> list[int]:
    """For each node of a graph given by its `inputs`, every node upstream of it (and `held`, what a call's
    callee holds), as a bit set: to a fixed point, as the walk's order is not the graph's."""
    upstream = [0] * len(inputs)
    changed = True
    while changed:
        changed = False
        for i, found in enumerate(inputs):
            bits = upstream[i] | held[i]
            for j in found:
                bits |= upstream[j] | (1 << j)
            if bits != upstream[i]:
                upstream[i], changed = bits, True
    return upstream


def _in_function(value) -> bool:
    """Whether an MLIR value is an argument of a function (not of a region inside one)."""
    from jaxlib.mlir import ir

    owner = value.owner
    return isinstance(owner, ir.Block) and owner.owner is not None and owner.owner.operation.name == "func.func"


def _main_results(main, index: dict) -> list[int | None]:
    """The walk index of the op defining each of `main`'s results, in order (None: an argument returned)."""
    from jaxlib.mlir import ir

    if main is None:
        return []
    returns = [op for block in main.regions[0].blocks for op in block.operations if op.name == "func.return"]
    if len(returns) != 1:
        return []
    out = []
    for value in returns[0].operands:
        owner = value.owner
        out.append(None if isinstance(owner, ir.Block) else index.get(owner.operation))
    return out


def _downstream(inputs: dict, results: list) -> dict:
    """For each node of a graph given by its `inputs` (in an order where most inputs come first), the
    numbers of the `results` (the nodes that yield them, in order) its value flows into, as a bit set: a
    pass over the nodes backwards at a time, to a fixed point (loops carry values round)."""
    out = dict.fromkeys(inputs, 0)
    for k, node in enumerate(results):
        if node in out:
            out[node] |= 1 << k
    keys = list(reversed(inputs))
    changed = True
    while changed:
        changed = False
        for key in keys:
            bits = out[key]
            if bits:
                for j in inputs[key]:
                    if j in out and out[j] | bits != out[j]:
                        out[j] |= bits
                        changed = True
    return out


# The opcode and operand list of a printed instruction, after its result type (whose layouts hold
# parentheses on a TPU: `f32[16,16]{0,1:T(8,128)}`): what follows them is its attributes.
_CALL_RE = re.compile(r" [a-z][\w-]*\([^()]*\)")


def _attributes(printed: str) -> str:
    """A printed instruction's attributes (`, dimensions={0}`): what follows its operand list, up to its metadata."""
    head = printed.split(", metadata=", 1)[0]
    found = _CALL_RE.search(head, head.find(" = ") + 2)
    return head[found.end():] if found else ""


def hlo_copies(hlo, text: str, named: dict) -> dict[str, int]:
    """Each HLO instruction of the entry computation and of the fusions it calls, as a number equal for the
    copies of one value: XLA duplicates a producer into each fusion that uses it, and every copy keeps its
    opcode, shape, metadata (`named`: name -> (op_name, frame)) and operands (a fused parameter stands
    for its fusion's operand). Other instructions are their own."""
    found = _ENTRY.search(text)
    computations = {c.name: list(c.instructions()) for c in hlo.computations()}
    out: dict[str, int] = {}
    if found is None or found.group(1) not in computations:
        return out

    def visit(computation: str, params: dict[int, int], seen: frozenset) -> dict[str, int]:
        classes: dict[str, int] = {}
        for instruction in computations[computation]:  # post-order: operands first
            printed = instruction.to_string()
            opcode = _opcode(instruction)
            if opcode == "kParameter":
                number = PARAMETER_RE.search(printed)
                value = params.get(int(number.group(1)), hash(("parameter", computation, number.group(1)))) \
                    if number else hash(instruction.name)
            else:
                operands = tuple(classes.get(o.name, hash(o.name)) for o in instruction.operands())
                attributes = _attributes(printed)
                value = hash((opcode, printed.split(" = ", 1)[-1].split(" ", 1)[0], named.get(instruction.name),
                              operands, attributes if opcode != "kFusion" else ""))
                called = _CALLS.search(printed.split(", metadata=", 1)[0])
                if opcode == "kFusion" and called and called.group(2) in computations and called.group(2) not in seen:
                    inner = visit(called.group(2), dict(enumerate(operands)), seen | {called.group(2)})
                    out.update(inner)
                    roots = [i for i in computations[called.group(2)]
                             if not i.users() and _opcode(i) != "kParameter"]
                    if len(roots) == 1 and _opcode(roots[0]) != "kTuple":
                        value = inner[roots[0].name]
            classes[instruction.name] = value
        return classes

    out.update(visit(found.group(1), {}, frozenset({found.group(1)})))
    return out


def entry_results(hlo, text: str, inputs: dict[str, list[str]], named: dict) -> dict[str, int] | None:
    """Each HLO instruction's entry results downstream of it and of its copies (`hlo_copies`; `named`: name
    -> (op_name, frame)), by number, as a bit set: what the op it came from flows into, where XLA split
    its uses among copies. Read through `inputs`, as `entry_dependence` reads upstream; result `k` is the
    entry root tuple's operand `k`, or the root itself where it is not a tuple (one result). None where
    the text names no entry computation."""
    found = _ENTRY.search(text)
    entry = next((c for c in hlo.computations() if c.name == found.group(1)), None) if found else None
    if entry is None:
        return None
    roots = [i for i in entry.instructions() if not i.users() and _opcode(i) != "kParameter"]
    if len(roots) != 1:
        return None
    root = roots[0]
    results = [o.name for o in root.operands()] if _opcode(root) == "kTuple" else [root.name]
    order = [i.name for c in hlo.computations() for i in c.instructions()]
    own = _downstream({name: inputs.get(name, ()) for name in order}, results)
    copies = hlo_copies(hlo, text, named)
    together: dict[int, int] = defaultdict(int)
    for name, value in copies.items():
        together[value] |= own.get(name, 0)
    return {name: together[copies[name]] if name in copies else bits for name, bits in own.items()}


@dataclass(frozen=True)
class Fused:
    """A fusion instruction's fused computation: its root (the fusion's value) and the instructions it
    holds, directly and inside nested fusions (one of them is the one whose metadata XLA gave the fusion)."""

    root: str
    members: tuple[str, ...]
    nested: tuple[str, ...]


def hlo_inputs(hlo) -> tuple[dict[str, list[str]], dict[str, Fused]]:
    """Each HLO instruction's inputs by name: its operands; for a called computation's parameter, the
    caller's operands; for a caller (fusion, call, loop, branch), the roots of what it calls.
    Reducers' regions (`to_apply` of all but a call) stay apart: their instructions are scalar plumbing. Also each
    fusion's fused computation (`Fused`)."""
    roots, params = {}, defaultdict(dict)
    printed = {}
    held: dict[str, list[str]] = defaultdict(list)  # computation -> its instructions
    for computation in hlo.computations():
        for instruction in computation.instructions():
            text = instruction.to_string()
            printed[instruction.name] = (computation.name, instruction, text)
            held[computation.name].append(instruction.name)
            # The root: what nothing in its computation uses (the printed instruction does not say ROOT).
            if not instruction.users() and not str(instruction.opcode).endswith("kParameter"):
                roots[computation.name] = instruction.name
            if str(instruction.opcode).endswith("kParameter") and (m := PARAMETER_RE.search(text)):
                params[computation.name][int(m.group(1))] = instruction.name
    inputs: dict[str, list[str]] = {}
    callers_of: dict[str, list[list[str]]] = defaultdict(list)
    bodies, fused_calls = set(), {}
    for name, (_computation, instruction, text) in printed.items():
        operands = [o.name for o in instruction.operands()]
        inputs[name] = list(operands)
        attributes = text.split(", metadata=", 1)[0]
        # A call names its callee `to_apply` too (XLA's CPU wraps a loop in one): what it applies is its value.
        calls = _opcode(instruction) == "kCall"
        called = [c for kind, c in _CALLS.findall(attributes) if kind != "to_apply" or calls]
        bodies.update(c for kind, c in _CALLS.findall(attributes) if kind == "body")
        if m := _BRANCHES.search(attributes):
            called += [c.strip().lstrip("%") for c in m.group(1).split(",") if c.strip()]
        for computation in called:
            callers_of[computation].append(operands)
            if str(instruction.opcode).endswith("kFusion") and computation in roots:
                fused_calls[name] = computation
            if computation in roots:
                inputs[name].append(roots[computation])
    for computation, numbered in params.items():
        for number, name in numbered.items():
            for operands in callers_of.get(computation, ()):
                inputs[name] += operands if len(operands) != len(numbered) else [operands[number]]
            if computation in bodies and computation in roots:  # a loop hands its body's root round
                inputs[name].append(roots[computation])
    # A get-tuple-element takes one element, not the whole tuple, where the text says which instruction yields it.
    for name, (_computation, instruction, text) in printed.items():
        if _opcode(instruction) == "kGetTupleElement" and (m := _TUPLE_INDEX.search(text.split(", metadata=", 1)[0])):
            element = _element(printed, fused_calls, roots, inputs[name][0], int(m.group(1)))
            if element is not None:
                inputs[name] = [element]

    def nested(computation: str, seen: frozenset) -> tuple[str, ...]:
        inner = [m for m in held[computation] if m in fused_calls and fused_calls[m] not in seen]
        return tuple(n for m in inner for n in (*held[fused_calls[m]], *nested(fused_calls[m], seen | {computation})))

    fused = {name: Fused(roots[computation], tuple(held[computation]), nested(computation, frozenset({computation})))
             for name, computation in fused_calls.items()}
    return inputs, fused


def loop_carried(hlo) -> set[tuple[str, str]]:
    """The inputs by which a loop hands its body's root round to its body's parameter, as (parameter, root)
    pairs of `hlo_inputs`: what one pass of a loop computes flows into the next by these alone."""
    bodies = set()
    for computation in hlo.computations():
        for instruction in computation.instructions():
            bodies.update(c for kind, c in _CALLS.findall(instruction.to_string().split(", metadata=", 1)[0])
                          if kind == "body")
    out = set()
    for computation in hlo.computations():
        if computation.name not in bodies:
            continue
        held = list(computation.instructions())
        roots = [i.name for i in held if not i.users() and _opcode(i) != "kParameter"]
        out.update((i.name, root) for i in held if _opcode(i) == "kParameter" for root in roots[:1])
    return out


def _opcode(instruction) -> str:
    return str(instruction.opcode).rsplit(".", 1)[-1]


def combined(instruction) -> bool:
    """Whether an HLO instruction is a collective XLA combined from several ops' collectives (several
    operands, a tuple of results): its metadata is one of theirs, it came from all of them."""
    return _opcode(instruction) in _COMBINABLE and len(instruction.operands()) > 1


def _element(printed: dict, fused_calls: dict, roots: dict, name: str, k: int, depth: int = 0) -> str | None:
    """The instruction whose value is element `k` of the tuple `name` yields: a tuple's operand, a
    multi-output fusion's root's operand, a combined collective's operand (reduced or gathered), an
    async done's start's. None where the text does not say."""
    if depth > 8 or name not in printed:
        return None
    instruction = printed[name][1]
    opcode, operands = _opcode(instruction), [o.name for o in instruction.operands()]
    if opcode == "kTuple" or combined(instruction):
        return operands[k] if k < len(operands) else None
    if opcode == "kFusion" and name in fused_calls:
        return _element(printed, fused_calls, roots, roots[fused_calls[name]], k, depth + 1)
    if opcode.endswith("Done") and operands:
        return _element(printed, fused_calls, roots, operands[0], k, depth + 1)
    return None


_ENTRY = re.compile(r"^ENTRY %([\w.\-]+)", re.MULTILINE)


def entry_dependence(hlo, text: str, inputs: dict[str, list[str]]) -> dict[str, int] | None:
    """Each HLO instruction's entry parameters upstream of it, by number, as a bit set (through `inputs`:
    fusion parameters, calls and loops); None where the text names no entry computation."""
    found = _ENTRY.search(text)
    if found is None:
        return None
    out: dict[str, int] = {}
    order = []
    for computation in hlo.computations():
        entry = computation.name == found.group(1)
        for instruction in computation.instructions():
            order.append(instruction.name)
            out[instruction.name] = 0
            if entry and _opcode(instruction) == "kParameter":
                number = PARAMETER_RE.search(instruction.to_string())
                if number:
                    out[instruction.name] = 1 << int(number.group(1))
    changed = True
    while changed:  # a fixed point: fused parameters take their callers' operands, loops carry values round
        changed = False
        for name in order:
            bits = out[name]
            for j in inputs.get(name, ()):
                bits |= out.get(j, 0)
            if bits != out[name]:
                out[name], changed = bits, True
    return out


def value_contents(walked: list) -> tuple[list[int | None], list[int | None]]:
    """For each op of a pre-order walk computed from `main`'s arguments and constants alone through ops of
    `main` (a reducer's region read as the names and attributes of what it holds; no loop, branch or call
    on the way), what it computes, as a number equal for two ops that compute the same (their names,
    attributes, result types and operands' contents, an argument by its number); None for every other op.
    XLA merges such equal computations into one instruction (a broadcast of Adam's bias correction for each
    of twelve layers' weights), which keeps the metadata of one of them.

    And for each op of a function's body (not a region's), a number equal for two ops that compute the same
    from the same values (a value no number is given to, such as a call's result, by the op that makes it):
    the two `x - mean` of a layer norm downstream of a call, which XLA merges as well. None for the rest."""
    from jaxlib.mlir import ir

    index = {op: i for i, op in enumerate(walked)}
    out: list[int | None] = [None] * len(walked)
    numbers: list[int | None] = [None] * len(walked)
    for i, op in enumerate(walked):  # pre-order: an operand's op comes before its user
        if op.name in ("func.func", "builtin.module", "func.call", "stablehlo.while", "stablehlo.case",
                       "stablehlo.if") or _in_region(op):
            continue
        operands, known = [], True
        for value in op.operands:
            owner = value.owner
            if isinstance(owner, ir.Block):
                holder = owner.owner.operation if owner.owner is not None else None
                if holder is None or holder.name != "func.func" or holder.attributes["sym_name"].value != "main":
                    operands = None
                    break
                operands.append(("argument", ir.BlockArgument(value).arg_number))
                continue
            j = index.get(owner.operation)
            if j is None:
                operands = None
                break
            result = ir.OpResult(value).result_number
            if out[j] is not None:
                operands.append((out[j], result))
            else:
                known = False
                operands.append(("value", numbers[j], result) if numbers[j] is not None else ("op", j, result))
        if operands is None:
            continue
        attributes = _op_attributes(op)
        held = tuple((o.name, _op_attributes(o))
                     for region in op.regions for block in region.blocks for o in block.operations)
        numbers[i] = hash((op.name, attributes, tuple(str(r.type) for r in op.results), tuple(operands), held))
        if known:
            out[i] = numbers[i]
    return out, numbers


def _op_attributes(op) -> tuple:
    """An op's attributes as text, by name: where the bindings cannot cast one (a complex constant, which an FFT
    or a complex multiply makes: `dense<(0.0,0.0)> : tensor<complex<f32>>`), the op as MLIR prints it generically,
    its values' names blanked (they differ between equal ops)."""
    try:
        return tuple(sorted((a, str(op.attributes[a])) for a in op.attributes))
    except TypeError:
        text = op.operation.get_asm(print_generic_op_form=True)
        return (("", re.sub(r"%[\w#.$-]+", "%", text)),)


def _in_region(op) -> bool:
    """Whether an op sits in a region of another op (a reducer's body, a loop's), not in a function's body."""
    parent = op.parent
    return parent is not None and parent.operation.name not in ("func.func", "builtin.module")
