"""A dump folder's modules (`DumpFolder`): what a folder holds that `JAX_DUMP_IR_TO` and `--xla_dump_to` wrote.

The two dumpers number their files with counters of their own (`jax_ir0003_jit_f_compile.mlir`
beside `module_0006.jit_f.…`), so files are paired across them by what they say: the module's
name, main's argument and result shapes, and the name stacks (with their source file and line)
that the StableHLO's locations carry and the HLO's `op_name` metadata repeats. A compile repeated
with the same text is kept once, the newest (the dumper's highest number). Nothing here imports
JAX: listings are read through `ir/parse.py` (jaxlib's MLIR bindings, XLA's HLO parser).

File names are read with patterns (they are names the dumpers chose, not listings), and so is the
jaxpr text, for which no parser exists outside a trace: only its first line (the input avals), its
result binders and its equations' primitives.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from dumpgym.ir.parse import (DumpError, hlo_op_names, ir_context, jaxpr_primitives, parse_hlo, parse_stablehlo,
                                read_text, shapes_of_hlo, shapes_of_mlir, stablehlo_locations)

LAYERS = ("jaxpr", "stablehlo", "hlo_before", "hlo_after")
LAYER_NAMES = {"jaxpr": "jaxpr", "stablehlo": "StableHLO", "hlo_before": "HLO before optimisations",
               "hlo_after": "optimised HLO"}

_JAXPR_FILE = re.compile(r"jax_(\d+)_(.+)\.jaxpr\.txt")
_MLIR_FILE = re.compile(r"jax_ir(\d+)_(.+)_compile\.mlir")
_XLA_FILE = re.compile(r"module_(\d+)\.([^.]+)\.(.+)")
# What follows `module_NNNN.NAME.`: TPU's `cl_N.` compile id, then the backend's own prefix
# (`cpu_`, `sm_9.0a_gpu_`, none for TPU) before `after_optimizations`.
_XLA_REST = re.compile(r"(?:cl_\d+\.)?(?:(?P<before>before_optimizations)|(?P<prefix>[\w.]*?)after_optimizations"
                       r"(?P<what>-buffer-assignment|-memory-usage-report|-live-range)?)\.txt")
_GPU_PREFIX = re.compile(r"sm_(\d+)\.(\d+)(a?)_gpu_")
# The outermost jaxpr's first line names its constants (before `;`) and inputs; shared sub-jaxprs
# hoisted into `let` blocks print before it, so it is the last line that starts with `{ lambda`.
_JAXPR_HEAD = re.compile(r"^\{ lambda (.*?); (.*?)\. let", re.M | re.S)  # a long head wraps
_JAXPR_AVAL = re.compile(r"\w+:([a-z][\w<>]*)\[([\w@, ]*)\]")  # a sharded axis prints `64@x`; a key `key<fry>`


@dataclass
class DumpModule:
    """One module's files across the two dumpers, its target, and what stops it being read."""

    name: str
    files: dict[str, Path] = field(default_factory=dict)  # layer -> file
    buffer_assignment: Path | None = None
    memory_report: Path | None = None
    live_range: Path | None = None
    backend: str | None = None  # cpu, gpu, tpu
    target: str = ""  # the target as the folder names it: `sm_9.0a` (an H100), a TPU's version
    xla_number: int | None = None
    ir_number: int | None = None
    repeats: int = 0  # older compiles with the same text, left out
    problem: str | None = None
    slug: str = ""

    def layers(self) -> list[str]:
        """The layers this module has, in pipeline order."""
        return [layer for layer in LAYERS if layer in self.files]

    def text(self, layer: str) -> str:
        """One layer's text, as the dumper wrote it."""
        return read_text(self.files[layer])


@dataclass
class DumpFolder:
    """The modules of one or more dump folders, in the order XLA compiled them."""

    paths: tuple[Path, ...]
    modules: list[DumpModule]
    ignored: int = 0  # files of the dumpers this reader does not use (pass dumps, LLVM IR, .o, ...)

    def module(self, slug: str) -> DumpModule:
        """The module named `slug`."""
        for m in self.modules:
            if m.slug == slug:
                return m
        raise DumpError(f"no module {slug!r} in the dump; modules: {' '.join(m.slug for m in self.modules)}")

    def problems(self) -> list[str]:
        """One line per module that cannot be read."""
        return [f"{m.slug}: {m.problem}" for m in self.modules if m.problem]


@dataclass
class _Ir:
    number: int
    name: str
    path: Path
    digest: str
    repeats: int = 0
    shapes: tuple | None = None
    names: frozenset = frozenset()
    problem: str | None = None
    paired: bool = False


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as e:
        raise DumpError(f"cannot read {path}: {e.strerror or e}") from None


def _newest(entries: list[_Ir]) -> list[_Ir]:
    """One entry per function and distinct text, the newest (highest number), counting the older repeats it
    stands for. A jaxpr's text does not name its function: two functions may print the same one."""
    by_text: dict[tuple[str, str], _Ir] = {}
    for entry in sorted(entries, key=lambda e: e.number):
        older = by_text.get((entry.name, entry.digest))
        if older is not None:
            entry.repeats = older.repeats + 1
        by_text[(entry.name, entry.digest)] = entry
    return sorted(by_text.values(), key=lambda e: e.number)


def read_folder(*folders: str | Path) -> DumpFolder:
    """The modules of the dump folders: files paired across the dumpers, newest compile of each text."""
    paths = tuple(Path(f) for f in folders)
    jaxprs, mlirs, xla, ignored = [], [], {}, 0
    for folder in paths:
        if not folder.is_dir():
            raise DumpError(f"{folder} is not a folder")
        for path in sorted(folder.iterdir(), key=lambda p: p.name):
            if not path.is_file():
                continue
            if m := _JAXPR_FILE.fullmatch(path.name):
                jaxprs.append(_Ir(int(m.group(1)), m.group(2), path, _digest(path)))
            elif m := _MLIR_FILE.fullmatch(path.name):
                mlirs.append(_Ir(int(m.group(1)), m.group(2), path, _digest(path)))
            elif (m := _XLA_FILE.fullmatch(path.name)) and (rest := _XLA_REST.fullmatch(m.group(3))):
                key = (folder, int(m.group(1)), m.group(2))  # numbers repeat across clients: the name too
                module = xla.setdefault(key, DumpModule(m.group(2), xla_number=int(m.group(1))))
                _place_xla_file(module, path, rest)
            elif path.name.startswith(("jax_", "module_")):
                ignored += 1
    if not (jaxprs or mlirs or xla):
        names = ", ".join(str(p) for p in paths)
        raise DumpError(f"{names} holds no JAX or XLA dump (no jax_*.jaxpr.txt, jax_ir*_compile.mlir or "
                        "module_*.txt files); dump with JAX_DUMP_IR_TO=DIR and XLA_FLAGS=--xla_dump_to=DIR")
    jaxprs, mlirs = _newest(jaxprs), _newest(mlirs)
    modules = _newest_xla(_join_renumbered(xla))
    context = ir_context() if mlirs else None
    for entry in mlirs:
        _read_mlir(entry, context)
    for entry in jaxprs:
        _read_jaxpr(entry)
    mlirs_named: dict[str, list[_Ir]] = {}
    for entry in mlirs:
        mlirs_named.setdefault(entry.name, []).append(entry)
    for module in modules:
        _pair_xla(module, mlirs_named.get(module.name, []))
    for entry in mlirs:
        if not entry.paired:
            modules.append(DumpModule(entry.name, {"stablehlo": entry.path}, ir_number=entry.number,
                                      repeats=entry.repeats, problem=entry.problem))
    jaxprs_named: dict[str, list[_Ir]] = {}
    for entry in jaxprs:
        jaxprs_named.setdefault(_function_module_name(entry.name), []).append(entry)
    mlir_at = {entry.path: entry for entry in mlirs}
    for module in modules:
        _pair_jaxpr(module, jaxprs_named.get(module.name, []), mlir_at)
    for entry in jaxprs:
        if not entry.paired:
            modules.append(DumpModule(entry.name, {"jaxpr": entry.path}, repeats=entry.repeats,
                                      problem=entry.problem))
    _finish(modules)
    return DumpFolder(paths, modules, ignored)


def _place_xla_file(module: DumpModule, path: Path, rest: re.Match) -> None:
    if rest.group("before"):
        module.files["hlo_before"] = path
        return
    what = rest.group("what")
    if what == "-buffer-assignment":
        module.buffer_assignment = path
    elif what == "-memory-usage-report":
        module.memory_report = path
    elif what == "-live-range":
        module.live_range = path
    else:
        module.files["hlo_after"] = path
    backend, target = _backend(rest.group("prefix"), path)
    if backend is None:
        module.problem = f"unknown backend {rest.group('prefix')[:-1]!r} in {path.name}"
    else:
        module.backend, module.target = backend, target


def _backend(prefix: str, path: Path) -> tuple[str | None, str]:
    """The backend an `after_optimizations` file's prefix names, and the target it says."""
    if prefix == "cpu_":
        return "cpu", "CPU"
    if m := _GPU_PREFIX.fullmatch(prefix):
        return "gpu", f"GPU, compute capability {m.group(1)}.{m.group(2)}{m.group(3)}"
    if prefix == "" and ".cl_" in path.name:
        return "tpu", _tpu_version(path)
    return None, ""


def _tpu_version(path: Path) -> str:
    """The TPU version libtpu wrote beside the module (`target_arguments.txt`), as it names it."""
    stem = path.name.split(".cl_", 1)[0]
    compile_id = path.name.split(".cl_", 1)[1].split(".", 1)[0]
    arguments = path.with_name(f"{stem}.cl_{compile_id}.target_arguments.txt")
    try:
        text = arguments.read_text(errors="replace")
    except OSError:
        return "TPU"
    version = re.search(r"version: (\w+)", text)
    variant = re.search(r'variant: "(\w+)"', text)
    words = " ".join(w for w in (version and version.group(1), variant and variant.group(1)) if w)
    return f"TPU ({words})" if words else "TPU"


_COMPILE_ID = re.compile(r"\.cl_(\d+)\.")


def _join_renumbered(xla: dict[tuple, DumpModule]) -> list[DumpModule]:
    """XLA's modules, with one that libtpu renumbered between its two dumps made whole again: a module of
    only HLO before optimisations and the next one of its name and compile id (`cl_N`) in the same
    folder, of only the optimised HLO, are one compile (libtpu numbers some modules anew when it
    optimises them, as dropout's threefry: `module_0000` before, `module_0003` after)."""
    out, waiting = [], {}
    for (folder, _number, name), module in sorted(xla.items(), key=lambda item: (str(item[0][0]), item[0][1])):
        compile_id = _COMPILE_ID.search(next(iter(module.files.values())).name) if module.files else None
        key = (folder, name, compile_id and compile_id.group(1))
        earlier = waiting.pop(key, None)
        if compile_id and earlier is not None and set(module.files) == {"hlo_after"}:
            earlier.files["hlo_after"] = module.files["hlo_after"]
            earlier.buffer_assignment, earlier.memory_report = module.buffer_assignment, module.memory_report
            earlier.live_range, earlier.backend, earlier.problem = module.live_range, module.backend, module.problem
            earlier.target = _tpu_version(earlier.files["hlo_before"]) if module.backend == "tpu" else module.target
            continue
        if compile_id and set(module.files) == {"hlo_before"}:
            waiting[key] = module
        out.append(module)
    return out


def _newest_xla(modules: list[DumpModule]) -> list[DumpModule]:
    by_text: dict[tuple, DumpModule] = {}
    for module in sorted(modules, key=lambda m: m.xla_number):
        layer = module.files.get("hlo_before") or module.files.get("hlo_after")
        key = (module.name, _digest(layer)) if layer else (module.name, module.xla_number)
        older = by_text.get(key)
        if older is not None:
            module.repeats = older.repeats + 1
        by_text[key] = module
    return sorted(by_text.values(), key=lambda m: m.xla_number)


def _read_mlir(entry: _Ir, context) -> None:
    try:
        module = parse_stablehlo(read_text(entry.path), entry.path, context)
    except DumpError as e:
        entry.problem = str(e)
        return
    entry.name = module.operation.attributes["sym_name"].value if "sym_name" in module.operation.attributes \
        else entry.name
    entry.shapes = shapes_of_mlir(module)
    entry.names = frozenset((name, frame) for _op, name, frame, _fine in stablehlo_locations(module) if name)


def _read_jaxpr(entry: _Ir) -> None:
    try:
        text = read_text(entry.path)
    except DumpError as e:
        entry.problem = str(e)
        return
    heads = list(_JAXPR_HEAD.finditer(text))
    head = heads[-1] if heads else None
    if head is None or not text.rstrip().endswith("}"):
        entry.problem = f"{entry.path} is not a whole printed jaxpr (truncated?)"
        return
    entry.shapes = (tuple(_aval_dims(dims, dtype) for dtype, dims in _JAXPR_AVAL.findall(head.group(2))),
                    _jaxpr_results(text))
    entry.names = frozenset(jaxpr_primitives(text))


# A typed PRNG key lowers to its implementation's key data, a uint32 array with trailing dimensions of its
# own (JAX's threefry2x32 keys are u32[2], its rbg and unsafe_rbg keys u32[4]).
_KEY_DATA = {"key<fry>": (2,), "key<rbg>": (4,), "key<unsafe_rbg>": (4,)}


def _aval_dims(dims: str, dtype: str = "") -> tuple[int, ...]:
    """An aval's shape as StableHLO has it: a typed key's with its key data's dimensions after it."""
    return tuple(int(d.split("@")[0]) for d in dims.split(",") if d.strip()) + _KEY_DATA.get(dtype, ())


def _jaxpr_results(text: str) -> tuple[tuple[int, ...], ...] | None:
    """The shapes of the outermost jaxpr's results, from the binders of the names its last line returns."""
    tail = re.search(r"\bin \(([^()]*)\) \}\s*$", text)
    if tail is None:
        return None
    shapes = []
    for name in (n.strip() for n in tail.group(1).split(",") if n.strip()):
        binder = re.search(rf"(?<![\w]){re.escape(name)}:[a-z]\w*\[([\w@, ]*)\]", text)
        if binder is None:
            return None  # a literal result: its shape is not printed
        shapes.append(_aval_dims(binder.group(1)))
    return tuple(shapes)


def _pair_xla(module: DumpModule, mlirs: list[_Ir]) -> None:
    """Pair an XLA module with the one StableHLO dump whose name, shapes and name stacks it repeats."""
    layer = "hlo_before" if "hlo_before" in module.files else "hlo_after" if "hlo_after" in module.files else None
    if layer is None:
        module.problem = module.problem or "XLA wrote no HLO text for it (no before_optimizations or " \
                                           "after_optimizations file)"
        return
    path = module.files[layer]
    try:
        hlo = parse_hlo(read_text(path), path)
        if "hlo_after" in module.files and layer != "hlo_after":
            parse_hlo(read_text(module.files["hlo_after"]), module.files["hlo_after"])
    except DumpError as e:
        module.problem = str(e)
        return
    shapes = shapes_of_hlo(hlo)
    names = frozenset((n, frame) for _c, _i, n, frame in hlo_op_names(hlo) if "/" in n or "(" in n)
    candidates = [e for e in mlirs if e.problem is None and e.name == module.name
                  and (layer == "hlo_after" or e.shapes == shapes) and _covers(e.names, names)]
    if len(candidates) > 1:
        exact = [e for e in candidates if e.names == names]
        candidates = exact if len(exact) == 1 else [max(candidates, key=lambda e: e.number)] \
            if len({e.digest for e in candidates}) == 1 else candidates
    if len(candidates) == 1:
        entry = candidates[0]
        entry.paired = True
        module.files["stablehlo"] = entry.path
        module.ir_number = entry.number
    elif len(candidates) > 1:
        module.problem = module.problem or (f"{len(candidates)} StableHLO dumps match it equally "
                                            f"({', '.join(e.path.name for e in candidates)}); none is shown")


def _covers(stablehlo_names: frozenset, hlo_names: frozenset) -> bool:
    """Whether every name stack (and source line) of the HLO is one the StableHLO carries. An op_name
    without a stack frame (JAX before 0.9, a branch's parameter) is matched by its name stack alone,
    and one that XLA made by merging instructions (`a;b`) by each of its parts."""
    names = {n for n, _f in stablehlo_names}
    return all(all(part in names for part in n.split(";")) if frame is None or ";" in n
               else (n, frame) in stablehlo_names for n, frame in hlo_names)


def _pair_jaxpr(module: DumpModule, jaxprs: list[_Ir], mlir_at: dict[Path, _Ir]) -> None:
    """Pair a module that has StableHLO with the one jaxpr dump of its function, shapes and primitives."""
    if "stablehlo" not in module.files:
        return
    entry = mlir_at[module.files["stablehlo"]]
    if entry.problem:
        module.problem = module.problem or entry.problem
        return
    primitives = {n.rsplit("/", 1)[-1] for n, _f in entry.names}
    primitives = {p for p in primitives if re.fullmatch(r"[a-z_]\w*", p)}
    candidates = [j for j in jaxprs if not j.paired and j.problem is None
                  and _function_module_name(j.name) == module.name and j.shapes[0] == entry.shapes[0]
                  and j.shapes[1] in (None, entry.shapes[1])]
    if len(candidates) > 1:
        # Lowering adds primitives of its own (a scan's `while`, `lt`): the jaxpr sharing the most wins,
        # and only alone.
        shared = {j.path: len(primitives & j.names) for j in candidates}
        best = max(shared.values())
        candidates = [j for j in candidates if shared[j.path] == best]
    if len(candidates) > 1 and len({c.digest for c in candidates}) == 1:
        candidates = [max(candidates, key=lambda c: c.number)]
    if len(candidates) == 1:
        candidates[0].paired = True
        module.files["jaxpr"] = candidates[0].path


def _function_module_name(function: str) -> str:
    """The module name `jax.jit` gives a function's lowering (`f` -> `jit_f`)."""
    return "jit_" + re.sub(r"[^\w]", "_", function)


def _finish(modules: list[DumpModule]) -> None:
    modules.sort(key=lambda m: (m.xla_number is None, m.xla_number or 0, m.ir_number or 0))
    seen: dict[str, int] = {}
    for module in modules:
        base = re.sub(r"[^a-z0-9-]+", "-", module.name.lower()).strip("-") or "module"
        seen[base] = seen.get(base, 0) + 1
        module.slug = base if seen[base] == 1 else f"{base}-{seen[base]}"
        if module.problem is None and len(module.layers()) < 2:
            only = LAYER_NAMES[module.layers()[0]] if module.layers() else "no"
            module.problem = f"only one layer ({only}) in the folder: nothing to link it to"
