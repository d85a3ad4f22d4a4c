"""The pages `dumpgym open` adds to the gym for a dump folder: an index of its modules, and one x-ray
page per module, made when first asked for (a folder of hundreds of modules lists at once).

Every value shown goes through `html.escape`; the listings are the notebook view's columns, lit by
the page's own hover module (`static/hover.js`), so the dump's x-ray behaves as the gym's does.
Nothing here imports JAX: the folder is all it reads.
"""
from __future__ import annotations

import html
import json
from functools import partial
from typing import Callable

from dumpgym.dumps.source import source_xray
from dumpgym.dumps.xray import ModuleXray, xray_module
from dumpgym.ir.parse import BIG_FILE, DumpError
from dumpgym.dumps.folder import LAYER_NAMES, DumpFolder, DumpModule
from dumpgym.notebook import STYLE, WIRING, column, script_json

# The column count is a class, not the notebook's inline `--dgx-n`: the gym's CSP allows no inline style.
# A module page's x-ray is wired by the notebook view's wiring, as a served file importing the page's
# hover module (the gym's Content-Security-Policy runs no inline script).
_SCRIPT = ("import { LAYERS, Lights, indexGroups } from '../static/hover.js';\n"
           + WIRING % {"id": '"dump-xray"', "bodies": "null", "compiled": ""})
_PAGE_STYLE = """
body{font:14px/1.5 system-ui,sans-serif;margin:16px;color:#1d2330;background:#fbfbf8}
table{border-collapse:collapse;margin:6px 0 12px}td,th{border:1px solid #d9d9d0;padding:2px 8px;text-align:left}
.problem{color:#8a1c1c}.dgx .dgx-col{max-height:70vh}
.dgx.n1 .dgx-cols{grid-template-columns:minmax(0,1fr)}.dgx.n2 .dgx-cols{grid-template-columns:repeat(2,minmax(0,1fr))}
.dgx.n3 .dgx-cols{grid-template-columns:repeat(3,minmax(0,1fr))}.dgx.n4 .dgx-cols{grid-template-columns:repeat(4,minmax(0,1fr))}
@media (prefers-color-scheme: dark){body{background:#15171c;color:#dde1ea}td,th{border-color:#333}.problem{color:#ff9a9a}}
"""


def _e(value) -> str:
    """A value as page text: escaped, and with what a file system handed over undecoded (a name's bytes that
    are not UTF-8, which Python keeps as lone surrogates) shown as U+FFFD, so the page can be encoded."""
    return html.escape(shown_text(value))


def _name(value) -> str:
    """A name from the dump (a module's, a path), escaped and isolated: a bidi override in it (U+202E) turns
    only itself around, not the page's text after it."""
    return f"<bdi>{_e(value)}</bdi>"


def shown_text(value) -> str:
    """`value` as text that encodes as UTF-8: bytes of a name that were not UTF-8 shown as U+FFFD."""
    return str(value).encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _page(title: str, body: str, depth: str = "../") -> bytes:
    from dumpgym.site.files import CSP

    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{_e(CSP)}">'
            f"<title>{_e(title)} · dumpgym</title>"
            f'<link rel="icon" href="{depth}static/icon.svg" type="image/svg+xml">'
            f'<link rel="stylesheet" href="{depth}dump/dump.css"></head><body>{body}</body></html>\n').encode("utf-8")


def _bytes(n: int | None) -> str:
    if n is None:
        return "—"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit} ({n:,} B)"
    return f"{n:,} B"


def index_page(folder: DumpFolder) -> bytes:
    """The list of a dump's modules: the user's first, biggest first, with target, layers, size, repeats
    and what stops any from being read; JAX's own helper modules folded away below them."""
    head = ("<tr><th>module</th><th>name</th><th>target</th><th>layers</th><th>size</th><th>repeats</th>"
            "<th>note</th></tr>")
    shown = folder.shown()
    users = [_index_row(m) for m in shown if not m.helper]
    helpers = [_index_row(m) for m in shown if m.helper]
    where = ", ".join(_name(p) for p in folder.paths)
    folded = (f"<details><summary>{len(helpers)} helper modules JAX compiled itself (a primitive run outside "
              "<code>jit</code>, as <code>jnp.zeros</code>; JAX's own private functions, as "
              f"<code>jax.random.normal</code>'s)</summary><table>{head}{''.join(helpers)}</table></details>"
              if helpers else "")
    body = (f"<h1>Dump: {where}</h1>"
            f"<p>{len(folder.modules)} modules · {folder.ignored} other dump files not read "
            f'(pass dumps, LLVM IR, object files) · <a href="../index.html">the gym</a></p>'
            + (f"<table>{head}{''.join(users)}</table>" if users else "")
            + folded)
    return _page("dump", body)


def _index_row(m: DumpModule) -> str:
    name = f'<a href="{_e(m.slug)}.html">{_e(m.slug)}</a>' if not m.problem else _e(m.slug)
    layers = ", ".join(LAYER_NAMES[layer] for layer in m.layers())
    state = f'<span class="problem">{_e(m.problem)}</span>' if m.problem else ""
    repeats = f"{m.repeats} older compile(s) of the same text left out" if m.repeats else ""
    return (f"<tr><td>{name}</td><td>{_name(m.name)}</td><td>{_e(m.target or '—')}</td><td>{_e(layers)}</td>"
            f"<td>{_e(_bytes(m.size()))}</td><td>{_e(repeats)}</td><td>{state}</td></tr>")


def module_page(module: DumpModule) -> bytes:
    """One module's x-ray: its layers linked, what is unlinked and why, its buffers and memory."""
    head = (f'<p><a href="index.html">all modules</a></p><h1>{_e(module.slug)}</h1>'
            f"<p>{_name(module.name)} · {_e(module.target or 'no compiled layer')} · "
            f"{_e(', '.join(LAYER_NAMES[layer] for layer in module.layers()))}</p>")
    if module.problem:
        return _page(module.slug, head + f'<p class="problem">{_e(module.problem)}</p>')
    if module.big:  # read by its head alone: the page says where its files are, and what XLA's reports say
        files = "".join(f"<li>{_e(LAYER_NAMES[layer])}: {_name(str(path))} ({_e(_bytes(path.stat().st_size))})</li>"
                        for layer, path in module.files.items() if path.exists())
        note = (f"<p>Its files are too big to list and link here (a file of {BIG_FILE // 2**20} MiB or more is read "
                f"by its head alone): open them in an editor; <code>dumpgym add --dump</code> with "
                f"<code>--module {_e(module.name)}</code> makes it a program of the gym, in a while.</p>")
        return _page(module.slug, head + note + f"<ul>{files}</ul>" + _memory(module))
    try:
        xray = xray_module(module)
    except DumpError as e:
        # The StableHLO cannot be read (truncated): XLA's layers are still shown, unlinked.
        xray = ModuleXray(None, notes=[f"{shown_text(e)}: the layers are shown unlinked"])
    try:
        body = head + _stats(module, xray) + _memory(module) + _columns(module, xray)
    except DumpError as e:  # a layer's file or a buffer report that cannot be read: said, nothing else lost
        body = head + f'<p class="problem">{_e(e)}</p>'
    return _page(module.slug, body)


def _stats(module: DumpModule, xray: ModuleXray) -> str:
    parts = []
    for layer in ("hlo_after", "hlo_before"):
        if layer not in xray.hlo:
            continue
        exact, grouped, named = xray.coverage(layer)
        silent = sum(1 for link in xray.hlo[layer] if link.op_name is None)
        reasons = "".join(f"<li>{n} × not linked: {_e(why)}</li>" for why, n in xray.unlinked(layer).most_common())
        groups = "".join(f"<li>{n} × linked to a group: {_e(why)}</li>" for why, n in xray.groups_of(layer).most_common())
        parts.append(f"<p>{_e(LAYER_NAMES[layer])}: of {named} instructions that carry a full name stack, {exact} "
                     f"linked to one equation's StableHLO ops and {grouped} to a group of ops the text cannot tell "
                     f"apart (one of them made it); {silent} instructions carry no op_name (made by XLA).</p>"
                     + (f"<ul>{groups}{reasons}</ul>" if reasons or groups else ""))
    if "jaxpr" in module.files:
        reasons = "".join(f"<li>{n} × {_e(why)}</li>" for why, n in xray.jaxpr_unlinked.most_common())
        parts.append(f"<p>jaxpr: {len(xray.jaxpr_links)} equations linked to StableHLO.</p>"
                     + (f"<ul>{reasons}</ul>" if reasons else ""))
    for note in xray.notes:
        parts.append(f"<p>{_e(note)}</p>")
    if xray.sources:
        files = ", ".join(f"{_name(name)} ({'here' if here else 'not on this machine'})"
                          for name, here in xray.sources.items())
        parts.append(f"<p>source files: {files}</p>")
    return "".join(parts)


def _memory(module: DumpModule) -> str:
    try:
        report = module.memory()
    except DumpError as e:  # a report that cannot be read: the rest of the page stands
        return f'<h2>Buffers</h2><p class="problem">{_e(e)}</p>'
    if report is None:
        return "<p>XLA wrote no buffer assignment for this module.</p>"
    rows = "".join(f"<tr><td>{n}</td><td>{_e(_bytes(size))}</td><td>{_e(kind)}</td><td>{_e(value)}</td></tr>"
                   for n, size, kind, value in report.allocations[:12])
    more = len(report.allocations) - 12
    peak = ""
    if report.peak_bytes is not None:
        live = "".join(f"<tr><td>{_e(name)}</td><td>{_e(_bytes(size))}</td></tr>" for name, size in report.live_at_peak[:12])
        peak = (f"<p>peak (XLA's live-range report): {_e(_bytes(report.peak_bytes))} live at once, while the schedule "
                f"runs {_e(report.peak_at or '?')}; live then:</p><table><tr><th>buffer</th><th>size</th></tr>{live}</table>")
    kinds = " · ".join(f"{word} {_e(_bytes(report.bytes_of(kind)))}" for word, kind in (
        ("parameters", "parameter"), ("outputs", "output"), ("temporaries", "temp"), ("constants", "constant")))
    return (f"<h2>Buffers</h2>{peak}<p>buffer assignment: {kinds} · memory-usage report, total bytes: "
            f"{_e(_bytes(report.total_bytes))} · {len(report.allocations)} allocations, "
            f"{_e(_bytes(report.allocated()))} in all (every memory space)</p>"
            "<table><tr><th>allocation</th><th>size</th><th>holds</th><th>largest value</th></tr>"
            f"{rows}</table>" + (f"<p>and {more} smaller allocations</p>" if more > 0 else ""))


def _columns(module: DumpModule, xray: ModuleXray) -> str:
    if xray.stablehlo is None and {"hlo_before", "hlo_after"} <= set(module.files):
        return _source_columns(module)
    groups, lines_by_eqn = xray.groups()
    columns, notes = [], []

    def listing(layer: str, key: str, title: str, lit: set[int]) -> None:
        try:
            columns.append(column(key, title, module.text(layer), lit))
        except DumpError as e:  # that layer's file alone is lost
            notes.append(f'<p class="problem">{_e(e)}</p>')

    if "jaxpr" in module.files:
        listing("jaxpr", "jaxpr", "jaxpr", {n for g in groups for n in g["jaxpr_lines"]})
    if xray.stablehlo is not None:
        columns.append(column("stablehlo", "StableHLO", xray.stablehlo,
                               {n for g in groups for n in g["stablehlo_lines"]}))
    if "hlo_after" in module.files:
        listing("hlo_after", "hlo", "optimised HLO", {n for lines in lines_by_eqn.values() for n in lines})
    if "hlo_before" in module.files:
        linked = {link.line for link in xray.hlo.get("hlo_before", ()) if link.stablehlo_lines}
        listing("hlo_before", "before", "HLO before optimisations", linked)
    data = {"xray": groups, "eqns": [{"id": g["eqn"], "parent": None, "jaxpr_lines": g["jaxpr_lines"]} for g in groups],
            "hlo": {"lines_by_eqn": lines_by_eqn}}
    return (f'<h2>X-ray</h2>{"".join(notes)}<div class="dgx n{len(columns)}" id="dump-xray">'
            f'<div class="dgx-cols">{"".join(columns)}</div>'
            f'<script type="application/json">{script_json(data)}</script></div>'
            '<script type="module" src="dump.js"></script>')


def _source_columns(module: DumpModule) -> str:
    """Without JAX's layers: the source lines the HLO's tables name, the HLO before optimisations and the
    optimised HLO, a source line lighting the instructions of both that name it (`dumps/source.py`)."""
    x = source_xray(module)
    files = ", ".join(f"{_name(name)} ({'here' if here else 'not on this machine'})" for name, here in x.files.items())
    columns = [column("jaxpr", "source lines", x.source, {n + 1 for n in range(len(x.groups))}),
               column("stablehlo", "HLO before optimisations", module.text("hlo_before"), x.before_lines),
               column("hlo", "optimised HLO", module.text("hlo_after"),
                      {n for lines in x.lines_by_eqn.values() for n in lines})]
    data = {"xray": x.groups, "eqns": [{"id": g["eqn"], "parent": None, "jaxpr_lines": g["jaxpr_lines"]} for g in x.groups],
            "hlo": {"lines_by_eqn": x.lines_by_eqn}}
    return (f"<h2>X-ray</h2><p>No JAX layers in the dump: {_e(x.line())}. Source files: {files or 'none named'}. "
            "Hover a source line: the instructions that name it light before and after optimisation.</p>"
            f'<div class="dgx n3" id="dump-xray"><div class="dgx-cols">{"".join(columns)}</div>'
            f'<script type="application/json">{script_json(data)}</script></div>'
            '<script type="module" src="dump.js"></script>')


def dump_files(folder: DumpFolder) -> dict[str, Callable[[], bytes]]:
    """The dump's pages by path under the gym (`dump/index.html`, `dump/SLUG.html`), each made when first read."""
    makers: dict[str, Callable[[], bytes]] = {
        "dump/index.html": partial(index_page, folder),
        "dump/dump.css": lambda: (STYLE + _PAGE_STYLE).encode("utf-8"),
        "dump/dump.js": lambda: _SCRIPT.encode("utf-8"),
        "dump/modules.json": lambda: json.dumps(
            [{"slug": m.slug, "name": m.name, "backend": m.backend, "target": m.target, "layers": m.layers(),
              "bytes": m.size(), "helper": m.helper, "repeats": m.repeats, "problem": m.problem}
             for m in folder.shown()], indent=1).encode("utf-8"),
    }
    for module in folder.modules:
        makers[f"dump/{module.slug}.html"] = partial(module_page, module)
    if len(makers) != 4 + len(folder.modules):  # two modules of one slug would share one page
        raise RuntimeError("two modules of the dump have one slug")
    return makers
