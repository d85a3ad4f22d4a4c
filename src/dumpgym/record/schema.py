"""The corpus record ("dumpgym.corpus/2") as frozen dataclasses: written by one function, read by one.

`ProgramRecord.from_json` (reading as `typedjson` does) is the only way a record comes in from disk or from the committed
corpus: it checks every field's type against the annotations below and every cross-reference
(equation ids, line numbers) against the texts, and raises `RecordError` naming the first field
that is wrong. `to_json` is the only way one goes out; it reproduces the export byte for byte.
Records of "dumpgym.corpus/1" (the committed corpus and added programs of the previous release)
still read: their three compiled fields, `hlo`, `hlo_tpu` and `hlo_gpu`, become `compiled` entries.
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any, Iterable

from dumpgym.record.dtypes import short as short_dtype
from dumpgym.record.typedjson import RecordError, TypedRecord as _Record, at as _at, join as _join

SCHEMA = "dumpgym.corpus/2"
# Older schemas this reader upgrades as it reads (`upgrade_program`).
READS = (SCHEMA, "dumpgym.corpus/1")
# What the export writes for a parameter that is a jaxpr (see `facts.to_json`, the parameter writer).
JAXPR_PLACEHOLDER = "<jaxpr>"
SLUG = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
# A compile target's id as the registry allows it (`targets.register_target`) and the record keys `compiled` by.
_TARGET_ID = re.compile(r"[a-z][a-z0-9-]{0,31}")


def valid_slug(slug: object) -> bool:
    """Whether `slug` may name a program: lowercase letters, digits and dashes, at most 64."""
    return isinstance(slug, str) and SLUG.fullmatch(slug) is not None


def valid_target_id(name: object) -> bool:
    """Whether `name` may be a compile target's id (a key of `compiled`): a lowercase letter, then up to 31
    lowercase letters, digits and dashes."""
    return isinstance(name, str) and _TARGET_ID.fullmatch(name) is not None


# ---------------------------------------------------------------------------------------------
# The record, leaves first.


@dataclass(frozen=True)
class Aval(_Record):
    """An array's abstract value as the export writes it: global shape and numpy dtype name."""

    OMIT_DEFAULT = frozenset({"weak_type"})
    shape: tuple[int, ...]
    dtype: str
    weak_type: bool = False

    def __str__(self) -> str:
        """The aval as the jaxpr prints it: `bf16[64,512]`, `f32[]` (weak typing is not printed)."""
        return f"{short_dtype(self.dtype)}[{','.join(str(d) for d in self.shape)}]"

    @property
    def rank(self) -> int:
        """Number of axes."""
        return len(self.shape)

    def same(self, other: Aval) -> bool:
        """Whether `other` prints as this aval: the same shape and dtype, weakly typed or not."""
        return (self.shape, self.dtype) == (other.shape, other.dtype)

    def with_shape(self, shape: Iterable[int]) -> Aval:
        """The same dtype with another shape."""
        return dataclasses.replace(self, shape=tuple(int(d) for d in shape))

    def with_dtype(self, dtype: str) -> Aval:
        """The same shape with another dtype."""
        return dataclasses.replace(self, dtype=dtype)


@dataclass(frozen=True)
class Literal(_Record):
    """A literal input of an equation: its value as printed and its dtype."""

    literal: str
    dtype: str

    def __str__(self) -> str:
        """The literal as the jaxpr prints it: `0.5:bf16[]`."""
        return f"{self.literal}:{short_dtype(self.dtype)}[]"

    @property
    def aval(self) -> Aval:
        """The literal's aval: a scalar of its dtype."""
        return Aval((), self.dtype)


@dataclass(frozen=True)
class Source(_Record):
    """Where an equation's input comes from: output `index` of equation `eqn` in the same jaxpr, or,
    with `eqn` None, binder `index` of the jaxpr that holds the equation (its constvars, then invars)."""

    eqn: int | None
    index: int


@dataclass(frozen=True)
class Binder(_Record):
    """A variable as the jaxpr binds it, `c:bf16[64,512]`, and where: its line and the column its name starts at."""

    name: str
    type: str  # as printed, sharding marks included: `f32[64@x,32]`, `f32[8,32]{V:x}`
    line: int  # 1-based, in the jaxpr
    column: int  # where its name starts on the line (0-based)

    @property
    def aval_text(self) -> str:
        """Its type without sharding marks, as the aval prints: `f32[64@x,32]` and `f32[8,32]{V:x}` -> `f32[64,32]`, `f32[8,32]`."""
        head, _, dims = self.type.partition("[")
        dims, _, _ = dims.partition("]")
        return f"{head}[{','.join(d.partition('@')[0] for d in dims.split(','))}]" if dims else f"{head}[]"

    @property
    def type_span(self) -> tuple[int, int]:
        """The columns of its printed type on the line, start and end."""
        start = self.column + len(self.name) + 1
        return start, start + len(self.type)


@dataclass(frozen=True)
class TextSpan(_Record):
    """A stretch of a listing: from `first` line's `column` to `last` line's `end` (1-based lines, 0-based
    columns, `end` exclusive)."""

    first: int
    column: int
    last: int
    end: int


@dataclass(frozen=True)
class EqnFact(_Record):
    """One printed equation: what it is, what goes in and out, and the jaxpr lines that print it."""

    # The defaults are omitted from the export, so records written before these fields still read.
    OMIT_DEFAULT = frozenset({"sources", "name_stack", "binders", "operand_names", "bodies", "partition_specs",
                              "printed_params", "body_binders", "printed_end"})
    id: int
    parent: int | None
    primitive: str
    params: dict
    inputs: tuple[Aval | Literal, ...]
    outputs: tuple[Aval, ...]
    jaxpr_lines: tuple[int, int]
    # One per input, in order: where the value comes from (None for a literal).
    sources: tuple[Source | None, ...] = ()
    # JAX's name stack for the equation, e.g. `transpose(jvp())` in a gradient's backward pass.
    name_stack: str = ""
    # How the jaxpr prints it (`ir/jaxpr.py`, read once when the record is made): its output binders (empty
    # where they are not one `name:type` per output before its ` = `), its operands as printed after its params
    # (names, literals as `0.5:f32[]`; empty where the equation does not start a line of its own or they are
    # not one per input), each `{ lambda ... }` printed on its lines (a sub-jaxpr inline, or the one-line
    # jaxpr it sits in), outermost ones only, and the invars those bodies bind; its params as printed: the
    # bracketed group, then each `name=value` entry (the group alone where one does not read so).
    binders: tuple[Binder, ...] = ()
    operand_names: tuple[str, ...] = ()
    bodies: tuple[TextSpan, ...] = ()
    # Its PartitionSpec params (a shard_map's `in_specs`, `out_specs`) as JAX holds them, one spec per operand or
    # result: per array axis the mesh axes it is split over (None: not split), or None for a spec naming more
    # than mesh axes (`P.UNCONSTRAINED`). `params` keeps each as printed, `P('x', None)`.
    partition_specs: dict[str, tuple[tuple[tuple[str, ...] | None, ...] | None, ...]] = \
        dataclasses.field(default_factory=dict)
    printed_params: tuple[TextSpan, ...] = ()
    body_binders: tuple[Binder, ...] = ()
    # Where its text ends on its line, for an equation inside a jaxpr printed on one line (0: at the line's end).
    printed_end: int = 0

    @property
    def arrays(self) -> tuple[Aval, ...]:
        """Inputs that are variables, not literals."""
        return tuple(x for x in self.inputs if isinstance(x, Aval))

    @property
    def literals(self) -> tuple[Literal, ...]:
        """Inputs that are printed literals."""
        return tuple(x for x in self.inputs if isinstance(x, Literal))

    @property
    def input_avals(self) -> tuple[Aval, ...]:
        """Every input's aval, in order; a literal's is a scalar of its dtype."""
        return tuple(x.aval if isinstance(x, Literal) else x for x in self.inputs)

    @property
    def has_subjaxpr(self) -> bool:
        """Whether the equation holds a sub-jaxpr (jit, remat, shard_map, cond, scan, ...)."""
        # The export writes every jaxpr-valued param as the placeholder, alone or in a list (cond's branches).
        return any(v == JAXPR_PLACEHOLDER or (isinstance(v, list) and JAXPR_PLACEHOLDER in v)
                   for v in self.params.values())

    def param(self, name: str) -> Any:
        """The parameter `name`, or None when this primitive has no parameter of that name."""
        # Params differ by primitive, so an absent one is an answer, not a gap in the record.
        return self.params[name] if name in self.params else None

    def ints(self, name: str) -> tuple[int, ...] | None:
        """A parameter that is a list of integers (`axes`, `permutation`, ...), or None if absent or not one."""
        value = self.param(name)
        if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return tuple(value)
        return None


@dataclass(frozen=True)
class Group(_Record):
    """The lines of one equation at the jaxpr and StableHLO layers."""

    eqn: int
    jaxpr_lines: tuple[int, ...]
    stablehlo_lines: tuple[int, ...]


@dataclass(frozen=True)
class StablehloValue(_Record):
    """An operand or result of a StableHLO op as MLIR reads it: its SSA name and type as printed, shape and element type."""

    name: str  # %arg0, %3 (a result's name is its op's)
    type: str  # tensor<8x16xbf16>
    shape: tuple[int, ...]
    dtype: str  # the element type as MLIR prints it: bf16, f32, i8, ui32, i1


@dataclass(frozen=True)
class StablehloDot(_Record):
    """A `stablehlo.dot_general`'s dimension numbers and its two operands and result, read by MLIR's bindings."""

    lhs_batch: tuple[int, ...]
    lhs_contracting: tuple[int, ...]
    rhs_batch: tuple[int, ...]
    rhs_contracting: tuple[int, ...]
    lhs: StablehloValue
    rhs: StablehloValue
    result: StablehloValue


@dataclass(frozen=True)
class StablehloOp(_Record):
    """One StableHLO op line: the op's name, its line, and the function it sits in; for some ops, what MLIR
    reads of them when the record is made (`ir/stablehlo.py`)."""

    OMIT_DEFAULT = frozenset({"dot", "callee", "operands", "results", "dimensions", "combiner", "slice"})
    name: str
    line: int
    function: str
    # A dot_general whose operands and result are static tensors without an encoding (what an aval holds).
    dot: StablehloDot | None = None
    # A `func.call`'s callee: the function it runs.
    callee: str = ""
    # Of a transpose, a reduce, a concatenate and a slice whose values are static tensors: its operands and results,
    # the attribute that decides its result's shape (a transpose's `permutation`, the axes a reduce combines away,
    # a concatenate's `dimension`; a slice's (start, limit, stride) per axis), and what a reduce combines with (its
    # body's op: `stablehlo.add`).
    operands: tuple[StablehloValue, ...] = ()
    results: tuple[StablehloValue, ...] = ()
    dimensions: tuple[int, ...] = ()
    combiner: str = ""
    slice: tuple[tuple[int, int, int], ...] = ()


@dataclass(frozen=True)
class LoweredToNothing(_Record):
    """An equation that emitted no StableHLO, and why."""

    eqn: int
    why: str


@dataclass(frozen=True)
class XrayStats(_Record):
    """How much of each layer the x-ray links."""

    equations: int
    mapped_equations: int
    jaxpr_lines: int
    mapped_jaxpr_lines: int
    stablehlo_lines: int
    stablehlo_op_lines: int
    mapped_stablehlo_op_lines: int

    def line(self) -> str:
        """The one-line summary the page and the CLI print for a program's x-ray."""
        return (f"{self.mapped_equations} of {self.equations} equations mapped · "
                f"{self.mapped_jaxpr_lines} of {self.jaxpr_lines} jaxpr lines · "
                f"{self.mapped_stablehlo_op_lines} of {self.stablehlo_op_lines} StableHLO op lines")


@dataclass(frozen=True)
class DotDims(_Record):
    """A compiled dot's dimension numbers as printed (`lhs_batch_dims={0}, lhs_contracting_dims={2}, ...`)."""

    OMIT_DEFAULT = frozenset({"printed_end", "algorithm"})
    lhs_batch: tuple[int, ...]
    lhs_contracting: tuple[int, ...]
    rhs_batch: tuple[int, ...]
    rhs_contracting: tuple[int, ...]
    # The column on its line just past its last dims attribute (past `dot(%a, %b)` where none is printed):
    # where a page cuts the line before its metadata (0 in a record written before it).
    printed_end: int = 0
    # The algorithm it prints, where it prints one (`dot_bf16_bf16_f32`: the type its multiplies run in);
    # "" for none, the default precision.
    algorithm: str = ""


@dataclass(frozen=True)
class WindowDim(_Record):
    """One spatial dimension of a convolution's `window={...}`: size, stride, padding and dilations."""

    size: int
    stride: int = 1
    pad_low: int = 0
    pad_high: int = 0
    lhs_dilate: int = 1
    rhs_dilate: int = 1


@dataclass(frozen=True)
class ConvDims(_Record):
    """A compiled convolution's dimension numbers read off its `dim_labels` (`01bf_01oi->01bf`), its window
    (one `WindowDim` per spatial dimension, in the labels' digit order) and its group counts."""

    OMIT_DEFAULT = frozenset({"feature_group_count", "batch_group_count"})
    input_batch: int
    input_feature: int
    input_spatial: tuple[int, ...]
    kernel_input_feature: int
    kernel_output_feature: int
    kernel_spatial: tuple[int, ...]
    output_batch: int
    output_feature: int
    output_spatial: tuple[int, ...]
    window: tuple[WindowDim, ...]
    feature_group_count: int = 1
    batch_group_count: int = 1


@dataclass(frozen=True)
class Absorbed(_Record):
    """An equation with no instruction of its own whose work XLA folded into an instruction of another
    equation, and the rule of docs/corpus.md ("How XLA's rewrites are attributed") that proves it: 2 (a
    broadcast, iota or transpose folded into the one equation reading it), 3 (the same work kept once)."""

    eqn: int
    rule: int


# The rules an instruction's `absorbed` may name (docs/corpus.md).
ABSORBING_RULES = (2, 3)


@dataclass(frozen=True)
class Instruction(_Record):
    """One compiled HLO instruction, the equations it computes, and how that is known (`via`).

    `via` is one of `VIAS`: "tag" (its op_name carries an equation's tag), "inferred" (XLA dropped
    the metadata; the equation follows from dataflow), "region" (inside a reducer or comparator
    region: its holder's equations) or "none" (XLA's own: no equation, `eqns` empty). `eqns` are its
    own (for "tag", the one its tag names); `absorbed` are equations with no instruction of their own
    whose work it also does, each with the rule that proves it.
    """

    # The compiled facts (`ir/hlo_facts.py`) are omitted where empty, so records written before them still read;
    # so is `absorbed` (a record of an earlier release listed those equations in `eqns`).
    OMIT_DEFAULT = frozenset({"absorbed", "shape", "operands", "calls", "to_apply", "printed_opcode", "dot",
                              "convolution", "window", "control", "parameter", "custom_call_target", "backend_kind",
                              "tail", "cost_estimate", "dimensions", "slice"})
    line: int
    name: str
    opcode: str
    computation: str
    eqns: tuple[int, ...]
    via: str
    # Equations folded into it (`Absorbed`), by id.
    absorbed: tuple[Absorbed, ...] = ()
    # Its result shape: an index into its layer's `shapes` (None in a record written before them).
    shape: int | None = None
    # The lines of its operands' instructions, in operand order (its users are the instructions naming it).
    operands: tuple[int, ...] = ()
    # The computations it names with `calls=` (a fusion's, an async op's) and `to_apply=` (a reducer, a call's).
    calls: tuple[str, ...] = ()
    to_apply: tuple[str, ...] = ()
    # Its opcode as printed, only where that is not its layer's `printed_opcodes[opcode]`: XLA prints an
    # async wrapper (`asyncstart`) as the op it wraps (`reduce-scatter-start`).
    printed_opcode: str = ""
    # A dot's dimension numbers and a convolution's (dim_labels, window, group counts): what its FLOPs need.
    dot: DotDims | None = None
    convolution: ConvDims | None = None
    # A reduce-window's window (one entry per operand dimension): how many elements each result combines.
    window: tuple[WindowDim, ...] = ()
    # A parameter's number (`parameter(2)`): which operand of its fusion (or argument of its computation) it is.
    parameter: int | None = None
    # The computations a while (its condition, then its body) or a conditional (its branches, in order) runs.
    control: tuple[str, ...] = ()
    # A custom call's `custom_call_target` (`__cublas$gemm`), and the `"kind"` its backend_config names where
    # that is one of XLA's own (`__triton_gemm`): which kernel XLA chose for it.
    custom_call_target: str = ""
    backend_kind: str = ""
    # Where its trailing attributes start on its line (`metadata`, `backend_config`, `frontend_attributes`,
    # `sharding`, `operand_layout_constraints`): each name, first of each, with the column of its `, `, in order.
    tail: dict[str, int] = dataclasses.field(default_factory=dict)
    # The cost estimate a custom call's kernel carries (a Pallas `CostEstimate`, written into its backend_config as
    # `"cost_estimate":{"flops":"…",…}`): each count by name.
    cost_estimate: dict[str, int] = dataclasses.field(default_factory=dict)
    # The `dimensions={...}` a transpose (its permutation), reduce (the axes it combines away) or concatenate (its
    # axis) prints: what decides its result's shape (in a dump's record).
    dimensions: tuple[int, ...] = ()
    # A slice's `slice={[0:8], [0:64:2]}`: (start, limit, stride) per axis (in a dump's record).
    slice: tuple[tuple[int, int, int], ...] = ()

    @property
    def computed_eqns(self) -> tuple[int, ...]:
        """Every equation whose work it does: its own and those folded into it, in id order."""
        return tuple(sorted((*self.eqns, *(a.eqn for a in self.absorbed)))) if self.absorbed else self.eqns

    def short(self, line: str) -> str:
        """Its printed `line` without the trailing attributes, stripped."""
        return (line[:min(self.tail.values())] if self.tail else line).strip()

    def without(self, line: str, names: frozenset[str]) -> str:
        """Its printed `line`, stripped, without the trailing attributes `names` (each to the next, or the line's end)."""
        starts = sorted(self.tail.items(), key=lambda kv: kv[1])
        ends = [at for _, at in starts[1:]] + [len(line)]
        for (name, at), end in reversed(list(zip(starts, ends))):
            if name in names:
                line = line[:at] + line[end:]
        return line.strip()


VIAS = ("tag", "inferred", "region", "none")


def padded_elements(dims, minor_to_major, tiles) -> int:
    """Elements stored for `dims` laid out minor-to-major and tiled by `tiles` in turn (XLA's tiling).

    The first tile cuts the physical (major-to-minor) shape: its minor dims round up to the tile and
    become (count of tiles, tile); each later tile cuts the minor dims of that result, so a bf16
    `(2,1)` sub-tile pairs the rows inside each `(8,128)` tile. A scalar is one element, tiled too.
    """
    shape = [dims[i] for i in reversed(minor_to_major)] or [1]
    for tile in tiles:
        if len(shape) < len(tile):
            shape = [1] * (len(tile) - len(shape)) + shape
        head, minor = shape[:-len(tile)], shape[-len(tile):]
        shape = head + [-(-d // t) for d, t in zip(minor, tile)] + list(tile)
    return math.prod(shape)


@dataclass(frozen=True)
class Buffer(_Record):
    """One array of a compiled result as XLA's shape parser reads it: dims, element type, layout, memory space."""

    text: str  # as printed: bf16[256,512]{1,0:T(8,128)(2,1)S(1)}
    dtype: str  # as printed: bf16, f32, u32, pred
    dims: tuple[int, ...]
    minor_to_major: tuple[int, ...]
    tiles: tuple[tuple[int, ...], ...]
    memory_space: int  # the layout's `S(n)`; 0, the default (HBM on a TPU), is not printed
    # Bits per element as XLA stores it: 16 for bf16, and 4 for an s4 or f4e2m1fn packed two to a byte
    # (the layout's `E(4)`), so a sub-byte buffer's bytes are counted as XLA counts them.
    bits: int

    @property
    def plain(self) -> str:
        """The shape without its layout: `bf16[256,512]`."""
        return self.text.split("{", 1)[0]

    def padded_bytes(self, tiles=None) -> int:
        """Bytes the tiled buffer takes, padding included: each tile pads the minor dims it covers."""
        elements = padded_elements(self.dims, self.minor_to_major, self.tiles if tiles is None else tiles)
        return -(-elements * self.bits // 8)

    def width(self) -> str:
        """What one element takes, in words: `2 bytes`, `4 bits`."""
        return f"{self.bits // 8} byte{'s' if self.bits != 8 else ''}" if self.bits % 8 == 0 else f"{self.bits} bits"


@dataclass(frozen=True)
class ResultShape(_Record):
    """An instruction's result shape as printed, and its arrays with layouts (a tuple's members, in order),
    as indices into its layer's `buffers`."""

    OMIT_DEFAULT = frozenset({"arrays"})
    text: str
    buffers: tuple[int, ...]
    # Every array it prints, in order: element type, dims, and whether it prints a layout (then it is the next of
    # `buffers`); a scalar printed without one (`f32[]`, as regions print them) is only here.
    arrays: tuple[tuple[str, tuple[int, ...], bool], ...] = ()


@dataclass(frozen=True)
class Computation(_Record):
    """One printed computation: its name, its lines (signature to closing brace) and its ROOT's line."""

    OMIT_DEFAULT = frozenset({"entry"})
    name: str
    lines: tuple[int, int]
    root: int
    entry: bool = False


@dataclass(frozen=True)
class Sharding(_Record):
    """A compiled sharding (`sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}`) as XLA's HloSharding reads it.

    Recorded only when it is replicated or a plain tiling (not manual, maximal or with subgroups).
    """

    OMIT_DEFAULT = frozenset({"tile_dims", "devices", "last_tile_dim_replicate", "iota_reshape", "iota_transpose"})
    replicated: bool
    tile_dims: tuple[int, ...] = ()  # tile_assignment_dimensions
    devices: tuple[int, ...] = ()  # tile_assignment_devices, in order
    last_tile_dim_replicate: bool = False  # the last tile count counts copies of each block
    # The iota form as printed, `<=[2,4]T(1,0)`: the devices' reshape and its transpose (() where not printed).
    iota_reshape: tuple[int, ...] = ()
    iota_transpose: tuple[int, ...] = ()


@dataclass(frozen=True)
class EntryParameter(_Record):
    """A parameter of the entry computation: its instruction's line, its number, its argument's name, its sharding."""

    OMIT_DEFAULT = frozenset({"op_name", "sharding"})
    line: int
    number: int
    op_name: str = ""  # its metadata's op_name: the argument's name
    sharding: Sharding | None = None


@dataclass(frozen=True)
class Alias(_Record):
    """One entry of the module's `input_output_alias`: output {output} may take parameter's buffer (at its index)."""

    output: tuple[int, ...]
    parameter: int
    parameter_index: tuple[int, ...]
    kind: str  # may-alias, must-alias


@dataclass(frozen=True)
class ReplicaGroups(_Record):
    """A collective's `replica_groups` as printed (list or iota form) and as device positions."""

    line: int
    printed: str
    groups: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class WhileCounter(_Record):
    """A compiled while's loop counter as XLA's graph shows it: its state slot, start, step and bound.

    `direction` is the condition's compare written counter-first (LT: `counter < limit` keeps looping);
    `exact` is False where the condition also stops on something else (an `and` of tests). `known` is XLA's own
    count of its runs where its line states one (`known_trip_count` in its backend_config), None where it does not.
    """

    OMIT_DEFAULT = frozenset({"known"})
    line: int  # the while instruction
    slot: int
    init: int
    step: int
    direction: str
    limit: int
    exact: bool
    start: tuple[int, ...]  # the lines that set the counter's first value, and the while's own
    condition: str  # the condition computation
    update: tuple[int, ...]  # the body's lines that move the counter and return it
    known: int | None = None


@dataclass(frozen=True)
class Fusion(_Record):
    """A fusion instruction and every equation whose work it absorbed."""

    line: int
    name: str
    kind: str
    eqns: tuple[int, ...]


@dataclass(frozen=True)
class HloStats(_Record):
    """Counts over the compiled layer."""

    instructions: int
    with_op_name: int
    arguments: int
    attributed: int
    unattributed_with_op_name: int
    compiler_own: int  # via "none": XLA's own plumbing
    fusions: int
    by_tag: int  # via "tag"
    inferred: int  # via "inferred"
    in_regions: int  # via "region"


@dataclass(frozen=True)
class PassDump(_Record):
    """One of XLA's per-pass dumps of a module (`--xla_dump_hlo_pass_re`), as its file name says where it was
    written: in `pipeline`, after pass `after` had run (`pipeline-start`: none yet) and before `before` runs
    (`pipeline-end`: none is left); a dump written inside a pass (copy insertion's steps) names the pass as
    `after`, the step as `during`, and no pipeline."""

    OMIT_DEFAULT = frozenset({"during"})
    step: int  # XLA's step number for the module (the file's `NNNN`), in the order it wrote them
    pipeline: str
    after: str
    before: str
    during: str = ""


@dataclass(frozen=True)
class PassOrigin(_Record):
    """Where one optimised instruction (by `line`) came from in the per-pass dumps: `made`, the first dump that
    prints its name (an index into `PassHistory.dumps`), and `exact`, whether that dump's pass made it for
    certain; `changed`, the later dumps whose printed line of it differs from the one before; and around it, from
    the dump before `made` and from `made` itself, the lines it replaced (`before`, as far as the texts tell
    them: `note` says how, or why they cannot be told) and its own line, a fusion's with its body (`after`). An
    instruction made with its computation (a new fusion's body) has neither, nor a note: its fusion shows them."""

    OMIT_DEFAULT = frozenset({"changed", "before", "after", "note"})
    line: int
    made: int
    exact: bool
    changed: tuple[int, ...] = ()
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class PassHistory(_Record):
    """A module's pass pipeline as its per-pass dumps show it (`dumps/passes.py`): each dump in XLA's order, the
    `--xla_dump_hlo_pass_re` it was dumped with where the folder says it, and each optimised instruction's origin
    that some dump prints (the lines of the texts around each are cut to a budget: the optimised text's size)."""

    dumps: tuple[PassDump, ...]
    pass_re: str
    origins: tuple[PassOrigin, ...]

    def check_against(self, lines: int, path: str) -> None:
        """Every origin is a line of the compiled text and names dumps that exist."""
        for i, o in enumerate(self.origins):
            _lines_within((o.line,), lines, f"{path}.origins[{i}].line", "the compiled HLO")
            for k in (o.made, *o.changed):
                if not 0 <= k < len(self.dumps):
                    raise RecordError(f"{_at(f'{path}.origins[{i}]')}: no dump {k} of {len(self.dumps)}")


_COMPILED_FACTS = ("computations", "shapes", "buffers", "printed_opcodes", "entry_parameters", "aliases",
                   "replica_groups", "while_counters", "xla_cost", "xla_memory")


@dataclass(frozen=True)
class CompiledLayer(_Record):
    """XLA's compiled HLO of a program, what compiled it, and which equations each line holds.

    A CPU layer names the host (XLA targets its CPU); a TPU layer names the device kind, topology and
    libtpu version it was compiled for without a TPU, and a GPU layer the device kind, `NAME:1x1xN`
    and CUDA plugin version it was compiled for without a GPU; both leave `host` empty. A layer read from a
    user's dump (`add --dump`) was compiled by the run that wrote it: it names no host (`host_id` empty).
    """

    OMIT_DEFAULT = frozenset({"device_kind", "topology", "libtpu_version", "cuda_plugin_version", "passes",
                              *_COMPILED_FACTS})
    text: str
    backend: str
    jaxlib_version: str
    host: str
    host_id: str
    instructions: tuple[Instruction, ...]
    fusions: tuple[Fusion, ...]
    lines_by_eqn: dict[str, tuple[int, ...]]
    stats: HloStats
    # TPU only: the device kind and topology as libtpu names them ("TPU v5 lite", "v5e:2x2"), and its version.
    device_kind: str = ""
    topology: str = ""
    libtpu_version: str = ""
    # GPU only: the version of JAX's CUDA plugin that compiled it (`backend` "gpu").
    cuda_plugin_version: str = ""
    # The compiled facts, read from the module once by the stage that compiles (`ir/hlo_facts.py`). A record
    # written before them has none (`has_facts` is False): the drills that read them ask nothing of it.
    computations: tuple[Computation, ...] = ()
    shapes: tuple[ResultShape, ...] = ()  # each distinct printed result shape once; `Instruction.shape` indexes it
    buffers: tuple[Buffer, ...] = ()  # each distinct array with its layout once; `ResultShape.buffers` index it
    # Each opcode as the record spells it -> as the text prints it (`allreduce` -> `all-reduce`), from its first
    # instruction; an instruction printed otherwise says so itself (`Instruction.printed_opcode`).
    printed_opcodes: dict[str, str] = dataclasses.field(default_factory=dict)
    entry_parameters: tuple[EntryParameter, ...] = ()
    aliases: tuple[Alias, ...] = ()  # the module's input_output_alias, in printed order
    replica_groups: tuple[ReplicaGroups, ...] = ()  # of every instruction that prints them
    while_counters: tuple[WhileCounter, ...] = ()  # of every while whose counter XLA's graph shows
    # XLA's own totals for the module, as the compiled executable reports them (cost/estimate.py sets ours beside them):
    # `cost_analysis()`'s flops, transcendentals, bytes accessed and optimal_seconds where it gives them (a GPU
    # compiled without one gives none), and `memory_analysis()`'s sizes in bytes.
    xla_cost: dict[str, float] = dataclasses.field(default_factory=dict)
    xla_memory: dict[str, int] = dataclasses.field(default_factory=dict)
    # A dump read with its per-pass files (`--xla_dump_hlo_pass_re`): the pass that made each instruction.
    passes: PassHistory | None = None

    def printed(self, ins: Instruction) -> str | None:
        """An instruction's opcode as its line prints it (`all-reduce`), or None without the compiled facts."""
        return ins.printed_opcode or self.printed_opcodes.get(ins.opcode)

    @property
    def has_facts(self) -> bool:
        """Whether the record carries the compiled facts (every compiled module has an entry computation)."""
        return bool(self.computations)

    def check_against(self, n_eqns: int, path: str) -> None:
        """Every line is in the compiled text and every equation id exists."""
        lines = _line_count(self.text)
        self._check_facts(path, lines)
        if self.passes is not None:
            self.passes.check_against(lines, f"{path}.passes")
        for name, rows in (("instructions", self.instructions), ("fusions", self.fusions)):
            for i, row in enumerate(rows):
                _lines_within((row.line,), lines, f"{path}.{name}[{i}].line", "the compiled HLO")
                for e in row.eqns:
                    _eqn_within(e, n_eqns, f"{path}.{name}[{i}].eqns")
        for i, row in enumerate(self.instructions):
            if row.via not in VIAS:
                raise RecordError(f"{_at(f'{path}.instructions[{i}].via')}: {row.via!r}, "
                                  f"expected one of {', '.join(VIAS)}")
            if (row.via == "none") != (not row.eqns):
                raise RecordError(f"{_at(f'{path}.instructions[{i}].via')}: {row.via!r} with eqns {list(row.eqns)}")
            for k, a in enumerate(row.absorbed):
                at = f"{path}.instructions[{i}].absorbed[{k}]"
                _eqn_within(a.eqn, n_eqns, f"{at}.eqn")
                if a.rule not in ABSORBING_RULES or a.eqn in row.eqns or not row.eqns:
                    raise RecordError(f"{_at(at)}: equation {a.eqn} by rule {a.rule} beside eqns {list(row.eqns)}")
        for key, hlo_lines in self.lines_by_eqn.items():
            if not key.isdigit():
                raise RecordError(f"{_join(path, 'lines_by_eqn')}: key {key!r} is not an equation id")
            _eqn_within(int(key), n_eqns, _join(path, "lines_by_eqn"))
            _lines_within(hlo_lines, lines, f"{_join(path, 'lines_by_eqn')}.{key}", "the compiled HLO")


    def _check_facts(self, path: str, lines: int) -> None:
        """The compiled facts point at instructions, computations and shapes that exist."""
        at_line = {i.line: i for i in self.instructions}
        names = {c.name for c in self.computations}

        def instruction_at(line: int, where: str) -> Instruction:
            if line not in at_line:
                raise RecordError(f"{_at(where)}: no instruction on line {line}")
            return at_line[line]

        for i, c in enumerate(self.computations):
            _lines_within(c.lines, lines, f"{path}.computations[{i}].lines", "the compiled HLO")
            if instruction_at(c.root, f"{path}.computations[{i}].root").computation != c.name:
                raise RecordError(f"{_at(f'{path}.computations[{i}].root')}: line {c.root} is not in {c.name}")
        if self.computations and sum(c.entry for c in self.computations) != 1:
            raise RecordError(f"{_join(path, 'computations')}: {sum(c.entry for c in self.computations)} entries, "
                              "expected 1")
        for i, shape in enumerate(self.shapes):
            if any(not 0 <= b < len(self.buffers) for b in shape.buffers):
                raise RecordError(f"{_at(f'{path}.shapes[{i}].buffers')}: "
                                  f"an index past the {len(self.buffers)} buffers")
        for i, ins in enumerate(self.instructions):
            where = f"{path}.instructions[{i}]"
            if ins.shape is not None and not 0 <= ins.shape < len(self.shapes):
                raise RecordError(f"{_at(where + '.shape')}: no shape {ins.shape}")
            for line in ins.operands:
                instruction_at(line, f"{where}.operands")
            for name in (*ins.calls, *ins.to_apply):
                if name not in names:
                    raise RecordError(f"{_at(where + '.calls')}: no computation {name!r}")
            if self.has_facts and ins.opcode not in self.printed_opcodes:
                raise RecordError(f"{_join(path, 'printed_opcodes')}: no printed name for {ins.opcode!r}")
        for i, p in enumerate(self.entry_parameters):
            if instruction_at(p.line, f"{path}.entry_parameters[{i}].line").opcode != "parameter":
                raise RecordError(f"{_at(f'{path}.entry_parameters[{i}].line')}: line {p.line} is not a parameter")
        numbers = {p.number for p in self.entry_parameters}
        for i, a in enumerate(self.aliases):
            if a.parameter not in numbers:
                raise RecordError(f"{_at(f'{path}.aliases[{i}].parameter')}: no entry parameter {a.parameter}")
        for i, g in enumerate(self.replica_groups):
            instruction_at(g.line, f"{path}.replica_groups[{i}].line")
        for i, w in enumerate(self.while_counters):
            where = f"{path}.while_counters[{i}]"
            if instruction_at(w.line, f"{where}.line").opcode != "while":
                raise RecordError(f"{_at(where + '.line')}: line {w.line} is not a while")
            for line in (*w.start, *w.update):
                instruction_at(line, f"{where}.start")
            if w.condition not in names:
                raise RecordError(f"{_at(where + '.condition')}: no computation {w.condition!r}")


@dataclass(frozen=True)
class MainValue(_Record):
    """One argument or result of the lowered `main`: its type, shape, Shardy sharding and donation."""

    OMIT_DEFAULT = frozenset({"sharding", "aliasing_output"})
    type: str  # as MLIR prints it: tensor<32x64xf32>
    shape: tuple[int, ...] | None  # a ranked tensor's dims; None for any other type
    # Its `sdy.sharding`: the mesh axes along each array axis; None without one (or where it names sub-axes).
    sharding: tuple[tuple[str, ...], ...] | None = None
    aliasing_output: int | None = None  # an argument's `tf.aliasing_output`: the result that may take its buffer


@dataclass(frozen=True)
class MainSignature(_Record):
    """The lowered module's public `main`: the line that declares it, its arguments and its results."""

    line: int
    args: tuple[MainValue, ...]
    results: tuple[MainValue, ...]


@dataclass(frozen=True)
class SdyMesh(_Record):
    """An `sdy.mesh` of the lowered module: its line and its axes, (name, size) in order."""

    line: int
    axes: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class ShardingConstraint(_Record):
    """An `sdy.sharding_constraint`: its line, its result's type and shape, its sharding (as `MainValue`'s)."""

    line: int
    type: str
    shape: tuple[int, ...] | None
    sharding: tuple[tuple[str, ...], ...] | None


@dataclass(frozen=True)
class StablehloCollective(_Record):
    """A lowered op with `replica_groups`: its name, line and groups (device positions, -1 padding as MLIR holds it)."""

    name: str
    line: int
    replica_groups: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class LoweredModule(_Record):
    """What MLIR reads in the lowered module, once, for the drills: main's signature, meshes, constraints and
    collectives."""

    main: MainSignature | None
    meshes: tuple[SdyMesh, ...]
    sharding_constraints: tuple[ShardingConstraint, ...]
    collectives: tuple[StablehloCollective, ...]

    def check_against(self, lines: int, path: str) -> None:
        """Every line is in the StableHLO text and every alias names a result."""
        if self.main is not None:
            _lines_within((self.main.line,), lines, f"{path}.main.line", "the StableHLO")
            for i, arg in enumerate(self.main.args):
                if arg.aliasing_output is not None and not 0 <= arg.aliasing_output < len(self.main.results):
                    raise RecordError(f"{_at(f'{path}.main.args[{i}].aliasing_output')}: "
                                      f"no result {arg.aliasing_output}")
        for name, rows in (("meshes", self.meshes), ("sharding_constraints", self.sharding_constraints),
                           ("collectives", self.collectives)):
            for i, row in enumerate(rows):
                _lines_within((row.line,), lines, f"{path}.{name}[{i}].line", "the StableHLO")


# A keyword value as a `Call` writes it: a JSON scalar, or one of these tagged forms (`program.call_value`).
CALL_FORMS = ("function", "partition_spec", "tuple")
_FUNCTION_REF = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


@dataclass(frozen=True)
class Call(_Record):
    """How a compile with one change calls the function `entry` names otherwise than its base does, so that it
    can be traced again from the export alone (`program.called`): first, where `jit` is not None, the function
    under `entry`'s own `jax.jit` (its `__wrapped__`) is jitted anew with those options (`{}`: jit's defaults,
    so nothing donated); then it is called with `keywords` beside its positional arguments, each value a JSON
    scalar or `{"function": "module:qualname"}`, `{"partition_spec": [axis, ...]}` (an axis a name, null or a
    list of names) or `{"tuple": [value, ...]}`."""

    OMIT_DEFAULT = frozenset({"keywords", "jit"})
    keywords: dict = dataclasses.field(default_factory=dict)
    jit: dict | None = None

    def check(self, path: str) -> None:
        """Every keyword value is one `program.called` reads, and something differs from the base's call."""
        if not self.keywords and self.jit is None:
            raise RecordError(f"{_at(path)}: a call that changes nothing (no keywords, no jit)")
        for name, value in self.keywords.items():
            if not name.isidentifier():
                raise RecordError(f"{_at(_join(path, 'keywords'))}: {name!r} is not a keyword")
            _check_call_value(value, f"{_join(path, 'keywords')}.{name}")


def _check_call_value(value, path: str) -> None:
    if value is None or isinstance(value, (str, int, float, bool)):
        return
    if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in CALL_FORMS:
        raise RecordError(f"{_at(path)}: {value!r} is not a JSON scalar or one of {', '.join(CALL_FORMS)}")
    (form, inner), = value.items()
    if form == "function" and not (isinstance(inner, str) and _FUNCTION_REF.fullmatch(inner)):
        raise RecordError(f"{_at(path)}.function: {inner!r} is not module:qualname")
    if form == "partition_spec" and not (isinstance(inner, list) and all(
            a is None or isinstance(a, str) or (isinstance(a, list) and all(isinstance(n, str) for n in a))
            for a in inner)):
        raise RecordError(f"{_at(path)}.partition_spec: {inner!r} is not a list of axes (a name, null or names)")
    if form == "tuple":
        if not isinstance(inner, list):
            raise RecordError(f"{_at(path)}.tuple: {inner!r} is not a list")
        for k, item in enumerate(inner):
            _check_call_value(item, f"{path}.tuple[{k}]")


@dataclass(frozen=True)
class DumpFile(_Record):
    """One file of a dump folder that the module was read from: its layer (`jaxpr`, `stablehlo`, `hlo_before`,
    `hlo_after`, `buffers`, ...), its path as the folder gives it, and its size (None: unreadable)."""

    layer: str
    path: str
    bytes: int | None


@dataclass(frozen=True)
class DumpAllocation(_Record):
    """One allocation of XLA's buffer assignment: its number, size, what it holds and its largest value."""

    number: int
    bytes: int
    kind: str
    value: str


@dataclass(frozen=True)
class DumpBuffers(_Record):
    """What XLA's buffer reports say of a module: its allocations (the largest, and how many in all), their
    bytes by kind, the memory-usage report's total, and the live-range report's peak with what is live then."""

    total_bytes: int | None
    allocations: tuple[DumpAllocation, ...]
    allocation_count: int
    allocated_bytes: int
    bytes_by_kind: dict[str, int]
    peak_bytes: int | None = None
    peak_at: str = ""
    live_at_peak: dict[str, int] = dataclasses.field(default_factory=dict)  # buffer -> bytes, as XLA lists them


@dataclass(frozen=True)
class DumpSourceLine(_Record):
    """One source line of a module dumped without JAX's layers: its row in `DumpFacts.source`, and the lines of
    the HLO before optimisations (`before`) and of the optimised HLO (`hlo`) whose stack frame names it."""

    row: int
    before: tuple[int, ...]
    hlo: tuple[int, ...]


@dataclass(frozen=True)
class DumpArray(_Record):
    """An operand or result of a dot of the HLO before optimisations: the instruction's name, its type as printed
    (`f32[32,8]{1,0}`), and that type's element type and dims."""

    name: str
    type: str
    dtype: str
    dims: tuple[int, ...]


@dataclass(frozen=True)
class DumpDot(_Record):
    """One `dot` of the HLO before optimisations (`DumpFacts.hlo_before`): its line, its dimension numbers as
    printed, its result and its two operands (`ir/hlo_before.py`), and the `op_name` its metadata gives it (JAX's
    name stack: `jit(f)/transpose(jvp())/dot_general` in a gradient's backward pass), "" for none."""

    OMIT_DEFAULT = frozenset({"op_name"})
    line: int
    name: str
    dims: DotDims
    result: DumpArray
    lhs: DumpArray
    rhs: DumpArray
    op_name: str = ""


@dataclass(frozen=True)
class DumpFacts(_Record):
    """What only a dump folder says of a module (`dumps/facts.py`): the files it was read from, what could not be
    read (`notes`), the links in words (`counts`), XLA's HLO before optimisations, its buffers, and for a module
    without JAX's layers the source lines its stack frames name, linked to both HLO layers, and the dots of the HLO
    before optimisations (`dots`: none in a record written before them). For a module without a jaxpr, the
    optimised instructions' exact links (`dumps/exact.py`), by their line as a string: to the one line of the HLO
    before optimisations each came from (`before_links`) and to the StableHLO op lines of the one op's each came from
    (`stablehlo_links`), and the lines before optimisations an optimised instruction left undecided may have come from
    (`before_undecided`); none in a record written before them or with a jaxpr."""

    OMIT_DEFAULT = frozenset({"dots", "before_links", "stablehlo_links", "before_undecided"})
    module: str
    folders: tuple[str, ...]
    target: str
    files: tuple[DumpFile, ...]
    notes: tuple[str, ...] = ()
    counts: tuple[str, ...] = ()
    hlo_before: str = ""
    buffers: DumpBuffers | None = None
    source: str = ""
    source_files: dict[str, bool] = dataclasses.field(default_factory=dict)
    source_lines: tuple[DumpSourceLine, ...] = ()
    dots: tuple[DumpDot, ...] = ()
    before_links: dict[str, int] = dataclasses.field(default_factory=dict)
    stablehlo_links: dict[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    before_undecided: tuple[int, ...] = ()

    def check(self, path: str) -> None:
        """Each source line's rows and before-optimisation lines, and each dot's line, point into the texts held."""
        rows, before = _line_count(self.source) if self.source else 0, _line_count(self.hlo_before) if self.hlo_before else 0
        for i, s in enumerate(self.source_lines):
            _lines_within((s.row,), rows, f"{_join(path, 'source_lines')}[{i}].row", "the source rows")
            _lines_within(s.before, before, f"{_join(path, 'source_lines')}[{i}].before", "the HLO before optimisations")
        for i, d in enumerate(self.dots):
            _lines_within((d.line,), before, f"{_join(path, 'dots')}[{i}].line", "the HLO before optimisations")
        _lines_within((*self.before_links.values(), *self.before_undecided), before, _join(path, "before_links"),
                      "the HLO before optimisations")


@dataclass(frozen=True)
class ProgramRecord(_Record):
    """Everything the export says about one program."""

    OMIT_DEFAULT = frozenset({"jax_version", "added", "platform", "lowered", "variant_of", "change", "call",
                              "arg_binders", "dump"})
    slug: str
    title: str
    lesson: str
    entry: str
    args: tuple[str, ...]
    mesh: dict[str, int] | None
    in_specs: list | None
    source: str
    jaxpr: str
    stablehlo: str
    eqns: tuple[EqnFact, ...]
    xray: tuple[Group, ...]
    stablehlo_ops: tuple[StablehloOp, ...]
    lowered_to_nothing: tuple[LoweredToNothing, ...]
    xray_stats: XrayStats
    # XLA's compiled HLO by compile target id (`record/targets.py`: `TARGETS`, "tpu", "gpu", "cpu", ...), in the
    # registry's order; empty for a program added without `--hlo`. Each layer names what compiled it.
    compiled: dict[str, CompiledLayer] = dataclasses.field(default_factory=dict)
    # The JAX that traced this program when it was traced apart from its corpus (an added program);
    # the built-in programs share the corpus's `jax_version`.
    jax_version: str | None = None
    # True for a program the user added (`load_corpus` marks them; the page's "your programs" filter).
    added: bool = False
    # The platform the StableHLO was lowered for: "tpu" for a program only a TPU can lower (a Pallas
    # kernel), which then has only TPU layers in `compiled` and says why on the page.
    platform: str = "cpu"
    # What MLIR read in the StableHLO when it was lowered (`ir/stablehlo.py`); None in a record written
    # before it, where the drills that read it ask nothing.
    lowered: LoweredModule | None = None
    # The slug of the program this record is a traced variant of (the same code at other example shapes
    # or on another mesh: `mlp-2` of `mlp`), or None for a program in its own right. Variants are drawn
    # in drills but are not counted or listed as programs of the gym.
    variant_of: str | None = None
    # For a compile of `variant_of` with one change (`mlp-f32`: "f32 instead of bf16"), that change in words;
    # None for every other record. `cost/compare.py` sets the two records' compiled layers side by side.
    change: str | None = None
    # For a change that calls `entry` otherwise than the base (a keyword, jit's options): how, so that it is traced
    # again from the export alone; None where it calls `entry` as the base does (other args or in_specs only).
    call: Call | None = None
    # The top-level jaxpr's arguments (its invars) as it binds them, `{ lambda ; a:f32[8] b:...`, with their
    # lines (`ir/jaxpr.py`); empty in a record written before them or without a jaxpr.
    arg_binders: tuple[Binder, ...] = ()
    # For a module read from a dump folder (`dumps/facts.py`), what only the dump says of it; None for a traced
    # program, and left out of its JSON then.
    dump: DumpFacts | None = None

    @classmethod
    def from_json(cls, value, path: str = ""):
        """A typed record from parsed JSON of either schema (`READS`); raises `RecordError` naming the field."""
        return super().from_json(upgrade_program(value), path)

    def layers(self, backend: str | None = None) -> dict[str, CompiledLayer]:
        """The compiled layers by target id, in order; with `backend`, only those compiled for it (`tpu`)."""
        return {k: v for k, v in self.compiled.items() if backend is None or v.backend == backend}

    def ancestors(self, eqn: EqnFact) -> list[EqnFact]:
        """The containers that hold `eqn`, innermost first."""
        out = []
        while eqn.parent is not None:
            eqn = self.eqns[eqn.parent]
            out.append(eqn)
        return out

    def in_backward(self, eqn: EqnFact) -> bool:
        """Whether JAX's name stack puts `eqn`, or a container around it, in a transpose (a gradient's backward pass)."""
        return any("transpose(" in e.name_stack for e in (eqn, *self.ancestors(eqn)))

    def check(self, path: str) -> None:
        """Slug, equation ids and every line number point at something that exists."""
        if not valid_slug(self.slug):
            raise RecordError(f"{_join(path, 'slug')}: {self.slug!r} is not a slug (lowercase letters, digits, dashes)")
        if self.variant_of is not None and (not valid_slug(self.variant_of) or self.variant_of == self.slug):
            raise RecordError(f"{_join(path, 'variant_of')}: {self.variant_of!r} is not another program's slug")
        if self.change is not None and (self.variant_of is None or not self.change.strip()):
            raise RecordError(f"{_join(path, 'change')}: a change names the program it changes (variant_of) and says what it is")
        if self.call is not None:
            if self.change is None:
                raise RecordError(f"{_join(path, 'call')}: only a compile with one change (`change`) calls its entry otherwise")
            self.call.check(_join(path, "call"))
        n = len(self.eqns)
        for i, e in enumerate(self.eqns):
            if e.id != i:
                raise RecordError(f"{_join(path, 'eqns')}[{i}].id: {e.id}, expected {i} (ids follow print order)")
            if e.parent is not None and not 0 <= e.parent < n:
                raise RecordError(f"{_join(path, 'eqns')}[{i}].parent: no equation {e.parent}")
            if e.sources and len(e.sources) != len(e.inputs):
                raise RecordError(f"{_join(path, 'eqns')}[{i}].sources: {len(e.sources)} for {len(e.inputs)} inputs")
            for j, src in enumerate(e.sources):
                if src is not None and src.eqn is not None and not 0 <= src.eqn < n:
                    raise RecordError(f"{_join(path, 'eqns')}[{i}].sources[{j}].eqn: no equation {src.eqn}")
        jaxpr_n, shlo_n = _line_count(self.jaxpr), _line_count(self.stablehlo)
        for i, e in enumerate(self.eqns):
            _lines_within(e.jaxpr_lines, jaxpr_n, f"{_join(path, 'eqns')}[{i}].jaxpr_lines", "the jaxpr")
            _lines_within([b.line for b in e.binders], jaxpr_n, f"{_join(path, 'eqns')}[{i}].binders", "the jaxpr")
            _lines_within([n for s in e.bodies for n in (s.first, s.last)], jaxpr_n,
                          f"{_join(path, 'eqns')}[{i}].bodies", "the jaxpr")
        _lines_within([b.line for b in self.arg_binders], jaxpr_n, _join(path, "arg_binders"), "the jaxpr")
        for i, g in enumerate(self.xray):
            _eqn_within(g.eqn, n, f"{_join(path, 'xray')}[{i}].eqn")
            _lines_within(g.jaxpr_lines, jaxpr_n, f"{_join(path, 'xray')}[{i}].jaxpr_lines", "the jaxpr")
            _lines_within(g.stablehlo_lines, shlo_n, f"{_join(path, 'xray')}[{i}].stablehlo_lines", "the StableHLO")
        for i, op in enumerate(self.stablehlo_ops):
            _lines_within((op.line,), shlo_n, f"{_join(path, 'stablehlo_ops')}[{i}].line", "the StableHLO")
        for i, gone in enumerate(self.lowered_to_nothing):
            _eqn_within(gone.eqn, n, f"{_join(path, 'lowered_to_nothing')}[{i}].eqn")
        if self.lowered is not None:
            self.lowered.check_against(shlo_n, _join(path, "lowered"))
        for target, layer in self.compiled.items():
            if not valid_target_id(target):
                raise RecordError(f"{_join(path, 'compiled')}: {target!r} is not a compile target id")
            layer.check_against(n, f"{_join(path, 'compiled')}.{target}")
        if self.dump is not None:
            self.dump.check(_join(path, "dump"))


# "dumpgym.corpus/1" kept each compiled layer in a field of its own; the target id each one is now.
_CORPUS1_LAYERS = (("hlo", None), ("hlo_tpu", "tpu"), ("hlo_gpu", "gpu"))


def upgrade_program(value):
    """A program record of "dumpgym.corpus/1" in the shape of "dumpgym.corpus/2"; anything else as it is.

    corpus/1's `hlo` held the CPU's layer, or for a program added with `--hlo gpu` by an early release,
    a GPU's: its `backend` says which target it is.
    """
    if not isinstance(value, dict) or "compiled" in value or not any(k in value for k, _ in _CORPUS1_LAYERS):
        return value
    out = {k: v for k, v in value.items() if k not in dict(_CORPUS1_LAYERS)}
    compiled = {}
    for key, target in _CORPUS1_LAYERS:
        layer = value.get(key)
        if layer is None:
            continue
        if target is None:
            target = layer.get("backend") if isinstance(layer, dict) and layer.get("backend") in ("cpu", "gpu") else "cpu"
        compiled.setdefault(target, layer)
    # In the registry's order (tpu, gpu, cpu), as a fresh corpus/2 record writes them.
    out["compiled"] = {t: compiled[t] for t in ("tpu", "gpu", "cpu") if t in compiled}
    return out


def _line_count(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def _lines_within(lines, count: int, path: str, what: str) -> None:
    for line in lines:
        if not 1 <= line <= count:
            raise RecordError(f"{_at(path)}: line {line} is outside {what} ({count} lines)")


def _eqn_within(eqn: int, count: int, path: str) -> None:
    if not 0 <= eqn < count:
        raise RecordError(f"{_at(path)}: no equation {eqn}")


@dataclass(frozen=True)
class Corpus(_Record):
    """A whole corpus: the JAX that traced it and its programs, unique by slug."""

    schema: str
    jax_version: str
    programs: tuple[ProgramRecord, ...]

    @classmethod
    def from_json(cls, value, path: str = ""):
        """A typed corpus from parsed JSON of either schema (`READS`); a corpus/1 one reads as corpus/2."""
        if isinstance(value, dict) and value.get("schema") in READS and isinstance(value.get("programs"), list):
            value = {**value, "schema": SCHEMA, "programs": [upgrade_program(p) for p in value["programs"]]}
        return super().from_json(value, path)

    def check(self, path: str) -> None:
        """The schema is ours, every program passes its own checks, and no slug is used twice."""
        for i, p in enumerate(self.programs):
            p.check(f"{_join(path, 'programs')}[{i}]")
        if self.schema != SCHEMA:
            raise RecordError(f"{_join(path, 'schema')}: {self.schema!r}, expected {SCHEMA!r}")
        seen = set()
        for i, p in enumerate(self.programs):
            if p.slug in seen:
                raise RecordError(f"{_join(path, 'programs')}[{i}].slug: {p.slug!r} is used twice")
            seen.add(p.slug)

    @property
    def bases(self) -> tuple[ProgramRecord, ...]:
        """The programs in their own right, without the traced variants: what the gym lists and counts."""
        return tuple(p for p in self.programs if p.variant_of is None)
