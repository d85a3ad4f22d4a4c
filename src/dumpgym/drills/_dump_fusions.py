"""The fusion drill of a dump without a jaxpr: tap the lines of the layer the dump has (its StableHLO, or XLA's HLO
before optimisations) whose ops XLA fused into one fusion, from the exact links the record keeps (`DumpFacts.
stablehlo_links`, `before_links`: `dumps/exact.py`).

A fusion is asked only where every instruction of its body (reducers' regions aside, whose instructions are their
holder's work) that is no parameter, constant, tuple plumbing or nested fusion call links exactly to that layer: a
bitcast or a copy may link nowhere (it relabels or moves what is there), anything else that does not leaves the set
undecided, and the fusion is not asked. The answer is the set of lines those links reach (constants aside: a
constant is plumbing, never asked to be tapped), between two and `MAX_SET`.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from dumpgym.drills._layers import text_lines
from dumpgym.drills._tpu import Listing, which_compile
from dumpgym.drills.item import Item, Lines, LineSet, Note
from dumpgym.record.schema import CompiledLayer, Fusion, Instruction, ProgramRecord

MAX_SET = 16  # as the jaxpr's fusion drill: more is a chore, not a reading
NEAR = 6  # at most this many rows outside the set are explained: those nearest its members
FEEDBACK_NAMES = 6
# Body instructions that do no op's work and need no link: they pass, hold or call what is linked elsewhere.
PASSING = frozenset({"parameter", "constant", "tuple", "gettupleelement", "fusion"})
# Body instructions that may link nowhere: a relabel or a move of what is there.
MOVING = frozenset({"bitcast", "copy"})
# Body instructions whose links are not asked: a constant (the question sets constants aside) and a parameter.
UNASKED = frozenset({"parameter", "constant"})
LAYER_WORDS = {"stablehlo": "StableHLO", "hlo-before": "HLO before optimisations"}


@dataclass(frozen=True)
class DumpLinks:
    """A dump's exact links from one compile's instructions to the layer asked (`layer`: `stablehlo` or
    `hlo-before`), and that layer's lines."""

    program: ProgramRecord
    layer: str

    @functools.cached_property
    def links(self) -> dict[int, tuple[int, ...]]:
        """Each optimised line -> the lines of the layer it links to exactly."""
        dump = self.program.dump
        if self.layer == "stablehlo":
            return {int(k): v for k, v in dump.stablehlo_links.items()}
        return {int(k): (v,) for k, v in dump.before_links.items()}

    @functools.cached_property
    def text(self) -> list[str]:
        return text_lines(self.program.stablehlo if self.layer == "stablehlo" else self.program.dump.hlo_before)

    @functools.cached_property
    def constants(self) -> frozenset[int]:
        """The layer's lines that hold a constant (the StableHLO's, as the record read its ops)."""
        return frozenset(op.line for op in self.program.stablehlo_ops if op.name == "stablehlo.constant") \
            if self.layer == "stablehlo" else frozenset()

    @functools.cached_property
    def linked_from(self) -> dict[int, list[int]]:
        """Each linked line of the layer -> the optimised lines linked to it, in order."""
        out: dict[int, list[int]] = {}
        for hlo_line, lines in sorted(self.links.items()):
            for n in lines:
                out.setdefault(n, []).append(hlo_line)
        return out


def asked_layer(program: ProgramRecord) -> str | None:
    """The layer a dump without a jaxpr asks of: its StableHLO where it has one linked, else the HLO before
    optimisations where that is linked; None for a traced program or a dump with a jaxpr."""
    dump = program.dump
    if program.eqns or dump is None:
        return None
    if program.stablehlo and dump.stablehlo_links:
        return "stablehlo"
    return "hlo-before" if dump.before_links and dump.hlo_before else None


def unlinked_fusion_items(program: ProgramRecord) -> list[Item]:
    """The fusion items of a dump without a jaxpr, in each CPU compile, then each TPU one, then each GPU one."""
    layer = asked_layer(program)
    if layer is None:
        return []
    links = DumpLinks(program, layer)
    layers = [*program.layers("cpu").items(), *program.layers("tpu").items(), *program.layers("gpu").items()]
    return [item for target, hlo in layers if hlo.has_facts for item in _layer_items(links, target, hlo)]


class _Body:
    """One compile's fusions read for the drill: each fusion's body instructions, and where each instruction sits."""

    def __init__(self, hlo: CompiledLayer):
        self.hlo, self.listing = hlo, Listing(hlo)
        self.regions = {c for i in hlo.instructions for c in i.to_apply}
        self.held: dict[str, list[Instruction]] = {}
        for i in hlo.instructions:
            self.held.setdefault(i.computation, []).append(i)
        outer = {i.computation for i in hlo.instructions if i.opcode == "fusion"} - \
            {c for i in hlo.instructions if i.opcode == "fusion" for c in i.calls}
        # Each instruction's top fusion (the one called from a computation that is no fused body), by line.
        self.fusion_of: dict[int, Fusion] = {}
        for f in hlo.fusions:
            if self.listing.at[f.line].computation in outer:
                for i in self.members(f):
                    self.fusion_of[i.line] = f

    def members(self, fusion: Fusion) -> list[Instruction]:
        """The instructions of a fusion's body and the fusions it calls, reducers' regions aside."""
        return [i for c in self.listing.body(fusion.line) if c not in self.regions for i in self.held.get(c, ())]


def _answer(links: DumpLinks, body: _Body, fusion: Fusion) -> dict[int, list[Instruction]] | None:
    """Each line of the set -> the body instructions linked to it; None where the body leaves the set undecided."""
    out: dict[int, list[Instruction]] = {}
    for i in body.members(fusion):
        found = links.links.get(i.line) if i.opcode not in UNASKED else None
        if found:
            for n in found:
                if n not in links.constants:
                    out.setdefault(n, []).append(i)
        elif i.opcode not in PASSING and i.opcode not in MOVING:
            return None
    return out


def _layer_items(links: DumpLinks, target: str, hlo: CompiledLayer) -> list[Item]:
    body = _Body(hlo)
    items = []
    for fusion in hlo.fusions:
        if fusion.line not in body.listing.at:
            continue
        answer = _answer(links, body, fusion)
        if answer is None or not 2 <= len(answer) <= MAX_SET:
            continue
        words = LAYER_WORDS[links.layer]
        compiled = f"{hlo.backend.upper()} compiled HLO line {fusion.line}"
        items.append(Item(
            question=(f"Tap every line of the {words} whose op XLA fused into %{fusion.name} ({compiled}), "
                      "constants aside, then submit."),
            answer=LineSet(tuple(answer), _explain(links, body, fusion, answer)),
            context=_context(links, hlo, target, fusion, body),
            card=(fusion.name, target, links.layer), layer=target, skill=fusion.kind,
            feedback=_feedback(links, fusion, answer),
            facts={"fusion": fusion.name, "hlo_line": fusion.line, "lines": sorted(answer),
                   "linked": {str(n): [i.line for i in found] for n, found in sorted(answer.items())}}))
    return items


def _context(links: DumpLinks, hlo: CompiledLayer, target: str, fusion: Fusion, body: _Body) -> tuple:
    """The whole layer to tap in first, which compile, the fusion's call line and its computations."""
    bodies = [Lines(target, *body.listing.computations[n], numbered=True) for n in body.listing.body(fusion.line)]
    return (Lines(links.layer, 1, len(links.text)), Note(which_compile(hlo)),
            Lines(target, fusion.line, fusion.line, strip=True, numbered=True), *bodies)


def _named(links: DumpLinks, n: int) -> str:
    """A line of the layer in words: its number and its text, cut."""
    shown = links.text[n - 1].strip() if 0 < n <= len(links.text) else ""
    return f"line {n} (`{shown[:60]}{'…' if len(shown) > 60 else ''}`)"


def _explain(links: DumpLinks, body: _Body, fusion: Fusion, answer: dict[int, list[Instruction]]) -> dict[str, str]:
    """Why each line is in the set (the body instruction linked to it), and for the linked lines nearest the set's
    outside it, where this compile put their ops instead."""
    explain = {str(n): f"{_named(links, n).capitalize()} is in %{fusion.name}: %{found[0].name} "
                       f"({body.hlo.backend.upper()} HLO line {found[0].line}) came from it."
               for n, found in answer.items()}
    lo, hi = min(answer), max(answer)
    outside = [n for n in links.linked_from if n not in answer and n not in links.constants]
    for n in sorted(outside, key=lambda n: 0 if lo < n < hi else min(abs(n - lo), abs(n - hi)))[:NEAR]:
        where = [body.fusion_of.get(h) for h in links.linked_from[n]]
        others = sorted({f.name for f in where if f is not None and f.name != fusion.name})
        if others:
            said = f"this compile fused its op into %{others[0]}" + (f" (and {len(others) - 1} more)" if len(others) > 1 else "")
        else:
            ins = body.listing.at.get(links.linked_from[n][0])
            said = f"its op is %{ins.name}, outside every fusion" if ins is not None and None in where else \
                "its op is not in this fusion's body"
        explain[str(n)] = f"{_named(links, n).capitalize()} stayed outside %{fusion.name}: {said}."
    return explain


def _feedback(links: DumpLinks, fusion: Fusion, answer: dict[int, list[Instruction]]) -> str:
    named = [f"line {n} (%{found[0].name})" for n, found in sorted(answer.items())]
    more = f", and {len(named) - FEEDBACK_NAMES} more" if len(named) > FEEDBACK_NAMES else ""
    return (f"%{fusion.name}'s body came from {len(answer)} lines of the {LAYER_WORDS[links.layer]}: "
            f"{', '.join(named[:FEEDBACK_NAMES])}{more}.")
