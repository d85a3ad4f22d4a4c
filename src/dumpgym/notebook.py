"""The x-ray inside a notebook: `dumpgym.xray(f, *example_args)` renders linked jaxpr and StableHLO.

The HTML is self-contained (inline CSS and script, no server, no network), so it works in
Jupyter and VS Code; the object also carries `.jaxpr`, `.stablehlo` and `.groups` as data.
"""
from __future__ import annotations

import html
import json
import re
import uuid
from dataclasses import dataclass
from importlib import resources

from dumpgym.record import EqnFact, XrayStats

_STYLE = """
.dgx{font:12px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;color:#1d2330;background:#fbfbf8;border:1px solid #d9d9d0;border-radius:6px;padding:8px}
.dgx .dgx-stats{font-family:system-ui,sans-serif;font-size:12px;color:#555;margin:0 0 6px}
.dgx .dgx-cols{display:grid;grid-template-columns:1fr 1fr;gap:8px}
.dgx .dgx-col{overflow:auto;max-height:420px;border:1px solid #e4e4dc;border-radius:4px;background:#fff}
.dgx h4{margin:0;padding:4px 8px;font:600 11px system-ui,sans-serif;text-transform:uppercase;letter-spacing:.06em;color:#777;position:sticky;top:0;background:#fff;border-bottom:1px solid #eee}
.dgx .l{white-space:pre;padding:0 8px;cursor:default;border-left:3px solid transparent}
.dgx .l.m:hover,.dgx .l.on{background:#fff1b8;border-left-color:#d49b00}
.dgx .l.u{color:#9a9a94}
@media (prefers-color-scheme: dark){.dgx{background:#15171c;color:#dde1ea;border-color:#333}.dgx .dgx-col,.dgx h4{background:#1b1e24;border-color:#30343c}.dgx .l.m:hover,.dgx .l.on{background:#4a3d12}.dgx .l.u{color:#7c808a}}
"""

# Wires one render to the page's own hover module (static/hover.js, inlined above it in the same module
# script). No keys: j/k would fight the notebook's own shortcuts.
_WIRING = """
const root = document.getElementById(%(id)s);
if (root) {
  const data = JSON.parse(root.querySelector('script[type="application/json"]').textContent);
  const cols = { jaxpr: root.querySelector('[data-layer="jaxpr"]'), stablehlo: root.querySelector('[data-layer="stablehlo"]') };
  const rows = { jaxpr: cols.jaxpr.querySelectorAll('[data-line]'), stablehlo: cols.stablehlo.querySelectorAll('[data-line]'), hlo: [] };
  const lights = new Lights(root, cols);
  lights.show(indexGroups(data), rows);
  for (const layer of ['jaxpr', 'stablehlo']) lights.watch(cols[layer], layer);
}
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


@dataclass(frozen=True)
class NotebookXRay:
    """A traced program's jaxpr, StableHLO and x-ray groups, rendering itself as linked HTML."""

    name: str
    jaxpr: str
    stablehlo: str
    groups: list  # the export's `xray` groups, as JSON
    stats: XrayStats
    eqns: tuple[EqnFact, ...]

    def _repr_html_(self) -> str:
        # Unique across renders, kernels and reloads: one notebook page can hold many renders.
        root = f"dumpgym-xray-{uuid.uuid4().hex}"
        mapped = {
            "jaxpr": {n for g in self.groups for n in g["jaxpr_lines"]},
            "stablehlo": {n for g in self.groups for n in g["stablehlo_lines"]},
        }

        def column(layer: str, title: str, text: str) -> str:
            rows = "".join(
                f'<div class="l {"m" if n in mapped[layer] else "u"}" data-line="{n}">{html.escape(line) or " "}</div>'
                for n, line in enumerate(text.splitlines(), start=1)
            )
            return f'<div class="dgx-col" data-layer="{layer}"><h4>{title}</h4>{rows}</div>'

        # What the hover module's index reads: the groups, and each equation's parent and jaxpr lines.
        eqns = [{"id": e.id, "parent": e.parent, "jaxpr_lines": list(e.jaxpr_lines)} for e in self.eqns]
        data = json.dumps({"xray": self.groups, "eqns": eqns}).replace("</", "<\\/")
        script = _inlined("hover.js") + _WIRING % {"id": json.dumps(root)}
        return (
            f'<div class="dgx" id="{root}"><style>{_STYLE}</style>'
            f'<p class="dgx-stats">{html.escape(self.name)} · {html.escape(self.stats.line())}</p>'
            f'<div class="dgx-cols">{column("jaxpr", "jaxpr", self.jaxpr)}{column("stablehlo", "StableHLO", self.stablehlo)}</div>'
            f'<script type="application/json">{data}</script>'
            f'<script type="module">{script}</script></div>'
        )


def _example(arg):
    """An example argument: an array, a ShapeDtypeStruct, or a spec string such as 'bf16[64,128]'."""
    if isinstance(arg, str):
        from dumpgym.program import parse_arg

        return parse_arg(arg).to_struct()
    return arg


def xray(function, *example_args) -> NotebookXRay:
    """Trace `function` on example arguments and return its x-ray for display in a notebook."""
    from dumpgym.facts import build_facts
    from dumpgym.trace import trace
    from dumpgym.attribution import build_xray

    traced = trace(function, [_example(a) for a in example_args])
    facts = build_facts(traced)
    result = build_xray(traced, facts)
    return NotebookXRay(
        name=getattr(function, "__name__", "program"),
        jaxpr=traced.jaxpr,
        stablehlo=traced.stablehlo,
        groups=[g.to_json() for g in result.groups],
        stats=result.stats,
        eqns=facts.eqns,
    )
