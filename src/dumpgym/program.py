"""A program for the gym: a function, its example arguments, and the words around it."""
from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from dumpgym.dtypes import long as long_dtype
from dumpgym.errors import GymError
from dumpgym.dtypes import short as short_dtype
from dumpgym.record import valid_slug

# Dtypes the command line names in its errors; any dtype JAX knows is accepted.
COMMON_DTYPES = "bf16 f16 f32 f64 i8 i16 i32 i64 u8 u32 bool"
_AVAL = re.compile(r"(?P<dtype>[a-z0-9_]+)\[(?P<dims>\s*(?:\d+\s*(?:,\s*\d+\s*)*)?)\]")


class ProgramError(GymError):
    """Bad input naming a program or its arguments; the message is one line for the user."""


@dataclass(frozen=True)
class ArgSpec:
    """One example argument: a shape and a numpy dtype name."""

    shape: tuple[int, ...]
    dtype: str

    def __str__(self) -> str:
        return f"{short_dtype(self.dtype)}[{','.join(map(str, self.shape))}]"

    def to_struct(self):
        """This argument as a `jax.ShapeDtypeStruct` (optionally sharded)."""
        import jax

        return jax.ShapeDtypeStruct(self.shape, jax.numpy.dtype(self.dtype))


def parse_arg(spec: str) -> ArgSpec:
    """Parse an argument written in the jaxpr's aval notation, such as `bf16[64,128]` or `f32[]`."""
    match = _AVAL.fullmatch(spec.strip())
    if not match:
        raise ProgramError(f"argument {spec!r} is not an array spec like bf16[64,128] or f32[]")
    name = long_dtype(match["dtype"])
    if name is None or not _known_dtype(name):
        raise ProgramError(f"argument {spec!r}: unknown dtype {match['dtype']!r} (e.g. {COMMON_DTYPES})")
    dims = match["dims"].replace(" ", "")
    shape = tuple(int(d) for d in dims.split(",")) if dims else ()
    return ArgSpec(shape, name)


def _known_dtype(name: str) -> bool:
    import numpy as np

    try:
        import ml_dtypes  # noqa: F401  (registers bfloat16, float8_*, int4 with numpy)
    except ImportError:
        pass
    try:
        np.dtype(name)
    except TypeError:
        return False
    return True


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
        import jax.numpy as jnp
        from jax.sharding import NamedSharding, PartitionSpec

        specs = [parse_arg(a) for a in self.args]
        if self.mesh is None:
            return [s.to_struct() for s in specs]
        mesh = cpu_mesh(**self.mesh)
        in_specs = self.in_specs or tuple(() for _ in specs)
        return [
            jax.ShapeDtypeStruct(s.shape, jnp.dtype(s.dtype), sharding=NamedSharding(mesh, PartitionSpec(*p)))
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
