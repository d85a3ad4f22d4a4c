"""How the rows of two compiles pair: what each row computes, read from its record's compiled facts and its
printed line, and which rows are the same work (*kept*), the same work changed (*changed*, each with its
closest partner, flagged where another row was as close) or in one compile only.

What a row computes (`Work`): its own line read canonically (`_attributes`: names left out, every attribute
that says what it computes kept), the computations it runs (a fusion's fused body, a reducer, a loop's) as
dataflow graphs of such lines, its operands' shapes, and, to rank partners, the opcodes and dims inside it,
its operands' dims, its users' opcodes and its reach (the parameters it is computed from, the results it
feeds). `pair_rows` pairs two lists of rows; `cost/compare.py` sets the
pairs beside the layers' counts, buffers and times.
"""
from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction

from dumpgym.cost.closure import bits, closure
from dumpgym.record.schema import CompiledLayer, Instruction

# Opcodes that only name, pass on or reinterpret a value: a body made of them alone computes nothing alike.
PLUMBING = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast"})


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


@dataclass(frozen=True)
class Work:
    """What a row computes, read from the record's compiled facts and its printed line: `body`, one id for its
    own line read canonically (`_attributes`) and the computations it runs (a fusion's fused body, a reducer,
    a loop's: the same lines in the same dataflow, names left out, get the same id, in either layer);
    `inputs`, its operands' shapes as printed (layouts included) in order; `ops`, those
    computations' instructions, each as its opcode and dims (result, then operands), dtypes left out so a
    dtype change keeps them alike; its result's dims (dtypes left out, as in what follows); the dims of its
    operands; the printed opcodes of the rows that use it; and `reach`, where its value comes from and goes
    to in its computation (`_reach`)."""

    body: int
    inputs: tuple
    ops: Counter
    dims: tuple
    operands: Counter
    users: Counter
    reach: frozenset = frozenset()


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
        reach = _reach(layer, rows)
        users: dict[int, Counter] = {i.line: Counter() for i in rows}
        for ins in rows:
            for o in ins.operands:
                if o in users:
                    users[o][layer.printed(ins) or ins.opcode] += 1
        return {ins.line: Work(self.ids.setdefault(("row", *said(ins)), len(self.ids)),
                               tuple(layer.shapes[at[o].shape].text if at[o].shape is not None else ""
                                     for o in ins.operands), ops((*ins.calls, *ins.to_apply)),
                               value(ins, False),
                               Counter(value(at[o], False) for o in ins.operands), users[ins.line],
                               reach[ins.line])
                for ins in rows}


def _neighbours(layer: CompiledLayer) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]]:
    """Each running row's operands and users, by line."""
    rows = running(layer)
    users: dict[int, list[int]] = {i.line: [] for i in rows}
    for ins in rows:
        for o in ins.operands:
            users.setdefault(o, []).append(ins.line)
    return {ins.line: (tuple(ins.operands), tuple(users[ins.line])) for ins in rows}


def _reach(layer: CompiledLayer, rows: list[Instruction]) -> dict[int, frozenset]:
    """Where each running row's value comes from and goes to, by line: the parameters of its computation it is
    computed from (`("in", number, tuple index or None)`, reached back through operands; a parameter is its
    own) and the results of that computation it flows into (`("out", tuple index, or None for a root that
    is no tuple)`, reached forward through users). The entry computation's parameters are the function's
    arguments and its root its results, so two rows that read and feed the same ones stand in the same
    place in the function, whatever they are named or however its equations are counted."""
    at = {i.line: i for i in layer.instructions}
    roots = {c.name: c.root for c in layer.computations}
    users = {line: theirs for line, (_, theirs) in _neighbours(layer).items()}
    lines = layer.text.splitlines()

    @functools.cache
    def source(line: int):
        ins = at[line]
        if ins.parameter is not None:
            return ("in", ins.parameter, None)
        if ins.opcode == "get-tuple-element" and ins.operands and at[ins.operands[0]].parameter is not None:
            index = _attributes(lines[line - 1], layer.printed(ins) or ins.opcode)
            return ("in", at[ins.operands[0]].parameter, dict(index[1:]).get("index"))
        return None

    # Each value's reach is the union of its neighbours' (a walk stops at a source: a parameter, or an element
    # of one), so it is made once per line, as bits, from the neighbours' already made: a walk from every row
    # visited its whole computation each time.
    bit: dict[tuple, int] = {}  # a source -> its bit
    back = closure(lambda k: at[k].operands if k in at else (), lambda k: source(k) is None,
                    lambda k: 0 if source(k) is None else 1 << bit.setdefault(source(k), len(bit)))
    sources: list[tuple] = []  # by bit, as the walks find them
    # a value feeding the root of its computation: its bit 0; feeding element k of a root tuple: its bit k + 1
    marks: dict[int, int] = {}
    for c in layer.computations:
        marks[c.root] = marks.get(c.root, 0) | 1
        for k, o in enumerate(at[c.root].operands if c.root in at else ()):
            marks[o] = marks.get(o, 0) | 1 << (k + 1)
    forth = closure(lambda k: users.get(k, ()), lambda k: source(k) is None, lambda k: marks.get(k, 0))
    out = {}
    for ins in rows:
        came = back(ins.line, start=True)
        went = forth(ins.line, start=True)
        root = at[roots[ins.computation]]
        if not went & 1:
            fed = set()
        elif (layer.printed(root) or root.opcode) != "tuple":
            fed = {("out", None)}
        else:
            fed = {("out", k) for k in range(len(root.operands)) if went >> (k + 1) & 1}
        if len(sources) < len(bit):
            sources += list(bit)[len(sources):]
        out[ins.line] = frozenset({sources[b] for b in bits(came)} | fed)
    return out


def _operations(work: Work) -> set[str]:
    """The opcodes a row's body computes with, leaving out those that only name or pass on a value."""
    return {op for op, _, _ in work.ops if op not in PLUMBING}


def _overlap(a: Counter, b: Counter) -> Fraction:
    """How alike two multisets are: what they share over what either holds (1 when both are empty)."""
    union = sum((a | b).values())
    return Fraction(sum((a & b).values()), union) if union else Fraction(1)


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
    `ties`, each pair carries whether another row was as close to either of its rows by all but the last
    measure (`closeness` ends with the rows' places in their listings, which only breaks ties) and was not
    taken by a closer partner: left unpaired, or paired no closer than this pair. Both pairs of a tie are
    flagged so, whichever was made first."""
    ranked = sorted(((closeness(a, b), -a.line, -b.line, a, b) for a in a_rows for b in b_rows
                     if allowed(a, b)), key=lambda t: t[:3], reverse=True)
    out, used_a, used_b = [], set(), set()
    for near, _, _, a, b in ranked:
        if a.line not in used_a and b.line not in used_b:
            used_a.add(a.line)
            used_b.add(b.line)
            out.append((a, b, near[:-1]))
    if not ties:
        return [(a, b) for a, b, _ in out]
    pair_of_a = {a.line: k for k, (a, _, _) in enumerate(out)}
    pair_of_b = {b.line: k for k, (_, b, _) in enumerate(out)}
    tied = set()
    for near, _, _, a, b in ranked:  # (a, b) competes with the pair holding one of them, as close as it, if the
        # other of them is left unpaired or paired no closer
        for mine, theirs, own, other in ((pair_of_a.get(a.line), pair_of_b.get(b.line), b, 1),
                                         (pair_of_b.get(b.line), pair_of_a.get(a.line), a, 0)):
            if mine is not None and out[mine][2] == near[:-1] and out[mine][other].line != own.line and (
                    theirs is None or out[theirs][2] <= near[:-1]):
                tied.add(mine)
    return [(a, b, k in tied) for k, (a, b, _) in enumerate(out)]


def pair_rows(a_layer: CompiledLayer, b_layer: CompiledLayer, a_rows: list[Row], b_rows: list[Row],
              to_changed: dict[int, int]) -> tuple[tuple[Changed, ...], tuple[Changed, ...], tuple[Row, ...],
                                                   tuple[Row, ...]]:
    """The rows of two layers paired: (kept twins, changed pairs, both by the changed compile's line; the base's
    rows left: vanished; the changed compile's left: appeared). `to_changed` aligns the base's equation ids
    with the changed record's (`compare.align`)."""
    back = {v: k for k, v in to_changed.items()}

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
    a_next, b_next = _neighbours(a_layer), _neighbours(b_layer)
    partners: dict[int, int] = {}  # the base's lines paired so far -> the changed compile's

    def linked(a: Row, b: Row) -> int:
        """How many of `a`'s operands and users are paired (`partners`) with one of `b`'s."""
        return sum(sum((Counter(partners[k] for k in mine if k in partners) & Counter(theirs)).values())
                   for mine, theirs in zip(a_next[a.line], b_next[b.line]))

    def closeness(a: Row, b: Row) -> tuple:
        """How alike two rows of one opcode are, compared in order: the same role in the entry computation (its
        parameter of one number, its root), how alike their reach is (`_reach`: the arguments they are
        computed from, the results they feed), how many of their operands and users are paired with each
        other (`linked`), the equations they share, their bodies, result dims, operands and
        users, the same body or parameter number, result shapes, and last their places in their listings."""
        wa, wb = a_work[a.line], b_work[b.line]
        place = abs(Fraction(a_at[a.line], len(a_rows)) - Fraction(b_at[b.line], len(b_rows)))
        role = a_role.get(a.line)
        return (role is not None and role == b_role.get(b.line), _overlap(Counter(wa.reach), Counter(wb.reach)),
                linked(a, b), len(eqns(a, "a") & eqns(b, "b")),
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
    # partner closer to it than the one it got, unless that partner went to a row closer still. The changed
    # round runs twice: the second time, rows whose operands and users the first paired with each other's
    # are the closer (two bitcasts of one shape, each of the counterpart of the other's operand).
    kept_pairs = _closest(a_rows, b_rows, same, closeness)
    kept_a, kept_b = {a.line for a, _ in kept_pairs}, {b.line for _, b in kept_pairs}
    a_left = [r for r in a_rows if r.line not in kept_a]
    b_left = [r for r in b_rows if r.line not in kept_b]
    twins = tuple(sorted((Changed(a, b) for a, b in kept_pairs), key=lambda pair: pair.changed.line))
    for _ in range(2):
        partners.update({a.line: b.line for a, b in kept_pairs})
        modified = [Changed(a, b, tie) for a, b, tie in _closest(a_left, b_left, akin, closeness, ties=True)]
        partners = {p.base.line: p.changed.line for p in modified}
    paired_a, paired_b = {p.base.line for p in modified}, {p.changed.line for p in modified}
    a_left = [r for r in a_left if r.line not in paired_a]
    b_left = [r for r in b_left if r.line not in paired_b]
    modified.sort(key=lambda pair: pair.changed.line)
    return twins, tuple(modified), tuple(a_left), tuple(b_left)
