"""Two compiles, one change: what the change made appear or vanish, and what an instruction became.

A program of the built-in corpus and its compile with one change (`mlp` and `mlp-f32`: f32 instead of
bf16; a checkpoint policy, donation, input `PartitionSpec`s) are set side by side by `cost/compare.py`, a
pure function of the two records. This kind asks, on each compile target, three things of the pair:

- **appeared** (on the changed record): tap every row of a computation of the changed compile that no
  row of the base's compile matches (`lines` form over that computation's rows);
- **vanished** (on the base record): tap every row of the base's compile that the changed compile has
  no counterpart of;
- **became** and **was** (typed): a row the change kept but altered (another shape, another fused body,
  other equations fused), shown in one compile; type what its counterpart in the other compile returns (dtype and
  shape, per device, as `compare` pairs them);
- **fate** (on the base) and **origin** (on the changed record), a `choice` among three fixed options:
  one row, and whether the other compile has it as it is, has it changed, or lacks it. Asked only in
  a compile where each of the three is some row's answer, each answer's rows sharing a third of the
  weight, so over the step every option is right equally often and the usual answer is a guess.

Every item shows both compiles: its own around what it asks, and the other's computation that stands for
it, whole, read from the other record's listing; its feedback says what the change did to the row (what it
became, that it appeared or vanished, or that it is the same in both).

The answers are `compare`'s, computed from the records' compiled facts (each row's printed opcode, the
aligned equations it computes, its fused body); no answer is chosen among options, so a reader who does not read the
rows has a guess's chance. A set is asked only where it is small enough to tap (`MOST_ROWS`) and is not
one row alone of its opcode in the computation (the row a change is known for, tapped by habit), and a
row whose result is a tuple or a scalar is not asked to be typed.
"""
from __future__ import annotations

from dumpgym.cost.compare import LayerDiff, align, compare
from dumpgym.cost.rows import PLUMBING, Row, attributes, body_opcodes, operand_shapes, running
from dumpgym.drills import drill
from dumpgym.drills._dot import numpy_dtype
from dumpgym.drills._tpu import which_compile
from dumpgym.drills.answer import Choice, LineSet, Misreading, Typed
from dumpgym.drills.item import Block, Item, Lines, Note
from dumpgym.record.dtypes import short as short_dtype
from dumpgym.record.schema import CompiledLayer, ProgramRecord

# A set of more rows than this is a chore to tap, not a question: it is not asked.
MOST_ROWS = 8
# What a choice item asks of a row: the other compile has it as it is, has it changed, or lacks it. The
# base's rows are asked their fate in the changed compile, the changed compile's rows their origin.
FATES = {"fate": ("kept as it is", "kept, but changed", "vanished"),
         "origin": ("there as it is", "there, but changed", "appeared")}
# The rows shown either side of the one asked about, in its own compile (the other compile's is shown whole).
AROUND = 4
# Rows that only name, pass on or hold values (a parameter, a constant, a tuple's member) are not asked.
_NAMING = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast"})


@drill("diff", number="14", title="two compiles, one change",
       aim="Set a compile beside the same program's compile with one change (a dtype, a sharding, a checkpoint "
           "policy, donation): tap what appeared or vanished, and say what an instruction became.",
       per_program=2, cap_by=("step", "layer"), partners=True)
def diff_items(program: ProgramRecord, partners: tuple[ProgramRecord, ...]) -> list[Item]:
    """The items of each change pair `program` is in: as the changed record, what appeared and what its rows
    were; as the base, what vanished and what its rows became (a base with two changes is asked of each).
    Cards name the step, target, the other record and the computation or row."""
    items = []
    for other in partners:
        changed_side = program.change is not None and other.slug == program.variant_of
        base, changed = (other, program) if changed_side else (program, other)
        if changed.change is None or changed.variant_of != base.slug:
            continue
        for target, diff in compare(base, changed).items():
            items += _set_items(program, other, diff, "appeared" if changed_side else "vanished")
            items += _typed_items(program, other, diff, changed_side)
            items += _fate_items(program, other, diff, changed_side)
    return items


def _set_items(program: ProgramRecord, other: ProgramRecord, diff: LayerDiff, step: str) -> list[Item]:
    """One `lines` item per computation of `program`'s layer holding rows that appeared (or vanished)."""
    layer = program.compiled[diff.target]
    rows = diff.appeared if step == "appeared" else diff.vanished
    by_computation: dict[str, list[Row]] = {}
    at = {i.line: i for i in layer.instructions}
    for row in rows:
        by_computation.setdefault(at[row.line].computation, []).append(row)
    items = []
    for computation, mine in by_computation.items():
        if len(mine) > MOST_ROWS:
            continue
        first, last = next(c.lines for c in layer.computations if c.name == computation)
        shown = [i for i in layer.instructions if i.computation == computation]
        if len(shown) < 2 * len(mine) + 2:
            continue  # nearly every row is the answer: tapping them all would do
        if _lone_of_its_opcode(layer, shown, mine):
            continue  # the change names the one row of its kind: tapping the usual opcode (or the ROOT) would do
        items.append(_set_item(program, other, diff, step, layer, computation, (first, last), mine))
    return items


def _lone_of_its_opcode(layer: CompiledLayer, shown: list, rows: list[Row]) -> bool:
    """Whether the set is one row, the only row of its printed opcode among those shown (auto-sharded's
    ROOT all-reduce that replicated weights make vanish, the one all-gather `out=P()` makes appear): a
    reader who taps the opcode the change is known for, or the last row, has it without reading."""
    if len(rows) != 1:
        return False
    return sum((layer.printed(i) or i.opcode) == rows[0].opcode for i in shown) == 1


def _set_item(program, other, diff: LayerDiff, step: str, layer: CompiledLayer, computation: str,
              lines: tuple[int, int], rows: list[Row]) -> Item:
    first, last = lines
    base, changed = (other.slug, program.slug) if step == "appeared" else (program.slug, other.slug)
    where = "the entry computation" if any(c.entry and c.name == computation for c in layer.computations) \
        else f"%{computation}"
    if step == "appeared":
        question = (f"`{base}` compiled again with one change, {diff.change}, gives this {diff.target.upper()} "
                    f"compile. Tap every row of {where} that no row of `{base}`'s {diff.target.upper()} "
                    f"compile matches: what the change made appear.")
    else:
        question = (f"`{base}` is compiled again with one change, {diff.change}. Tap every row of {where} of "
                    f"this {diff.target.upper()} compile that the other compile has no counterpart of: what "
                    f"the change made vanish.")
    said = {r.line: _row_words(program, r) for r in rows}
    explain = {str(line - first + 1): f"{words}: {'it appeared' if step == 'appeared' else 'it vanished'} "
                                      f"(`{other.slug}`'s compile has no row that computes what it does)"
               for line, words in said.items()}
    kept_or_changed = _counterparts(diff, step)
    for ins in layer.instructions:
        if ins.computation == computation and ins.line not in said and first <= ins.line <= last:
            was = kept_or_changed.get(ins.line)
            explain[str(ins.line - first + 1)] = (
                f"%{ins.name} is in both compiles" + (f" (`{other.slug}`'s is %{was})" if was else "")
                + f", so it did not {'appear' if step == 'appeared' else 'vanish'}")
    listed = ", ".join(f"%{r.name} ({r.opcode})" for r in rows)
    many = len(rows) > 1
    feedback = (f"{_with(diff)} (`{base}` -> `{changed}`), {len(rows)} row{'s' if many else ''} of {where} "
                f"{step}: {listed}; `{other.slug}`'s compile has no row that computes what "
                f"{'they do' if many else 'it does'}. "
                + "; ".join(said.values()) + ".")
    return Item(
        question=question,
        answer=LineSet(tuple(r.line - first + 1 for r in rows), explain),
        context=(Lines(diff.target, first, last, cut=True), Note(which_compile(layer)),
                 Note(f"the change: {diff.change} (`{base}` -> `{changed}`)"),
                 *_other_compile(program, other, diff, computation)),
        card=(step, diff.target, other.slug, computation), layer=diff.target, step=step,
        skill=_skill(rows), feedback=feedback,
        facts={"partner": other.slug, "target": diff.target, "hlo_lines": [first, last],
               "rows": [r.name for r in rows]})


def _other_compile(program: ProgramRecord, other: ProgramRecord, diff: LayerDiff, computation: str) -> tuple[Block, ...]:
    """The other compile's computation that `computation` of `program`'s stands for (the entry for the entry, else
    the one of its name, else the entry), whole, under a note naming it: both compiles, side by side."""
    mine, theirs = program.compiled[diff.target], other.compiled[diff.target]
    entry = next(c for c in theirs.computations if c.entry)
    own = next(c for c in mine.computations if c.name == computation)
    shown = entry if own.entry else next((c for c in theirs.computations if c.name == computation), entry)
    role = "as written" if other.change is None else "with the change"
    return (Note(f"`{other.slug}`'s {diff.target.upper()} compile, {role} ({'its entry computation' if shown.entry else '%' + shown.name}):"),
            Lines(diff.target, *shown.lines, cut=True, program=other.slug))


def _around(program: ProgramRecord, other: ProgramRecord, diff: LayerDiff, line: int) -> tuple[Block, ...]:
    """The row on `line` of `program`'s compile, what its compile says, the change, the rows around it, and the
    other compile's computation: what an item about one row shows."""
    layer = program.compiled[diff.target]
    computation = next(i.computation for i in layer.instructions if i.line == line)
    first, last = next(c.lines for c in layer.computations if c.name == computation)
    role = "with the change" if program.change is not None else "as written"
    return (Lines(diff.target, line, line, cut=True), Note(which_compile(layer)), Note(f"the change: {diff.change}"),
            Note(f"around it, `{program.slug}`'s {diff.target.upper()} compile, {role}:"),
            Lines(diff.target, max(first, line - AROUND), min(last, line + AROUND), cut=True),
            *_other_compile(program, other, diff, computation))


def _counterparts(diff: LayerDiff, step: str) -> dict[int, str]:
    """Line of a kept or changed row on this side -> the other side's row name."""
    return {(p.changed if step == "appeared" else p.base).line: (p.base if step == "appeared" else p.changed).name
            for p in (*diff.modified, *diff.twins)}


def _row_words(program: ProgramRecord, row: Row) -> str:
    """A row as feedback names it: `%all-gather, an all-gather returning f32[64,32]{1,0}, computes the jaxpr's
    `dot_general` (result `f32[64,32]`)`. The equation is told by its result, not its jaxpr line: the item shows no jaxpr."""
    return f"%{row.name}, {_a(row.opcode)} returning {row.shape}, {_does(program, row)}"


def _with(diff: LayerDiff) -> str:
    """The change as a sentence's opening, whatever its words' grammar (`donation off`, `both weights arrive
    replicated`): "With the change, donation off"."""
    return f"With the change, {diff.change}"


def _a(word: str) -> str:
    """`word` after its indefinite article: `an all-gather`, `a fusion`."""
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def _does(program: ProgramRecord, row: Row) -> str:
    """What a row computes, as a predicate: "computes the jaxpr's `dot_general` (result `f32[8,16]`)", or "is the
    compiler's own"."""
    does = [program.eqns[e] for e in row.eqns]
    if not does:
        return "is the compiler's own"
    return ("computes " + ", ".join(f"the jaxpr's `{e.primitive}`" + (f" (result `{e.outputs[0]}`)" if e.outputs else "")
                                    for e in does[:2])
            + (" and more" if len(does) > 2 else ""))


def _skill(rows: list[Row]) -> str:
    """What a missed item comes back as: the category most of its rows are (collective, copy, fusion, other)."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.category] = counts.get(r.category, 0) + 1
    return max(sorted(counts), key=counts.__getitem__)


def _typed_items(program: ProgramRecord, other: ProgramRecord, diff: LayerDiff, changed_side: bool) -> list[Item]:
    """One typed item per changed row with an array result on both sides: shown in `program`'s compile, what
    its counterpart in `other`'s returns."""
    layer = program.compiled[diff.target]
    items = []
    for pair in diff.modified:
        mine, theirs = (pair.changed, pair.base) if changed_side else (pair.base, pair.changed)
        value, shown = _aval(theirs.shape), _aval(mine.shape)
        if value is None or shown is None or value.endswith("[]") or pair.uncertain:
            continue  # no array to type, or which row is its counterpart is a guess
        step = "was" if changed_side else "became"
        if changed_side:
            question = (f"This row is of `{program.slug}`, `{other.slug}` compiled again with one change, "
                        f"{diff.change}. What did its counterpart in `{other.slug}`'s {diff.target.upper()} "
                        f"compile return (dtype and shape, per device)?")
        else:
            question = (f"`{program.slug}` is compiled again with one change, {diff.change}. What does this row's "
                        f"counterpart in that {diff.target.upper()} compile return (dtype and shape, per device)?")
        what = _what_changed(program, other, diff, mine, theirs, changed_side)
        feedback = (f"%{mine.name} ({mine.opcode}) returns {shown} here; its counterpart in `{other.slug}`'s compile, "
                    f"%{theirs.name}, returns {value}{', the same' if value == shown else ''}. "
                    f"{_with(diff)}, {what}.")
        misread = {} if value == shown else {shown: _unchanged(shown, other.slug)}
        items.append(Item(
            question=question,
            answer=Typed("aval", value, misread=misread),
            context=_around(program, other, diff, mine.line),
            card=(step, diff.target, other.slug, mine.name), layer=diff.target, step=step, skill=mine.category,
            eqn=mine.eqns[0] if mine.eqns else None, feedback=feedback,
            facts={"partner": other.slug, "target": diff.target, "hlo_line": mine.line,
                   "counterpart": theirs.name, "counterpart_line": theirs.line}))
    return items


def _what_changed(program: ProgramRecord, other: ProgramRecord, diff: LayerDiff, mine: Row, theirs: Row,
                  changed_side: bool) -> str:
    """What the change did to a changed row, before to after, in a clause: `its result went from bf16[64,512] to
    f32[64,512] and its body's convert instructions went from 23 to none`."""
    base, changed = (other, program) if changed_side else (program, other)
    before, after = (theirs, mine) if changed_side else (mine, theirs)
    a_layer, b_layer = base.compiled[diff.target], changed.compiled[diff.target]
    said = []
    a_val, b_val = _aval(before.shape), _aval(after.shape)
    if a_val != b_val:
        said.append(f"its result went from {a_val or before.shape} to {b_val or after.shape}")
    elif before.shape != after.shape:
        said.append(f"its result's layout went from {before.shape} to {after.shape}")
    a_ops, b_ops = body_opcodes(a_layer, before.line), body_opcodes(b_layer, after.line)
    moved = sorted((op for op in a_ops.keys() | b_ops.keys() if op not in PLUMBING and a_ops[op] != b_ops[op]),
                   key=lambda op: (-abs(a_ops[op] - b_ops[op]), op))
    said += [f"its body's {op} instructions went from {a_ops[op] or 'none'} to {b_ops[op] or 'none'}"
             for op in moved[:2]]
    to_changed = align(base, changed)
    kept = {to_changed.get(e) for e in before.eqns} & set(after.eqns)
    if len(kept) < len(after.eqns):
        said.append(f"it computes {len(after.eqns) - len(kept)} equation{'s' if len(after.eqns) - len(kept) > 1 else ''} more")
    if len(kept) < len(before.eqns):
        said.append(f"it no longer computes {len(before.eqns) - len(kept)} of its equations")
    if not said:
        said += _what_else(a_layer, b_layer, before.line, after.line)
    return ", ".join(said[:-1]) + " and " + said[-1] if len(said) > 1 else said[0]


def _what_else(a_layer: CompiledLayer, b_layer: CompiledLayer, before: int, after: int) -> list[str]:
    """What differs between two rows of one result and the same opcodes inside, in clauses: an attribute
    (`its index went from 3 to 5`), its operands' shapes, or else the dataflow and layouts of its body."""
    a_said, b_said = attributes(a_layer, before), attributes(b_layer, after)
    said = [f"its {key or 'value'} went from {a_said.get(key) or 'none'} to {b_said.get(key) or 'none'}"
            for key in sorted(a_said.keys() | b_said.keys()) if a_said.get(key) != b_said.get(key)]
    a_in, b_in = operand_shapes(a_layer, before), operand_shapes(b_layer, after)
    if a_in != b_in:
        said.append(f"its operands went from {', '.join(a_in) or 'none'} to {', '.join(b_in) or 'none'}")
    return said[:2] or ["its body's dataflow or layouts differ, though its result and the opcodes inside are the same"]


def _unchanged(shown: str, other: str) -> Misreading:
    """The misreading of typing what this compile's row returns, as if the change left it alone."""
    return Misreading(f"{shown} is what it returns in this compile; `{other}`'s counterpart returns something "
                      "else: read what the change does to it", "unchanged")


def _aval(printed: str) -> str | None:
    """A printed array result (`bf16[64,128]{1,0:T(8,128)(2,1)}`) as the jaxpr writes an aval (`bf16[64,128]`);
    None for a tuple or a token."""
    if not printed or printed.startswith("(") or "[" not in printed:
        return None
    dtype, dims = printed.split("[", 1)
    return f"{short_dtype(numpy_dtype(dtype))}[{dims.split(']', 1)[0]}]"


def _fate_items(program: ProgramRecord, other: ProgramRecord, diff: LayerDiff, changed_side: bool) -> list[Item]:
    """One choice item per row of `program`'s compile that runs (not one that only names a value): kept, changed
    or gone in `other`'s. Only where each of the three answers some row; each answer's rows share a third."""
    layer = program.compiled[diff.target]
    changed = {(p.changed if changed_side else p.base).line: (p.base if changed_side else p.changed) for p in diff.modified}
    twins = {(p.changed if changed_side else p.base).line: (p.base if changed_side else p.changed) for p in diff.twins}
    gone = {r.line for r in (diff.appeared if changed_side else diff.vanished)}
    uncertain = {(p.changed if changed_side else p.base).line for p in diff.modified if p.uncertain}
    rows = {r.line: r for r in (diff.appeared if changed_side else diff.vanished)}
    rows.update({(p.changed if changed_side else p.base).line: (p.changed if changed_side else p.base)
                 for p in (*diff.modified, *diff.twins)})
    groups: dict[int, list] = {0: [], 1: [], 2: []}
    for ins in running(layer):
        printed = layer.printed(ins) or ins.opcode
        if printed in _NAMING or ins.line in uncertain:
            continue
        groups[2 if ins.line in gone else 1 if ins.line in changed else 0].append(ins)
    if not all(groups.values()):
        return []
    step = "origin" if changed_side else "fate"
    options = FATES[step]
    # Each answer's rows share a third of what the kind's cap leaves the compile's items (their number, n, times
    # the cap's 2 / n): weighed so, the compile's items hold the cap's share, a third per answer.
    asked = sum(map(len, groups.values()))
    items = []
    for answer, members in groups.items():
        for ins in members:
            row = rows[ins.line]
            twin = changed.get(ins.line) or twins.get(ins.line)
            fact, feedback = _fate_words(program, other, diff, row, twin, answer, changed_side)
            reasons = tuple("" if k == answer else f"Not {options[k]}: {fact}" for k in range(3))
            rules = tuple("" if k == answer else f"not-{('kept', 'changed', 'gone')[k]}" for k in range(3))
            question = (f"`{diff.base}` compiled again with one change, {diff.change}, gives `{diff.changed}`. "
                        f"In `{other.slug}`'s {diff.target.upper()} compile, is this row of `{program.slug}`'s "
                        f"{'there as it is, there but changed, or did the change make it appear' if changed_side else 'kept as it is, kept but changed, or did the change make it vanish'}?")
            items.append(Item(
                question=question,
                answer=Choice(options, answer, reasons, rules),
                context=_around(program, other, diff, ins.line),
                card=(step, diff.target, other.slug, ins.name), layer=diff.target, step=step,
                skill=("kept", "changed", "gone")[answer], weight=round(asked / (3 * len(members)), 4),
                feedback=feedback,
                facts={"partner": other.slug, "target": diff.target, "hlo_line": ins.line,
                       "counterpart": twin.name if twin else None}))
    return items


def _fate_words(program: ProgramRecord, other: ProgramRecord, diff: LayerDiff, row: Row, twin: Row | None,
                answer: int, changed_side: bool) -> tuple[str, str]:
    """Why a row is kept, changed or gone, as a clause a wrong option's reason gives (no full stop: the page adds
    one), and the feedback: what the change did to the row, in a sentence or two."""
    if answer == 0:
        fact = (f"`{other.slug}`'s %{twin.name} is the same {row.opcode}, with the same equations, body and "
                f"operands and the same result, {twin.shape}")
        return fact, f"%{row.name} is the same in both compiles: {fact}."
    if answer == 1:
        what = _what_changed(program, other, diff, row, twin, changed_side)
        fact = f"its counterpart in `{other.slug}`'s compile is %{twin.name}, and {what}"
        if changed_side:
            return fact, f"{_with(diff)}, `{other.slug}`'s %{twin.name} became %{row.name}: {what}."
        return fact, f"{_with(diff)}, %{row.name} became `{other.slug}`'s %{twin.name}: {what}."
    fact = f"`{other.slug}`'s compile has no row that computes what %{row.name} does"
    return fact, (f"{_with(diff)}, %{row.name} {'appeared' if changed_side else 'vanished'}: this {row.opcode}, "
                  f"returning {row.shape}, {_does(program, row)}, and `{other.slug}`'s compile has no row that "
                  "computes what it does.")
