"""A `LayerDiff`: two compiles of one program set side by side, aligned by equation.

A pure function of two `ProgramRecord`s, a program and a compile of it with one change (`change`,
`variant_of`: `mlp` and `mlp-f32`). Their equations are aligned by difflib on each one's primitive and
name stack, in print order (what the change leaves alone keeps its place); each compiled instruction is
then known by what it computes, read from the records' compiled facts: its printed opcode, the aligned
equations it computes (`Instruction.eqns`), its printed line and the body it runs (a fusion's fused
computation: each line's opcode, shape, attributes and dataflow, names left out), its operands and its users. Rows alike in opcode, equations, body, operands' shapes and
result shape are the same work, *kept*; rows of one opcode that are not, whose bodies share an operation and which share an
equation, are both the compiler's own or have the same result shape, are that work *changed*, each paired
with its closest partner (`compare_layer`); the rest *appeared* in the changed compile or *vanished* from
the base. Only the instructions that run are rows: the entry computation's and those its loops, branches
and calls run, never a fusion's body or a reducer's region (a fusion is one row, as a launch is one). With them,
per layer: the buffers XLA reported (`memory_analysis()`), the aliased outputs, and the roofline time
cost/estimate.py estimates on the layer's chip.
"""
from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction

from dumpgym.cost.estimate import layer_cost
from dumpgym.errors import GymError
from dumpgym.record.schema import CompiledLayer, Instruction, ProgramRecord

# Opcodes as printed, by what the diff calls them. A collective's -start and -done halves are each a row.
COLLECTIVES = frozenset({"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
                         "collective-broadcast", "ragged-all-to-all"})
COPIES = frozenset({"copy"})
# Opcodes that only name, pass on or reinterpret a value: a body made of them alone computes nothing alike.
PLUMBING = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast"})
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
class Row:
    """One compiled instruction as the diff shows it: its line, name, printed opcode and category, the
    equations it computes (its own record's ids) and its result shape as printed."""

    line: int
    name: str
    opcode: str
    category: str
    eqns: tuple[int, ...]
    shape: str


@dataclass(frozen=True)
class Changed:
    """The same work in both compiles, the base's row and the changed compile's: changed (`LayerDiff.modified`),
    or as it is (`LayerDiff.twins`). `uncertain`: another row was as close a partner to either as the one it got
    (two elements of one tuple alike in all the record holds), so which of them is this row's counterpart is a
    guess."""

    base: Row
    changed: Row
    uncertain: bool = False


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


def running(layer: CompiledLayer) -> list[Instruction]:
    """The instructions that run as rows of their own: the entry computation's, and those of the computations
    its whiles and conditionals (`control`) and calls run; not a fusion's body, a region, an async body."""
    entry = next(c.name for c in layer.computations if c.entry)
    out = _reached(_members(layer), [entry], lambda ins: ins.control + (ins.calls if ins.opcode == "call" else ()))
    return sorted(out, key=lambda i: i.line)


def body_opcodes(layer: CompiledLayer, line: int) -> Counter:
    """The printed opcodes of what the row on `line` runs inside (a fusion's body, nested ones, a reducer), counted."""
    ins = next(i for i in layer.instructions if i.line == line)
    return Counter(layer.printed(i) or i.opcode for i in _reached(_members(layer), (*ins.calls, *ins.to_apply),
                                                                  lambda i: (*i.calls, *i.to_apply)))


def _members(layer: CompiledLayer) -> dict[str, list[Instruction]]:
    """Each computation's instructions, by its name."""
    members: dict[str, list[Instruction]] = {}
    for ins in layer.instructions:
        members.setdefault(ins.computation, []).append(ins)
    return members


def _reached(members: dict[str, list[Instruction]], names, follow) -> list[Instruction]:
    """The instructions of the computations `names`, and of those `follow(instruction)` names from them, each once."""
    out, todo, seen = [], list(names), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for ins in members.get(name, ()):
            out.append(ins)
            todo += follow(ins)
    return out


def _rows(layer: CompiledLayer) -> list[Row]:
    shapes = layer.shapes
    out = []
    for ins in running(layer):
        printed = layer.printed(ins) or ins.opcode
        shape = shapes[ins.shape].text if ins.shape is not None else ""
        out.append(Row(ins.line, ins.name, printed, category(printed), ins.eqns, shape))
    return out


@dataclass(frozen=True)
class Work:
    """What a row computes, read from the record's compiled facts and its printed line: `body`, one id for its
    own line read canonically (`_attributes`) and the computations it runs (a fusion's fused body, a reducer,
    a loop's: the same lines in the same dataflow, names left out, get the same id, in either layer);
    `inputs`, its operands' shapes as printed (layouts included) in order; `ops`, those
    computations' instructions, each as its opcode and dims (result, then operands), dtypes left out so a
    dtype change keeps them alike; its result's dims (dtypes left out, as in what follows); the dims of its
    operands; and the printed opcodes of the rows that use it."""

    body: int
    inputs: tuple
    ops: Counter
    dims: tuple
    operands: Counter
    users: Counter


# Attributes of a printed instruction that say where it came from or how a backend tunes it, not what it
# computes (XLA's canonical print leaves them out too), and those naming the computations it runs, read as
# those computations' ids instead. A custom call's backend_config is its kernel, so it counts there.
_UNREAD = frozenset({"metadata", "backend_config", "frontend_attributes", "statistics", "origin",
                     "control-predecessors", "channel_id"})
_NAMING = frozenset({"calls", "to_apply", "condition", "body", "branch_computations", "called_computations"})


def _attributes(printed_line: str, opcode: str) -> tuple:
    """What a printed instruction says beyond its operands' names: what its parentheses hold when it has no
    operand to name (a parameter's number, a constant's value), then its `key=value` attributes in order,
    less `_UNREAD` and `_NAMING` ones (a `get-tuple-element`'s index, a slice's bounds, a comparison's
    direction, a collective's groups stay)."""
    head = printed_line.find(f" {opcode}(", printed_line.find(" = "))
    if head < 0:
        return ()
    pieces, depth, quoted, start = [], 0, False, head + len(opcode) + 2
    for k in range(start, len(printed_line)):
        ch = printed_line[k]
        if ch == '"' and printed_line[k - 1] != "\\":
            quoted = not quoted
        if quoted:
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0:  # the parentheses close: what they held, then the attributes
                held = printed_line[start:k]
                pieces.append("" if "%" in held else held)
                start = k + 1
                depth = 0
        elif ch == "," and depth == 0 and pieces:
            pieces.append(printed_line[start:k])
            start = k + 1
    pieces.append(printed_line[start:])
    out = []
    for k, piece in enumerate(pieces):
        key, _, value = piece.strip().partition("=")
        if k and key and not (key in _NAMING or (key in _UNREAD and not (key == "backend_config"
                                                                            and opcode == "custom-call"))):
            out.append((key, value))
    return (pieces[0], *out)


def attributes(layer: CompiledLayer, line: int) -> dict[str, str]:
    """The attributes that count of the instruction printed on `line` (`_attributes`), by key; what its
    parentheses hold when it names no operand (a parameter's number, a constant's value) under `""`."""
    ins = next(i for i in layer.instructions if i.line == line)
    held, *pairs = _attributes(layer.text.splitlines()[line - 1], layer.printed(ins) or ins.opcode) or ("",)
    return {"": held, **dict(pairs)}


def operand_shapes(layer: CompiledLayer, line: int) -> tuple[str, ...]:
    """The shapes, as printed, of the operands of the instruction on `line`."""
    at = {i.line: i for i in layer.instructions}
    return tuple(layer.shapes[at[o].shape].text if at[o].shape is not None else "" for o in at[line].operands)


class _Reader:
    """Interns the computations of both layers, so that one id means one body in either (`Work.body`)."""

    def __init__(self):
        self.ids: dict[tuple, int] = {}

    def works(self, layer: CompiledLayer) -> dict[int, Work]:
        """Each running row's `Work`, by line."""
        at = {i.line: i for i in layer.instructions}
        roots = {c.name: c.root for c in layer.computations}
        members = _members(layer)

        def value(ins: Instruction, dtypes: bool = True) -> tuple:
            if ins.shape is None:
                return ()
            bufs = [layer.buffers[b] for b in layer.shapes[ins.shape].buffers]
            return tuple((b.dtype, b.dims) if dtypes else b.dims for b in bufs)

        node_ids: dict[int, int] = {}

        printed_lines = layer.text.splitlines()

        def said(ins: Instruction) -> tuple:
            """Its printed opcode, result shape as printed (layout included), attributes, and the ids of the
            computations it runs (a fusion's body, a reducer, a loop's condition and body, branches)."""
            printed = layer.printed(ins) or ins.opcode
            return (printed, layer.shapes[ins.shape].text if ins.shape is not None else "",
                    _attributes(printed_lines[ins.line - 1], printed),
                    tuple(computation(c) for c in (*ins.calls, *ins.to_apply, *ins.control)))

        def node(line: int) -> int:  # memoised on the line: a fused body is a DAG, never walked twice
            if line not in node_ids:
                ins = at[line]
                node_ids[line] = self.ids.setdefault((*said(ins), tuple(node(o) for o in ins.operands)), len(self.ids))
            return node_ids[line]

        def computation(name: str) -> int:
            return node(roots[name])

        def ops(names) -> Counter:
            return Counter((layer.printed(ins) or ins.opcode, value(ins, False),
                            tuple(value(at[o], False) for o in ins.operands))
                           for ins in _reached(members, names, lambda ins: (*ins.calls, *ins.to_apply)))

        rows = running(layer)
        users: dict[int, Counter] = {i.line: Counter() for i in rows}
        for ins in rows:
            for o in ins.operands:
                if o in users:
                    users[o][layer.printed(ins) or ins.opcode] += 1
        return {ins.line: Work(self.ids.setdefault(("row", *said(ins)), len(self.ids)),
                               tuple(layer.shapes[at[o].shape].text if at[o].shape is not None else ""
                                     for o in ins.operands), ops((*ins.calls, *ins.to_apply)),
                               value(ins, False),
                               Counter(value(at[o], False) for o in ins.operands), users[ins.line])
                for ins in rows}


def _operations(work: Work) -> set[str]:
    """The opcodes a row's body computes with, leaving out those that only name or pass on a value."""
    return {op for op, _, _ in work.ops if op not in PLUMBING}


def _overlap(a: Counter, b: Counter) -> Fraction:
    """How alike two multisets are: what they share over what either holds (1 when both are empty)."""
    union = sum((a | b).values())
    return Fraction(sum((a & b).values()), union) if union else Fraction(1)


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
    back = {v: k for k, v in to_changed.items()}
    a_rows, b_rows = _rows(a_layer), _rows(b_layer)

    # Each row's equations in the base's ids (a changed equation with no counterpart keeps a key of its own).
    def eqns(row: Row, side: str) -> frozenset:
        return frozenset(e if side == "a" else back.get(e, ("new", e)) for e in row.eqns)

    reader = _Reader()
    a_work, b_work = reader.works(a_layer), reader.works(b_layer)
    a_at = {r.line: k for k, r in enumerate(a_rows)}
    b_at = {r.line: k for k, r in enumerate(b_rows)}

    def same(a: Row, b: Row) -> bool:  # the same work: kept
        wa, wb = a_work[a.line], b_work[b.line]
        return ((a.opcode, a.shape, wa.body, wa.inputs) == (b.opcode, b.shape, wb.body, wb.inputs)
                and eqns(a, "a") == eqns(b, "b"))

    a_role, b_role = _roles(a_layer), _roles(b_layer)

    def closeness(a: Row, b: Row) -> tuple:
        """How alike two rows of one opcode are, compared in order: the same role in the entry computation (its
        parameter of one number, its root), the equations they share, their bodies, result dims, operands and
        users, the same body or parameter number, result shapes, and last their places in their listings."""
        wa, wb = a_work[a.line], b_work[b.line]
        place = abs(Fraction(a_at[a.line], len(a_rows)) - Fraction(b_at[b.line], len(b_rows)))
        role = a_role.get(a.line)
        return (role is not None and role == b_role.get(b.line), len(eqns(a, "a") & eqns(b, "b")),
                _overlap(wa.ops, wb.ops), wa.dims == wb.dims,
                _overlap(wa.operands, wb.operands), _overlap(wa.users, wb.users), wa.body == wb.body,
                a.shape == b.shape, -place)

    def akin(a: Row, b: Row) -> bool:  # may be the same work changed: one opcode; bodies, where they have
        # them, that share an operation; and a shared equation, both the compiler's own, or one result shape
        wa, wb = a_work[a.line], b_work[b.line]
        params = {a_role.get(a.line), b_role.get(b.line)} - {None, ("root",)}  # an argument is only itself
        return (a.opcode == b.opcode and (not params or a_role.get(a.line) == b_role.get(b.line))
                and (not (wa.ops or wb.ops) or bool(_operations(wa) & _operations(wb)))
                and (bool(eqns(a, "a") & eqns(b, "b")) or not (a.eqns or b.eqns) or a.shape == b.shape))

    # Kept first, then changed: each time the closest pair of all that qualify, so no row is left with a
    # partner closer to it than the one it got, unless that partner went to a row closer still.
    kept_pairs = _closest(a_rows, b_rows, same, closeness)
    a_left = [r for r in a_rows if r.line not in {a.line for a, _ in kept_pairs}]
    b_left = [r for r in b_rows if r.line not in {b.line for _, b in kept_pairs}]
    kept = len(kept_pairs)
    twins = tuple(sorted((Changed(a, b) for a, b in kept_pairs), key=lambda pair: pair.changed.line))
    modified = [Changed(a, b, tie) for a, b, tie in _closest(a_left, b_left, akin, closeness, ties=True)]
    a_left = [r for r in a_left if r.line not in {p.base.line for p in modified}]
    b_left = [r for r in b_left if r.line not in {p.changed.line for p in modified}]
    appeared = b_left
    modified.sort(key=lambda pair: pair.changed.line)
    counts = {c: (sum(r.category == c for r in a_rows), sum(r.category == c for r in b_rows)) for c in CATEGORIES}
    memory = {k: (a_layer.xla_memory[k], b_layer.xla_memory[k]) for k in a_layer.xla_memory if k in b_layer.xla_memory}
    times = [layer_cost(layer, target).time() for layer in (a_layer, b_layer)]
    seconds = (times[0][0], times[1][0]) if all(times) else None
    pairs = _eqn_pairs(base, changed, to_changed, a_layer, b_layer)
    return LayerDiff(target, base.slug, changed.slug, changed.change or "", pairs, tuple(appeared), tuple(a_left),
                     tuple(modified), kept, counts, memory,
                     (len(a_layer.aliases), len(b_layer.aliases)), seconds, twins)


def _roles(layer: CompiledLayer) -> dict[int, tuple]:
    """The rows that stand for the function's own interface, by line: the entry computation's parameters
    (`("parameter", number)`) and its root (`("root",)`)."""
    entry = next(c for c in layer.computations if c.entry)
    out = {i.line: ("parameter", i.parameter) for i in layer.instructions
           if i.computation == entry.name and i.parameter is not None}
    out[entry.root] = ("root",)
    return out


def _closest(a_rows: list[Row], b_rows: list[Row], allowed, closeness, ties: bool = False) -> list[tuple]:
    """Pairs of `allowed` rows, the closest first (by `closeness`, ties by line), each row in at most one. With
    `ties`, each pair carries whether a row still free when it was made was as close to either of its rows by
    all but the last measure (`closeness` ends with the rows' places in their listings, which only breaks ties)."""
    ranked = sorted(((closeness(a, b), -a.line, -b.line, a, b) for a in a_rows for b in b_rows
                     if allowed(a, b)), key=lambda t: t[:3], reverse=True)
    out, used_a, used_b = [], set(), set()
    for k, (near, _, _, a, b) in enumerate(ranked):
        if a.line not in used_a and b.line not in used_b:
            used_a.add(a.line)
            used_b.add(b.line)
            if not ties:
                out.append((a, b))
                continue
            tie = any(other[0][:-1] == near[:-1] and (other[3].line == a.line) != (other[4].line == b.line)
                      and other[3].line not in used_a - {a.line} and other[4].line not in used_b - {b.line}
                      for other in ranked[k + 1:])
            out.append((a, b, tie))
    return out


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
        out.append(f"  changed   line {a.line} -> {b.line}  %{a.name} -> %{b.name} {a.opcode} {a.shape} -> {b.shape}")
    return "\n".join(out)
