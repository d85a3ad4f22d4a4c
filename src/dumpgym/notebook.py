"""The x-ray inside a notebook: `dumpgym.xray(f, *example_args)` renders linked jaxpr and StableHLO.

With `compiled=True` a third column shows XLA's compiled HLO, linked the same way. The HTML is
self-contained (inline CSS and script, no server, no network), so it works in Jupyter and VS Code;
`save(path)` writes it as a standalone page. The object also carries `.jaxpr`, `.stablehlo`,
`.groups` and `.hlo` as data.
"""
from __future__ import annotations

import html
import json
import re
import uuid
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from dumpgym.record.schema import CompiledLayer, EqnFact, XrayStats

# Every text colour keeps 4.5:1 against what it sits on, and a dimmed line (`.u`) 3:1, in both schemes
# (the browser tests measure them); lines are dimmed by one grey, never by opacity.
STYLE = """
.dgx{font:12px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;color:#1d2330;background:#fbfbf8;border:1px solid #d9d9d0;border-radius:6px;padding:8px}
.dgx .dgx-stats{font-family:system-ui,sans-serif;font-size:12px;color:#555;margin:0 0 6px}
.dgx .dgx-cols{display:grid;grid-template-columns:repeat(var(--dgx-n),minmax(0,1fr));gap:8px}
.dgx .dgx-col{overflow:auto;max-height:420px;border:1px solid #e4e4dc;border-radius:4px;background:#fff}
.dgx h4{margin:0;padding:4px 8px;font:600 11px system-ui,sans-serif;text-transform:uppercase;letter-spacing:.06em;color:#5f6368;position:sticky;top:0;background:#fff;border-bottom:1px solid #eee}
.dgx .l{white-space:pre;padding:0 8px;cursor:default;border-left:3px solid transparent}
.dgx .l.m:hover,.dgx .l.on{background:#fff1b8;border-left-color:#d49b00}
.dgx .l.u{color:#80858c}
.dgx .l.fz{font-weight:700}
.dgx .l.fb{background:#edf5f4;border-left-color:#0a6b66}
@media (prefers-color-scheme: dark){.dgx{background:#15171c;color:#dde1ea;border-color:#333}.dgx .dgx-stats{color:#a9afb9}.dgx .dgx-col,.dgx h4{background:#1b1e24;border-color:#30343c}.dgx h4{color:#a0a6b0}.dgx .l.m:hover,.dgx .l.on{background:#4a3d12}.dgx .l.u{color:#80858c}.dgx .l.fb{background:#22302f;border-left-color:#4fc1b7}}
"""

# Wires one render to the page's own hover module (static/hover.js, inlined above it in the same module
# script). The render claims the first root with its id that no script has wired yet: the same output
# shown twice in one page (a second view of it) repeats the id, and each copy must light itself.
# No keys: j/k would fight the notebook's own shortcuts.
WIRING = """
const root = [...document.querySelectorAll('[id=%(id)s]')].find((el) => !el.hasAttribute('data-wired'));
if (root) {
  root.setAttribute('data-wired', '');
  const data = JSON.parse(root.querySelector('script[type="application/json"]').textContent);
  const cols = {};
  const rows = {};
  for (const layer of LAYERS) {
    cols[layer] = root.querySelector(`[data-layer="${layer}"]`);
    rows[layer] = cols[layer] ? cols[layer].querySelectorAll('[data-line]') : [];
  }
  const lights = new Lights(root, cols);
  lights.show(indexGroups(data), rows, %(bodies)s);
  for (const layer of LAYERS) if (cols[layer]) lights.watch(cols[layer], layer);
%(compiled)s}
"""
# With the compiled column: the page's own reading of the record (static/compiled.js) gives each
# fusion's body, which hovering the fusion marks, and the line saying what compiled it.
_COMPILED_WIRING = """  root.querySelector('[data-dgx-hlo]').textContent = `${backendNote(data.hlo)} · ${compiledStats(data.hlo)}`;
"""

_IMPORT = re.compile(r"^import \{[^}]*\} from '\./([\w-]+\.js)';\n", re.M)


def _inlined(module: str, done: set[str] | None = None) -> str:
    """A module of the page's `static/` with what it imports, as one script: dependencies first, their
    `import` lines dropped and `export` keywords removed (read from the package at render time)."""
    done = set() if done is None else done
    if module in done:
        return ""
    done.add(module)
    text = (resources.files("dumpgym") / "static" / module).read_text(encoding="utf-8")
    deps = "".join(_inlined(dep, done) for dep in _IMPORT.findall(text))
    body = re.sub(r"^export ", "", _IMPORT.sub("", text), flags=re.M)
    if re.search(r"^\s*(import|export)\b", body, re.M) or "</script" in body.lower():
        raise ValueError(f"static/{module} cannot be inlined: keep its imports to one-line `import {{...}} from './x.js';`")
    return deps + body


def script_json(value) -> str:
    """JSON that cannot end or comment out the `<script>` holding it."""
    return json.dumps(value).replace("<", "\\u003c")


@dataclass(frozen=True)
class NotebookXRay:
    """A traced program's jaxpr, StableHLO, x-ray groups and (on request) compiled HLO, rendering
    itself as linked HTML."""

    name: str
    jaxpr: str
    stablehlo: str
    groups: list  # the export's `xray` groups, as JSON
    stats: XrayStats
    eqns: tuple[EqnFact, ...]
    # XLA's compiled HLO by compile target id (`target.TARGETS`), with `compiled=`; empty without.
    compiled: dict[str, CompiledLayer] = field(default_factory=dict)

    @property
    def hlo(self) -> CompiledLayer | None:
        """The compiled layer the view shows as its third column (the first of `compiled`), or None."""
        return next(iter(self.compiled.values()), None)

    def _repr_html_(self) -> str:
        # The charset first, inside the 1,024 bytes a browser reads for it: the output saved on its own
        # as an .html file must still read as UTF-8.
        return '<meta charset="utf-8">' + self._fragment()

    def save(self, path) -> Path:
        """Write the x-ray as a standalone UTF-8 HTML page at `path`; returns the path."""
        path = Path(path)
        page = (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
                f"<title>{html.escape(self.name)} · dumpgym x-ray</title></head>"
                f"<body>{self._fragment()}</body></html>\n")
        path.write_bytes(page.encode("utf-8"))
        return path

    def _fragment(self) -> str:
        """The x-ray as one `<div>`: its style, columns, data and script."""
        # Unique across renders, kernels and reloads: one notebook page can hold many renders.
        root = f"dumpgym-xray-{uuid.uuid4().hex}"
        columns = [
            column("jaxpr", "jaxpr", self.jaxpr, {n for g in self.groups for n in g["jaxpr_lines"]}),
            column("stablehlo", "StableHLO", self.stablehlo, {n for g in self.groups for n in g["stablehlo_lines"]}),
        ]
        # What the hover module's index reads: the groups, and each equation's parent and jaxpr lines.
        data = {"xray": self.groups,
                "eqns": [{"id": e.id, "parent": e.parent, "jaxpr_lines": list(e.jaxpr_lines)} for e in self.eqns]}
        note = ""
        if self.hlo is not None:
            # hover.js lights a group's `lines_by_eqn` entry in the compiled column: those lines are mapped.
            mapped = {n for g in self.groups for n in self.hlo.lines_by_eqn.get(str(g["eqn"]), ())}
            fusions = frozenset(f.line for f in self.hlo.fusions)
            columns.append(column("hlo", "compiled HLO", self.hlo.text, mapped, fusions))
            data["hlo"] = self.hlo.to_json()
            note = '<p class="dgx-stats" data-dgx-hlo></p>'
        return (
            f'<div class="dgx" id="{root}" style="--dgx-n:{len(columns)}"><style>{STYLE}</style>'
            f'<p class="dgx-stats">{html.escape(self.name)} · {html.escape(self.stats.line())}</p>{note}'
            f'<div class="dgx-cols">{"".join(columns)}</div>'
            f'<script type="application/json">{script_json(data)}</script>'
            f'<script type="module">{_script(root, compiled=self.hlo is not None)}</script></div>'
        )


def column(layer: str, title: str, text: str, mapped: set[int], fusions: frozenset[int] = frozenset()) -> str:
    """One layer's listing: a row per line, dimmed (`u`) unless some group lights it, fusions bold (`fz`)."""
    rows = "".join(
        f'<div class="l {"m" if n in mapped else "u"}{" fz" if n in fusions else ""}" data-line="{n}">'
        f'{html.escape(line) or " "}</div>'
        for n, line in enumerate(text.splitlines(), start=1)
    )
    return f'<div class="dgx-col" data-layer="{layer}"><h4>{title}</h4>{rows}</div>'


def _script(root: str, compiled: bool) -> str:
    """The render's module script: the page's own modules, inlined, then the wiring of root `root`."""
    done: set[str] = set()
    modules = ["hover.js", "compiled.js"] if compiled else ["hover.js"]
    return "".join(_inlined(m, done) for m in modules) + WIRING % {
        "id": json.dumps(root),
        "bodies": "indexCompiled(data.hlo).bodies" if compiled else "null",
        "compiled": _COMPILED_WIRING if compiled else "",
    }


def xray(function, *example_args, compiled: bool | str = False, **example_kwargs) -> NotebookXRay:
    """Trace `function` on example arguments and return its x-ray for display in a notebook
    (`compiled`: with XLA's compiled HLO as a third column: True or "cpu" for this host's, or a
    target as `dumpgym add --hlo` names it, "tpu", "gpu:a100", ...).

    The arguments are pytrees as `dumpgym.add` takes them (`program.partition`): arrays,
    ShapeDtypeStructs, aval strings such as 'bf16[64,128]', models; Python scalars are traced as `jax.jit`
    traces them, other leaves are static.
    """
    from dumpgym.corpus.pipeline import function_record
    from dumpgym.record.targets import CPU, parse_target

    targets = []
    if compiled:
        target = CPU if compiled is True else parse_target(str(compiled))
        target.require()
        targets.append(target)
    name = getattr(function, "__name__", "program")
    record = function_record(function, example_args, example_kwargs, slug="notebook", title=name,
                             entry=f"<notebook>:{name}", name=name, targets=targets)
    return NotebookXRay(
        name=name,
        jaxpr=record.jaxpr,
        stablehlo=record.stablehlo,
        groups=[g.to_json() for g in record.xray],
        stats=record.xray_stats,
        eqns=record.eqns,
        compiled=dict(record.compiled),
    )
