"""The parsers a dump folder's texts are read with, without JAX: StableHLO through jaxlib's MLIR
bindings (with the dialects JAX registers), HLO through XLA's HLO parser bindings (`jaxlib._hlo`),
the HLO source tables (`FileNames`, `FileLocations`, `StackFrames`, which the bindings do not reach)
and a jaxpr's equations (no parser exists outside a trace) with patterns.

The dump's stages (`dumps/folder.py` lists and pairs the files, `dumps/xray.py` links the layers,
`dumps/memory.py` reads XLA's buffer reports) read a listing only through these.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

from dumpgym.errors import GymError

# An equation: its output binders (`c:f32[8,4]`, `_:i32[]`), then `= primitive`; first on a line, or after `let`.
_JAXPR_EQN = re.compile(r"(?:^\s*|\blet )(?:\S+:\S+ )+= ([a-z_]\w*)\b", re.M)
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_STACK_FRAME_ID = re.compile(r"stack_frame_id=(\d+)")
# HLO's source tables (JAX 0.9 on): the bindings give no access to them, the printed module does.
_TABLE_ROW = re.compile(r"^(\d+) (.*)$")
_FIELD = re.compile(r"(\w+)=(\"[^\"]*\"|\S+)")


class DumpError(GymError):
    """A folder that is not a dump, or a dump file that cannot be read; one line for the user."""


def read_text(path: Path) -> str:
    """A dump file's text; a `DumpError` where it cannot be read, is binary or is not UTF-8."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise DumpError(f"cannot read {path}: {e.strerror or e}") from None
    if b"\x00" in data:
        raise DumpError(f"{path} is not text (a binary file)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise DumpError(f"{path} is not UTF-8 text") from None


@functools.cache
def _ir():
    """jaxlib's MLIR bindings, imported once (a location walk asks for them per op)."""
    from jaxlib.mlir import ir

    return ir


def ir_context():
    """An MLIR context with the dialects JAX's lowerings print (stablehlo, chlo, sdy, func), without JAX."""
    from jaxlib.mlir import ir
    from jaxlib.mlir._mlir_libs import _jax_mlir_ext
    from jaxlib.mlir.dialects import chlo, sdy, stablehlo

    registry = ir.DialectRegistry()
    _jax_mlir_ext.register_dialects(registry)
    context = ir.Context()
    context.append_dialect_registry(registry)
    context.load_all_available_dialects()
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
            out.append((computation.name, instruction.name, name.group(1),
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
    return _JAXPR_EQN.findall(text)
