"""A program for the gym: a function, its example arguments, and the words around it."""
from __future__ import annotations

import functools
import importlib
import importlib.util
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from dumpgym.dtypes import is_extended, numpy_name
from dumpgym.dtypes import short as short_dtype
from dumpgym.errors import GymError
from dumpgym.record import valid_slug

# Dtypes the command line names in its errors; any dtype JAX knows is accepted.
COMMON_DTYPES = "bf16 f16 f32 f64 i8 i16 i32 i64 u8 u32 bool int32 float32 key<fry>"
_AVAL = re.compile(r"(?P<dtype>[a-z0-9_]+(?:<[a-z0-9_]+>)?)\[(?P<dims>\s*(?:\d+\s*(?:,\s*\d+\s*)*)?)\]")
# JAX's PRNG implementations. Nothing public lists them (`jax.random.key` takes a name and the
# jaxpr prints only the key dtype's tag, `key<fry>`), so the names are ours and each one's dtype is
# JAX's; a name this JAX lacks is skipped, and the configured default is always included.
_PRNG_IMPLS = ("threefry2x32", "rbg", "unsafe_rbg", "philox2x32", "philox4x32", "threefry4x32")


class ProgramError(GymError):
    """Bad input naming a program or its arguments; the message is one line for the user."""


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

    def __post_init__(self):
        if not valid_slug(self.slug):
            raise ProgramError(f"slug {self.slug!r} must use only a-z, 0-9 and '-' (at most 64, not starting with '-')")
        if not self.entry:
            object.__setattr__(self, "entry", f"{self.function.__module__}:{self.function.__name__}")

    def example_args(self) -> list:
        """The arguments as `jax.ShapeDtypeStruct`s, sharded over the mesh where the program has one."""
        import jax
        from jax.sharding import NamedSharding, PartitionSpec

        specs = [parse_arg(a) for a in self.args]
        if self.mesh is None:
            return [s.to_struct() for s in specs]
        mesh = cpu_mesh(**self.mesh)
        in_specs = self.in_specs or tuple(() for _ in specs)
        return [
            jax.ShapeDtypeStruct(s.shape, s.to_struct().dtype, sharding=NamedSharding(mesh, PartitionSpec(*p)))
            for s, p in zip(specs, in_specs)
        ]


def load_entry(entry: str) -> Callable[..., Any]:
    """Import `package.module:function` or `path/to/file.py:function` and return the function."""
    target, sep, name = entry.rpartition(":")
    if not sep or not target or not name:
        raise ProgramError(f"{entry!r} should be FILE.py:FUNCTION or MODULE:FUNCTION")
    if target.endswith(".py"):
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
