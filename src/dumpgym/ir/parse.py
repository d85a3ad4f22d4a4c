"""The parsers a dump folder's texts are read with, without JAX: StableHLO through jaxlib's MLIR
bindings (with the dialects JAX registers), HLO through XLA's HLO parser bindings (`jaxlib._hlo`),
the HLO source tables (`FileNames`, `FileLocations`, `StackFrames`, which the bindings do not reach)
and a jaxpr's equations (no parser exists outside a trace) with patterns.

The dump's stages (`dumps/folder.py` lists and pairs the files, `dumps/xray.py` links the layers,
`ir/memory.py` reads XLA's buffer reports) read a listing only through these.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

from dumpgym.errors import GymError
from dumpgym.ir.hlo_graph import OP_NAME_RE, unescaped

# A primitive's name, as a jaxpr prints it after `=`.
_PRIMITIVE = re.compile(r"[a-z_][\w-]*")  # `scatter-add`
_STACK_FRAME_ID = re.compile(r"stack_frame_id=(\d+)")
# HLO's source tables (JAX 0.9 on): the bindings give no access to them, the printed module does.
_TABLE_ROW = re.compile(r"^(\d+) (.*)$")
# Starts only at a word's start: from inside a long word it would rescan the word (quadratic).
_FIELD = re.compile(r"(?<!\w)(\w+)=(\"[^\"]*\"|\S+)")


class DumpError(GymError):
    """A folder that is not a dump, or a dump file that cannot be read; one line for the user."""


def read_text(path: Path) -> str:
    """A dump file's text, its lines ended by newlines alone; a `DumpError` where it cannot be read, is binary or is
    not UTF-8. JAX and XLA end lines with a newline: a file with CR LF endings is a copy made elsewhere (a Windows
    checkout), read as the text they wrote, so that every reader of a line sees the same line."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise DumpError(f"cannot read {path}: {e.strerror or e}") from None
    if not data:
        raise DumpError(f"{path} is empty")
    if path.name.endswith(".hlo.pb"):
        return _hlo_proto_text(data, path)
    if b"\x00" in data:
        raise DumpError(f"{path} is not text (a binary file)")
    try:
        return data.decode("utf-8").replace("\r\n", "\n")
    except UnicodeDecodeError:
        raise DumpError(f"{path} is not UTF-8 text") from None


def _hlo_proto_text(data: bytes, path: Path) -> str:
    """The HLO text of a module XLA dumped as a proto (`--xla_dump_hlo_as_proto`): an `HloProto`, whose field 1
    is the `HloModuleProto`, printed by XLA's own printer with its metadata, as the text dump has it."""
    from jaxlib import xla_client

    module = data
    if data[:1] == b"\x0a":  # field 1, length-delimited: the HloModuleProto inside an HloProto
        size, shift, at = 0, 0, 1
        while at < len(data):
            byte = data[at]
            size, shift, at = size | (byte & 0x7F) << shift, shift + 7, at + 1
            if byte < 0x80:
                break
        module = data[at:at + size] if at + size <= len(data) else data
    for candidate in (module, data):
        try:
            return xla_client.XlaComputation(candidate).get_hlo_module().to_string()
        except Exception:  # noqa: BLE001 - XLA says only that it does not parse; the line below says which file
            continue
    raise DumpError(f"{path} does not parse as an HLO proto (truncated?)")


@functools.cache
def _ir():
    """jaxlib's MLIR bindings, imported once (a location walk asks for them per op)."""
    from jaxlib.mlir import ir

    return ir


@functools.cache
def _registry():
    """The dialects JAX's lowerings print, registered once per process."""
    from jaxlib.mlir import ir
    from jaxlib.mlir._mlir_libs import _jax_mlir_ext

    registry = ir.DialectRegistry()
    _jax_mlir_ext.register_dialects(registry)
    return registry


def ir_context():
    """An MLIR context with the dialects JAX's lowerings print (stablehlo, chlo, sdy, func), without JAX.

    The registry's dialects are loaded as the parser meets them, not all up front: loading every one
    took 5 ms a context, most of what listing a folder of hundreds of small modules cost."""
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import chlo, sdy, stablehlo

    context = ir.Context()
    context.append_dialect_registry(_registry())
    for dialect in (stablehlo, chlo, sdy):
        dialect.register_dialect(context)
    context.allow_unregistered_dialects = True  # a dialect of a newer JAX still parses
    return context


def parse_stablehlo(text: str, path: Path, context=None):
    """The parsed MLIR module of a StableHLO dump; a `DumpError` naming the file where it does not parse."""
    from jaxlib.mlir import ir

    try:
        return ir.Module.parse(text, context=context or ir_context())
    except Exception as e:  # MLIRError: the first diagnostic is the line that says why
        first = str(e).splitlines()
        raise DumpError(f"{path} does not parse as StableHLO (truncated?): "
                        f"{first[1].strip() if len(first) > 1 else first[0]}") from None


def parse_hlo(text: str, path: Path):
    """The HloModule of an HLO dump, through XLA's own parser; a `DumpError` where it does not parse."""
    from jaxlib import _hlo

    try:
        return _hlo.hlo_module_from_text(text)
    except Exception as e:
        lines = [ln for ln in str(e).splitlines() if ln.strip()]
        raise DumpError(f"{path} does not parse as HLO (truncated?): {lines[0] if lines else e}") from None


def source_tables(printed: str, columns: bool = False) -> dict[int, tuple]:
    """stack_frame_id -> (file, line) of its own frame, from an HLO module's printed source tables; with
    `columns`, (file, line, column, end line, end column) where the table gives the columns (XLA copies them
    from the StableHLO location), else (file, line)."""
    tables: dict[str, dict[int, dict[str, str]]] = {}
    current = None
    for line in printed.splitlines():
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            current = tables.setdefault(line, {})
            continue
        if current is None:
            continue
        row = _TABLE_ROW.match(line)
        if not row:
            if line.startswith(("%", "ENTRY")):
                break
            current = None if not line else current
            continue
        fields = dict(_FIELD.findall(row.group(2))) if "=" in row.group(2) else {"value": row.group(2)}
        current[int(row.group(1))] = {k: v.strip('"') for k, v in fields.items()}
    files = tables.get("FileNames", {})
    locations = tables.get("FileLocations", {})
    out = {}
    for frame, row in tables.get("StackFrames", {}).items():
        location = locations.get(int(row.get("file_location_id", 0)))
        if location is None:
            continue
        name = files.get(int(location.get("file_name_id", 0)), {}).get("value", "")
        out[frame] = (name, int(location.get("line", 0)))
        if columns and "column" in location and "end_column" in location:  # the row's last field ends in '}'
            out[frame] += tuple(int(location.get(key, location.get("line", "0")).rstrip("}"))
                                for key in ("column", "end_line", "end_column"))
    return out


def function_names(printed: str) -> frozenset[str] | None:
    """The functions an HLO module's source tables name (`FunctionNames`: the functions its ops were traced
    in), or None where it prints no tables (JAX before 0.9)."""
    names, inside = set(), False
    for line in printed.split("\n"):
        if line == "FunctionNames":
            inside = True
        elif inside:
            row = _TABLE_ROW.match(line)
            if row is None:
                break
            names.add(row.group(2).strip('"'))
        elif line.startswith(("ENTRY", "%")):
            return None
    return frozenset(names) if inside else None


def hlo_op_names(module, columns: bool = False) -> list[tuple[str, str, str, tuple | None]]:
    """(computation, instruction, op_name, (file, line) of its stack frame) for every instruction with an op_name;
    with `columns`, the frame's columns too where the tables give them (`source_tables`)."""
    frames = source_tables(module.to_string(), columns)
    out = []
    for computation in module.computations():
        for instruction in computation.instructions():
            printed = instruction.to_string()
            meta = printed.split("metadata={", 1)[1] if "metadata={" in printed else ""
            name = OP_NAME_RE.search(meta)
            if name is None:
                continue
            frame = _STACK_FRAME_ID.search(meta)
            out.append((computation.name, instruction.name, unescaped(name.group(1)),
                        frames.get(int(frame.group(1))) if frame else None))
    return out


def stablehlo_locations(module) -> list[tuple]:
    """(op, its name stack, (file, line) of its innermost frame, that frame with its columns) for every op
    of a parsed module, in print order."""
    from jaxlib.mlir import ir

    out = []

    def visit(op):
        out.append((op, *location_key(op.location)))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return out


def location_key(location) -> tuple[str | None, tuple[str, int] | None, tuple | None]:
    """The name stack a location carries (`jit(f)/tanh`), the file and line of its innermost frame, and
    that frame with its columns (file, line, column, end line, end column)."""
    ir = _ir()

    top = _typed(location)
    # The outermost name is the name stack; names within it name the functions of the frames.
    name = top.name_str if type(top) is ir.NameLoc else None
    fine = None
    pending = [top]
    while pending and fine is None:
        loc = _typed(pending.pop(0))
        if type(loc) is ir.NameLoc:
            pending.insert(0, loc.child_loc)
        elif type(loc) is ir.CallSiteLoc:
            pending.insert(0, loc.callee)  # the innermost frame is the callee's
        elif type(loc) is ir.FileLineColLoc:
            fine = (loc.filename, loc.start_line, loc.start_col, loc.end_line, loc.end_col)
        elif type(loc) is ir.FusedLoc:
            pending[:0] = list(loc.locations)
    return name, (fine[0], fine[1]) if fine else None, fine


def _typed(loc):
    """A location as its own kind (`NameLoc`, `CallSiteLoc`, ...): the bindings may hand out the base type."""
    ir = _ir()

    if type(loc) is not ir.Location:
        return loc
    for cast in (ir.NameLoc, ir.CallSiteLoc, ir.FileLineColLoc, ir.FusedLoc):
        try:
            return cast(loc)
        except (ValueError, TypeError):
            continue
    return loc


def shapes_of_mlir(module) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]] | None:
    """The shapes of `main`'s arguments and results in a parsed StableHLO module (a token: `(-1,)`)."""
    from jaxlib.mlir import ir

    for op in module.body.operations:
        if op.operation.name == "func.func" and op.attributes["sym_name"].value == "main":
            kinds = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            return tuple(_dims(t) for t in kinds.inputs), tuple(_dims(t) for t in kinds.results)
    return None


def types_of_mlir(module) -> tuple[str, ...] | None:
    """The kinds of number of `main`'s arguments and results in a parsed StableHLO module, as numpy names
    them (`float32`, `int32`, `bool`; a token: `token`), to tell apart compiles of one shape."""
    from jaxlib.mlir import ir

    for op in module.body.operations:
        if op.operation.name == "func.func" and op.attributes["sym_name"].value == "main":
            kinds = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            return tuple(_number_name(t) for t in (*kinds.inputs, *kinds.results))
    return None


_MLIR_NUMBERS = {"i1": "bool", "bf16": "bfloat16", "f16": "float16", "f32": "float32", "f64": "float64",
                 "complex<f32>": "complex64", "complex<f64>": "complex128"}


def _number_name(type_) -> str:
    from jaxlib.mlir import ir

    try:
        element = str(ir.RankedTensorType(type_).element_type)
    except ValueError:
        return "token"
    if element in _MLIR_NUMBERS:
        return _MLIR_NUMBERS[element]
    if element.startswith("ui") and element[2:].isdigit():
        return f"uint{element[2:]}"
    if element.startswith("i") and element[1:].isdigit():
        return f"int{element[1:]}"
    return element.lower()  # f8E4M3FN and kin: compared as MLIR spells them


@functools.lru_cache(maxsize=2)
def _program_shape(module):
    """XLA's program shape of an HloModule, serialized once for both `shapes_of_hlo` and `types_of_hlo` (the
    module's whole proto is written to read it: a folder of hundreds of modules spent a second on the second)."""
    from jaxlib import xla_client

    return xla_client.XlaComputation(module.as_serialized_hlo_module_proto()).program_shape()


def types_of_hlo(module) -> tuple[str, ...]:
    """The same for an HloModule's entry parameters and results, from XLA's program shape."""
    shape = _program_shape(module)

    def kind(s):
        return str(s.element_type()).lower() if s.is_array() else "token"

    result = shape.result_shape()
    results = tuple(kind(s) for s in result.tuple_shapes()) if result.is_tuple() else (kind(result),)
    return tuple(kind(p) for p in shape.parameter_shapes()) + results


def _dims(type_) -> tuple[int, ...]:
    from jaxlib.mlir import ir

    try:
        return tuple(ir.RankedTensorType(type_).shape)
    except ValueError:
        return (-1,)  # a token: no shape


def shapes_of_hlo(module) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
    """The shapes of an HloModule's entry parameters and results, from XLA's program shape."""
    shape = _program_shape(module)

    def dims(s):
        return tuple(s.dimensions()) if s.is_array() else (-1,)

    result = shape.result_shape()
    results = tuple(dims(s) for s in result.tuple_shapes()) if result.is_tuple() else (dims(result),)
    return tuple(dims(p) for p in shape.parameter_shapes()), results


def jaxpr_primitives(text: str) -> list[str]:
    """The primitive of each printed equation of a jaxpr, in print order."""
    return [primitive for _line, primitive in jaxpr_equations(text)]


def jaxpr_equations(text: str) -> list[tuple[int, str]]:
    """(1-based line, primitive) of each printed equation of a jaxpr, in print order: output binders
    (`c:f32[8,4]`, `_:i32[]`) then `= primitive`, first on a line, after `let ` or after the `; ` that ends
    the one before on a jaxpr printed on one line. Read token by token, in time linear in the text (a pattern
    of repeated binders backtracks exponentially on `a:b:c:d` words)."""
    out = []
    for number, line in enumerate(text.split("\n"), start=1):
        starts = [len(line) - len(line.lstrip())]
        at = line.find("let ")
        while at != -1:
            if at == 0 or not (line[at - 1].isalnum() or line[at - 1] == "_"):
                starts.append(at + 4)
            at = line.find("let ", at + 4)
        at = line.find("; ")
        while at != -1:
            starts.append(at + 2)
            at = line.find("; ", at + 2)
        starts.sort()
        done = 0  # equations do not overlap: a `let ` inside one already read starts none
        for start in starts:
            if start < done:
                continue
            found = _equation_at(line, start)
            if found is not None:
                out.append((number, found[0]))
                done = found[1]
    return out


def _equation_at(line: str, start: int) -> tuple[str, int] | None:
    """The primitive of an equation printed from `start` of a line (binders, `=`, primitive) and where it
    ends, or None."""
    binders, at = 0, start
    while True:
        end = line.find(" ", at)
        if end == -1:
            return None
        token = line[at:end]
        if token == "=":
            m = _PRIMITIVE.match(line, end + 1)
            return (m.group(0), m.end()) if binders and m else None
        if ":" not in token[1:-1] or token.endswith(";"):  # a binder never ends an equation: each start reads to the next
            return None
        binders, at = binders + 1, end + 1


def located_ops(text: str, path: Path) -> tuple[str, list[tuple], list[tuple], list, list, object]:
    """A dumped StableHLO module's ops, read twice: as dumped (each op's name, `location_key`, callee and depth),
    and as shown (printed without locations, parsed again: each op's name, line there and function). Returns
    the shown text, the two lists in the ops' walk order, the dumped ops themselves (for their dataflow), each
    op's facts as shown (`ir/stablehlo.dumped_op_facts`: a dot's operands and types, a call's callee, a transpose's,
    reduce's or concatenate's values and attribute), and the dumped
    module: the ops are views into it, so the caller holds it for as long as it reads them."""
    from jaxlib.mlir import ir

    from dumpgym.ir.stablehlo import asm_names, dumped_op_facts
    from dumpgym.jax_internals import location_line

    context = ir_context()
    dumped = parse_stablehlo(text, path, context)
    shown = dumped.operation.get_asm(enable_debug_info=False)
    # Parsed again, the shown text gives each op its line in it; the ops come in the same order.
    lined = parse_stablehlo(shown, path, context)
    keyed, lines, walked = [], [], []

    def visit_keys(op):
        walked.append(op)
        callee = op.attributes["callee"] if op.name == "func.call" and "callee" in op.attributes else None
        keyed.append((op.name, *location_key(op.location), ir.FlatSymbolRefAttr(callee).value if callee else None,
                      _depth(op)))
        return ir.WalkResult.ADVANCE

    printed = asm_names(lined)
    facts = []

    def visit_lines(op):
        lines.append((op.name, location_line(op.location), _function_of(op)))
        facts.append(dumped_op_facts(op, printed))
        return ir.WalkResult.ADVANCE

    dumped.operation.walk(visit_keys, ir.WalkOrder.PRE_ORDER)
    lined.operation.walk(visit_lines, ir.WalkOrder.PRE_ORDER)
    if [k[0] for k in keyed] != [n for n, _l, _f in lines]:
        raise RuntimeError(f"{path}: printing without locations changed the ops")
    return shown, keyed, lines, walked, facts, dumped


def _depth(op) -> int:
    depth, parent = 0, op.parent
    while parent is not None:
        depth, parent = depth + 1, parent.parent
    return depth


def _function_of(op) -> str:
    parent = op.parent
    while parent is not None:
        if parent.name == "func.func":
            return parent.attributes["sym_name"].value
        parent = parent.parent
    return ""


# A binder and its aval (`a:f32[8,16]`); a sharded axis prints `64@x`, a key `key<fry>`. Starting only at a
# word's start keeps it linear: from inside a long word it would rescan the word.
JAXPR_AVAL = re.compile(r"(?<!\w)(\w+):([a-z][\w<>]*)\[([\w@(), ]*)\]")


def jaxpr_inputs(text: str) -> str | None:
    """The outermost jaxpr's inputs, as its first line prints them (a long one wraps). That line names its
    constants (before `; `) and inputs (before `. let`); shared sub-jaxprs hoisted into `let` blocks print
    before it, so it is the last line that starts with `{ lambda `. Found by searching, in linear time."""
    at = text.rfind("\n{ lambda ")
    start = at + 1 if at != -1 else 0 if text.startswith("{ lambda ") else -1
    if start == -1:
        return None
    semicolon = text.find("; ", start)
    end = text.find(". let", semicolon) if semicolon != -1 else -1
    return text[semicolon + 2:end] if end != -1 else None
# A jaxpr's kind of number as numpy names it (what `types_of_mlir` gives); a typed key is its key data's.
_JAXPR_NUMBERS = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16", "bool": "bool",
                  "c64": "complex64", "c128": "complex128"}


def aval_number(dtype: str) -> str:
    """A jaxpr's short dtype (`bf16`, `i32`, `key<fry>`) as numpy names its kind of number."""
    if dtype in _JAXPR_NUMBERS:
        return _JAXPR_NUMBERS[dtype]
    if dtype.startswith("key<"):
        return "uint32"
    if dtype[:1] in "iu" and dtype[1:].isdigit():
        return f"{'u' if dtype[0] == 'u' else ''}int{dtype[1:]}"
    return dtype.lower()
# A typed PRNG key lowers to its implementation's key data, a uint32 array with trailing dimensions of its
# own (JAX's threefry2x32 keys are u32[2], its rbg and unsafe_rbg keys u32[4]).
_KEY_DATA = {"key<fry>": (2,), "key<rbg>": (4,), "key<unsafe_rbg>": (4,)}


# A printed dimension's sharding: over one mesh axis (`64@x`) or several (`64@(x,y)`, whose comma is not a
# dimension's).
_DIM_SHARDING = re.compile(r"@(\([^()]*\)|\w+)")


def printed_dims(dims: str) -> tuple[int, ...]:
    """The sizes of a printed shape's dimensions (`32,64@(x,y)` -> (32, 64)), their shardings left out; raises
    ValueError where one is not a size."""
    return tuple(int(d) for d in _DIM_SHARDING.sub("", dims).split(",") if d.strip())


def aval_dims(dims: str, dtype: str = "") -> tuple[int, ...]:
    """An aval's shape as StableHLO has it: a typed key's with its key data's dimensions after it."""
    return printed_dims(dims) + _KEY_DATA.get(dtype, ())


def jaxpr_results(text: str) -> tuple[tuple[int, ...], ...] | None:
    """The shapes of the outermost jaxpr's results, from the binders of the names its last line returns."""
    tail = re.search(r"\bin \(([^()]*)\) \}\s*$", text)
    if tail is None:
        return None
    names = [n.strip() for n in tail.group(1).split(",") if n.strip()]
    binders: dict[str, tuple[str, str]] = {}  # each name's first binder, in one pass (a search per name is quadratic)
    for name, dtype, dims in JAXPR_AVAL.findall(text):
        binders.setdefault(name, (dims, dtype))
    if any(name not in binders for name in names):
        return None  # a literal result: its shape is not printed
    return tuple(aval_dims(*binders[name]) for name in names)  # a typed key's with its key data's


_ELEMENT = {"i1": "bool", "ui8": "u8", "ui16": "u16", "ui32": "u32", "ui64": "u64"}


def tensor_aval(type_text: str) -> str:
    """`tensor<8x16xf32>` in the jaxpr's aval notation, `f32[8,16]`."""
    m = re.fullmatch(r"tensor<(?:([\dx]*)x)?(\w+)>", type_text)
    if m is None:
        return type_text
    dims = m.group(1).split("x") if m.group(1) else []
    return f"{_ELEMENT.get(m.group(2), m.group(2))}[{','.join(dims)}]"


_TPU_VERSION = re.compile(r"version: (\w+)")
_TPU_VARIANT = re.compile(r'variant: "(\w+)"')


def tpu_target_words(text: str) -> str:
    """The chip libtpu compiled for, as its `target_arguments.txt` names it (`VIPERFISH lite`): its
    `version:` and `variant:` fields, joined; "" where neither is there."""
    found = (_TPU_VERSION.search(text), _TPU_VARIANT.search(text))
    return " ".join(m.group(1) for m in found if m)


def gpu_device_name(text: str) -> str:
    """The GPU XLA compiled for, as its `gpu_target_config.pbtxt` names it (`device_description_str:
    "NVIDIA H100 80GB HBM3"`, the name the device gives itself, which JAX gives as its device kind); "" where
    it is not there. Read line by line: the file is a text proto of a few hundred lines."""
    for line in text.splitlines():
        key, _, value = line.strip().partition(":")
        value = value.strip()
        if key == "device_description_str" and len(value) >= 2 and value[0] == value[-1] == '"':
            return value[1:-1]
    return ""


# A dump file at least this big is read by its head alone where only its head is needed (pairing, listing):
# its signature, its source tables; a 300 MB optimised HLO (a model's constants printed) is not parsed to list it.
BIG_FILE = 32 * 1024 * 1024


def is_big(path: Path) -> bool:
    """Whether a dump file is read by its head alone to list and pair it (a text file of `BIG_FILE` or more)."""
    try:
        return not path.name.endswith(".pb") and path.stat().st_size >= BIG_FILE
    except OSError:
        return False


def _head_lines(path: Path, stop) -> list[str]:
    """A text file's lines, streamed, up to the first for which `stop(line)` holds (that one included), or
    all; a `DumpError` where it cannot be read or a line is not UTF-8 text."""
    out = []
    try:
        with path.open("rb") as f:
            for raw in f:
                if b"\x00" in raw:
                    raise DumpError(f"{path} is not text (a binary file)")
                try:
                    line = raw.decode("utf-8").rstrip("\n")
                except UnicodeDecodeError:
                    raise DumpError(f"{path} is not UTF-8 text") from None
                out.append(line)
                if stop(line):
                    break
    except OSError as e:
        raise DumpError(f"cannot read {path}: {e.strerror or e}") from None
    if not out:
        raise DumpError(f"{path} is empty")
    return out


def _unquoted(text: str, start: int):
    """(index, character) of `text` from `start`, leaving out what is inside double quotes."""
    quoted = False
    for i in range(start, len(text)):
        c = text[i]
        if quoted:
            quoted = not (c == '"' and text[i - 1] != "\\")
        elif c == '"':
            quoted = True
        else:
            yield i, c


def _closing(text: str, at: int, pairs: str = "(){}[]") -> int:
    """The index just past the bracket that closes the one at `at` (nesting every kind of `pairs`, skipping
    quoted strings), or -1."""
    opens, closes = pairs[0::2], pairs[1::2]
    depth = 0
    for i, c in _unquoted(text, at):
        if c in opens:
            depth += 1
        elif c in closes:
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


def hlo_head(path: Path) -> tuple[str, tuple, tuple[str, ...], frozenset[str] | None]:
    """An HLO text dump's module name, entry shapes and kinds of number (as `shapes_of_hlo` and
    `types_of_hlo` give them) and source tables' function names (as `function_names`), read from its head
    alone: the header line and the tables XLA prints before the first computation."""
    from jaxlib import xla_client

    lines = _head_lines(path, lambda line: line.startswith(("ENTRY", "%")))
    header = lines[0]
    if not header.startswith("HloModule "):
        raise DumpError(f"{path} does not start as an HLO module does (HloModule ...)")
    name = header[len("HloModule "):].split(",", 1)[0].strip()
    at = header.find("entry_computation_layout={")
    end = _closing(header, at + len("entry_computation_layout=")) if at >= 0 else -1
    if end < 0:
        raise DumpError(f"{path}: its header names no entry computation layout")
    layout = re.sub(r"/\*.*?\*/", "", header[at + len("entry_computation_layout={"):end - 1])
    params_end = _closing(layout, 0, "(){}[]")
    if not layout.startswith("(") or layout[params_end:params_end + 2] != "->":
        raise DumpError(f"{path}: its entry computation layout is not (parameters)->result")
    try:
        params = xla_client.Shape(layout[:params_end]).tuple_shapes()
        result = xla_client.Shape(layout[params_end + 2:])
    except Exception:  # XLA's parser: a layout it cannot read
        raise DumpError(f"{path}: its entry computation layout does not parse") from None
    results = result.tuple_shapes() if result.is_tuple() else [result]

    def dims(s):
        return tuple(s.dimensions()) if s.is_array() else (-1,)

    def kind(s):
        return str(s.element_type()).lower() if s.is_array() else "token"
    shapes = (tuple(dims(p) for p in params), tuple(dims(r) for r in results))
    types = tuple(kind(s) for s in (*params, *results))
    return name, shapes, types, function_names("\n".join(lines))


def mlir_head(path: Path, context) -> tuple[str | None, tuple, tuple[str, ...]]:
    """A StableHLO dump's module name and `main`'s argument and result shapes and kinds of number (as
    `shapes_of_mlir` and `types_of_mlir` give them), read from its head alone: its lines up to `main`'s."""
    from jaxlib.mlir import ir

    lines = _head_lines(path, lambda line: "func.func public @main(" in line)
    module = next((line for line in lines if line.startswith("module @")), "")
    name = module[len("module @"):].split(" ", 1)[0] or None
    line = lines[-1]
    at = line.find("@main(")
    if at < 0:
        raise DumpError(f"{path}: no public main function in its head")
    args_end = _closing(line, at + len("@main"))
    types = []
    i = at + len("@main(")
    while args_end > 0 and (colon := line.find(": ", i, args_end)) >= 0:  # `%arg0: TYPE {attrs} loc(...)`
        t, i = _type_at(line, colon + 2)
        types.append(t)
    results = []
    rest = line[args_end:].lstrip() if args_end > 0 else ""
    if rest.startswith("->"):
        rest = rest[2:].lstrip()
        if rest.startswith("("):
            inner = rest[1:_closing(rest, 0) - 1]
            i = 0
            while i < len(inner):
                t, i = _type_at(inner, i)
                results.append(t)
                nxt = _next_item(inner, i)
                if nxt < 0:
                    break
                i = nxt
        else:
            results.append(_type_at(rest, 0)[0])
    try:
        parsed = [ir.Type.parse(t, context) for t in (*types, *results)]
    except Exception:
        raise DumpError(f"{path}: main's signature does not parse") from None
    args, outs = parsed[:len(types)], parsed[len(types):]
    return (name, (tuple(_dims(t) for t in args), tuple(_dims(t) for t in outs)),
            tuple(_number_name(t) for t in parsed))


def _type_at(text: str, i: int) -> tuple[str, int]:
    """The MLIR type written at `text[i:]` (`tensor<...>` with its nesting, or a word like `!stablehlo.token`)
    and the index past it."""
    while i < len(text) and text[i] == " ":
        i += 1
    j = i
    while j < len(text) and (text[j].isalnum() or text[j] in "!._"):
        j += 1
    if j < len(text) and text[j] == "<":
        j = _closing(text, j, "<>")
    return text[i:j], j


def _next_item(text: str, i: int) -> int:
    """The index after the next comma at depth 0 from `i` (past a result's `{attributes}`), or -1."""
    depth = 0
    for k, c in _unquoted(text, i):
        if c in "({[<":
            depth += 1
        elif c in ")}]>":
            depth -= 1
        elif c == "," and depth == 0:
            return k + 1
    return -1
