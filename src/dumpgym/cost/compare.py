"""A `LayerDiff`: two compiles of one program set side by side, aligned by equation.

A pure function of two `ProgramRecord`s, a program and a compile of it with one change (`change`,
`variant_of`: `mlp` and `mlp-f32`). Their equations are aligned by difflib on each one's primitive and
name stack, in print order (what the change leaves alone keeps its place); the rows of the two layers are
then paired by what they compute (`cost/rows.py`): the same printed line and body, names left out, are
the same work, *kept*; rows of one opcode alike enough are that work *changed*, each with its closest
partner; the rest *appeared* in the changed compile or *vanished* from the base. Only the instructions
that run are rows: the entry computation's and those its loops, branches and calls run, never a fusion's
body or a reducer's region (a fusion is one row, as a launch is one). With them,
per layer: the buffers XLA reported (`memory_analysis()`), the aliased outputs, and the roofline time
cost/estimate.py estimates on the layer's chip.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

from dumpgym.cost.estimate import layer_cost
from dumpgym.cost.rows import Changed, Row, pair_rows, running
from dumpgym.errors import GymError
from dumpgym.record.schema import CompiledLayer, ProgramRecord

# Opcodes as printed, by what the diff calls them. A collective's -start and -done halves are each a row.
COLLECTIVES = frozenset({"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
                         "collective-broadcast", "ragged-all-to-all"})
COPIES = frozenset({"copy"})
CATEGORIES = ("collective", "copy", "fusion", "other")
_PLURAL = {"collective": "collectives", "copy": "copies", "fusion": "fusions", "other": "others"}


class CompareError(GymError):
    """Two records that cannot be set side by side (not a change of each other, no common compiled layer)."""


def category(printed: str) -> str:
    """What the diff calls an instruction by its printed opcode: a collective (`all-gather-start` too), a copy
    (`copy-start`, `copy-done`), a fusion, or other."""
    stem = printed.removesuffix("-start").removesuffix("-done")
    if stem in COLLECTIVES:
        return "collective"
    if stem in COPIES:
        return "copy"
    return "fusion" if printed == "fusion" else "other"


@dataclass(frozen=True)
class EqnPair:
    """Two equations the alignment pairs (either None where one record has no counterpart), and the compiled
    lines each has in its layer."""

    base: int | None
    changed: int | None
    primitive: str
    base_lines: tuple[int, ...]
    changed_lines: tuple[int, ...]


@dataclass(frozen=True)
class LayerDiff:
    """One compile target's two layers side by side: what appeared, vanished and changed, counts by category,
    buffers, aliases and estimated time of each."""

    target: str
    base: str  # slugs
    changed: str
    change: str
    eqns: tuple[EqnPair, ...]
    appeared: tuple[Row, ...]
    vanished: tuple[Row, ...]
    modified: tuple[Changed, ...]
    kept: int  # rows alike in both
    counts: dict[str, tuple[int, int]]  # category -> (base, changed) rows that run
    memory: dict[str, tuple[int, int]]  # memory_analysis() field -> (base, changed), those both report
    aliases: tuple[int, int]
    seconds: tuple[float, float] | None  # roofline time on the layer's chip, where cost.py knows the chip
    twins: tuple[Changed, ...] = ()  # the kept rows, each with its twin, by the changed compile's line

    def of(self, kind: str) -> dict[str, tuple[Row, ...]]:
        """The appeared and vanished rows of one category."""
        return {"appeared": tuple(r for r in self.appeared if r.category == kind),
                "vanished": tuple(r for r in self.vanished if r.category == kind)}


def pair_of(records, slug: str) -> tuple[ProgramRecord, ProgramRecord]:
    """(base, changed) for the slug of either, from `records` (ProgramRecords); a base with several changes
    is refused: name the change."""
    by_slug = {r.slug: r for r in records}
    if slug not in by_slug:
        raise CompareError(f"no program {slug!r}")
    record = by_slug[slug]
    if record.change is not None:
        if record.variant_of not in by_slug:
            raise CompareError(f"{slug} changes {record.variant_of}, which is not in the corpus")
        return by_slug[record.variant_of], record
    changes = [r.slug for r in records if r.change is not None and r.variant_of == slug]
    if len(changes) != 1:
        known = " ".join(r.slug for r in records if r.change is not None)
        raise CompareError(f"{slug} has {'no compile with one change' if not changes else 'several changes: ' + ' '.join(changes)}"
                           f"; compiles with one change: {known or 'none'}")
    return record, by_slug[changes[0]]


def align(base: ProgramRecord, changed: ProgramRecord) -> dict[int, int]:
    """Base equation id -> changed equation id, for the equations difflib pairs on (primitive, name stack,
    container's primitive), in print order."""
    def key(record: ProgramRecord, eqn) -> tuple:
        holder = record.eqns[eqn.parent].primitive if eqn.parent is not None else ""
        return eqn.primitive, eqn.name_stack, holder

    a = [key(base, e) for e in base.eqns]
    b = [key(changed, e) for e in changed.eqns]
    out = {}
    for block in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks():
        for k in range(block.size):
            out[block.a + k] = block.b + k
    return out


def _rows(layer: CompiledLayer) -> list[Row]:
    shapes = layer.shapes
    out = []
    for ins in running(layer):
        printed = layer.printed(ins) or ins.opcode
        shape = shapes[ins.shape].text if ins.shape is not None else ""
        out.append(Row(ins.line, ins.name, printed, category(printed), ins.computed_eqns, shape))
    return out


def compare_layer(base: ProgramRecord, changed: ProgramRecord, target: str) -> LayerDiff:
    """The two records' layers for `target` side by side (see the module's docstring)."""
    if target not in base.compiled or target not in changed.compiled:
        common = " ".join(t for t in base.compiled if t in changed.compiled)
        raise CompareError(f"{base.slug} and {changed.slug} are not both compiled for {target!r}"
                           f" (both are for: {common or 'nothing'})")
    a_layer, b_layer = base.compiled[target], changed.compiled[target]
    if not a_layer.has_facts or not b_layer.has_facts:
        raise CompareError(f"{target}: a layer recorded before the compiled facts; run `dumpgym corpus build`")
    to_changed = align(base, changed)
    a_rows, b_rows = _rows(a_layer), _rows(b_layer)

    twins, modified, vanished, appeared = pair_rows(a_layer, b_layer, a_rows, b_rows, to_changed)
    counts = {c: (sum(r.category == c for r in a_rows), sum(r.category == c for r in b_rows)) for c in CATEGORIES}
    memory = {k: (a_layer.xla_memory[k], b_layer.xla_memory[k]) for k in a_layer.xla_memory if k in b_layer.xla_memory}
    times = [layer_cost(layer, target).time() for layer in (a_layer, b_layer)]
    seconds = (times[0][0], times[1][0]) if all(times) else None
    pairs = _eqn_pairs(base, changed, to_changed, a_layer, b_layer)
    return LayerDiff(target, base.slug, changed.slug, changed.change or "", pairs, appeared, vanished,
                     modified, len(twins), counts, memory,
                     (len(a_layer.aliases), len(b_layer.aliases)), seconds, twins)


def _eqn_pairs(base, changed, to_changed, a_layer, b_layer) -> tuple[EqnPair, ...]:
    """Every equation of both records in print order, paired where aligned, with its compiled lines."""
    def lines(layer, eqn):
        return tuple(layer.lines_by_eqn.get(str(eqn), ())) if eqn is not None else ()

    out, b_next = [], 0
    matched = set(to_changed.values())
    for e in base.eqns:
        partner = to_changed.get(e.id)
        if partner is not None:  # the changed record's unmatched equations before it come first
            while b_next < partner:
                if b_next not in matched:
                    out.append(EqnPair(None, b_next, changed.eqns[b_next].primitive, (), lines(b_layer, b_next)))
                b_next += 1
            b_next = partner + 1
        out.append(EqnPair(e.id, partner, e.primitive, lines(a_layer, e.id), lines(b_layer, partner)))
    out += [EqnPair(None, k, changed.eqns[k].primitive, (), lines(b_layer, k))
            for k in range(b_next, len(changed.eqns)) if k not in matched]
    return tuple(out)


def compare(base: ProgramRecord, changed: ProgramRecord, targets: tuple[str, ...] | None = None) -> dict[str, LayerDiff]:
    """The two records' layers side by side for each of `targets` (default: every target both have, in the
    base's order); refused unless `changed` is a compile of `base` with one change."""
    if changed.change is None or changed.variant_of != base.slug:
        raise CompareError(f"{changed.slug} is not a compile of {base.slug} with one change")
    if targets is None:
        targets = tuple(t for t in base.compiled if t in changed.compiled)
    return {t: compare_layer(base, changed, t) for t in targets}


def _seconds(value: float) -> str:
    return f"{value * 1e6:.3g} µs"


def text(diff: LayerDiff) -> str:
    """The diff as `dumpgym diff` prints it: counts, buffers and time side by side, then each row that
    appeared, vanished or changed, by line."""
    out = [f"{diff.target}: {diff.base} -> {diff.changed} ({diff.change})",
           f"  rows that run: {diff.kept} kept, {len(diff.modified)} changed, {len(diff.appeared)} appeared, "
           f"{len(diff.vanished)} vanished"]
    out += [f"  {_PLURAL[kind]:<12} {a:>4} -> {b:<4}" for kind, (a, b) in diff.counts.items() if a or b]
    out += [f"  {name:<30} {a:>10} -> {b:<10}" for name, (a, b) in diff.memory.items() if a or b]
    out.append(f"  {'aliased outputs':<30} {diff.aliases[0]:>10} -> {diff.aliases[1]:<10}")
    if diff.seconds is not None:
        out.append(f"  {'estimated time':<30} {_seconds(diff.seconds[0]):>10} -> {_seconds(diff.seconds[1]):<10}")
    for word, rows, slug in (("appeared", diff.appeared, diff.changed), ("vanished", diff.vanished, diff.base)):
        for r in rows:
            out.append(f"  {word:<9} {slug} line {r.line:<4} %{r.name} = {r.shape} {r.opcode}"
                       + (f"  (eqns {', '.join(map(str, r.eqns))})" if r.eqns else "  (the compiler's own)"))
    for pair in diff.modified:
        a, b = pair.base, pair.changed
        out.append(f"  changed   line {a.line} -> {b.line}  %{a.name} -> %{b.name} {a.opcode} {a.shape} -> {b.shape}"
                   + ("  (a guess: another row is as alike)" if pair.uncertain else ""))
    return "\n".join(out)
