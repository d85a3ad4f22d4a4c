"""The x-ray inside a notebook: `dumpgym.xray(f, *example_args)` renders linked jaxpr and StableHLO.

The HTML is self-contained (inline CSS and script, no server, no network), so it works in
Jupyter and VS Code; the object also carries `.jaxpr`, `.stablehlo` and `.groups` as data.
"""
from __future__ import annotations

import html
import itertools
import json
from dataclasses import dataclass

_ids = itertools.count()

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

_SCRIPT = """
(function(){
  var root=document.getElementById(%(id)s); if(!root) return;
  var groups=JSON.parse(root.querySelector('script[type="application/json"]').textContent);
  var byLine={jaxpr:{},stablehlo:{}};
  groups.forEach(function(g,i){
    g.jaxpr_lines.forEach(function(n){(byLine.jaxpr[n]=byLine.jaxpr[n]||[]).push(i);});
    g.stablehlo_lines.forEach(function(n){(byLine.stablehlo[n]=byLine.stablehlo[n]||[]).push(i);});
  });
  var lit=[];
  function clear(){lit.forEach(function(e){e.classList.remove('on');});lit=[];}
  function light(layer,n){
    clear(); var gs=byLine[layer][n]; if(!gs) return;
    var g=groups[gs[gs.length-1]];
    [['jaxpr',g.jaxpr_lines],['stablehlo',g.stablehlo_lines]].forEach(function(pair){
      var col=root.querySelector('[data-layer="'+pair[0]+'"]');
      pair[1].forEach(function(k){var e=col.children[k]; if(e){e.classList.add('on');lit.push(e);}});
      if(pair[0]!==layer && pair[1].length){var first=col.children[pair[1][0]]; if(first) col.scrollTop=first.offsetTop-col.clientHeight/3;}
    });
  }
  root.addEventListener('mouseover',function(ev){
    var line=ev.target.closest('.l'); if(!line) return;
    light(line.parentNode.getAttribute('data-layer'), +line.getAttribute('data-n'));
  });
  root.addEventListener('mouseleave',clear);
})();
"""


@dataclass(frozen=True)
class NotebookXRay:
    """A traced program's jaxpr, StableHLO and x-ray groups, rendering itself as linked HTML."""

    name: str
    jaxpr: str
    stablehlo: str
    groups: list
    stats: dict
    eqns: list

    def _repr_html_(self) -> str:
        from dumpgym.xray import stats_line

        root = f"dumpgym-xray-{next(_ids)}"
        mapped = {
            "jaxpr": {n for g in self.groups for n in g["jaxpr_lines"]},
            "stablehlo": {n for g in self.groups for n in g["stablehlo_lines"]},
        }

        def column(layer: str, title: str, text: str) -> str:
            # Line n is child n of the column (child 0 is the heading), so no lookup is needed on hover.
            rows = "".join(
                f'<div class="l {"m" if n in mapped[layer] else "u"}" data-n="{n}">{html.escape(line) or " "}</div>'
                for n, line in enumerate(text.splitlines(), start=1)
            )
            return f'<div class="dgx-col" data-layer="{layer}"><h4>{title}</h4>{rows}</div>'

        data = json.dumps(self.groups).replace("</", "<\\/")
        return (
            f'<div class="dgx" id="{root}"><style>{_STYLE}</style>'
            f'<p class="dgx-stats">{html.escape(self.name)} · {html.escape(stats_line(self.stats))}</p>'
            f'<div class="dgx-cols">{column("jaxpr", "jaxpr", self.jaxpr)}{column("stablehlo", "StableHLO", self.stablehlo)}</div>'
            f'<script type="application/json">{data}</script>'
            f"<script>{_SCRIPT % {'id': json.dumps(root)}}</script></div>"
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
    from dumpgym.xray import build_xray

    traced = trace(function, [_example(a) for a in example_args])
    facts = build_facts(traced)
    result = build_xray(traced, facts).to_json()
    return NotebookXRay(
        name=getattr(function, "__name__", "program"),
        jaxpr=traced.jaxpr,
        stablehlo=traced.stablehlo,
        groups=result["xray"],
        stats=result["xray_stats"],
        eqns=facts.to_json(),
    )
