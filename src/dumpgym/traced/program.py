"""A program for the gym: a function, its example arguments, and the words around it."""
from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from dumpgym.record.dtypes import is_extended, numpy_name
from dumpgym.record.dtypes import short as short_dtype
from dumpgym.errors import ProgramError
from dumpgym.record.schema import Call, valid_slug

# Dtypes the command line names in its errors; any dtype JAX knows is accepted.
COMMON_DTYPES = "bf16 f16 f32 f64 i8 i16 i32 i64 u8 u32 bool int32 float32 key<fry>"
_AVAL = re.compile(r"(?P<dtype>[a-z0-9_]+(?:<[a-z0-9_]+>)?)\[(?P<dims>\s*(?:\d+\s*(?:,\s*\d+\s*)*)?)\]")
# JAX's PRNG implementations. Nothing public lists them (`jax.random.key` takes a name and the
# jaxpr prints only the key dtype's tag, `key<fry>`), so the names are ours and each one's dtype is
# JAX's; a name this JAX lacks is skipped, and the configured default is always included.
_PRNG_IMPLS = ("threefry2x32", "rbg", "unsafe_rbg", "philox2x32", "philox4x32", "threefry4x32")


@dataclass(frozen=True)
class ArgSpec:
    """One example argument: a shape and a dtype name (numpy's, or a typed PRNG key's as JAX prints it)."""

    shape: tuple[int, ...]
    dtype: str

    def __str__(self) -> str:
        return f"{short_dtype(self.dtype)}[{','.join(map(str, self.shape))}]"

    def to_struct(self):
        """This argument as a `jax.ShapeDtypeStruct`."""
        import jax

        dtype = key_dtypes()[self.dtype] if is_extended(self.dtype) else jax.numpy.dtype(self.dtype)
        return jax.ShapeDtypeStruct(self.shape, dtype)


def parse_arg(spec: str) -> ArgSpec:
    """Parse an argument in the jaxpr's aval notation (`bf16[64,128]`, `f32[]`, `key<fry>[4]`) or with numpy's names (`int32[4]`)."""
    match = _AVAL.fullmatch(spec.strip())
    if not match:
        raise ProgramError(f"argument {spec!r} is not an array spec like bf16[64,128] or f32[]")
    name = numpy_name(match["dtype"]) or _key_name(match["dtype"])
    if name is None:
        raise ProgramError(f"argument {spec!r}: unknown dtype {match['dtype']!r} (e.g. {COMMON_DTYPES})")
    dims = match["dims"].replace(" ", "")
    shape = tuple(int(d) for d in dims.split(",")) if dims else ()
    return ArgSpec(shape, name)


@functools.lru_cache(maxsize=None)
def key_dtypes() -> dict:
    """This JAX's typed PRNG key dtypes by the name the jaxpr prints (`key<fry>`) and by `key<IMPL>` (`key<threefry2x32>`)."""
    import jax

    out = {}
    for impl in dict.fromkeys((jax.config.jax_default_prng_impl, *_PRNG_IMPLS)):
        try:
            dtype = jax.eval_shape(functools.partial(jax.random.key, 0, impl=impl)).dtype
        except ValueError:  # not an implementation of this JAX
            continue
        out[str(dtype)] = out[f"key<{impl}>"] = dtype
    return out


def _key_name(written: str) -> str | None:
    """The printed name (`key<fry>`) of the key dtype written as `key<fry>` or `key<threefry2x32>`, else None."""
    dtype = key_dtypes().get(written)
    return None if dtype is None else str(dtype)


def cpu_mesh(**axes: int):
    """A device mesh over the simulated CPU devices, e.g. `cpu_mesh(x=8)`."""
    import jax

    return jax.make_mesh(tuple(axes.values()), tuple(axes), devices=jax.devices()[: _product(axes.values())])


def sharded_structs(mesh, args: tuple[str, ...], specs) -> tuple:
    """Arguments in aval notation as `jax.ShapeDtypeStruct`s sharded over `mesh` by one spec each
    (`("data", None)`): how a program sharded by jit on a mesh of its own takes its inputs."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    return tuple(jax.ShapeDtypeStruct(s.shape, s.to_struct().dtype, sharding=NamedSharding(mesh, PartitionSpec(*spec)))
                 for s, spec in zip(map(parse_arg, args), specs))


def _product(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


@dataclass(frozen=True)
class Program:
    """A function with example arguments, registered the same way for built-in and added programs."""

    slug: str
    title: str
    lesson: str
    function: Callable[..., Any]
    args: tuple[str, ...]
    mesh: dict[str, int] | None = None
    in_specs: tuple[tuple[str | None, ...], ...] | None = None
    entry: str = field(default="")
    # The traced arguments as `jax.ShapeDtypeStruct`s (shardings kept), for a program made from
    # example values (`partition`); `args` then holds their avals, as the jaxpr prints them.
    structs: tuple | None = None
    # The platform the program lowers for. "tpu": one only a TPU can lower (a Pallas TPU kernel):
    # its arguments are placed on a TPU topology's first chip (libtpu, no TPU) and it has no CPU compile.
    platform: str = "cpu"
    # The slug of the built-in program this one is a traced variant of (the same code at other example
    # shapes, or on another mesh), or None for a program in its own right.
    variant_of: str | None = None
    # For a compile with one change (`program.change`): that change in words ("f32 instead of bf16"),
    # the program it changes being `variant_of`; None for every other program.
    change: str | None = None
    # For a change that calls the base's function otherwise (a keyword, jit's options): how (`called`).
    call: Call | None = None

    def __post_init__(self):
        if not valid_slug(self.slug):
            raise ProgramError(f"slug {self.slug!r} must use only a-z, 0-9 and '-' (at most 64, not starting with '-')")
        if not self.entry:
            object.__setattr__(self, "entry", f"{self.function.__module__}:{self.function.__name__}")

    def example_args(self) -> list:
        """The arguments as `jax.ShapeDtypeStruct`s, sharded over the mesh where the program has one."""
        import jax
        from jax.sharding import NamedSharding, PartitionSpec

        if self.structs is not None:
            return list(self.structs)
        specs = [parse_arg(a) for a in self.args]
        if self.platform == "tpu":
            from jax.sharding import SingleDeviceSharding

            from dumpgym.traced.devices import topology_devices
            from dumpgym.record.targets import DEFAULT_TOPOLOGY, require_libtpu

            require_libtpu()
            chip = SingleDeviceSharding(topology_devices(DEFAULT_TOPOLOGY)[0])
            return [jax.ShapeDtypeStruct(s.shape, s.to_struct().dtype, sharding=chip) for s in specs]
        if self.mesh is None:
            return [s.to_struct() for s in specs]
        mesh = cpu_mesh(**self.mesh)
        in_specs = self.in_specs or tuple(() for _ in specs)
        return [
            jax.ShapeDtypeStruct(s.shape, s.to_struct().dtype, sharding=NamedSharding(mesh, PartitionSpec(*p)))
            for s, p in zip(specs, in_specs)
        ]


def on_mesh(function: Callable[..., Any], mesh) -> Callable[..., Any]:
    """`function`, which takes its mesh as the keyword `mesh`, called on `mesh`: a mesh variant's function.
    Its source is `function`'s (`inspect.getsource` follows `__wrapped__`), so no program text is repeated."""
    return with_keywords(function, mesh=mesh)


def with_keywords(function: Callable[..., Any], **keywords) -> Callable[..., Any]:
    """`function` called with `keywords` beside its positional arguments (`policy=...`, `mesh=...`): the function
    of a variant or a changed compile. Its source is `function`'s, so no program text is repeated."""
    @functools.wraps(function)
    def called(*args):
        return function(*args, **keywords)

    return called


def variant(base: Program, number: int, args: tuple[str, ...], *, function: Callable[..., Any] | None = None,
            mesh=None, in_specs=None, title: str | None = None) -> Program:
    """`base` traced again at other example arguments (and, for a program with a mesh, on `mesh`, a
    `jax.sharding.Mesh`, with `function` made for it by `on_mesh`): slug `BASE-NUMBER`, a title that names what
    differs (after `title`, where the base's own names its shapes), and a lesson computed from its own
    arguments, since the base's lesson speaks of the base's shapes."""
    if number < 2:
        raise ProgramError(f"variant {number} of {base.slug}: variants are numbered from 2 (the base is 1)")
    function = base.function if function is None else function
    axes = None if mesh is None else {str(k): int(v) for k, v in mesh.shape.items()}
    if axes is None and base.mesh is not None and function is not base.function:
        raise ProgramError(f"variant {number} of {base.slug}: a function built for a mesh needs that mesh")
    structs = None
    if axes is not None and base.structs is not None:  # sharded by jit: structs carry the shardings
        structs = sharded_structs(mesh, args, in_specs or base.in_specs)
    differs = describe_args(function, args, base.args)
    on = "" if axes is None or axes == base.mesh else f" on a mesh of {_axes_words(axes)}"
    sizes = f" at {differs}" if differs else ""
    return Program(
        slug=f"{base.slug}-{number}",
        title=f"{title or base.title}{sizes}{on}",
        lesson=(f"The same code as {base.slug}, traced at other example arguments ({', '.join(args)})"
                + (f" on a mesh of {_axes_words(axes)}" if axes else "")
                + ": every size in these listings is read from them, not remembered from the base program."),
        function=function, args=tuple(args),
        mesh=axes if axes is not None else base.mesh,
        in_specs=in_specs if in_specs is not None else base.in_specs,
        entry=base.entry, structs=structs, platform=base.platform, variant_of=base.slug,
    )


def change(base: Program, name: str, words: str, *, args: tuple[str, ...] | None = None, in_specs=None,
           keywords: dict[str, Any] | None = None, jit: dict[str, Any] | None = None, lesson: str = "") -> Program:
    """`base` compiled again with one change, `words` saying which ("f32 instead of bf16"): other argument
    dtypes (`args`), other input shardings (`in_specs`, for a program with a mesh), or the base's function
    called otherwise: with `keywords` beside its arguments (a checkpoint policy, a sharding constraint), or
    the function under its `jax.jit` jitted anew with `jit`'s options (`{}`: without the base's donation).
    The record says how (`Call`), so the change is traced again from the export alone. Slug `BASE-NAME`; its
    two compiles are set side by side (`compare.py`)."""
    if not valid_slug(name) or name.isdigit():
        raise ProgramError(f"change {name!r} of {base.slug}: a change is named by a word (digits name variants)")
    args = tuple(base.args if args is None else args)
    in_specs = base.in_specs if in_specs is None else tuple(tuple(p) for p in in_specs)
    structs = None
    if base.structs is not None:  # sharded by jit: the structs carry the shardings, on the base's mesh
        structs = sharded_structs(base.structs[0].sharding.mesh, args, in_specs)
    call = None
    if keywords or jit is not None:
        call = Call(keywords={k: call_value(v) for k, v in (keywords or {}).items()}, jit=jit)
    return Program(
        slug=f"{base.slug}-{name}", title=f"{base.title}, {words}",
        lesson=(f"{base.slug} compiled again with one change, {words}" + (f": {lesson}" if lesson else "")
                + f". Set its compiled layers beside {base.slug}'s to see what the change made appear or vanish."),
        function=base.function if call is None else called(base.function, call), args=args, mesh=base.mesh,
        in_specs=in_specs, entry=base.entry, structs=structs, platform=base.platform,
        variant_of=base.slug, change=words, call=call,
    )


def called(function: Callable[..., Any], call: Call) -> Callable[..., Any]:
    """`function` (what a record's `entry` names) called as `call` says: jitted anew, then with keywords."""
    if call.jit is not None:
        import jax

        if not hasattr(function, "__wrapped__"):
            raise ProgramError(f"{function.__name__} is not under jax.jit: there is no function to jit anew")
        function = jax.jit(function.__wrapped__, **call.jit)
    if call.keywords:
        function = with_keywords(function, **{k: keyword_value(v) for k, v in call.keywords.items()})
    return function


def call_value(value) -> Any:
    """A keyword's value as a `Call` writes it: a JSON scalar as it is, a function by `module:qualname`, a
    `PartitionSpec` by its axes, a tuple by its members (`keyword_value` reads it back)."""
    from jax.sharding import PartitionSpec

    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, PartitionSpec):
        return {"partition_spec": [list(a) if isinstance(a, tuple) else a for a in value]}
    if isinstance(value, tuple):
        return {"tuple": [call_value(v) for v in value]}
    if callable(value) and getattr(value, "__qualname__", None) and "<" not in value.__qualname__:
        return {"function": _public_name(value)}
    raise ProgramError(f"a change's keyword value {value!r} cannot be written down: use a scalar, a function, a "
                       "PartitionSpec or a tuple of them")


def _public_name(function) -> str:
    """`package:name` or `package:namespace.name` where the function's top package offers it publicly
    (`jax:checkpoint_policies.nothing_saveable`, not its private module), else `module:qualname`."""
    import warnings

    top = importlib.import_module(function.__module__.split(".")[0])
    name = function.__name__
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a package's deprecated names warn when read
        if getattr(top, name, None) is function:
            return f"{top.__name__}:{name}"
        for space in sorted(n for n in dir(top) if not n.startswith("_")):
            try:
                if getattr(getattr(top, space), name, None) is function:
                    return f"{top.__name__}:{space}.{name}"
            except AttributeError:
                continue
    return f"{function.__module__}:{function.__qualname__}"


def keyword_value(written) -> Any:
    """A keyword's value from what `call_value` wrote."""
    if not isinstance(written, dict):
        return written
    (form, inner), = written.items()
    if form == "partition_spec":
        from jax.sharding import PartitionSpec

        return PartitionSpec(*(tuple(a) if isinstance(a, list) else a for a in inner))
    if form == "tuple":
        return tuple(keyword_value(v) for v in inner)
    module, qualname = inner.split(":")
    out = importlib.import_module(module)
    for part in qualname.split("."):
        out = getattr(out, part)
    return out


def _axes_words(axes: dict[str, int]) -> str:
    return ", ".join(f"{name}={size}" for name, size in axes.items())


def describe_args(function: Callable[..., Any], args: tuple[str, ...], base_args: tuple[str, ...],
                  most: int = 2) -> str:
    """The arguments that differ from `base_args`, as the function names them (`x bf16[48,96], w1 bf16[96,384], …`)."""
    try:
        names = list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        names = []
    names += [f"arg{i}" for i in range(len(names), len(args))]
    changed = [f"{name} {arg}" for name, arg, old in zip(names, args, base_args) if arg != old]
    return ", ".join(changed[:most]) + (", …" if len(changed) > most else "")


def load_entry(entry: str, files: dict | None = None) -> Callable[..., Any]:
    """Import `package.module:function` or `path/to/file.py:function` and return the function.

    `files` keeps the modules run from files by path, so that a second entry in the same file
    (`--args-from` beside the function) shares its module rather than running the file again.
    """
    target, sep, name = entry.rpartition(":")
    if not sep or not target or not name:
        raise ProgramError(f"{entry!r} should be FILE.py:FUNCTION or MODULE:FUNCTION")
    files = {} if files is None else files
    if target.endswith(".py") and Path(target).is_file() and Path(target).resolve() in files:
        module = files[Path(target).resolve()]
    elif target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise ProgramError(f"no such file: {target}")
        module_name = f"dumpgym_user_{abs(hash(str(path.resolve())))}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except SyntaxError as e:
            raise ProgramError(f"{target}:{e.lineno}: syntax error: {e.msg}") from e
        except (Exception, SystemExit) as e:
            raise ProgramError(f"{target} raised {type(e).__name__} on import: {_first_line(e)}") from e
        files[path.resolve()] = module
    else:
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as e:
            if e.name and (target == e.name or target.startswith(e.name + ".")):
                raise ProgramError(f"no module named {target!r}") from e
            raise ProgramError(f"{target} raised ModuleNotFoundError on import: {_first_line(e)}") from e
        except SyntaxError as e:
            raise ProgramError(f"{e.filename}:{e.lineno}: syntax error: {e.msg}") from e
        except (Exception, SystemExit) as e:
            raise ProgramError(f"{target} raised {type(e).__name__} on import: {_first_line(e)}") from e
    function = getattr(module, name, None)
    if function is None or not callable(function):
        raise ProgramError(f"{target} has no function {name!r}")
    return function


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [""])[0]


@dataclass(frozen=True)
class Partitioned:
    """A function on example values, split as `jax.jit` stages it: array leaves and Python scalars traced, the
    rest static (or left to a staging of its own)."""

    # Takes the traced leaves, flat, in the order jax.tree.flatten gives them; or, for a function with a
    # staging of its own (jax.jit, nnx.jit, eqx.filter_jit), that function itself, on its own arguments.
    function: Callable[..., Any]
    # The positional arguments to trace it on: one jax.ShapeDtypeStruct per traced leaf (a concrete
    # array's values are dropped), or the jitted function's own pytrees with their arrays as structs, or,
    # under another library's staging, the arguments as given (that staging decides what it traces).
    structs: tuple


def is_traced_leaf(leaf) -> bool:
    """Whether a pytree leaf becomes a traced input: a JAX or NumPy array (as `eqx.is_array` says) or a ShapeDtypeStruct."""
    import jax
    import numpy as np

    return isinstance(leaf, (jax.Array, np.ndarray, np.generic, jax.ShapeDtypeStruct))


def partition(function: Callable[..., Any], args: tuple, kwargs: dict | None = None, *,
              static_scalars: bool = False) -> Partitioned:
    """Split `function(*args, **kwargs)` into a function of its array leaves, everything else closed over.

    `args` and `kwargs` are pytrees (models included: an NNX or Equinox module, a Linen variable dict);
    a positional argument given as a string is an aval spec (`"bf16[64,128]"`). Array leaves become
    `ShapeDtypeStruct`s, so weights are never inlined as constants. A Python scalar (`bool`, `int`,
    `float`, `complex`) is traced as `jax.jit` traces it, a weak-typed scalar, unless `static_scalars`.
    The function returns what `function` returns, its leaves that JAX cannot return left out (None in
    their place), as `jax.jit` would stage it: arrays the call put into its arguments (an NNX module's
    `Rngs` advanced, an optimizer updated in place) are not returned, as they are not under `jax.jit`.
    A function with a staging of its own (`jax.jit`, `nnx.jit`, `eqx.filter_jit`) is left to it.
    """
    import jax

    from dumpgym.traced.trace import has_own_staging, own_jit

    kwargs = dict(kwargs or {})
    args = tuple(parse_arg(a).to_struct() if isinstance(a, str) else a for a in args)
    check_call(function, args, kwargs)
    if not kwargs and has_own_staging(function) and not own_jit(function):
        # Under another library's staging (nnx.jit, eqx.filter_jit): its `.lower` is given the arguments as
        # they are, since it decides itself what is traced (Equinox traces arrays, not ShapeDtypeStructs).
        return Partitioned(function, args)
    try:
        leaves, treedef = jax.tree.flatten((args, kwargs))
    except Exception as e:  # a pytree node whose flatten rule raises
        raise ProgramError(f"cannot flatten the example arguments: {type(e).__name__}: {_first_line(e)}") from e
    # A function under jax.jit traces its scalars itself, unless its static_argnums say otherwise.
    scalars = not static_scalars and not own_jit(function)
    traced_at = [i for i, leaf in enumerate(leaves) if is_traced_leaf(leaf) or (scalars and is_python_scalar(leaf))]
    structs = tuple(_struct(leaves[i]) for i in traced_at)
    if not kwargs and len(args) == len(leaves) == len(traced_at):
        # Flat arrays only: the function itself, so JAX names its parameters as the user wrote them.
        return Partitioned(function, structs)
    if not kwargs and own_jit(function):
        # Already under jax.jit: traced by its own jit on its own pytrees (arrays as structs), so the listing
        # is what its `.lower()` prints, with no jit of ours around it; what is static is its own business.
        structs_at = dict(zip(traced_at, structs))
        values = [structs_at.get(i, leaf) for i, leaf in enumerate(leaves)]
        own_args, _ = jax.tree.unflatten(treedef, values)
        return Partitioned(function, tuple(own_args))

    @functools.wraps(function, updated=())
    def partitioned(*traced):
        values = list(leaves)
        for i, value in zip(traced_at, traced):
            values[i] = value
        call_args, call_kwargs = jax.tree.unflatten(treedef, values)
        # A leaf of the result that JAX cannot return (an Equinox model's activation functions, a config
        # object) is static, as `eqx.filter_jit` treats it: the traced program returns the rest.
        return jax.tree.map(lambda v: v if is_traced_leaf(v) or is_python_scalar(v) else None,
                            function(*call_args, **call_kwargs))

    # JAX reads a function's signature (following __wrapped__) to name its arguments; this one takes the leaves.
    partitioned.__signature__ = inspect.Signature(
        [inspect.Parameter(f"leaf{i}", inspect.Parameter.POSITIONAL_ONLY) for i in range(len(structs))])
    return Partitioned(partitioned, structs)


def is_python_scalar(value) -> bool:
    """Whether a pytree leaf is a Python scalar, which `jax.jit` traces as a weak-typed scalar."""
    return isinstance(value, (bool, int, float, complex))


def _struct(leaf):
    """A traced leaf as a ShapeDtypeStruct; a concrete array keeps its sharding when it spans several devices."""
    import jax

    if isinstance(leaf, jax.ShapeDtypeStruct):
        return leaf
    if is_python_scalar(leaf):  # as jax.jit traces it: bool[], i32[] or f32[] (weak-typed but the bool)
        aval = jax.typeof(leaf)
        return jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=aval.weak_type)
    sharding = getattr(leaf, "sharding", None)
    if sharding is not None and len(sharding.device_set) < 2:
        sharding = None
    return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding, weak_type=bool(getattr(leaf, "weak_type", False)))


def check_call(function: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    """Raise a one-line ProgramError when `function`'s signature cannot take `args` and `kwargs`."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return  # builtins and some wrappers keep no signature; tracing will say
    try:
        signature.bind(*args, **kwargs)
    except TypeError as e:
        raise ProgramError(f"{expected(function)} cannot take {describe_call(args, kwargs)}: {e}") from None


def expected(function: Callable[..., Any]) -> str:
    """The function as it would be called: its name and signature, e.g. `train_step(model, optimizer, x, y)`."""
    name = getattr(function, "__name__", type(function).__name__)
    try:
        return f"{name}{inspect.signature(function)}"
    except (TypeError, ValueError):
        return f"{name}(...)"


def describe_call(args: tuple, kwargs: dict, limit: int = 160) -> str:
    """The example arguments as a short structure: `(dict{w: f32[64,128], b: f32[128]}, f32[8,64], k=3)`."""
    parts = [describe(a) for a in args] + [f"{k}={describe(v)}" for k, v in kwargs.items()]
    return _shorten(f"({', '.join(parts)})", limit)


def describe(value, depth: int = 0) -> str:
    """One example value as a short structure: arrays by aval (and partition spec, when sharded over a mesh),
    containers by their items, anything else by type."""
    from dumpgym.traced.facts import dtype_name

    if is_traced_leaf(value):
        spec = getattr(getattr(value, "sharding", None), "spec", None)
        sharded = f" sharded {spec}" if spec is not None and any(p is not None for p in spec) else ""
        return str(ArgSpec(tuple(value.shape), dtype_name(value.dtype))) + sharded
    if isinstance(value, (bool, int, float, complex, str, type(None))):
        return _shorten(repr(value), 24)
    if depth >= 2:
        return type(value).__name__ + ("{…}" if isinstance(value, dict) else "(…)")
    if isinstance(value, dict):
        items = [f"{k}: {describe(v, depth + 1)}" for k, v in list(value.items())[:4]]
        more = ", …" if len(value) > 4 else ""
        return f"{'dict' if type(value) is dict else type(value).__name__}{{{', '.join(items)}{more}}}"
    if isinstance(value, (list, tuple)):
        items = [describe(v, depth + 1) for v in value[:4]]
        more = ", …" if len(value) > 4 else ""
        return ("[{}{}]" if isinstance(value, list) else "({}{})").format(", ".join(items), more)
    return f"{type(value).__name__}(…)"


# JAX ends some messages with this line and a note about the frames it hid: not the user's business.
_JAX_FOOTER = "--------------------"


def jax_message(error: BaseException, limit: int = 600) -> str:
    """JAX's message for `error` on one line, its advice kept ("use `jax.lax.pcast(..., to='varying')`"),
    the note about hidden frames left out."""
    lines = str(error).strip().split(_JAX_FOOTER)[0].splitlines()
    return _shorten(" ".join(line.strip() for line in lines if line.strip()), limit)


def trace_failure(error: BaseException, function: Callable[..., Any], partitioned: Partitioned, *, args: tuple,
                  kwargs: dict) -> ProgramError:
    """Whose fault a failed trace of `function` (as `partition` made it, on `args` and `kwargs`) is, as one
    ProgramError: traced again by JAX alone (`jax.jit(f).trace(...).lower()`, or the function's own jit),
    a failure there is the program's, with JAX's message and advice; a success there makes it dumpgym's,
    said so, with what to report."""
    import jax

    name = getattr(function, "__name__", type(function).__name__)
    from dumpgym.traced.trace import staged

    try:
        plain = staged(partitioned.function, partitioned.structs)
        plain.lower()
    except Exception as refused:  # JAX refuses it too
        return ProgramError(f"{name} raised {type(refused).__name__} while tracing: {jax_message(refused)} "
                            f"(it expects {expected(function)}, given {describe_call(args, kwargs)})")
    from dumpgym.jax_internals import jaxprs_in_params
    from dumpgym.traced.trace import walk_eqns

    holders = sorted({e.primitive.name for e in walk_eqns(plain.jaxpr)
                      if any(True for _ in jaxprs_in_params(e.params))})
    binds = f"; its jaxpr binds {', '.join(holders)}" if holders else ""
    return ProgramError(f"dumpgym could not trace {name}, which JAX traces and lowers: {type(error).__name__}: "
                        f"{_first_line(error)}. This is a limitation of dumpgym, not of your program: please "
                        f"report it with JAX {jax.__version__}{binds}")


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def load_examples(entry: str, files: dict | None = None) -> tuple[tuple, dict]:
    """Import `FILE.py:MAKE` or `MODULE:MAKE`, call it, and return the positional and keyword arguments it gives.

    MAKE returns a tuple or list of positional arguments, or a dict `{"args": [...], "kwargs": {...}}`.
    """
    make = load_entry(entry, files)
    name = entry.rpartition(":")[2]
    try:
        made = make()
    except (Exception, SystemExit) as e:
        raise ProgramError(f"--args-from {name}() raised {type(e).__name__}: {_first_line(e)}") from e
    if isinstance(made, (tuple, list)):
        return tuple(made), {}
    if isinstance(made, dict) and set(made) <= {"args", "kwargs"} and made:
        args, kwargs = made.get("args", ()), made.get("kwargs", {})
        if isinstance(args, (tuple, list)) and isinstance(kwargs, dict) and all(isinstance(k, str) for k in kwargs):
            return tuple(args), dict(kwargs)
    raise ProgramError(f"--args-from {name}() returned {describe(made)}; return a tuple of the function's "
                       'positional arguments, or {"args": (...), "kwargs": {...}}')
