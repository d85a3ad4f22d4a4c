"""The one door to JAX's internals: every private JAX access of dumpgym, each with why no public API serves.

A JAX upgrade that moves one of these breaks it here and nowhere else. Everything else reaches
JAX through public modules (`jax`, `jax.extend.core`, `jax.interpreters.mlir`, `jaxlib.mlir`).
Where the supported JAX versions (pyproject.toml: 0.6 to 0.10) differ, the difference is handled
here too, each branch naming the versions it serves.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import threading
from typing import Any, Iterator

from dumpgym.errors import GymError

# The first jaxlib whose Python bindings reach a compiled HloModule's instructions
# (`HloComputation.instructions()`, with opcodes, operands and users), which the compiled layer reads.
HLO_BINDINGS_JAXLIB = (0, 10, 2)


class JaxVersionError(GymError):
    """The installed JAX lacks something a requested feature needs (the message names the version)."""


def print_with_source_map(closed_jaxpr) -> tuple[str, list[list[tuple[int, int, Any]]]]:
    """`str(closed_jaxpr)` and the printer's source map: for each output line, (start, end, traceback) segments.

    Why private: `str()` prints the same text but throws away the source map, and the source map is
    how we learn which lines each equation occupies without parsing the text.
    """
    from jax._src import core

    source_map: list[list[tuple[int, int, Any]]] = []
    with _printer_maps_tracebacks(core):
        text = core.pp_toplevel_jaxpr(closed_jaxpr).format(source_map=source_map)
    return text, source_map


_PRINTER_LOCK = threading.Lock()


@contextlib.contextmanager
def _printer_maps_tracebacks(core) -> Iterator[None]:
    """Make the printer's source map hold each equation's traceback object, as JAX 0.10.2 does.

    JAX up to 0.10.0 maps each equation to `source_info_util.user_frame(traceback)` instead,
    which reads a real traceback's frames. For the block, anything that is not a real traceback
    (no `raw_frames`) is passed through as itself; real tracebacks still get JAX's own answer,
    so other threads printing at the same time see no change.
    """
    from jax._src import source_info_util

    if "user_frame" not in core.pp_eqn.__code__.co_names:
        yield
        return

    with _PRINTER_LOCK:
        user_frame = source_info_util.user_frame

        def passthrough(info_or_traceback):
            # JAX 0.6 passes the SourceInfo, 0.7 onward its traceback.
            traceback = getattr(info_or_traceback, "traceback", info_or_traceback)
            if traceback is None or hasattr(traceback, "raw_frames"):
                return user_frame(info_or_traceback)
            return traceback

        source_info_util.user_frame = passthrough
        try:
            yield
        finally:
            source_info_util.user_frame = user_frame


def lower_with_jaxpr(traced, closed_jaxpr, retarget=None):
    """Lower `closed_jaxpr` in place of `traced`'s own jaxpr, with everything else jit decided (shardings, donation…).

    `retarget`, if given, maps each mesh and sharding jit decided (its arguments', its results', its
    context mesh) onto other devices: a TPU topology's (JAX 0.9 onward).

    Why private: `jax.stages.Traced` has no public way to swap its jaxpr, and re-tracing the user's
    function would give new equation objects, losing the tags we put on the old ones. Its argument
    types (`_meta_tys_flat`) hold the shardings of sharded arguments, which name devices.
    """
    from jax._src import stages

    if hasattr(traced, "_meta_tys_flat"):  # JAX 0.9 onward
        meta_tys, params = traced._meta_tys_flat, {**traced._params, "jaxpr": closed_jaxpr}
        if retarget is not None:
            from jax._src.layout import Format

            meta_tys = [m.replace(sharding=retarget(m.sharding),
                                  format=Format(m.format.layout, retarget(m.format.sharding)))
                        for m in meta_tys]
            for key in ("in_shardings", "out_shardings", "ctx_mesh"):
                params[key] = retarget(params[key])
        twin = stages.Traced(meta_tys, params, traced._in_tree, traced.out_tree, traced._consts)
    elif hasattr(traced, "_lfg") and retarget is None:  # JAX 0.7.2 to 0.8: the lowering function takes jit's params
        twin = stages.Traced(
            traced._lfg, {**traced._params, "jaxpr": closed_jaxpr},
            traced._in_tree, traced._out_tree, traced._num_consts,
        )
    elif retarget is not None:
        raise JaxVersionError("compiling for a TPU topology needs JAX 0.9 or later")
    else:  # JAX 0.6 to 0.7.1: jit's params, jaxpr included, are bound into the lowering callable
        bound = traced._lower_callable
        twin = copy.copy(traced)
        twin.jaxpr = closed_jaxpr
        twin._lower_callable = functools.partial(bound.func, *bound.args, **{**bound.keywords, "jaxpr": closed_jaxpr})
    return twin.lower()


def lowered_copy(lowered):
    """A `jax.stages.Lowered` that compiles as `lowered` does, holding a copy of its module (the same ops,
    attributes and locations) in an MLIR context of its own; None where the installed JAX keeps its lowering
    otherwise. The copy may be changed and compiled on another thread while `lowered` is read on this one:
    no context is shared between them (JAX turns off the locks of the contexts it makes).

    Why private: `Lowered` compiles the module its `_lowering` holds (`MeshComputation._hlo`), and nothing
    public makes a `Lowered` of another module. Copying the module (written as MLIR bytecode, read back) takes
    a tenth of the time of lowering the program again (JAX 0.10.2 onward, where a compiled layer is made)."""
    from jax.interpreters import mlir
    from jaxlib.mlir import ir

    lowering = getattr(lowered, "_lowering", None)
    module = getattr(lowering, "_hlo", None)
    if not isinstance(module, ir.Module) or not hasattr(lowering, "_executable"):
        return None
    twin_lowering = copy.copy(lowering)
    twin_lowering._hlo = ir.Module.parse(mlir.module_to_bytecode(module), context=mlir.make_ir_context())
    twin_lowering._executable = None  # what it compiles is its own
    twin = copy.copy(lowered)
    twin._lowering = twin_lowering
    return twin


def jit_shardings(traced) -> tuple[tuple, tuple, Any]:
    """The shardings `jit` was given for each flat argument and result (`in_shardings`, `out_shardings`;
    None where unspecified) and the mesh it was traced under (`jax.set_mesh`, `jax.sharding.use_mesh`;
    None where none), as a `jax.stages.Traced` lowers them.

    Why private: `jax.stages.Traced` keeps jit's parameters in `_params` alone (JAX 0.7.2 onward); `Lowered`
    names shardings only once lowered, and nothing public names the context mesh. Earlier JAX: none known.
    """
    from jax.sharding import Sharding

    params = getattr(traced, "_params", None) or {}

    def given(shardings):
        return tuple(s if isinstance(s, Sharding) else None for s in shardings or ())

    mesh = params.get("ctx_mesh")
    return (given(params.get("in_shardings")), given(params.get("out_shardings")),
            mesh if mesh is not None and not getattr(mesh, "empty", False) else None)


def name_stack_of(eqn) -> str:
    """The scopes an equation was traced under, as its name stack prints them (`jvp()`, `transpose(jvp())`; "" for none).

    Why private: an equation's `source_info` is a `jax._src.source_info_util` type, and no public API
    names its scopes.
    """
    return str(eqn.source_info.name_stack)


_KEEP = object()  # `with_source_info`: leave the traceback as it is


def with_source_info(eqn, params: dict, *, name: str | None = None, traceback: Any = _KEEP):
    """A copy of `eqn` with `params`, `name` (if given) pushed innermost onto its name stack, and
    `traceback` (if given) in place of its own.

    The name reaches every location the equation lowers to (`jit(f)/.../name/primitive`) and the
    `op_name` of what XLA compiles from it, which is how the stages tag equations. A traceback of
    None lowers to locations without a source file; any other object stands where the printer's
    source map reports it (`print_with_source_map`).

    Why private: an equation's `source_info` and its name stack are `jax._src.source_info_util`
    types with no public way to change them; `jax.named_scope` names only what is traced under it,
    and tracing again would give new equations, not these.
    """
    info = eqn.source_info
    if name is not None:
        info = info.replace(name_stack=info.name_stack.extend(name))
    if traceback is not _KEEP:
        info = info.replace(traceback=traceback)
    return eqn.replace(params=params, source_info=info)


def jaxprs_in_params(params) -> Iterator[Any]:
    """The sub-jaxprs an equation's params hold (`jax.extend.core.jaxprs_in_params`).

    Why private: JAX before 0.10 keeps this function in `jax._src.core` only; the public name,
    where it exists, is the same function.
    """
    from jax.extend import core as jex

    if hasattr(jex, "jaxprs_in_params"):
        return jex.jaxprs_in_params(params)
    from jax._src import core

    return core.jaxprs_in_params(params)


@contextlib.contextmanager
def no_traceback_locations() -> Iterator[None]:
    """Lower with source-file locations off, for this block only.

    Why private: the public `jax.config.update("jax_traceback_in_locations_limit", 0)` changes the
    setting for the whole process, including the user's own code running beside us (a notebook).
    """
    from jax._src import config

    with config.traceback_in_locations_limit(0):
        yield


def location_line(location) -> int:
    """The line number of an MLIR file location (`loc("file.mlir":7:3)`), from jaxlib's MLIR bindings.

    Not private, but it moved: jaxlib 0.10.0 and older have no `ir.FileLineColLoc` and put
    `start_line` on `ir.Location` itself.
    """
    file_loc = _location_kinds()[2]
    if file_loc is None:
        return location.start_line
    return (location if type(location) is file_loc else file_loc(location)).start_line


def bare_location_name(location) -> str | None:
    """The name of a location that is a name and nothing more (`loc("jit(f)/sin")`), else None.

    Not private, but it moved: jaxlib 0.10.0 and older have no `ir.NameLoc` (nor `ir.UnknownLoc`),
    so there this answers None and the caller prints the location, several times slower.
    """
    name_loc, unknown_loc, _ = _location_kinds()
    if name_loc is not None and type(location) is name_loc and type(location.child_loc) is unknown_loc:
        return location.name_str
    return None


def location_parts(location):
    """A name location's (name, child location), (None, None) for an unknown location, None for any other.

    Not private, but it moved: jaxlib 0.10.0 and older have no `ir.NameLoc` (nor `ir.UnknownLoc`), so
    there this answers None for every location.
    """
    name_loc, unknown_loc, _ = _location_kinds()
    if name_loc is not None and type(location) is name_loc:
        return location.name_str, location.child_loc
    if unknown_loc is not None and type(location) is unknown_loc:
        return None, None
    return None


@functools.cache
def _location_kinds():
    from jaxlib.mlir import ir

    return getattr(ir, "NameLoc", None), getattr(ir, "UnknownLoc", None), getattr(ir, "FileLineColLoc", None)


def lowered_through_cache(primitive: str) -> bool:
    """Whether JAX lowers an equation of `primitive` (by name) through its lowering cache: its rule emitted as a
    function of its own, under a name stack of its own, then inlined where the equation is, each inlined op's
    name joined as text after the name of the equation's location (`jit(f)/jvp(dgeqn3)` and `checkpoint/sin`
    give `jit(f)/jvp(dgeqn3)/checkpoint/sin`); else its rule emits into the equation's own name stack.

    Why private: which primitives opt out of the cache (`mlir._uncacheable_primitives`: `jit`, callbacks,
    custom_vjp_call, ...) is a set of `jax._src.interpreters.mlir` alone.
    """
    from jax._src.interpreters import mlir

    return primitive not in {p.name for p in mlir._uncacheable_primitives}


def require_hlo_bindings(what: str = "the compiled HLO layer", then: str = "") -> None:
    """Raise `JaxVersionError` unless this jaxlib binds compiled HLO instructions (jaxlib 0.10.2 on): `what`
    needs them, `then` says what the user can do instead.

    Not private: older jaxlib has no binding for them at all, and the compiled layer reads no text. A dump is
    read through the same bindings (XLA's own HLO parser, the dialects JAX's StableHLO prints).
    """
    import jaxlib

    installed = tuple(int(part) for part in jaxlib.__version__.split(".")[:3] if part.isdigit())
    if installed < HLO_BINDINGS_JAXLIB:
        needed = ".".join(map(str, HLO_BINDINGS_JAXLIB))
        raise JaxVersionError(f"{what} needs jaxlib {needed} or later (this is jaxlib {jaxlib.__version__}){then}")


class _Captured(BaseException):
    """Raised out of a wrapper's `.lower` once JAX's own `Traced` is in hand (a BaseException, so no
    `except Exception` of the wrapper's swallows it)."""

    def __init__(self, traced):
        super().__init__()
        self.traced = traced


_capture_lock = threading.Lock()


def traced_by_own_lower(function, args: tuple, kwargs: dict):
    """The `jax.stages.Traced` a function with its own staging lowers (`nnx.jit`, `eqx.filter_jit`, any
    wrapper whose `.lower` ends in `jax.jit`'s): `function.lower(*args, **kwargs)` is called with
    `jax.stages.Traced.lower` caught, so the jaxpr is the one its staging traces, on the arguments
    its staging makes of ours, and lowering it prints what its own `.lower(...).as_text()` prints.

    Why private: a wrapper's `.lower` returns its own object around JAX's `Lowered`, which keeps no jaxpr,
    and nothing public names the `Traced` it came from. None when its `.lower` never lowers a `Traced`.
    """
    from jax._src import stages

    with _capture_lock:
        lower = stages.Traced.lower

        def caught(self, *a, **k):
            raise _Captured(self)

        stages.Traced.lower = caught
        try:
            function.lower(*args, **kwargs)
        except _Captured as captured:
            return captured.traced
        finally:
            stages.Traced.lower = lower
    return None
