"""What only a dump folder says of a module, as the record's `dump` field (`record/schema.py` `DumpFacts`):
the files it was read from, what could not be read, the links in words, XLA's HLO before optimisations,
its buffer reports, the dots of its HLO before optimisations (what the decoder asks of a dump without a jaxpr)
and, for a module without JAX's layers, the source lines its stack frames name.

Each part is read on its own: a part that cannot be read (a truncated or empty file, an unreadable
report) becomes a note, and the rest is kept, so the module's page always answers.
"""
from __future__ import annotations

from dumpgym.dumps.exact import before_links, stablehlo_links
from dumpgym.dumps.folder import LAYER_NAMES, DumpModule
from dumpgym.dumps.source import source_xray
from dumpgym.dumps.xray import ModuleXray
from dumpgym.ir.hlo_before import before_dots
from dumpgym.ir.parse import DumpError
from dumpgym.record.schema import DumpAllocation, DumpBuffers, DumpFacts, DumpFile, DumpSourceLine

# The largest allocations the record keeps (the page lists them; the count and the sums cover all).
ALLOCATIONS_KEPT = 12
_KINDS = ("parameter", "output", "temp", "constant")


# libtpu's names for the TPU versions it compiles for (its `target_arguments.txt`, as `dumps/folder.py` reads
# them) and the device kind JAX names each such chip, which the cost stage knows chips by (`cost/chips.py`);
# tests/test_dump_drills.py compiles for each generation without a TPU and reads both.
LIBTPU_DEVICE_KINDS = {
    "TPU (TPU_VERSION_PUFFERFISH)": "TPU v4",
    "TPU (TPU_VERSION_VIPERFISH)": "TPU v5",
    "TPU (TPU_VERSION_VIPERFISH lite)": "TPU v5 lite",
    "TPU (TPU_VERSION_GHOSTLITE)": "TPU v6 lite",
}


def chip_of(target: str | None) -> str:
    """The chip a dump names, as JAX names its device kind ("TPU v5 lite"), not by libtpu's code name; other
    targets as the dump says them; "" for none."""
    return LIBTPU_DEVICE_KINDS.get(target, target) if target else ""


def dump_facts(module: DumpModule, folders: tuple[str, ...], xray: ModuleXray | None,
               notes: tuple[str, ...] = (), exact: bool = False) -> DumpFacts:
    """The dump's own facts of `module` (`xray`: its links to the StableHLO, None where it has none or it
    could not be read); `notes` says what was lost already; with `exact` (a module without a jaxpr), the optimised
    instructions' exact links to the layers it has."""
    said = list(notes)
    before = ""
    if "hlo_before" in module.files:
        try:
            before = module.text("hlo_before")
        except DumpError as e:
            said.append(f"{LAYER_NAMES['hlo_before']}: {e}")
    source, source_files, source_lines, counts = "", {}, (), ()
    if xray is not None:
        counts = _counts(module, xray)
        said.extend(xray.notes)
    elif before and "hlo_after" in module.files:
        try:
            x = source_xray(module)
        except DumpError as e:
            said.append(f"the source lines could not be linked: {e}")
        else:
            source, source_files, counts = x.source, dict(x.files), (x.line(),)
            source_lines = tuple(DumpSourceLine(g["jaxpr_lines"][0], tuple(g["stablehlo_lines"]),
                                                tuple(x.lines_by_eqn[str(g["eqn"])])) for g in x.groups)
    links_before, links_stablehlo, undecided = {}, {}, ()
    if exact and before and "hlo_after" in module.files:
        try:
            links_before, undecided = before_links(module)
        except DumpError as e:
            said.append(f"the optimised HLO could not be linked to the HLO before optimisations: {e}")
    if exact and xray is not None:
        links_stablehlo = stablehlo_links(xray.hlo.get("hlo_after", ()))
    return DumpFacts(module=shown_text(module.name), folders=tuple(folders), target=chip_of(module.target),
                     files=_files(module), notes=tuple(map(shown_text, [*said, *_buffer_note(module)])), counts=counts, hlo_before=before,
                     buffers=_buffers(module), source=source, source_files=source_files, source_lines=source_lines,
                     dots=before_dots(before) if before else (), before_links=links_before,
                     stablehlo_links=links_stablehlo, before_undecided=undecided)


def _files(module: DumpModule) -> tuple[DumpFile, ...]:
    listed = [*module.files.items(), ("buffer assignment", module.buffer_assignment),
              ("memory-usage report", module.memory_report), ("live ranges", module.live_range)]
    out = []
    for layer, path in listed:
        if path is None:
            continue
        try:
            size = path.stat().st_size
        except OSError:
            size = None
        out.append(DumpFile(LAYER_NAMES.get(layer, layer), shown_text(path), size))
    return tuple(out)


def shown_text(path) -> str:
    """A name or a path as text a record can hold: bytes of a name that are not UTF-8 shown as U+FFFD."""
    return str(path).encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _buffer_note(module: DumpModule) -> tuple[str, ...]:
    try:
        module.memory()
    except DumpError as e:
        return (f"XLA's buffer reports could not be read: {e}",)
    return ()


def _buffers(module: DumpModule) -> DumpBuffers | None:
    try:
        report = module.memory()
    except DumpError:
        return None  # said by `_buffer_note`
    if report is None:
        return None
    rows = tuple(DumpAllocation(n, size, kind, shown_text(value)) for n, size, kind, value in report.allocations[:ALLOCATIONS_KEPT])
    live = {shown_text(name): size for name, size in report.live_at_peak[:ALLOCATIONS_KEPT]}
    return DumpBuffers(total_bytes=report.total_bytes, allocations=rows, allocation_count=len(report.allocations),
                       allocated_bytes=report.allocated(), bytes_by_kind={k: report.bytes_of(k) for k in _KINDS},
                       peak_bytes=report.peak_bytes, peak_at=report.peak_at, live_at_peak=live)


def _counts(module: DumpModule, xray: ModuleXray) -> tuple[str, ...]:
    """The links of each HLO layer to the StableHLO, in words."""
    out = []
    for layer in ("hlo_after", "hlo_before"):
        if layer not in xray.hlo:
            continue
        exact, grouped, named = xray.coverage(layer)
        silent = sum(1 for link in xray.hlo[layer] if link.op_name is None)
        out.append(f"{LAYER_NAMES[layer]}: of {named} instructions that carry a full name stack, {exact} linked to "
                   f"one equation's StableHLO ops and {grouped} to a group of ops the text cannot tell apart; "
                   f"{silent} carry no op_name (XLA's own)")
    if "jaxpr" in module.files:
        out.append(f"jaxpr: {len(xray.jaxpr_links)} equations linked to StableHLO")
    return tuple(out)
