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

# A primitive's name, as a jaxpr prints it after `=`.
_PRIMITIVE = re.compile(r"[a-z_][\w-]*")  # `scatter-add`
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_STACK_FRAME_ID = re.compile(r"stack_frame_id=(\d+)")
# HLO's source tables (JAX 0.9 on): the bindings give no access to them, the printed module does.
_TABLE_ROW = re.compile(r"^(\d+) (.*)$")
# Starts only at a word's start: from inside a long word it would rescan the word (quadratic).
_FIELD = re.compile(r"(?<!\w)(\w+)=(\"[^\"]*\"|\S+)")


class DumpError(GymError):
    """A folder that is not a dump, or a dump file that cannot be read; one line for the user."""


def read_text(path: Path) -> str:
    """A dump file's text; a `DumpError` where it cannot be read, is binary or is not UTF-8."""
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
        return data.decode("utf-8")
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


def source_tables(printed: str) -> dict[int, tuple[str, int]]:
    """stack_frame_id -> (file, line) of its own frame, from an HLO module's printed source tables."""
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


def hlo_op_names(module) -> list[tuple[str, str, str, tuple[str, int] | None]]:
    """(computation, instruction, op_name, (file, line) of its stack frame) for every instruction with an op_name."""
    frames = source_tables(module.to_string())
    out = []
    for computation in module.computations():
        for instruction in computation.instructions():
            printed = instruction.to_string()
            meta = printed.split("metadata={", 1)[1] if "metadata={" in printed else ""
            name = _OP_NAME.search(meta)
            if name is None:
                continue
            frame = _STACK_FRAME_ID.search(meta)
            out.append((computation.name, instruction.name, _unescaped(name.group(1)),
                        frames.get(int(frame.group(1))) if frame else None))
    return out


def _unescaped(text: str) -> str:
    """An HLO string attribute as it was given: XLA prints bytes outside ASCII as C escapes (`\\342\\200\\256`
    for U+202E), which the StableHLO's locations hold as the characters themselves."""
    if "\\" not in text:
        return text
    import codecs

    try:
        return codecs.escape_decode(text.encode("ascii", "backslashreplace"))[0].decode("utf-8", "replace")
    except ValueError:
        return text


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


def types_of_hlo(module) -> tuple[str, ...]:
    """The same for an HloModule's entry parameters and results, from XLA's program shape."""
    from jaxlib import xla_client

    shape = xla_client.XlaComputation(module.as_serialized_hlo_module_proto()).program_shape()

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
    from jaxlib import xla_client

    shape = xla_client.XlaComputation(module.as_serialized_hlo_module_proto()).program_shape()

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
    (`c:f32[8,4]`, `_:i32[]`) then `= primitive`, first on a line or after `let `. Read token by token, in
    time linear in the text (a pattern of repeated binders backtracks exponentially on `a:b:c:d` words)."""
    out = []
    for number, line in enumerate(text.split("\n"), start=1):
        starts = [len(line) - len(line.lstrip())]
        at = line.find("let ")
        while at != -1:
            if at == 0 or not (line[at - 1].isalnum() or line[at - 1] == "_"):
                starts.append(at + 4)
            at = line.find("let ", at + 4)
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
        if ":" not in token[1:-1]:
            return None
        binders, at = binders + 1, end + 1


def located_ops(text: str, path: Path) -> tuple[str, list[tuple], list[tuple], list, list, object]:
    """A dumped StableHLO module's ops, read twice: as dumped (each op's name, `location_key`, callee and depth),
    and as shown (printed without locations, parsed again: each op's name, line there and function). Returns
    the shown text, the two lists in the ops' walk order, the dumped ops themselves (for their dataflow), each
    op's facts as shown (`ir/stablehlo.op_facts`: a dot's operands and types, a call's callee), and the dumped
    module: the ops are views into it, so the caller holds it for as long as it reads them."""
    from jaxlib.mlir import ir

    from dumpgym.ir.stablehlo import asm_names, op_facts
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
        facts.append(op_facts(op, printed))
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
JAXPR_AVAL = re.compile(r"(?<!\w)(\w+):([a-z][\w<>]*)\[([\w@, ]*)\]")


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


def aval_dims(dims: str, dtype: str = "") -> tuple[int, ...]:
    """An aval's shape as StableHLO has it: a typed key's with its key data's dimensions after it."""
    return tuple(int(d.split("@")[0]) for d in dims.split(",") if d.strip()) + _KEY_DATA.get(dtype, ())


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
