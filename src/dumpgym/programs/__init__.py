"""The built-in corpus, one module per program, in the order the gym shows them.

A program is one module here: its `PROGRAM` (a `Program`, whose slug is the module's name with `-` for
`_`) and its `ORDER`, a number that places it in the gym (lowest first; they go in tens, so a new one
fits between two). Nothing else lists the programs: `SLUGS` is found from the modules. A module may
also declare `VARIANTS`, the same program traced at other example shapes (and, with a mesh, on another
mesh), made by `program.variant`, and compiles of it with one change (a dtype, a sharding, a checkpoint
policy, donation), made by `program.change`: each is a record of its own in the corpus (`mlp-2`,
`mlp-f32`), drawn in drills, but not one of the gym's programs (`SLUGS`).

The seventeen of the seed come first (small, straight-line, mostly on one device); the second part
is what real training and inference code prints: loops, branches, a training step, sharding by jit,
backpropagation through a loop, fully sharded gradients and a Pallas kernel.
"""
import ast
import importlib
from pathlib import Path


def order_of(module: Path) -> int:
    """The `ORDER = <int>` of a program module, read from its source: importing a program can start
    JAX's backend (the sharded ones build their mesh on import), and listing the programs must not."""
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["ORDER"]
                and isinstance(node.value, ast.Constant) and type(node.value.value) is int):
            return node.value.value
    raise ImportError(f"{module.name} has no `ORDER = <int>` (its place in the gym)")


def discover(folder: Path) -> tuple[str, ...]:
    """The slugs of the program modules in `folder` (every `*.py` not starting with `_`), by their `ORDER`."""
    modules = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
    orders = {module: order_of(module) for module in modules}
    taken: dict[int, Path] = {}
    for module, order in orders.items():
        if order in taken:
            raise ImportError(f"{taken[order].name} and {module.name} both have ORDER = {order}")
        taken[order] = module
    return tuple(module.stem.replace("_", "-") for module in sorted(modules, key=orders.__getitem__))


SLUGS = discover(Path(__file__).parent)


def builtin_programs():
    """Every built-in `Program`, imported on demand (the sharded ones need eight devices)."""
    return [builtin_program(slug) for slug in SLUGS]


def builtin_variants(slug: str) -> tuple:
    """The traced variants of the built-in program `slug`: its module's `VARIANTS` (the same code at other
    example shapes, or on another mesh), each a `Program` with `variant_of` set; none where it has none."""
    return tuple(getattr(importlib.import_module(f"dumpgym.programs.{module_name(slug)}"), "VARIANTS", ()))


def corpus_programs():
    """What `corpus build` traces: every built-in program in the gym's order, then their variants, each
    after the same order (so the base programs are the corpus's first records, as before variants)."""
    bases = builtin_programs()
    return bases + [v for p in bases for v in builtin_variants(p.slug)]


def builtin_program(slug: str):
    """The built-in `Program` named `slug`: a program of `SLUGS`, or a variant of one (`mlp-2`)."""
    if slug in SLUGS:
        return importlib.import_module(f"dumpgym.programs.{module_name(slug)}").PROGRAM
    for base in (s for s in SLUGS if slug.startswith(f"{s}-")):  # a variant (`mlp-2`) or a change (`mlp-f32`)
        for program in builtin_variants(base):
            if program.slug == slug:
                return program
    raise KeyError(slug)


def is_builtin(slug: str) -> bool:
    """Whether `slug` names a built-in program or a variant of one."""
    try:
        builtin_program(slug)
    except KeyError:
        return False
    return True


def module_name(slug: str) -> str:
    """The module of a built-in program: its slug with `-` as `_` (`scan-layers` is `scan_layers`)."""
    return slug.replace("-", "_")
