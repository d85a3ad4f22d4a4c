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

import functools
import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from dumpgym.ir.memory import MemoryReport, read_memory
from dumpgym.ir.parse import (JAXPR_AVAL, DumpError, aval_dims, aval_number, function_names, hlo_head, hlo_op_names,
                               ir_context, is_big, jaxpr_inputs, jaxpr_primitives, jaxpr_results, mlir_head, parse_hlo,
                               parse_stablehlo, read_text, shapes_of_hlo, shapes_of_mlir, stablehlo_locations,
                               tpu_target_words, types_of_hlo, types_of_mlir, gpu_device_name)
from dumpgym.ir.passes import pass_dump

LAYERS = ("jaxpr", "stablehlo", "hlo_before", "hlo_after")
LAYER_NAMES = {"jaxpr": "jaxpr", "stablehlo": "StableHLO", "hlo_before": "HLO before optimisations",
               "hlo_after": "optimised HLO"}

_JAXPR_FILE = re.compile(r"jax_(\d+)_(.+)\.jaxpr\.txt")
_MLIR_FILE = re.compile(r"jax_ir(\d+)_(.+)_compile\.mlir")
_XLA_FILE = re.compile(r"module_(\d+)\.(.+)")
# What follows `module_NNNN.NAME.`: TPU's `cl_N.` compile id, then the backend's own prefix
# (`cpu_`, `sm_9.0a_gpu_`, none for TPU) before `after_optimizations`.
_XLA_REST = re.compile(r"(?:cl_\d+\.)?(?:(?P<before>before_optimizations)|(?P<prefix>[\w.]*?)after_optimizations"
                       r"(?P<what>-buffer-assignment|-memory-usage-report|-live-range)?)\.(?P<ext>txt|hlo\.pb)")
_GPU_PREFIX = re.compile(r"sm_(\d+)\.(\d+)(a?)_gpu_")
# The slug of a module is at most this long, so that the record's `dump-SLUG` fits a slug's 64.
SLUG_MAX = 58


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
    # A layer whose file cannot be read (empty, truncated, unreadable) while the module can do without it: left
    # out of `files`, the reason kept here and said on its page.
    unread: dict[str, str] = field(default_factory=dict)
    slug: str = ""
    stacks: frozenset = frozenset()  # the name stacks its ops carry (StableHLO's, or else the HLO's op_names)
    frames: frozenset = frozenset()  # the (file, line) its StableHLO's ops were traced at
    namesakes: int = 0  # other modules of its name (a function compiled at other shapes): its title says its arguments
    helper: bool = False  # JAX's own (an eager primitive, a private function), not a function the user wrote
    functions: frozenset | None = None  # the functions its HLO's source tables name (None: no tables)
    primitives: frozenset = frozenset()  # a jaxpr's alone: the primitives of its equations
    big: bool = False  # a layer's file is `BIG_FILE` or more: listed and paired by its head alone, not shown
    # Its per-pass dumps (`--xla_dump_hlo_pass_re`), each with where XLA wrote it, and the options file XLA
    # wrote beside it (which names the pattern the passes were dumped with).
    pass_files: list = field(default_factory=list)
    debug_options: Path | None = None

    def size(self) -> int:
        """The bytes of its largest compiler layer's file, to list big modules first."""
        for layer in ("hlo_after", "hlo_before", "stablehlo", "jaxpr"):
            if layer in self.files:
                try:
                    return self.files[layer].stat().st_size
                except OSError:
                    return 0
        return 0

    def layers(self) -> list[str]:
        """The layers this module has, in pipeline order."""
        return [layer for layer in LAYERS if layer in self.files]

    def size_of_biggest(self) -> int:
        """The bytes of its biggest file, of any layer."""
        return max((_size(path) or 0 for path in self.files.values()), default=0)

    def text(self, layer: str) -> str:
        """One layer's text, as the dumper wrote it."""
        return read_text(self.files[layer])

    def memory(self) -> MemoryReport | None:
        """What XLA's buffer assignment, memory-usage report and live ranges say of it, where it wrote them."""
        return read_memory(self.buffer_assignment, self.memory_report, self.live_range)


@dataclass
class DumpFolder:
    """The modules of one or more dump folders, in the order XLA compiled them."""

    paths: tuple[Path, ...]
    modules: list[DumpModule]
    ignored: int = 0  # files of the dumpers this reader does not use (LLVM IR, .o, protos of passes, ...)
    unread: tuple[str, ...] = ()  # names of the modules left unread (`read_folder`'s `only`), from their files

    def module(self, name: str) -> DumpModule:
        """The module of slug `name`, or of that name as the files spell it (`jit_rnn_step`), where one has it."""
        for m in self.modules:
            if m.slug == name:
                return m
        named = [m for m in self.modules if m.name == name]
        if len(named) == 1:
            return named[0]
        if named:
            raise DumpError(f"{len(named)} modules are named {name!r} (compiles of other shapes or code): "
                            f"pick one by its slug: {' '.join(m.slug for m in named)}")
        known = [m.slug for m in self.modules] + list(self.unread)  # slugs of those read, names of the rest
        raise DumpError(f"no module {name!r} in the dump; modules: {' '.join(known)}")

    def shown(self) -> list[DumpModule]:
        """The modules as the index lists them: the user's first, biggest first, then JAX's own helpers."""
        return sorted(self.modules, key=lambda m: (m.helper, -m.size(), m.slug))

    def problems(self, helpers: bool = True) -> list[str]:
        """One line per module that cannot be read (JAX's own helpers left out unless `helpers`)."""
        return [f"{m.slug}: {m.problem}" for m in self.modules if m.problem and (helpers or not m.helper)]


@dataclass
class _Ir:
    number: int
    name: str
    path: Path
    digest: str
    repeats: int = 0
    shapes: tuple | None = None
    names: frozenset = frozenset()
    types: tuple | None = None
    problem: str | None = None
    paired: bool = False
    big: bool = False  # read by its head alone: its name stacks are not known


def _digest(path: Path) -> str:
    """The file's hash; a file that cannot be read is its own (the module that needs it says why)."""
    try:
        with path.open("rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()  # streamed: a big file is not held whole
    except OSError:
        return f"unreadable {path}"


def _newest(entries: list[_Ir]) -> list[_Ir]:
    """One entry per function and distinct text, the newest (highest number), counting the older repeats it
    stands for. A jaxpr's text does not name its function: two functions may print the same one. Only a file
    of the size another of its name and folder has can repeat it: the rest are not hashed (a file of hundreds
    of megabytes is not read before the gym's URL), as for XLA's modules (`_newest_xla`)."""
    sizes = Counter((e.path.parent, e.name, _size(e.path)) for e in entries)
    for entry in entries:
        size = _size(entry.path)
        entry.digest = (_digest(entry.path) if size is None or sizes[(entry.path.parent, entry.name, size)] > 1
                        else f"alone, {size} bytes")
    by_text: dict[tuple, _Ir] = {}
    for entry in sorted(entries, key=lambda e: e.number):
        key = (entry.path.parent, entry.name, entry.digest)  # two folders given are two runs
        older = by_text.get(key)
        if older is not None:
            entry.repeats = older.repeats + 1
        by_text[key] = entry
    return sorted(by_text.values(), key=lambda e: e.number)


def _copies(entries: list[_Ir], kept: list[_Ir]) -> list[tuple[_Ir, _Ir]]:
    """Each older entry of a kept one's text (`_newest`), read as that one (one text, one reading), beside the
    kept one. A jaxpr does not say how its function was compiled: a function jitted again at the same shapes with
    other options (donation, shardings) prints the same jaxpr beside another StableHLO, and each compile pairs
    with a copy of its own."""
    newest = {(e.path.parent, e.name, e.digest): e for e in kept}
    return [(replace(same, number=e.number, path=e.path, repeats=0), same) for e in entries
            if (same := newest[(e.path.parent, e.name, e.digest)]) is not e]


def _is_dump_file(name: str) -> bool:
    return bool(_JAXPR_FILE.fullmatch(name) or _MLIR_FILE.fullmatch(name)
                or ((m := _xla_file(name)) and _XLA_REST.fullmatch(m[2])))


def _xla_file(name: str) -> tuple[int, str, str] | None:
    """(number, module name, what follows it) of one of XLA's files, `module_NNNN.NAME.REST`, or None. A module's
    name may hold dots (JAX keeps them: a function named `evil.txt` is `jit_evil.txt`), so the name ends at the
    first dot whose rest is a layer of a known backend, a per-pass file or the options file; failing that, at
    the first whose rest is any layer, else at the first dot."""
    m = _XLA_FILE.fullmatch(name)
    if m is None:
        return None
    tail, best = m.group(2), None
    for dot in (i for i, char in enumerate(tail) if char == "."):
        module, rest = tail[:dot], tail[dot + 1:]
        if not module:
            continue
        layer = _XLA_REST.fullmatch(rest)
        rank = 2 if (rest == "debug_options" or pass_dump(rest) is not None or (layer is not None and (
            layer.group("before") or _known_prefix(layer.group("prefix"), rest)))) else 1 if layer else 0
        if best is None or rank > best[0]:
            best = (rank, module, rest)
        if rank == 2:
            break
    return None if best is None else (int(m.group(1)), best[1], best[2])


def _files(folder: Path) -> list[Path]:
    """The files of a folder, by name; a folder that cannot be listed is one line."""
    try:
        return sorted((p for p in folder.iterdir() if p.is_file()), key=lambda p: p.name)
    except OSError as e:
        raise DumpError(f"cannot read the folder {folder}: {e.strerror or e}") from None


def dump_folders(folders) -> tuple[Path, ...]:
    """The folders that hold the dump: each given folder that holds dump files, or else its subfolders that
    do (a run that dumped JAX's files and XLA's into two folders of one parent)."""
    out = []
    for folder in (Path(f) for f in folders):
        if not folder.is_dir():
            raise DumpError(f"{folder} is not a folder")
        if any(_is_dump_file(p.name) for p in _files(folder)):
            out.append(folder)
            continue
        try:
            subfolders = sorted((p for p in folder.iterdir() if p.is_dir()), key=lambda p: p.name)
        except OSError as e:
            raise DumpError(f"cannot read the folder {folder}: {e.strerror or e}") from None
        held = [sub for sub in subfolders if any(_is_dump_file(p.name) for p in _files(sub))]
        out.extend(held or [folder])
    return tuple(dict.fromkeys(out))


def read_folder(*folders: str | Path, only=()) -> DumpFolder:
    """The modules of the dump folders: files paired across the dumpers, newest compile of each text.

    With `only` (slugs or module names), just the modules of those names are read and paired: slugs are
    given from every file's name, so each is the slug a whole reading gives it."""
    paths = dump_folders(folders)
    jaxprs, mlirs, xla, ignored = [], [], {}, 0
    per_pass, options = {}, {}  # (folder, module number) -> its per-pass dumps, its options file
    for folder in paths:
        for path in _files(folder):
            if m := _JAXPR_FILE.fullmatch(path.name):
                jaxprs.append(_Ir(int(m.group(1)), m.group(2), path, ""))
            elif m := _MLIR_FILE.fullmatch(path.name):
                mlirs.append(_Ir(int(m.group(1)), m.group(2), path, ""))
            elif (m := _xla_file(path.name)) and (dumped := _pass_file(*m[1:])) is not None:
                per_pass.setdefault((folder, m[0]), []).append((dumped, path))
            elif m and m[2] == "debug_options":
                options[(folder, m[0])] = path
            elif m and (rest := _XLA_REST.fullmatch(m[2])):
                key = (folder, m[0], m[1])  # numbers repeat across clients: the name too
                module = xla.setdefault(key, DumpModule(m[1], xla_number=m[0]))
                _place_xla_file(module, path, rest)
            elif path.name.startswith(("jax_", "module_")):
                ignored += 1
    if not (jaxprs or mlirs or xla):
        names = ", ".join(str(p) for p in paths)
        raise DumpError(f"{names} holds no JAX or XLA dump (no jax_*.jaxpr.txt, jax_ir*_compile.mlir or "
                        "module_*.txt files, nor a subfolder that holds them); dump with JAX_DUMP_IR_TO=DIR "
                        "and XLA_FLAGS=--xla_dump_to=DIR")
    # Every name a module may take, from the files' names alone: no slug is given that another one's base is.
    reserved = {_base(e.name) for e in jaxprs + mlirs} | {_base(m.name) for m in xla.values()}
    unread: tuple[str, ...] = ()
    numbered = {(folder, number) for folder, number, _name in xla}  # the modules XLA wrote layers of
    if only:
        families = {_family(_base(name)) for name in only} | {_family(name) for name in only}
        names = ({m.name for m in xla.values()} | {e.name for e in mlirs}
                 | {_function_module_name(e.name) for e in jaxprs})
        unread = tuple(sorted(n for n in names if _family(_base(n)) not in families))
        jaxprs = [e for e in jaxprs if _family(_base(_function_module_name(e.name))) in families
                  or _family(_base(e.name)) in families]
        mlirs = [e for e in mlirs if _family(_base(e.name)) in families]
        xla = {k: m for k, m in xla.items() if _family(_base(m.name)) in families}
    every_jaxpr, mlirs = jaxprs, _newest(mlirs)
    jaxprs = _newest(every_jaxpr)
    modules = _newest_xla(_join_renumbered(xla))
    for module in modules:
        where = (next(iter(module.files.values())).parent, module.xla_number) if module.files else None
        module.pass_files = per_pass.pop(where, [])
        module.debug_options = options.get(where)
    # Per-pass files of a module XLA wrote nothing else for (a GPU autotuner's own small modules) are not read.
    ignored += sum(len(files) for where, files in per_pass.items() if where not in numbered)
    context = ir_context() if mlirs else None
    for entry in mlirs:
        _read_mlir(entry, context)
    for entry in jaxprs:
        _read_jaxpr(entry)
    copies = _copies(every_jaxpr, jaxprs)
    mlirs_named: dict[str, list[_Ir]] = {}
    for entry in mlirs:
        mlirs_named.setdefault(entry.name, []).append(entry)
    for module in modules:
        _pair_xla(module, mlirs_named.get(module.name, []))
    _unread_stablehlo(modules, mlirs)
    for entry in mlirs:
        if not entry.paired:
            modules.append(DumpModule(entry.name, {"stablehlo": entry.path}, ir_number=entry.number,
                                      repeats=entry.repeats, problem=entry.problem,
                                      stacks=frozenset(n for n, _f in entry.names),
                                      frames=frozenset(f for _n, f in entry.names if f), big=entry.big))
    jaxprs_named: dict[str, list[_Ir]] = {}
    for entry in jaxprs + [copy for copy, _kept in copies]:
        jaxprs_named.setdefault(_function_module_name(entry.name), []).append(entry)
    mlir_at = {entry.path: entry for entry in mlirs}
    for module in modules:
        _pair_jaxpr(module, jaxprs_named.get(module.name, []), mlir_at)
    for copy, kept in copies:  # a text paired once is no module of its own
        kept.paired = kept.paired or copy.paired
    copied = {id(copy) for copy, _kept in copies}
    jaxprs_named = {name: [e for e in entries if id(e) not in copied] for name, entries in jaxprs_named.items()}
    for module in modules:  # the one jaxpr of a function whose StableHLO cannot be read: left out, said
        named = [e for e in jaxprs_named.get(module.name, []) if not e.paired]
        if "stablehlo" in module.unread and "jaxpr" not in module.files and len(named) == 1:
            module.unread["jaxpr"] = f"{named[0].path} is linked through its StableHLO, left out"
            named[0].paired = True
    for entry in jaxprs:
        if not entry.paired:
            modules.append(DumpModule(entry.name, {"jaxpr": entry.path}, repeats=entry.repeats,
                                      problem=entry.problem, primitives=entry.names or frozenset()))
    _finish(modules, reserved)
    return DumpFolder(paths, modules, ignored, unread)


def _pass_file(name: str, rest: str):
    """Where one of XLA's per-pass files was written (`ir/passes.py`), or None for any other file of a module. XLA
    leaves the module's name out of a name that would be longer than 255 characters (`module_0006.0014.…`)."""
    dumped = pass_dump(rest)
    if dumped is None and name.isdigit():
        dumped = pass_dump(f"{name}.{rest}")
    return dumped


def _place_xla_file(module: DumpModule, path: Path, rest: re.Match) -> None:
    """File one of XLA's files under its layer; a proto (`--xla_dump_hlo_as_proto`) where no text of it is."""
    proto = rest.group("ext") != "txt"
    layer = "hlo_before" if rest.group("before") else "hlo_after" if not rest.group("what") else None
    if proto and (layer is None or layer in module.files):
        return  # the text of the same layer is read instead; XLA's reports come as text only
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


def _known_prefix(prefix: str, rest: str) -> bool:
    """Whether an `after_optimizations` file's prefix (and what follows the module's name, `rest`) names a
    backend: the CPU's, a GPU's, or none after a TPU's compile id."""
    return prefix == "cpu_" or _GPU_PREFIX.fullmatch(prefix) is not None or (prefix == "" and rest.startswith("cl_"))


def _backend(prefix: str, path: Path) -> tuple[str | None, str]:
    """The backend an `after_optimizations` file's prefix names, and the target it says."""
    if prefix == "cpu_":
        return "cpu", "CPU"
    if m := _GPU_PREFIX.fullmatch(prefix):
        return "gpu", _gpu_name(path, prefix) or f"GPU, compute capability {m.group(1)}.{m.group(2)}{m.group(3)}"
    if prefix == "" and ".cl_" in path.name:
        return "tpu", _tpu_version(path)
    return None, ""


def _gpu_name(path: Path, prefix: str) -> str:
    """The GPU XLA wrote beside the module (`gpu_target_config.pbtxt`) as the device names itself, the name
    JAX gives as its device kind (the compute capability alone does not tell an H100 from an H200); "" where
    that file is missing or names none."""
    stem = path.name.rpartition(f".{prefix}after_optimizations")[0] + "."  # the text's name or the proto's
    try:
        text = path.with_name(f"{stem}gpu_target_config.pbtxt").read_text(errors="replace")
    except OSError:
        return ""
    return gpu_device_name(text)


def _tpu_version(path: Path) -> str:
    """The TPU version libtpu wrote beside the module (`target_arguments.txt`), as it names it."""
    stem = path.name.split(".cl_", 1)[0]
    compile_id = path.name.split(".cl_", 1)[1].split(".", 1)[0]
    arguments = path.with_name(f"{stem}.cl_{compile_id}.target_arguments.txt")
    try:
        text = arguments.read_text(errors="replace")
    except OSError:
        return "TPU"
    words = tpu_target_words(text)
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
    by_size: dict[tuple, int] = {}
    for module in modules:
        layer = module.files.get("hlo_before") or module.files.get("hlo_after")
        size = _size(layer) if layer else None
        by_size[(module.name, size)] = by_size.get((module.name, size), 0) + 1
    for module in sorted(modules, key=lambda m: m.xla_number):
        layer = module.files.get("hlo_before") or module.files.get("hlo_after")
        # Only a file of a size that another of its name has can repeat it: the rest are not hashed. Two
        # folders given are two runs: a module of one never repeats one of the other.
        if layer is None:
            key = ("no HLO", id(module))
        elif by_size[(module.name, _size(layer))] == 1:
            key = (layer.parent, module.name, "alone", module.xla_number)
        else:
            key = (layer.parent, module.name, _digest(layer))
        older = by_text.get(key)
        if older is not None:
            module.repeats = older.repeats + 1
        by_text[key] = module
    return sorted(by_text.values(), key=lambda m: m.xla_number)


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _read_mlir(entry: _Ir, context) -> None:
    if is_big(entry.path):  # its head alone: a parse would hold the whole file, and more, in memory
        try:
            name, entry.shapes, entry.types = mlir_head(entry.path, context)
        except DumpError as e:
            entry.problem = str(e)
            return
        entry.name, entry.big = name or entry.name, True
        return
    try:
        module = parse_stablehlo(read_text(entry.path), entry.path, context)
    except DumpError as e:
        entry.problem = str(e)
        return
    entry.name = module.operation.attributes["sym_name"].value if "sym_name" in module.operation.attributes \
        else entry.name
    entry.shapes = shapes_of_mlir(module)
    entry.types = types_of_mlir(module)
    entry.names = frozenset((name, frame) for _op, name, frame, _fine in stablehlo_locations(module) if name)


def _read_jaxpr(entry: _Ir) -> None:
    try:
        text = read_text(entry.path)
    except DumpError as e:
        entry.problem = str(e)
        return
    inputs = jaxpr_inputs(text)
    if inputs is None or not text.rstrip().endswith("}"):
        entry.problem = f"{entry.path} is not a whole printed jaxpr (truncated?)"
        return
    avals = JAXPR_AVAL.findall(inputs)
    entry.shapes = (tuple(aval_dims(dims, dtype) for _name, dtype, dims in avals), jaxpr_results(text))
    entry.types = tuple(aval_number(dtype) for _name, dtype, _dims in avals)
    entry.names = frozenset(jaxpr_primitives(text))


def _pair_xla(module: DumpModule, mlirs: list[_Ir]) -> None:
    """Pair an XLA module with the one StableHLO dump whose name, shapes and name stacks it repeats."""
    layer = "hlo_before" if "hlo_before" in module.files else "hlo_after" if "hlo_after" in module.files else None
    if layer is None:
        module.problem = module.problem or "XLA wrote no HLO text for it (no before_optimizations or " \
                                           "after_optimizations file)"
        return
    path = module.files[layer]
    module.big = any(is_big(p) for p in module.files.values())
    try:
        if module.big:  # its head alone: names, shapes and tables (its name stacks are not read)
            _name, shapes, types, module.functions = hlo_head(path)
            if "hlo_after" in module.files and layer != "hlo_after":
                hlo_head(module.files["hlo_after"])
            names = None
        else:
            layer, text, hlo = _readable_hlo(module)
            path = module.files[layer]
            module.functions = function_names(text)
            shapes, types = shapes_of_hlo(hlo), types_of_hlo(hlo)
            names = frozenset((n, frame) for _c, _i, n, frame in hlo_op_names(hlo) if "/" in n or "(" in n)
            module.stacks = frozenset(n for n, _f in names)
            if "hlo_before" in module.unread:
                names = None  # the optimised HLO's names are XLA's after inlining calls: not the StableHLO's
    except DumpError as e:
        module.problem = str(e)
        return
    candidates = [e for e in mlirs if e.problem is None and not e.paired and e.name == module.name
                  and (layer == "hlo_after" or (e.shapes == shapes and e.types in (None, types)))
                  and (names is None or e.big or _covers(e.names, names))]
    if len(candidates) > 1 and names is not None:
        exact = [e for e in candidates if e.names == names]
        candidates = exact or candidates
    if candidates:
        # What the texts cannot tell apart (an eager helper compiled again for another value of the same
        # shapes) is paired in compile order: each dumper numbers its files in the order JAX compiled them,
        # and XLA's modules are paired lowest number first.
        here = path.parent
        entry = min(candidates, key=lambda e: (e.path.parent != here, e.number))  # a run's own files first
        entry.paired = True
        module.files["stablehlo"] = entry.path
        module.ir_number = entry.number
        module.big = module.big or entry.big
        if not entry.big:
            module.stacks = frozenset(n for n, _f in entry.names)
            module.frames = frozenset(f for _n, f in entry.names if f)


def _readable_hlo(module: DumpModule) -> tuple[str, str, object]:
    """The HLO layer a module is paired by (before optimisations, else the optimised), its text and its parse. A
    layer that cannot be read while the other can is left out of `files`, its reason kept in `unread`, so the
    module is shown with a note; a `DumpError` where neither can."""
    read, failed = {}, {}
    for layer in ("hlo_before", "hlo_after"):
        if layer in module.files:
            try:
                text = read_text(module.files[layer])
                read[layer] = (text, parse_hlo(text, module.files[layer]))
            except DumpError as e:
                failed[layer] = e
    if not read:
        raise next(iter(failed.values()))
    for layer, error in failed.items():
        module.unread[layer] = str(error)
        del module.files[layer]
    layer = next(iter(read))
    return (layer, *read[layer])


def _unread_stablehlo(modules: list[DumpModule], mlirs: list[_Ir]) -> None:
    """A StableHLO that cannot be read (empty, truncated) is said on the page of the one module of its name that
    has no StableHLO, where only one has its name, instead of standing as a module of its own."""
    for entry in mlirs:
        if entry.problem is None or entry.paired or sum(e.name == entry.name for e in mlirs) != 1:
            continue
        named = [m for m in modules if m.name == entry.name]
        if len(named) == 1 and "stablehlo" not in named[0].files and named[0].problem is None:
            named[0].unread["stablehlo"] = entry.problem
            entry.paired = True


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
                  and j.shapes[1] in (None, entry.shapes[1])
                  and (entry.types is None or j.types == entry.types[:len(j.types)])]
    if len(candidates) > 1:
        # Lowering adds primitives of its own (a scan's `while`, `lt`): the jaxpr sharing the most wins,
        # and only alone.
        shared = {j.path: len(primitives & j.names) for j in candidates}
        best = max(shared.values())
        candidates = [j for j in candidates if shared[j.path] == best]
    if candidates:  # the rest, as for StableHLO, in compile order, a run's own files first
        here = module.files["stablehlo"].parent
        entry = min(candidates, key=lambda c: (c.path.parent != here, c.number))
        entry.paired = True
        module.files["jaxpr"] = entry.path


def _function_module_name(function: str) -> str:
    """The module name `jax.jit` gives a function's lowering as XLA prints it (`f` -> `jit_f`, `<lambda>` ->
    `jit__lambda`: JAX's `jit(<lambda>)` with what is not a word character made `_`, trailing ones dropped)."""
    return ("jit_" + re.sub(r"[^\w.-]", "_", function)).rstrip("_")


def _base(name: str) -> str:
    """A module name as a slug: lowercase letters, digits and dashes, at most `SLUG_MAX`."""
    return re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:SLUG_MAX].rstrip("-") or "module"


def _family(slug: str) -> str:
    """What every slug given to modules of one base starts with: its first 50 characters without a `-N` tail
    (a second module's slug is its base cut to leave room for `-N`, never below 50)."""
    return re.sub(r"(-\d+)+$", "", slug[:50].rstrip("-"))


def _is_helper(module: DumpModule) -> bool:
    """Whether a module is JAX's own rather than a function the user wrote: no op of it was traced inside its
    function (JAX's source frames are left out of the tables, so the ops of `jax.random.normal`'s `_normal`
    or of `jnp.zeros` sit at the user's line that called them), and it is a private function of JAX's
    (`jit__normal`), or one primitive that ran outside `jit` (`jit_broadcast_in_dim`, whose only name stack is
    `jit(broadcast_in_dim)/broadcast_in_dim`), or a module whose ops carry no name stack at all."""
    function = module.name.removeprefix("jit_")
    if module.functions is not None and any(_same_function(f, function) for f in module.functions):
        return False  # the user's own function (`_sgd`, a method `M.apply`, a lambda too): its ops were traced in it
    if function.startswith("_"):
        # A private function is JAX's own only where JAX jits one of that name (`_normal`); a user's `_loss` is
        # the user's (the tables that would name it are XLA's, absent from a folder of JAX's files alone). A
        # user's function that shares its name with one of JAX's (`_gamma`) is the user's where its ops were
        # traced inside a `def` of that name in the user's own file (JAX's frames are left out of the locations,
        # so a helper's ops sit at the line that called it, outside any `def` of its name).
        if module.functions is None and _traced_in_a_def_named(function, module.frames):
            return False
        jitted = _jax_jitted_private_names()
        return not jitted or function in jitted
    # JAX before 0.9 puts its inner `jit(main)` in every stack: `jit(squeeze)/jit(main)/squeeze`.
    top = f"jit({function})"
    stacks = {s.replace(f"{top}/jit(main)", top, 1) for s in module.stacks}
    if all(stack in (top, f"{top}/{function}") for stack in stacks):
        return True
    # Every op at its top (`jit(multiply)/mul`, and a weak type's convert), its name one of JAX's public array
    # functions: one run outside `jit` (`x * 0.02`), where the source tables name no function of its name;
    # without tables (JAX before 0.9), only where it is one primitive's (a function of the user's is rarely).
    # A stack that does not start at the module's top is relative to a function it calls (`jnp.remainder`'s
    # `jit(_where)` holds a `select_n`) or is such a function's own location: the call stands at the top for
    # it, as in XLA's HLO before optimisations, whose calls keep those stacks out of sight the same way.
    if module.functions is not None:
        stacks = {s for s in stacks if s == top or s.startswith(f"{top}/")}
    ops = {s.removeprefix(f"{top}/") for s in stacks if s != top}
    if not stacks or not all(s == top or (s.startswith(f"{top}/") and s.count("/") == 1) for s in stacks):
        return False
    if module.functions is None and len(ops - {"convert_element_type"}) > 1:
        return False
    return function in _jax_public_names()


# JAX's public array namespaces, as files of the installed package: the names a module of an eager call may take.
_JAX_SPACES = ("numpy/__init__.py", "numpy/linalg.py", "numpy/fft.py", "lax/__init__.py", "nn/__init__.py", "random.py")


@functools.cache
def _jax_public_names() -> frozenset[str]:
    """The names of JAX's public array functions, whose eager calls JAX compiles as `jit_<name>` modules: read
    from the installed JAX's own files, the names each namespace binds (imports, definitions, assignments) as
    Python reads them, without importing JAX (a second and a half, and its memory, that reading a folder does
    not need); none where JAX is not installed."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec("jax")
    roots = list(spec.submodule_search_locations or ()) if spec is not None else []
    names: set[str] = set()

    def bound(body) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, (ast.If, ast.Try)):
                for block in (node.body, node.orelse, *(h.body for h in getattr(node, "handlers", ())),
                              getattr(node, "finalbody", ())):
                    bound(block)

    for root in roots[:1]:
        for space in _JAX_SPACES:
            try:
                bound(ast.parse(Path(root, space).read_text(encoding="utf-8")).body)
            except (OSError, SyntaxError, ValueError):
                continue
    return frozenset(name for name in names if not name.startswith("_"))


@functools.cache
def _jax_jitted_private_names() -> frozenset[str]:
    """The private functions JAX jits in its own files (`_normal`, `_threefry_split`, `_where`), whose eager
    calls JAX compiles as `jit__<name>` modules: each `def _NAME(` under a decorator naming `jit`, and each
    `jit(_NAME` call, read line by line from the installed JAX's files without importing it; none where JAX is
    not installed."""
    import importlib.util

    spec = importlib.util.find_spec("jax")
    roots = list(spec.submodule_search_locations or ()) if spec is not None else []
    names: set[str] = set()
    for root in roots[:1]:
        for path in sorted(Path(root).rglob("*.py")):
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            decorators = ""  # the decorator lines above the next `def`, however many lines each takes
            for line in text.splitlines():
                stripped = line.lstrip()
                if stripped.startswith("@") or (decorators and not stripped.startswith(("def ", "async def "))):
                    decorators += stripped
                elif stripped.startswith(("def ", "async def ")):
                    name = stripped.split("def ", 1)[1].split("(", 1)[0].strip()
                    if name.startswith("_") and "jit" in decorators and not name.endswith("__"):
                        names.add(name)  # a method of a class (`__call__`) is not an eager helper's
                    decorators = ""
                at = line.find("jit(_")
                while at >= 0:
                    end = at + 4
                    while end < len(line) and (line[end].isalnum() or line[end] == "_"):
                        end += 1
                    if not line[at + 4:end].endswith("__"):
                        names.add(line[at + 4:end])
                    at = line.find("jit(_", end)
    return frozenset(names)


def _traced_in_a_def_named(function: str, frames) -> bool:
    """Whether any of the (file, line) frames lies inside a `def` named `function` (a method's too) of its
    file, as Python parses the file where it is on this machine (a file that is not, or does not parse, says
    nothing)."""
    lines: dict[str, list[int]] = {}
    for file, line in frames:
        lines.setdefault(file, []).append(line)
    return any(a <= line <= b for file, at in lines.items() for a, b in _def_spans(file, function) for line in at)


@functools.lru_cache(maxsize=64)
def _def_spans(file: str, function: str) -> tuple[tuple[int, int], ...]:
    """The line spans of every `def function` in a Python file, body and decorators included; none where the
    file cannot be read or parsed, or is larger than a source file would be."""
    import ast

    try:
        path = Path(file)
        if not path.is_file() or path.stat().st_size > _SOURCE_MAX:
            return ()
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    return tuple((min([n.lineno, *(d.lineno for d in n.decorator_list)]), n.end_lineno or n.lineno)
                 for n in ast.walk(tree)
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function)


_SOURCE_MAX = 8 << 20  # bytes: a Python file larger than this is not a user's source


def _same_function(traced_in: str, function: str) -> bool:
    """Whether a function the source tables name (`M.apply`, `<lambda>`) is the one a module is named for
    (`apply`, `_lambda`): by its last dotted part, word characters only, as JAX makes a module's name."""
    def words(name: str) -> str:
        return re.sub(r"[^\w]+", "_", name).strip("_")
    return words(traced_in.rsplit(".", 1)[-1]) == words(function)


def _finish(modules: list[DumpModule], reserved: set[str]) -> None:
    """Order the modules as compiled, give each a slug no other has, and say what stops one being read.

    A module's slug is its name's base (`jit-f`); a second module of that base gets the first `jit-f-N` that
    is no module's base, so `jit_f` compiled twice beside a `jit_f_2` gives `jit-f`, `jit-f-3`, `jit-f-2`."""
    modules.sort(key=lambda m: (m.xla_number is None, m.xla_number or 0, m.ir_number or 0))
    reserved = reserved | {_base(m.name) for m in modules}
    taken: set[str] = set()
    named = Counter(m.name for m in modules)
    for module in modules:
        module.namesakes = named[module.name] - 1
        slug = base = _base(module.name)
        n = 1
        while slug in taken or (n > 1 and slug in reserved):
            n += 1
            slug = f"{base[:SLUG_MAX - len(str(n)) - 1].rstrip('-')}-{n}"
        taken.add(slug)
        module.slug = slug
        if module.problem is None and len(module.layers()) < 2:
            only = LAYER_NAMES[module.layers()[0]] if module.layers() else "no"
            module.problem = next(iter(module.unread.values()), None) or \
                f"only one layer ({only}) in the folder: nothing to link it to"
        # A module that cannot be read is not known to be JAX's own: it stays in front, with its note; but a
        # jaxpr alone of one primitive's equations, named for it, is an eager primitive's (`squeeze` of a key).
        module.helper = (module.problem is None and not module.big and _is_helper(module)) or (
            set(module.files) == {"jaxpr"} and module.primitives == {module.name})
