"""A `LayerCost`: what each compiled instruction costs, on a named chip.

A pure function of the record: FLOPs from the shapes and dimension numbers the compile stage kept
(`Instruction.dot`, `.convolution`), bytes from the result buffers at the layouts XLA chose (a TPU
buffer padded to its tiles, each memory space apart), the bytes a collective sends from its replica
groups, and a roofline time on the chip's published peaks (`chips.CHIPS`). The rules follow XLA's own
`HloCostAnalysis` where it has one, so the program's sums can be set beside `cost_analysis()`
(`CompiledLayer.xla_cost`); docs/cost.md names each rule and each place the two differ.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

from dumpgym.cost.chips import CHIPS, Chip
from dumpgym.errors import GymError
from dumpgym.record.schema import CompiledLayer, ConvDims, Instruction, ProgramRecord, ResultShape, WhileCounter


class CostError(GymError):
    """A compiled layer recorded before the facts its cost needs (a dot's dimension numbers, XLA's totals)."""


# Opcodes as the record spells them. XLA's HloCostAnalysis counts these as transcendentals, not FLOPs.
TRANSCENDENTAL_OPCODES = frozenset({"exp", "expm1", "log", "log1p", "logistic", "power", "sqrt", "cbrt", "rsqrt",
                                    "tanh", "sin", "cos", "tan", "atan2", "erf"})
# One FLOP per result element, as XLA counts an elementwise op.
ELEMENTWISE_OPCODES = frozenset({
    "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "negate", "abs", "sign", "floor",
    "ceil", "roundnearestafz", "roundnearesteven", "and", "or", "xor", "not", "compare", "select", "clamp",
    "convert", "shiftleft", "shiftrightlogical", "shiftrightarithmetic", "isfinite", "reduceprecision", "popcnt",
    "clz", "real", "imag", "complex", "stochasticconvert", "bitcastconvert",
})
# What XLA charges no bytes: names, views and plumbing (a while's or conditional's work is its computations').
NO_BYTES = frozenset({"parameter", "constant", "gettupleelement", "tuple", "bitcast", "while", "conditional", "call",
                      "afterall", "optimizationbarrier", "addDependency"})
# Collectives by what each device sends of its data on a ring of n devices (the bandwidth-optimal count):
# all-gather and all-to-all send n-1 of n pieces of the result (or operand), all-reduce twice that, a
# reduce-scatter n-1 of n pieces of its operand, a permute its whole operand once.
_RING = {"allgather": ("result", 1), "allgatherstart": ("result", 1), "alltoall": ("operand", 1),
         "reducescatter": ("operand", 1), "allreduce": ("operand", 2), "allreducestart": ("operand", 2)}
_PERMUTES = frozenset({"collectivepermute", "collectivepermutestart"})
# An async op wrapping another (`asyncstart`) prints the wrapped one: its ring count is that one's.
_PRINTED_RING = {"reduce-scatter-start": "reducescatter", "all-gather-start": "allgather",
                 "all-reduce-start": "allreduce", "all-to-all-start": "alltoall"}


_POINTER = 8  # bytes of a pointer in a tuple's index table, as XLA's CPU and GPU compilers size it
# Bits per element of each XLA element type, for a scalar printed without a layout (an array's are its Buffer's).
_BITS = {"pred": 8, "s8": 8, "u8": 8, "s16": 16, "u16": 16, "f16": 16, "bf16": 16, "s32": 32, "u32": 32, "f32": 32,
         "s64": 64, "u64": 64, "f64": 64, "c64": 64, "c128": 128, "s4": 4, "u4": 4, "f8e4m3fn": 8, "f8e5m2": 8}


@dataclass(frozen=True)
class Work:
    """What a piece of a program computes and moves: FLOPs by kind, transcendentals, bytes by memory space."""

    matmul: int = 0  # dots and convolutions: 2 per multiply-add
    elementwise: int = 0
    reduction: int = 0  # a reduce's combines (its region's FLOPs per combine), an all-reduce's adds
    transcendentals: int = 0
    read: dict[int, int] = field(default_factory=dict)  # bytes by memory space (0: HBM on a TPU or GPU)
    written: dict[int, int] = field(default_factory=dict)
    sends: int = 0  # bytes each device sends to others (collectives)
    kernel: int = 0  # a custom kernel's FLOPs, as its own cost estimate gives them (a Pallas `CostEstimate`)
    unknown: int = 0  # custom kernels whose FLOPs nothing gives: the FLOPs here are at least the rest's
    f32_matmul: int = 0  # of `matmul`, the FLOPs of f32 dots, which a chip may run at a rate of its own (TF32)

    @property
    def flops(self) -> int:
        """FLOPs as XLA's `flops` counts them: matmul, elementwise, reduction and kernels' own estimates,
        transcendentals apart (without the kernels of unknown cost: a lower bound where `unknown`)."""
        return self.matmul + self.elementwise + self.reduction + self.kernel

    @property
    def hbm_bytes(self) -> int:
        """Bytes read and written in the default memory space (HBM)."""
        return self.read.get(0, 0) + self.written.get(0, 0)

    @property
    def bytes(self) -> int:
        """Bytes read and written in every memory space."""
        return sum(self.read.values()) + sum(self.written.values())

    def __add__(self, other: Work) -> Work:
        return Work(self.matmul + other.matmul, self.elementwise + other.elementwise,
                    self.reduction + other.reduction, self.transcendentals + other.transcendentals,
                    _add(self.read, other.read), _add(self.written, other.written), self.sends + other.sends,
                    self.kernel + other.kernel, self.unknown + other.unknown, self.f32_matmul + other.f32_matmul)

    def times(self, n: int) -> Work:
        """This work done n times (a kernel of unknown cost is still one kernel, however often it runs)."""
        return Work(self.matmul * n, self.elementwise * n, self.reduction * n, self.transcendentals * n,
                    {k: v * n for k, v in self.read.items()}, {k: v * n for k, v in self.written.items()},
                    self.sends * n, self.kernel * n, self.unknown if n else 0, self.f32_matmul * n)

    def most(self, other: Work) -> Work:
        """The larger of each count (a conditional runs one branch: XLA charges each figure's largest)."""
        return Work(max(self.matmul, other.matmul), max(self.elementwise, other.elementwise),
                    max(self.reduction, other.reduction), max(self.transcendentals, other.transcendentals),
                    _most(self.read, other.read), _most(self.written, other.written), max(self.sends, other.sends),
                    max(self.kernel, other.kernel), max(self.unknown, other.unknown),
                    max(self.f32_matmul, other.f32_matmul))

    def intensity(self) -> float | None:
        """FLOPs per HBM byte (None when it moves no HBM bytes)."""
        return self.flops / self.hbm_bytes if self.hbm_bytes else None

    def compute_seconds(self, chip: Chip) -> float:
        """FLOPs and transcendentals at the chip's matmul peak, f32 dots' FLOPs at its f32 rate where it has one."""
        if chip.f32_flops_per_s is None:
            return (self.flops + self.transcendentals) / chip.flops_per_s
        return ((self.flops + self.transcendentals - self.f32_matmul) / chip.flops_per_s
                + self.f32_matmul / chip.f32_flops_per_s)

    def ridge(self, chip: Chip) -> float:
        """The FLOPs (and transcendentals) per HBM byte at which this work's compute and memory take equally long:
        the chip's ridge point, or an f32 dot's (TF32 on an H100), or between the two for a mix."""
        computed = self.flops + self.transcendentals
        if not computed:
            return chip.ridge
        return computed / self.compute_seconds(chip) / chip.hbm_bytes_per_s

    def roofline(self, chip: Chip | None) -> tuple[float, str] | None:
        """(seconds, "compute", "memory" or "interconnect"): the longest of FLOPs and transcendentals at the chip's
        matmul peak (f32 dots at its f32 rate where it has one), HBM bytes at its bandwidth and bytes sent at its
        interconnect's; None without a chip. Where `unknown`, a lower bound: a kernel of unknown cost adds its bytes
        and no FLOPs."""
        if chip is None:
            return None
        compute = self.compute_seconds(chip)
        memory = self.hbm_bytes / chip.hbm_bytes_per_s
        network = self.sends / chip.interconnect_bytes_per_s if chip.interconnect_bytes_per_s else 0.0
        if network > max(compute, memory):
            return network, "interconnect"
        return max(compute, memory), "compute" if compute >= memory else "memory"


def _add(a: dict[int, int], b: dict[int, int]) -> dict[int, int]:
    return {k: a.get(k, 0) + b.get(k, 0) for k in sorted({*a, *b})}


def _in_space(part: dict[int, int], whole: dict[int, int]) -> dict[int, int]:
    """A part's bytes in the memory space its whole lives in (a fused slice of a VMEM operand reads VMEM); as
    the part says where the whole spans several spaces."""
    spaces = [k for k, v in whole.items() if v]
    return {spaces[0]: sum(part.values())} if len(spaces) == 1 and part else part


def _most(a: dict[int, int], b: dict[int, int]) -> dict[int, int]:
    return {k: max(a.get(k, 0), b.get(k, 0)) for k in sorted({*a, *b})}


@dataclass(frozen=True)
class InstructionCost:
    """One compiled instruction's cost for one run of it, where it sits, and how often a program run runs it.

    `place` is "entry" or "control" (a while body or condition, a conditional's branch: its own row counts),
    "fused" (inside a fusion: its FLOPs are its fusion's, its bytes stay on chip) or "region" (a reducer's
    scalar body: its FLOPs count once per combine, in its holder). `runs` is None where a loop's trip count
    is not known from the record.
    """

    line: int
    name: str
    opcode: str
    computation: str
    place: str
    work: Work
    runs: int | None = 1


@dataclass(frozen=True)
class LayerCost:
    """A compiled layer's costs: each instruction's, the program's sums (loops run their trip counts), the
    chip it is timed on, and XLA's own totals for the module, to set beside ours."""

    target: str
    chip: Chip | None
    instructions: tuple[InstructionCost, ...]
    total: Work  # a while's body and condition counted as often as its counter runs them (once if not known)
    once: Work  # every loop body and condition counted once, as XLA's cost_analysis() counts them
    xla_cost: dict[str, float]
    xla_memory: dict[str, int]
    unknown_trips: tuple[int, ...] = ()  # lines of whiles whose trip count the record does not give

    def time(self) -> tuple[float, str] | None:
        """The program's roofline time, by its sums (each instruction's times add up to at least this)."""
        return self.total.roofline(self.chip)

    @functools.cached_property
    def _summed_time(self) -> float:
        return sum(self._weighted(c) for c in self.instructions if c.place in ("entry", "control"))

    def share(self, cost: InstructionCost) -> float | None:
        """The share of the program's summed instruction times this instruction's runs take."""
        return self._weighted(cost) / self._summed_time if self._summed_time else None

    def _weighted(self, cost: InstructionCost) -> float:
        timed = cost.work.roofline(self.chip)
        return timed[0] * (cost.runs or 1) if timed else 0.0


def trips(counter: WhileCounter) -> int:
    """How many times a while's body runs, from its counter's start, step and bound."""
    span = counter.limit - counter.init
    if counter.step == 0:
        return 0
    if counter.direction in ("LT", "GT", "NE"):
        return max(0, -(-span // counter.step))
    if counter.direction in ("LE", "GE"):
        return max(0, span // counter.step + 1)
    return 1  # EQ: runs while the counter equals its bound, once at most from a different start


class _Layer:
    """One compiled layer read for costing: instructions by line, result buffers, computations by role."""

    def __init__(self, layer: CompiledLayer):
        self.layer = layer
        self.by_line = {i.line: i for i in layer.instructions}
        self.members: dict[str, list[Instruction]] = {}
        for ins in layer.instructions:
            self.members.setdefault(ins.computation, []).append(ins)
        self.fused = {c for i in layer.instructions if i.opcode == "fusion" for c in i.calls}
        self.regions = {c for i in layer.instructions for c in i.to_apply}
        self.users: dict[int, list[Instruction]] = {}
        for ins in layer.instructions:
            for line in dict.fromkeys(ins.operands):
                self.users.setdefault(line, []).append(ins)
        self.groups = {g.line: g.groups for g in layer.replica_groups}
        self.counters = {c.line: c for c in layer.while_counters}
        self.entry = next(c.name for c in layer.computations if c.entry)
        self.roots = {c.name: c.root for c in layer.computations}

    def custom_call(self, ins: Instruction) -> tuple[str, dict[str, int] | None]:
        """A custom call's target and the cost estimate its kernel carries (a Pallas `CostEstimate`), None where
        it carries none: the record's `custom_call_target` and `cost_estimate`."""
        return ins.custom_call_target, (ins.cost_estimate or None)

    def collectives_in(self, fusion: Instruction) -> list[Instruction]:
        """The collectives inside a fusion's body, nested fusions' included."""
        out = []
        for c in fusion.calls:
            for inner in self.members.get(c, ()):
                if inner.opcode == "fusion":
                    out += self.collectives_in(inner)
                elif _PRINTED_RING.get(self.layer.printed(inner) or "", inner.opcode) in (*_RING, *_PERMUTES):
                    out.append(inner)  # an async wrapper counts as the op it wraps, as `_ring` reads it
        return out

    def continues(self, fusion: Instruction, inner: Instruction) -> bool:
        """Whether a collective fused into `fusion` continues one an earlier fusion started: a TPU's async
        collective is a start, continuation(s) and a done fusion, each holding a copy of the one collective (one
        channel). Its data comes, through the fused parameter and get-tuple-elements, from a fusion holding a
        collective of the same op over the same replica groups."""
        if not inner.operands:
            return False
        param = self.by_line.get(inner.operands[0])
        if param is None or param.opcode != "parameter" or param.parameter is None \
                or param.parameter >= len(fusion.operands):
            return False
        source = self.by_line[fusion.operands[param.parameter]]
        while source.opcode == "gettupleelement" and source.operands:
            source = self.by_line[source.operands[0]]
        if source.opcode != "fusion":
            return False
        groups = self.groups.get(inner.line, ())
        return any(c.opcode == inner.opcode and self.groups.get(c.line, ()) == groups
                   for c in self.collectives_in(source))

    def scatters(self, ins: Instruction) -> bool:
        """Whether an all-reduce keeps only a slice of its sum on each device (every user a dynamic slice: a
        TPU's all-reduce-scatter fusion): it sends as a reduce-scatter does, one pass round the ring."""
        users = self.users.get(ins.line, ())
        return bool(users) and all(u.opcode == "dynamicslice" for u in users)

    def f32_dot(self, ins: Instruction) -> bool:
        """Whether a dot or convolution multiplies f32 by f32 at JAX's default precision: both operands f32 and no
        `algorithm=` naming another (`algorithm=dot_bf16_bf16_f32` runs at the bf16 rate), as the compile stage
        recorded it (a convolution prints none the gym reads: default precision)."""
        if any(self.dtype(line) != "f32" for line in ins.operands[:2]):
            return False
        algorithm = ins.dot.algorithm if ins.dot else ""
        return not algorithm or algorithm.removeprefix("dot_").split("_")[0] in ("tf32", "f32")

    def dtype(self, line: int) -> str:
        """An instruction's (first) result array's element type, as its shape prints it."""
        members = _members(self.layer.shapes[self.by_line[line].shape], self.layer)
        return members[0][0] if members else ""

    def buffers(self, ins: Instruction):
        shape = self.layer.shapes[ins.shape]
        return [self.layer.buffers[b] for b in shape.buffers]

    def elements(self, ins: Instruction) -> int:
        """Elements of an instruction's (first) result array."""
        return math.prod(self.dims(ins.line))

    def dims(self, line: int) -> tuple[int, ...]:
        """An instruction's (first) result array's dims, as its shape prints them (a scalar printed without a
        layout, as a region's are, has no buffer)."""
        members = _members(self.layer.shapes[self.by_line[line].shape], self.layer)
        return members[0][1] if members else ()

    def bytes_of(self, ins: Instruction) -> dict[int, int]:
        """Bytes of an instruction's result arrays at their layouts (tiles padded), by memory space; a scalar
        printed without a layout takes its element's width."""
        found = iter(self.buffers(ins))
        out: dict[int, int] = {}
        for dtype, dims, laid_out in _members(self.layer.shapes[ins.shape], self.layer):
            b = next(found) if laid_out else None
            space, size = ((b.memory_space, b.padded_bytes()) if b
                           else (0, -(-math.prod(dims) * _BITS.get(dtype, 0) // 8)))
            out[space] = out.get(space, 0) + size
        return out

    def fusion_reads(self, ins: Instruction) -> dict[int, int]:
        """The bytes a fusion reads of its operands, as XLA's HloCostAnalysis counts them: what its body takes
        of each parameter (a slice's or dynamic slice's result, a dynamic-update-slice's target not at all),
        and the whole parameter once for every other use."""
        out: dict[int, int] = {}
        for k, line in enumerate(ins.operands):
            param = next((p for c in ins.calls for p in self.members.get(c, ())
                          if p.opcode == "parameter" and p.parameter == k), None)
            whole = self.bytes_of(self.by_line[line])
            out = _add(out, whole if param is None else self._param_reads(param, whole))
        return out

    def fusion_writes(self, ins: Instruction) -> dict[int, int]:
        """The bytes a fusion writes: its result, or where its fused ROOT is a dynamic-update-slice (updating
        its operand in place), only the update, as XLA's HloCostAnalysis counts it."""
        roots = [self.by_line[self.roots[c]] for c in ins.calls if c in self.roots]
        if len(roots) == 1 and roots[0].opcode == "dynamicupdateslice":  # the update, where the result lives
            return _in_space(self.bytes_of(self.by_line[roots[0].operands[1]]), self.bytes_of(ins))
        return self.bytes_of(ins)

    def _param_reads(self, param: Instruction, whole: dict[int, int]) -> dict[int, int]:
        out: dict[int, int] = {}
        shared = False
        for user in self.users.get(param.line, ()):
            if user.opcode == "fusion":  # a nested fusion: what its own parameter reads
                for k, line in enumerate(user.operands):
                    if line == param.line:
                        inner = next((p for c in user.calls for p in self.members.get(c, ())
                                      if p.opcode == "parameter" and p.parameter == k), None)
                        out = _add(out, whole if inner is None else self._param_reads(inner, whole))
            elif user.opcode in ("slice", "dynamicslice") and user.operands[0] == param.line:
                # the slice's bytes, read where the operand lives (a fused slice's own result is no buffer: it
                # prints no `S(n)` even when it reads VMEM)
                out = _add(out, _in_space(self.bytes_of(user), whole))
            elif user.opcode == "dynamicupdateslice" and user.operands[0] == param.line:
                continue  # updated in place: the target is not read
            elif user.opcode in ("broadcast", "reshape"):
                out = _add(out, whole)
            elif not shared:
                shared = True
                out = _add(out, whole)
        return out

    def place(self, computation: str) -> str:
        if computation in self.fused:
            return "fused"
        if computation in self.regions:
            return "region"
        return "entry" if computation == self.entry else "control"


def _members(shape: ResultShape, layer: CompiledLayer) -> tuple[tuple[str, tuple[int, ...], bool], ...]:
    """The arrays of a recorded result shape, in order: (element type, dims, whether a layout is printed); a
    record written before `ResultShape.arrays` has only those with a layout (its buffers)."""
    if shape.arrays:
        return shape.arrays
    return tuple((b.dtype, b.dims, True) for b in (layer.buffers[k] for k in shape.buffers))


def _flops(layer: _Layer, ins: Instruction) -> Work:
    """An instruction's own FLOPs and transcendentals (a fusion's are its body's)."""
    op = ins.opcode
    if op in TRANSCENDENTAL_OPCODES:
        return Work(transcendentals=layer.elements(ins))
    if op in ELEMENTWISE_OPCODES:
        return Work(elementwise=layer.elements(ins))
    if op == "dot":
        lhs = layer.dims(ins.operands[0])
        flops = 2 * layer.elements(ins) * math.prod(lhs[d] for d in ins.dot.lhs_contracting)
        return Work(matmul=flops, f32_matmul=flops if layer.f32_dot(ins) else 0)
    if op == "convolution":
        flops = convolution_flops(ins.convolution, layer.dims(ins.operands[0]), layer.dims(ins.operands[1]),
                                  layer.dims(ins.line))
        return Work(matmul=flops, f32_matmul=flops if layer.f32_dot(ins) else 0)
    if op == "reduce":
        combine = _region_flops(layer, ins)
        count = math.prod(layer.dims(ins.operands[0])) - layer.elements(ins)
        return Work(reduction=count * combine)
    if op == "reducewindow":  # each result combines its window's elements: size - 1 combines
        combine = _region_flops(layer, ins)
        return Work(reduction=(math.prod(w.size for w in ins.window) - 1) * layer.elements(ins) * combine)
    if op == "scatter":  # each update element is combined into the operand once
        return Work(reduction=math.prod(layer.dims(ins.operands[-1])) * _region_flops(layer, ins))
    if op in ("allreduce", "allreducestart"):
        return Work(reduction=sum(math.prod(b.dims) for b in layer.buffers(ins)))
    if op == "customcall":
        return _kernel(layer, ins)
    if op == "fusion":
        return sum((_flops(layer, inner) for c in ins.calls for inner in layer.members.get(c, ())), Work())
    return Work()


# Custom calls XLA itself inserts, whose work is known: they compute nothing (an allocation, an async collective's
# start and done markers inside its fusions, a gather's index checks); any other custom call is a kernel.
XLA_HELPERS = frozenset({"AllocateBuffer", "AsyncCollectiveStart", "AsyncCollectiveDone",
                         "AssumeGatherIndicesInBound", "GatherScatterIndicesBitpacked"})


def _kernel(layer: _Layer, ins: Instruction) -> Work:
    """A custom call's FLOPs: its kernel's own estimate where it carries one, none for XLA's helpers, and
    otherwise unknown (counted in `unknown`, never as a silent 0)."""
    target, estimate = layer.custom_call(ins)
    if estimate is not None:
        return Work(kernel=estimate.get("flops", 0), transcendentals=estimate.get("transcendentals", 0))
    return Work() if target in XLA_HELPERS else Work(unknown=1)


def _region_flops(layer: _Layer, ins: Instruction) -> int:
    """FLOPs of one application of an instruction's reducer region (an add: 1)."""
    return sum(_flops(layer, inner).flops + _flops(layer, inner).transcendentals
               for c in ins.to_apply for inner in layer.members.get(c, ()))


def convolution_flops(conv: ConvDims, lhs: tuple[int, ...], rhs: tuple[int, ...], out: tuple[int, ...]) -> int:
    """2 per multiply-add of a convolution, counting as XLA does only the kernel positions that land on input
    (not on padding nor between dilated input elements): per spatial dimension, the (output, kernel) index
    pairs whose input index is real; times batch, input features per group and output features."""
    valid = 1
    for k, window in enumerate(conv.window):
        kernel, outputs, inputs = rhs[conv.kernel_spatial[k]], out[conv.output_spatial[k]], lhs[conv.input_spatial[k]]
        count = 0
        for kernel_index in range(kernel):
            for output_index in range(outputs):
                undilated = output_index * window.stride - window.pad_low + kernel_index * window.rhs_dilate
                if undilated % window.lhs_dilate == 0 and 0 <= undilated // window.lhs_dilate < inputs:
                    count += 1
        valid *= count
    features_in = lhs[conv.input_feature] // conv.feature_group_count
    batch = lhs[conv.input_batch] // conv.batch_group_count
    return 2 * features_in * out[conv.output_feature] * batch * valid


def _moves(layer: _Layer, ins: Instruction) -> Work:
    """The bytes an instruction outside a fusion reads and writes, and a collective's bytes sent per device."""
    if ins.opcode == "tuple":  # it gathers pointers: XLA charges its index table, one 8-byte pointer a member
        return Work(written={0: _POINTER * len(ins.operands)})
    if ins.opcode in NO_BYTES:
        return Work()
    if ins.opcode.endswith("done"):  # an async pair: the start reads, the done writes its result
        return Work(written=layer.bytes_of(ins))
    read: dict[int, int] = {}
    if ins.opcode == "fusion":
        read = layer.fusion_reads(ins)
    else:
        for line in ins.operands:
            read = _add(read, layer.bytes_of(layer.by_line[line]))
    # An async start's result holds its operand again (and a context): its done writes the result.
    written = {} if ins.opcode.endswith("start") else layer.fusion_writes(ins) if ins.opcode == "fusion" \
        else layer.bytes_of(ins)
    sends = _fused_sends(layer, ins) if ins.opcode == "fusion" else _sends(layer, ins, read, written)
    return Work(read=read, written=written, sends=sends)


def _fused_sends(layer: _Layer, fusion: Instruction) -> int:
    """What the collectives inside a fusion send (a TPU fuses an all-reduce or all-gather with its neighbours), each
    once: a collective an earlier fusion started (an async collective's continuation and done) sends nothing more."""
    total = 0
    for inner in layer.collectives_in(fusion):
        if layer.continues(fusion, inner):
            continue
        read: dict[int, int] = {}
        for line in inner.operands:
            read = _add(read, layer.bytes_of(layer.by_line[line]))
        total += _sends(layer, inner, read, layer.bytes_of(inner))
    return total


def _sends(layer: _Layer, ins: Instruction, read: dict[int, int], written: dict[int, int]) -> int:
    """Bytes each device sends for a collective, on a ring over its replica group (0 for anything else)."""
    found = _ring(layer, ins, read)
    return found.sends if found is not None else 0


@dataclass(frozen=True)
class Ring:
    """What a collective's bytes sent are counted from: its op (the record's spelling, an async start's wrapped
    op), the devices of its replica group, its passes round the ring, and the bytes it sends pieces of (its
    result or its operand, at their layouts)."""

    op: str
    devices: int
    passes: int
    data: int

    @property
    def sends(self) -> int:
        """Bytes each device sends: a permute its whole operand, a ring collective `passes` times n-1 of n pieces."""
        if self.op in _PERMUTES:
            return self.data
        return self.passes * self.data * (self.devices - 1) // self.devices


def _ring(layer: _Layer, ins: Instruction, read: dict[int, int]) -> Ring | None:
    op = _PRINTED_RING.get(layer.layer.printed(ins) or "", ins.opcode)
    groups = layer.groups.get(ins.line, ())
    n = len(groups[0]) if groups else 1
    if op in _PERMUTES:
        return Ring(op, n, 1, sum(read.values()))
    if op not in _RING:
        return None
    which, passes = _RING[op]
    if op in ("allreduce", "allreducestart") and layer.scatters(ins):
        op, which, passes = "reducescatter", "operand", 1
    data = sum(read.values()) if which == "operand" else sum(
        (layer.bytes_of(ins) if not ins.opcode.endswith("start") else _started(layer, ins)).values())
    return Ring(op, n, passes, data)


def rings(layer: CompiledLayer) -> dict[int, Ring]:
    """By line, how each collective outside a fusion counts the bytes it sends (the drills ask about them)."""
    read = _Layer(layer)
    out = {}
    for ins in layer.instructions:
        op = _PRINTED_RING.get(layer.printed(ins) or "", ins.opcode)
        if read.place(ins.computation) in ("entry", "control") and (op in _RING or op in _PERMUTES):
            operands: dict[int, int] = {}
            for line in ins.operands:
                operands = _add(operands, read.bytes_of(read.by_line[line]))
            found = _ring(read, ins, operands)
            if found is not None:
                out[ins.line] = found
    return out


def buffer_computations(layer: CompiledLayer) -> set[str]:
    """The computations whose instructions' results are buffers: the entry and what a while, a conditional or a
    call runs. Not a fusion's body (its intermediates stay on chip, in no buffer: its parameters are the fusion's
    operands and its root the fusion's result) nor a reducer's scalar region."""
    read = _Layer(layer)
    return {c.name for c in layer.computations if read.place(c.name) in ("entry", "control")}


def started_results(layer: CompiledLayer, ins: Instruction) -> list:
    """An async start's result arrays (`Buffer`s). Its result tuple holds its operands' arrays first, then as many
    results, then any sync flags (a TPU's `u32[]`s). A start of several arrays prints a nested tuple (a GPU's
    `((a, b), (A, B)) all-gather-start`), whose arrays the record does not list: its done's result is those
    arrays."""
    found = [layer.buffers[b] for b in layer.shapes[ins.shape].buffers]
    if not found:
        done = next((d for d in layer.instructions if d.operands == (ins.line,) and d.opcode.endswith("done")), None)
        return [layer.buffers[b] for b in layer.shapes[done.shape].buffers] if done is not None else []
    k = max(1, len(ins.operands))
    return found[k:2 * k] or found[-1:]


def _started(layer: _Layer, ins: Instruction) -> dict[int, int]:
    """An async start's result arrays' bytes, by memory space."""
    out: dict[int, int] = {}
    for b in started_results(layer.layer, ins):
        out[b.memory_space] = out.get(b.memory_space, 0) + b.padded_bytes()
    return out

def layer_cost(layer: CompiledLayer, target: str = "") -> LayerCost:
    """Every instruction's cost in a compiled layer, and the program's sums, timed on its chip if known."""
    stale = [i for i in layer.instructions if (i.opcode == "dot" and i.dot is None)
             or (i.opcode == "convolution" and i.convolution is None) or (i.opcode == "while" and not i.control)]
    if not layer.has_facts or stale:
        raise CostError("this compiled layer was recorded before the facts its cost needs (dimension numbers, "
                        "loop bodies): run `dumpgym corpus build`, or `dumpgym cost --compile`")
    read = _Layer(layer)
    own: dict[int, Work] = {}
    for ins in layer.instructions:
        place = read.place(ins.computation)
        work = _flops(read, ins)
        own[ins.line] = work + _moves(read, ins) if place in ("entry", "control") else work
    runs: dict[str, int | None] = {read.entry: 1}
    unknown: list[int] = []

    def total(computation: str, once: bool) -> Work:
        out = Work()
        for ins in read.members.get(computation, ()):
            out += own[ins.line]
            if ins.opcode == "while" and len(ins.control) == 2:
                condition, body = ins.control
                counter = read.counters.get(ins.line)
                n = trips(counter) if counter is not None else None
                if n is None and not once:
                    unknown.append(ins.line)
                for c, k in ((condition, None if n is None else n + 1), (body, n)):
                    runs[c] = None if k is None or runs[computation] is None else k * runs[computation]
                if once or n is None:
                    out += total(body, once) + total(condition, once)
                else:
                    out += total(body, once).times(n) + total(condition, once).times(n + 1)
            elif ins.opcode == "conditional":
                branches = Work()
                for c in ins.control:
                    runs[c] = runs[computation]
                    branches = branches.most(total(c, once))
                out += branches
            elif ins.opcode in ("call", "asyncstart"):
                for c in ins.calls + ins.to_apply:
                    if c not in read.fused and c not in read.regions:
                        runs[c] = runs[computation]
                        out += total(c, once)
        return out

    once = total(read.entry, once=True)
    summed = total(read.entry, once=False)
    rows = []
    for ins in layer.instructions:
        place = read.place(ins.computation)
        holder_runs = runs.get(ins.computation, 1)
        rows.append(InstructionCost(ins.line, ins.name, ins.opcode, ins.computation, place, own[ins.line],
                                    holder_runs if place in ("entry", "control") else 1))
    return LayerCost(target or layer.backend, CHIPS.get(layer.device_kind), tuple(rows), summed, once,
                     dict(layer.xla_cost), dict(layer.xla_memory), tuple(sorted(set(unknown))))


def program_costs(record: ProgramRecord) -> dict[str, LayerCost]:
    """The cost of each compiled layer of a program, by target id."""
    return {target: layer_cost(layer, target) for target, layer in record.compiled.items()}
