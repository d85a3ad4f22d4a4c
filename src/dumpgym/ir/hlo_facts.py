"""A compiled module's facts (each `Instruction`'s shape, operands, dims; buffers, shardings, loops): what it says, read once so that no later stage parses it again.

`compile_layer` (compiled/layer.py) calls `with_facts` on its one compile, with the text the record holds.
XLA's Python bindings give each instruction's operands (`HloInstruction.operands()`) and opcode, and
its shape parser (`xla_client.Shape`) and sharding parser (`xla_client.HloSharding`) read what a line
prints; the bindings expose no attributes, so the rest is read from each instruction's printed line,
narrowly: the result shape between ` = ` and the opcode, `calls=`/`to_apply=`, an entry parameter's
`parameter(n)`, op_name and `sharding={...}`, a collective's `replica_groups`, the module header's
`input_output_alias`, a computation's lines from its signature to its closing brace, a parameter's
number, a dot's dimension numbers (and the column past them, where a page cuts its line), a convolution's
`dim_labels`, window and group counts, what a while or conditional runs, and which kernel XLA chose: a
custom call's `custom_call_target` and a backend_config's emitter `"kind"`. A while's counter (start, step, bound) is read by walking the graph from its
condition's ROOT, as XLA links it.
"""
from __future__ import annotations

import dataclasses
import math
import re
from collections import namedtuple

from dumpgym.ir.hlo_graph import (CALLS_RE, OP_NAME_RE, PARAMETER_RE, TO_APPLY_RE, defined, opcode_of as _opcode,
                                  unescaped)
from dumpgym.record.typedjson import made
from dumpgym.record.schema import (Alias, Buffer, Computation, ConvDims, DotDims, EntryParameter, Instruction,
                                   ReplicaGroups, ResultShape, Sharding, WhileCounter, WindowDim)

_COMPUTATION = re.compile(r"(?:ENTRY )?%([\w.\-]+) \(")
_MEMORY_SPACE = re.compile(r"S\((\d+)\)")
# `sharding={...}` up to the next attribute (a sharding prints no `, name=` inside its braces).
_SHARDING = re.compile(r"sharding=(\{.*?\})(?=, [a-z_]+=|$)")
_IOTA = re.compile(r"<=\[([\d,]+)\](?:T\(([\d,]+)\))?")
_GROUPS = re.compile(r"replica_groups=(\{(?:\{[\d,]*\},?)*\}|\[[\d,]+\]<=\[[\d,]+\](?:T\([\d,]+\))?"
                     r"|mesh\[[^\]]*\](?:, device_ids=\([\[\]\d,T()]*\))? \{[^}]*\})")
# The mesh-axes form, `mesh['axis_0'=2,'axis_1'=4] {'axis_0'}`: a group for each place on the axes not named; the
# mesh's devices in order where they are not 0, 1, 2, ...: `device_ids=([2,4]T(1,0))` (an iota reshaped and
# transposed, as a tile assignment prints it) or `device_ids=(0,4,1,5)`.
_MESH_GROUPS = re.compile(r"mesh\[([^\]]*)\](?:, device_ids=\(((?:\[[\d,]+\](?:T\([\d,]+\))?)|[\d,]+)\))? \{([^}]*)\}")
_IOTA_IDS = re.compile(r"\[([\d,]+)\](?:T\(([\d,]+)\))?")
# `{1}: (1, {}, may-alias)`: output index, parameter number, index inside that parameter, kind.
_ALIAS_ENTRY = re.compile(r"\{([\d,\s]*)\}: \((\d+), \{([\d,\s]*)\}, ([\w-]+)\)")
_ALIAS_TABLE = re.compile(r"input_output_alias=\{ (.*?) \}(?:, [a-z_]+=|$)")
_DOT_DIMS = re.compile(r"\b(lhs_batch|lhs_contracting|rhs_batch|rhs_contracting)_dims=\{([\d,]*)\}")
_DIM_LABELS = re.compile(r"\bdim_labels=([0-9bf]+)_([0-9io]+)->([0-9bf]+)")
_WINDOW = re.compile(r"\bwindow=\{([^}]*)\}")
# A while's `condition=%c, body=%b`; a conditional's `branch_computations={%a, %b}` or true/false computations.
_CONTROL = re.compile(r"\b(?:condition|body|true_computation|false_computation)=%([\w.\-]+)"
                      r"|\bbranch_computations=\{([^}]*)\}")
_GROUP_COUNT = re.compile(r"\b(feature|batch)_group_count=(\d+)")
# A dot's operand list, where its line's dims would end were none printed.
_DOT_OPERANDS = re.compile(r" dot\(%[\w.\-]+, %[\w.\-]+\)")
_CUSTOM_CALL_TARGET = re.compile(r'custom_call_target="([^"]+)"')
# The attribute that decides a transpose's, reduce's or concatenate's result shape.
_DIMENSIONS = re.compile(r", dimensions=\{([\d,]*)\}")
_WITH_DIMENSIONS = frozenset({"transpose", "reduce", "concatenate"})
# A slice's `slice={[0:8], [128:256], [0:64:2]}`, and each axis's `[start:limit]` or `[start:limit:stride]` in it.
_SLICE = re.compile(r", slice=\{([^}]*)\}")
_SLICE_AXIS = re.compile(r"\[(-?\d+):(-?\d+)(?::(\d+))?\]")
# The kind a backend_config names where it is one of XLA's own emitters (`"kind":"__triton_gemm"`).
_BACKEND_KIND = re.compile(r'"kind":"(__[\w$]+)"')


# An instruction's row as the compiled layer finds it (`compiled.layer.layer_rows`), before its facts: an
# `Instruction`'s fields that have no default, and its `absorbed`, which `with_facts` makes it with the rest.
Row = namedtuple("Row", [*(f.name for f in dataclasses.fields(Instruction)
                           if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING), "absorbed"])
# `with_facts` unpacks a row by position: a change of `Instruction`'s fields must fail here, not mix them up.
if Row._fields != ("line", "name", "opcode", "computation", "eqns", "via", "absorbed"):
    raise ImportError(f"hlo_facts.Row's fields changed with Instruction's: {Row._fields}; update with_facts")


def with_facts(instructions: list[Row], module, text: str,
               operands: dict[str, list[str]] | None = None, dumped: bool = False
               ) -> tuple[list[Instruction], dict]:
    """The rows made `Instruction`s, with their shapes, operands and called computations, and the layer's own facts
    (`CompiledLayer` keyword arguments), read from the compile's `module` and its shown `text`. `operands`:
    each instruction's operands' names by its name, where the bindings were asked already (`CompiledGraph`).
    `dumped`: the module is a dump's, which may have no jaxpr to ask of: also read what its drills need then, each
    transpose's, reduce's and concatenate's `dimensions={...}`, a slice's bounds, and a while's counter where
    a `call` sets its start or one fusion joins its tests, with XLA's own count of its runs (a traced program's
    record keeps them once the committed corpus is made again with them)."""
    shaped = _WITH_DIMENSIONS if dumped else frozenset()
    lines = text.splitlines()
    computations = _computations(lines)
    line_of = {row.name: row.line for row in instructions}
    if operands is None:
        bound = {i.name: i for c in module.computations() for i in c.instructions()}
        operands = {name: [o.name for o in i.operands()] for name, i in bound.items()}
    shapes: dict[str, int] = {}
    printed: dict[str, str] = {}
    out = []
    for number, name, opcode_name, computation, eqns, via, absorbed in instructions:  # each a `Row`
        line = lines[number - 1]
        found = defined(line)
        if found is None or found[0] != name:
            raise RuntimeError(f"compiled HLO line {number} does not define %{name}")
        _, shape, opcode = found
        own = opcode if printed.setdefault(opcode_name, opcode) != opcode else ""
        # Made whole (every field given), not `dataclasses.replace`d: a big compile has tens of thousands.
        out.append(made(
            Instruction, line=number, name=name, opcode=opcode_name, computation=computation,
            eqns=eqns, via=via, absorbed=absorbed,
            shape=shapes.setdefault(shape, len(shapes)),
            operands=tuple(line_of[o] for o in operands[name]),
            calls=tuple(CALLS_RE.findall(line)) if "calls=" in line else (),
            to_apply=tuple(TO_APPLY_RE.findall(line)) if "to_apply=" in line else (), printed_opcode=own,
            dot=read_dot(line) if opcode_name == "dot" else None,
            convolution=read_convolution(line) if opcode_name == "convolution" else None,
            window=read_window(line) if opcode_name == "reducewindow" else (),
            parameter=int(PARAMETER_RE.search(line).group(1)) if opcode_name == "parameter" else None,
            control=control_computations(line) if opcode_name in ("while", "conditional") else (),
            custom_call_target=_first(_CUSTOM_CALL_TARGET, line) if opcode_name == "customcall" else "",
            backend_kind=_first(_BACKEND_KIND, line) if "backend_config=" in line else "", tail=read_tail(line),
            cost_estimate=read_cost_estimate(line) if opcode_name == "customcall" else {},
            dimensions=_ints(_first(_DIMENSIONS, line)) if opcode_name in shaped else (),
            slice=read_slice(line) if dumped and opcode_name == "slice" else ()))
    entry = next(c.name for c in computations if c.entry)
    buffers: dict[Buffer, int] = {}
    facts = {
        "computations": tuple(computations),
        "shapes": tuple(ResultShape(shape, tuple(buffers.setdefault(b, len(buffers)) for b in _buffers(shape)),
                                    read_arrays(shape)) for shape in shapes),
        "buffers": tuple(buffers),
        "printed_opcodes": dict(sorted(printed.items())),
        "entry_parameters": tuple(_entry_parameter(ins, lines[ins.line - 1]) for ins in out
                                  if ins.computation == entry and ins.opcode == "parameter"),
        "aliases": _aliases(lines[0]),
        "replica_groups": tuple(ReplicaGroups(ins.line, g, read_groups(g)) for ins in out
                                if (g := groups_text(lines[ins.line - 1])) is not None),
        "while_counters": _Loops(module, computations, line_of, dumped).counters(),
    }
    return out, facts


# What `memory_analysis()` reports, by the names of its fields.
_MEMORY_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes", "temp_size_in_bytes",
                  "generated_code_size_in_bytes")
_COST_KEYS = ("flops", "transcendentals", "bytes accessed", "optimal_seconds")


def xla_analyses(compiled) -> dict:
    """XLA's own totals of a compiled executable (`CompiledLayer.xla_cost`, `xla_memory`): what its
    `cost_analysis()` gives of flops, transcendentals, bytes accessed and optimal seconds (nothing where it
    returns None, as a GPU compiled without one does), and `memory_analysis()`'s sizes."""
    cost = compiled.cost_analysis() or {}
    memory = compiled.memory_analysis()
    return {"xla_cost": {k: float(cost[k]) for k in _COST_KEYS if k in cost},
            "xla_memory": {k: int(getattr(memory, k)) for k in _MEMORY_FIELDS} if memory is not None else {}}


def _computations(lines: list[str]) -> list[Computation]:
    """Each printed computation's name, first and last line (signature to closing brace) and ROOT line."""
    out, start, name = [], None, None
    for n, line in enumerate(lines, start=1):
        head = _COMPUTATION.match(line)
        if head and start is None:
            start, name = n, head.group(1)
        elif line.startswith("}") and start is not None:
            root = next(k for k in range(start, n + 1) if lines[k - 1].lstrip().startswith("ROOT "))
            out.append(Computation(name, (start, n), root, lines[start - 1].startswith("ENTRY ")))
            start = None
    return out


def read_buffer(text: str) -> Buffer | None:
    """XLA's reading of a printed array shape with its layout, or None for a tuple or a shape without one.

    XLA's Python `Layout` does not expose the memory space, so `S(n)` is read off the layout as XLA
    prints it back (`Layout.to_string()`), nothing else.
    """
    from jaxlib import xla_client  # XLA's shape parser; its Layout carries minor_to_major and tiles

    shape = xla_client.Shape(text)
    if shape.is_tuple() or "{" not in text:
        return None
    layout = shape.layout()
    space = _MEMORY_SPACE.search(layout.to_string())
    bits = layout.element_size_in_bits() or shape.numpy_dtype().itemsize * 8
    return Buffer(text, text.split("[", 1)[0], tuple(shape.dimensions()), tuple(layout.minor_to_major()),
                  tuple(tuple(t) for t in layout.tiling()), int(space.group(1)) if space else 0, bits)


def _buffers(text: str) -> tuple[Buffer, ...]:
    """A printed result shape's arrays with layouts: the result, or each member of a tuple (as XLA splits it)."""
    from jaxlib import xla_client

    shape = xla_client.Shape(text)
    members = shape.tuple_shapes() if shape.is_tuple() else [shape]
    return tuple(b for b in (read_buffer(str(m)) for m in members if not m.is_tuple()) if b is not None)


def control_computations(line: str) -> tuple[str, ...]:
    """The computations a while (condition, body) or a conditional (its branches) names, in printed order."""
    out: list[str] = []
    for single, branches in _CONTROL.findall(line):
        out += [single] if single else [b.strip().lstrip("%") for b in branches.split(",")]
    return tuple(out)


# A dot's printed algorithm (`algorithm=dot_bf16_bf16_f32`), among its own attributes.
_DOT_ALGORITHM = re.compile(r", algorithm=(\w+)")


def read_dot(line: str) -> DotDims:
    """A dot's dimension numbers from its printed line (a list not printed is empty), the column past them, and
    the algorithm it prints (read before the attributes XLA appends, `metadata=` and the rest)."""
    found = list(_DOT_DIMS.finditer(line))
    dims = {m.group(1): _ints(m.group(2)) for m in found}
    operands = _DOT_OPERANDS.search(line)
    end = max((m.end() for m in found), default=operands.end() if operands else 0)
    tail = _TAIL.search(line, end)
    algorithm = _DOT_ALGORITHM.search(line, end, tail.start() if tail else len(line))
    return DotDims(*(dims.get(kind, ()) for kind in ("lhs_batch", "lhs_contracting", "rhs_batch", "rhs_contracting")),
                   printed_end=end, algorithm=algorithm.group(1) if algorithm else "")


# The attributes XLA prints after an instruction's own (`, metadata={...}`): what a shortened line leaves out.
_TAIL = re.compile(r", (metadata|backend_config|frontend_attributes|sharding|operand_layout_constraints)=")


_COST_ESTIMATE = re.compile(r'"cost_estimate":\{([^{}]*)\}')
_COUNT = re.compile(r'"(\w+)":"?(\d+)"?')
_ARRAY = re.compile(r"([a-z][a-z0-9]*)\[([\d,]*)\](\{[^}]*\})?")


def read_cost_estimate(line: str) -> dict[str, int]:
    """The cost estimate a custom call's backend_config carries (`"cost_estimate":{"flops":"…",…}`), or {}."""
    found = _COST_ESTIMATE.search(line)
    return {} if found is None else {k: int(v) for k, v in _COUNT.findall(found.group(1))}


def read_arrays(shape: str) -> tuple[tuple[str, tuple[int, ...], bool], ...]:
    """The arrays of a printed result shape, in order: element type, dims, whether a layout is printed."""
    return tuple((dtype, tuple(int(d) for d in dims.split(",") if d), layout != "")
                 for dtype, dims, layout in _ARRAY.findall(shape))


def read_tail(line: str) -> dict[str, int]:
    """Where each trailing attribute starts on the line (the column of its `, `), first of each name, in order."""
    seen: dict[str, int] = {}
    for m in _TAIL.finditer(line):
        seen.setdefault(m[1], m.start())
    return seen


def read_slice(line: str) -> tuple[tuple[int, int, int], ...]:
    """A slice's printed `slice={[0:8], [0:64:2]}` as (start, limit, stride) per axis (stride 1 where not printed)."""
    return tuple((int(a), int(b), int(c or 1)) for a, b, c in _SLICE_AXIS.findall(_first(_SLICE, line)))


def _first(pattern: re.Pattern, line: str) -> str:
    found = pattern.search(line)
    return found.group(1) if found else ""


def read_window(line: str, rank: int | None = None) -> tuple[WindowDim, ...]:
    """A printed `window={size=2x4 stride=1x3 pad=1_1x3_3 lhs_dilate=2x4}`, one `WindowDim` per dimension
    (`rank` of them where no window is printed: a convolution without spatial dimensions)."""
    window = _WINDOW.search(line)
    fields = dict(f.split("=", 1) for f in window.group(1).split()) if window else {}
    if rank is None:
        rank = len(fields["size"].split("x")) if "size" in fields else 0

    def per_dim(key: str, default: int) -> list[int]:
        return [int(v) for v in fields[key].split("x")] if key in fields else [default] * rank

    pads = ([tuple(int(v) for v in p.split("_")) for p in fields["pad"].split("x")] if "pad" in fields
            else [(0, 0)] * rank)
    return tuple(WindowDim(size, stride, low, high, lhs_dilate, rhs_dilate)
                 for size, stride, (low, high), lhs_dilate, rhs_dilate
                 in zip(per_dim("size", 1), per_dim("stride", 1), pads, per_dim("lhs_dilate", 1),
                        per_dim("rhs_dilate", 1)))


def read_convolution(line: str) -> ConvDims:
    """A convolution's dimension numbers, window and group counts from its printed line.

    `dim_labels=01bf_01oi->01bf` names each operand's dimensions in order: `b`/`f` (batch, feature), `i`/`o`
    (the kernel's input and output features) and digits for the spatial dimensions, the digit being the
    spatial dimension's number; the window lists one entry per spatial dimension in that numbering.
    """
    lhs, rhs, out = _DIM_LABELS.search(line).groups()

    def spatial(labels: str) -> tuple[int, ...]:
        return tuple(labels.index(str(k)) for k in range(len(labels) - 2))

    windows = read_window(line, len(lhs) - 2)
    groups = dict(_GROUP_COUNT.findall(line))
    return ConvDims(lhs.index("b"), lhs.index("f"), spatial(lhs), rhs.index("i"), rhs.index("o"), spatial(rhs),
                    out.index("b"), out.index("f"), spatial(out), windows, int(groups.get("feature", 1)),
                    int(groups.get("batch", 1)))


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(d) for d in text.replace(" ", "").split(",") if d)


def _entry_parameter(ins: Instruction, line: str) -> EntryParameter:
    """An entry parameter's number, its argument's name (op_name) and its sharding, from its printed line."""
    number, name = PARAMETER_RE.search(line), OP_NAME_RE.search(line)
    sharding = _SHARDING.search(line)
    return EntryParameter(ins.line, int(number.group(1)), unescaped(name.group(1)) if name else "",
                          read_sharding(sharding.group(1)) if sharding else None)


def read_sharding(text: str) -> Sharding | None:
    """XLA's reading of a printed sharding, or None when it is neither replicated nor a plain tiling."""
    from jaxlib import xla_client  # XLA's own sharding parser

    sharding = xla_client.HloSharding.from_string(text)
    if sharding.is_replicated():
        return Sharding(replicated=True)
    if not sharding.is_tiled() or sharding.subgroup_types():
        return None
    iota = _IOTA.search(text)
    return Sharding(False, tuple(sharding.tile_assignment_dimensions()), tuple(sharding.tile_assignment_devices()),
                    bool(sharding.replicate_on_last_tile_dim()), _ints(iota.group(1)) if iota else (),
                    _ints(iota.group(2) or "") if iota else ())


def groups_text(line: str) -> str | None:
    """The `replica_groups` of a collective's printed line, list or iota form, as printed."""
    found = _GROUPS.search(line)
    return found.group(1) if found else None


def read_groups(text: str) -> tuple[tuple[int, ...], ...]:
    """Printed replica groups as device positions; the iota form (`[4,2]<=[2,4]T(1,0)`) read by XLA, the
    mesh-axes form (`mesh['a'=2,'b'=4] {'a'}`: devices numbered in the mesh's order, one group for each
    place on the axes not named, holding the devices along the named ones)."""
    mesh = _MESH_GROUPS.fullmatch(text)
    if mesh:
        return _mesh_groups(mesh)
    if text.startswith("["):
        from jaxlib import xla_client  # the iota form is a tile assignment's: XLA's sharding parser reads it

        shape = [int(d) for d in text[1:text.index("]")].split(",")]
        devices = xla_client.HloSharding.from_string("{devices=" + text + "}").tile_assignment_devices()
        per_group = math.prod(shape[1:])
        return tuple(tuple(devices[k:k + per_group]) for k in range(0, len(devices), per_group))
    return tuple(_ints(g) for g in re.findall(r"\{([\d,]*)\}", text[1:-1]))


def _mesh_groups(mesh: re.Match) -> tuple[tuple[int, ...], ...]:
    """XLA's rule for the mesh-axes form: the mesh's devices laid out over its axes, the axes not named put
    first and the named ones after, in the order named; each run of the named axes' size is a group. A named
    axis that is not one of the mesh's whole axes (a sub-axis, `'a':(1)2`) is not read: no groups."""
    import numpy as np

    axes = [(name.strip().strip("'"), int(size)) for name, size in (a.split("=") for a in mesh.group(1).split(","))]
    names = [name for name, _ in axes]
    named = [a.strip().strip("'") for a in mesh.group(3).split(",") if a.strip()]
    if any(a not in names for a in named):
        return ()
    count = math.prod(size for _, size in axes)
    ids = np.arange(count)
    if mesh.group(2) and mesh.group(2).startswith("["):
        iota = _IOTA_IDS.fullmatch(mesh.group(2))
        shape = _ints(iota.group(1))
        ids = ids.reshape(shape).transpose(_ints(iota.group(2)) if iota.group(2) else range(len(shape))).reshape(-1)
    elif mesh.group(2):
        ids = np.array(_ints(mesh.group(2)))
    if ids.size != count:
        return ()
    inside = [names.index(a) for a in named]
    outside = [k for k in range(len(axes)) if k not in inside]
    grouped = ids.reshape([size for _, size in axes]).transpose(outside + inside).reshape(
        -1, math.prod(axes[k][1] for k in inside))
    return tuple(tuple(int(d) for d in group) for group in grouped)


def _aliases(header: str) -> tuple[Alias, ...]:
    """The module header's `input_output_alias` entries, in printed order."""
    table = _ALIAS_TABLE.search(header)
    return tuple(Alias(_ints(out), int(param), _ints(inner), kind)
                 for out, param, inner, kind in _ALIAS_ENTRY.findall(table.group(1) if table else ""))


# --- while loops: the counter, read through XLA's graph ----------------------------------------

# XLA's own count of a while's runs, where its analysis finds one: `"known_trip_count":{"n":"5"}` in its backend_config.
_KNOWN_TRIPS = re.compile(r'"known_trip_count":\{"n":"(-?\d+)"\}')
# Instructions that pass a value through unchanged: the counter is read through them.
_PASS = frozenset({"copy", "bitcast", "convert", "reshape"})
_FLIP = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "EQ": "EQ", "NE": "NE"}


def _attribute(ins, name: str) -> str | None:
    found = re.search(rf"\b{name}=%?([\w.\-]+)", ins.to_string())
    return found.group(1) if found else None


def _through(ins):
    """The instruction a value comes from, looking through copies, bitcasts and converts."""
    while _opcode(ins) in _PASS:
        ins = ins.operands()[0]
    return ins


def _chain(ins) -> list:
    """`ins` and every instruction `_through` passes on the way to its source, source last."""
    out = [ins]
    while _opcode(out[-1]) in _PASS:
        out.append(out[-1].operands()[0])
    return out


def _constant(ins) -> int | None:
    ins = _through(ins)
    if _opcode(ins) != "constant":
        return None
    value = re.search(r" constant\((-?\d+)\)", ins.to_string())
    return int(value.group(1)) if value else None


def _slot(ins) -> int | None:
    """The tuple index a value reads off the computation's parameter, or None."""
    ins = _through(ins)
    if _opcode(ins) != "gettupleelement" or _opcode(ins.operands()[0]) != "parameter":
        return None
    return int(_attribute(ins, "index"))


class _Loops:
    """Every while of a compiled module whose counter can be read: a condition test `slot <op> constant`,
    a constant start and a constant step, the test and the step seen through a fusion that wraps each alone
    (as CPU and GPU compile them; a GPU's holds the bound's constant inside). The bindings expose no
    attributes, so five things are read from an instruction's printed form: a while's `condition=`/`body=`, a fusion's `calls=`, a constant's value, a
    get-tuple-element's `index=`, a parameter's number and a compare's `direction=`."""

    def __init__(self, module, computations: list[Computation], line_of: dict[str, int], dumped: bool = False):
        self.dumped = dumped
        self.line = line_of
        self.computations = {c.name: c for c in module.computations()}
        self.roots = {c.name: c.root for c in computations}
        self.name_at = {line: name for name, line in line_of.items()}
        self.whiles = [i for c in module.computations() for i in c.instructions() if _opcode(i) == "while"]
        # Who runs each computation with `call` (a CPU compile moves a small loop into one, `xla_cpu_small_call`),
        # and where each instruction sits: a while's start may be its computation's parameter, set by the call.
        self.home: dict[str, str] = {}
        self.callers: dict[str, list] = {}
        for c in module.computations() if dumped else ():
            for i in c.instructions():
                self.home[i.name] = c.name
                if _opcode(i) == "call":
                    self.callers.setdefault(_attribute(i, "to_apply"), []).append(i)

    def root(self, computation: str):
        """The ROOT instruction of a computation, as the compiled text marks it."""
        name = self.name_at[self.roots[computation]]
        return next(i for i in self.computations[computation].instructions() if i.name == name)

    def counters(self) -> tuple[WhileCounter, ...]:
        """The readable counter of each while, in text order (a while whose counter is not read is left out)."""
        found = (self.counter(w) for w in self.whiles)
        return tuple(sorted((c for c in found if c is not None), key=lambda c: c.line))

    def counter(self, loop) -> WhileCounter | None:
        """The counter of one while, or None when its condition does not test a counter against a constant."""
        start, passed = self._start(loop)
        if _opcode(start) != "tuple" or loop.name not in self.line:
            return None
        condition, body = _attribute(loop, "condition"), _attribute(loop, "body")
        tests = self._tests(self.root(condition))
        for test, fusion in tests:
            read = self._compare(test, fusion)
            if read is None:
                continue
            slot, direction, limit = read
            init, step = _constant(start.operands()[slot]), self._step(body, slot)
            if init is None or step is None:
                continue
            first = [loop, *passed, start, *_chain(start.operands()[slot])]
            known = _KNOWN_TRIPS.search(loop.to_string()) if self.dumped else None
            return WhileCounter(self.line[loop.name], slot, init, step, direction, limit, exact=len(tests) == 1,
                                start=self._lines(first), condition=condition,
                                update=self._lines(self._step_chain(body, slot)),
                                known=int(known.group(1)) if known else None)
        return None

    def _start(self, loop) -> tuple[object, list]:
        """The instruction that makes a while's first state, and the parameters and calls passed on the way: where
        the while's operand is its computation's parameter and one `call` runs that computation, the call's operand."""
        start, passed = loop.operands()[0], []
        while self.dumped and _opcode(start) == "parameter":
            callers = self.callers.get(self.home.get(start.name), ())
            if len(callers) != 1:
                break
            call = callers[0]
            number = int(PARAMETER_RE.search(start.to_string()).group(1))
            if number >= len(call.operands()):
                break
            passed += [start, call]
            start = call.operands()[number]
        return start, passed

    def _lines(self, instructions) -> tuple[int, ...]:
        """The printed lines of these instructions, in text order."""
        return tuple(sorted({self.line[i.name] for i in instructions if i.name in self.line}))

    def _tests(self, root, fusion=None) -> list[tuple[object, object]]:
        """The tests a condition's ROOT joins with `and` (itself, when it is one test), each with the fusion it
        sits in (None outside one): a CPU compile fuses `i < n & other` into one fusion whose ROOT is the `and`."""
        root = _through(root)
        if self.dumped and fusion is None and _opcode(root) == "fusion":
            inner = _through(self.root(_attribute(root, "calls")))
            if _opcode(inner) == "and":
                return self._tests(inner, root)
        if _opcode(root) != "and":
            return [(root, fusion)]
        return [t for operand in root.operands() for t in self._tests(operand, fusion)]

    def _outer(self, ins, fusion):
        """What a fused computation's instruction stands for outside its `fusion`: a parameter, the fusion's operand."""
        if fusion is not None and _opcode(ins) == "parameter":
            return fusion.operands()[int(PARAMETER_RE.search(ins.to_string()).group(1))]
        return ins

    def _wrapped(self, ins) -> tuple[str, list, object]:
        """(opcode, operands, the instruction that prints its attributes) of `ins`, or of the one instruction
        a fusion wraps around its parameters (CPU and GPU wrap a loop's compare and add in a fusion each)."""
        if _opcode(ins) == "fusion":
            inner = self.root(_attribute(ins, "calls"))
            params = inner.operands()
            # a GPU compile folds the loop's bound (or step) into the fusion: a constant operand stays as it is
            if params and all(_opcode(p) == "parameter" or _constant(p) is not None for p in params):
                outer = ins.operands()
                return _opcode(inner), [outer[int(PARAMETER_RE.search(p.to_string()).group(1))]
                                        if _opcode(p) == "parameter" else p for p in params], inner
        return _opcode(ins), list(ins.operands()), ins

    def _compare(self, test, fusion=None) -> tuple[int, str, int] | None:
        """(slot, direction counter-first, limit) for a compare of a state slot with a constant (`fusion`: the one
        the compare sits in, whose operands its parameters are)."""
        opcode, operands, inner = self._wrapped(test)
        if opcode != "compare" or len(operands) != 2:
            return None
        a, b = (self._outer(o, fusion) for o in operands)
        direction = _attribute(inner, "direction")
        if _slot(a) is not None and _constant(b) is not None:
            return _slot(a), direction, _constant(b)
        if _slot(b) is not None and _constant(a) is not None:
            return _slot(b), _FLIP[direction], _constant(a)
        return None

    def _step_chain(self, body: str, slot: int) -> list:
        """The body's update of a slot: the ROOT tuple, the add or subtract, its counter read and its constant."""
        root = self.root(body)
        if _opcode(root) != "tuple":
            return []
        update = _chain(root.operands()[slot])
        opcode, operands, _ = self._wrapped(update[-1])
        if opcode not in ("add", "subtract"):
            return []
        return [root, *update, *(i for operand in operands for i in _chain(operand))]

    def _step(self, body: str, slot: int) -> int | None:
        """What the body adds to the counter each run, or None when it is not `slot + constant`."""
        chain = self._step_chain(body, slot)
        if not chain:
            return None
        opcode, operands, _ = self._wrapped(_through(chain[1]))
        if len(operands) != 2:
            return None
        a, b = operands
        sign = -1 if opcode == "subtract" else 1
        if _slot(a) == slot and _constant(b) is not None:
            return sign * _constant(b)
        if sign == 1 and _slot(b) == slot and _constant(a) is not None:
            return _constant(a)
        return None
