"""The x-ray of a module XLA dumped without JAX's layers: its optimised HLO linked to the HLO before
optimisations and to the source lines its stack-frame tables name (`SourceXray`).

XLA keeps each instruction's metadata through its passes: a fused or rewritten instruction carries the
`op_name` and `stack_frame_id` of what it came from, and the module's tables (`FileNames` ...
`StackFrames`) turn a frame into a file and a line. So one source line is one group: the lines it
lights are the instructions before optimisation and after it whose innermost frame is that line. That
is all the text says: an instruction is never linked to a line its own frame does not name, and one
without a frame (XLA's own, a parameter) to none. The source lines are shown from the files where they
exist on this machine, each row `file:line  text`.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from dumpgym.ir.hlo_graph import definition_lines
from dumpgym.ir.parse import hlo_op_names, parse_hlo


@dataclass
class SourceXray:
    """The source column's text, the groups (one per source line), each layer's linked lines, and counts."""

    source: str
    groups: list[dict]
    lines_by_eqn: dict[str, list[int]]
    before_lines: set[int] = field(default_factory=set)
    files: dict[str, bool] = field(default_factory=dict)  # source file -> exists on this machine
    framed: int = 0  # optimised instructions whose metadata names a stack frame
    linked: int = 0  # of those, linked to their source line and to instructions before optimisation

    def line(self) -> str:
        """The counts in words."""
        share = f" ({self.linked / self.framed:.0%})" if self.framed else ""
        return (f"optimised HLO: of {self.framed} instructions whose metadata names a source line, {self.linked}"
                f"{share} linked to that line and to the instructions before optimisations that name it too")


def source_xray(module) -> SourceXray:
    """The x-ray of a dumped module's two HLO layers and its source lines (`module`: a `DumpModule` with
    `hlo_before` and `hlo_after`); a `DumpError` where a layer cannot be read."""
    located: dict[str, dict[tuple[str, int], list[int]]] = {}
    for layer in ("hlo_before", "hlo_after"):
        text = module.text(layer)
        lines = definition_lines(text)[0]
        by_place: dict[tuple[str, int], list[int]] = defaultdict(list)
        for _computation, name, _op_name, frame in hlo_op_names(parse_hlo(text, module.files[layer])):
            if frame is not None and name in lines:
                by_place[frame].append(lines[name])
        located[layer] = by_place
    places = sorted(set(located["hlo_before"]) | set(located["hlo_after"]))
    files = {file: Path(file).is_file() for file in dict.fromkeys(f for f, _ in places)}
    texts = {file: _lines(file) for file, here in files.items() if here}
    rows, groups, lines_by_eqn = [], [], {}
    for n, (file, line) in enumerate(places):
        shown = texts.get(file, [])
        said = shown[line - 1].strip() if 0 < line <= len(shown) else "(not on this machine)" if not files[file] else ""
        rows.append(f"{Path(file).name}:{line}  {said}")
        groups.append({"eqn": n, "jaxpr_lines": [n + 1], "stablehlo_lines": sorted(located["hlo_before"].get((file, line), []))})
        lines_by_eqn[str(n)] = sorted(located["hlo_after"].get((file, line), []))
    framed = sum(len(v) for v in located["hlo_after"].values())
    linked = sum(len(v) for place, v in located["hlo_after"].items() if located["hlo_before"].get(place))
    before = {line for v in located["hlo_before"].values() for line in v}
    return SourceXray("\n".join(rows), groups, lines_by_eqn, before, files, framed, linked)


def _lines(file: str) -> list[str]:
    try:
        return Path(file).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
