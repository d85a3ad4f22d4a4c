"""A module's pass pipeline from its per-pass dumps (`--xla_dump_hlo_pass_re`): which pass made each optimised
instruction, which passes changed it after, and the texts around it before and after.

The dumps are read in XLA's order, each once (`ir/passes.py`), keeping only the one before. An instruction is
made by the first dump that prints its name. That dump's pass made it for certain when nothing else ran
since the dump before: XLA dumps after every pass that changed the module when the pattern is `.*`, and
otherwise the dump before must be the one written just before that pass (`before_PASS`, in its pipeline). A
dump at a pipeline's start that first prints it says only that it was made between the two.

What it replaced is told by dataflow, never by likeness: its users that were there before read, at its
place among their operands, an instruction that is gone now (or, for a computation's root, the root
before); from that one, the instructions gone with it that fed it. For a fusion those must be one for one
what its body computes (the same opcodes, as many): else only the one it took the place of is shown.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from dumpgym.ir.passes import PassText, read_pass_text
from dumpgym.record.schema import PassDump, PassHistory, PassOrigin

# Each snippet line is cut to this many characters, and a snippet to this many lines: a fusion of a
# thousand instructions shows its first lines and how many more it has.
LINE_MAX = 320
SNIPPET_LINES = 24
_START, _END = "pipeline-start", "pipeline-end"


def pass_history(files: list[tuple[PassDump, Path]], optimised: dict[str, int], pass_re: str,
                 budget: int) -> PassHistory:
    """The pipeline of a module's per-pass dumps (`files`), and the origin of each optimised instruction (by name:
    its line) some dump prints; the before and after texts kept in all come to at most `budget` characters."""
    files = sorted(files, key=lambda f: f[0].step)
    dumps = tuple(d for d, _path in files)
    first: dict[str, int] = {}
    changed: dict[str, list[int]] = {}
    snippets: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {}
    last: dict[str, str] = {}
    spent = 0
    prev: PassText | None = None
    for k, (_dump, path) in enumerate(files):
        cur = read_pass_text(path)
        exact = _exact(dumps, k, pass_re)
        for name, ins in cur.instructions.items():
            if name not in optimised:
                continue
            if name not in first:
                first[name] = k
                if k and prev is not None:
                    before, after, note = _around(name, prev, cur, exact)
                    size = sum(map(len, before)) + sum(map(len, after))
                    if spent + size > budget:
                        before, after = (), ()
                        note = (f"{note} " if note else "") + "(its texts are left out: this module's are kept up " \
                            "to the size of its optimised HLO)"
                    spent += sum(map(len, before)) + sum(map(len, after))
                    snippets[name] = (before, after, note)
            elif name not in prev.instructions or last.get(name) != ins.text:
                changed.setdefault(name, []).append(k)
            last[name] = ins.text
        prev = cur
    origins = []
    for name, k in sorted(first.items(), key=lambda item: optimised[item[0]]):
        before, after, note = snippets.get(name, ((), (), _first_note(dumps, k)))
        origins.append(PassOrigin(line=optimised[name], made=k, exact=bool(k) and _exact(dumps, k, pass_re),
                                  changed=tuple(changed.get(name, ())), before=before, after=after, note=note))
    return PassHistory(dumps=dumps, pass_re=pass_re, origins=tuple(origins))


def _first_note(dumps, k: int) -> str:
    return "in the module as its first pass dump prints it: made before the passes it records" if k == 0 else ""


def _exact(dumps: tuple[PassDump, ...], k: int, pass_re: str) -> bool:
    """Whether dump `k`'s own pass made what it prints first: it was written after a pass (not at a pipeline's
    start), and nothing that changed the module ran since the dump before."""
    d = dumps[k]
    if not k or d.after == _START:
        return False
    if pass_re == ".*":  # XLA then dumps after every pass that says it changed the module
        return True
    p = dumps[k - 1]
    if d.during:  # inside a pass: the dump before is that pass's own step, or the one just before it
        return (p.during and p.after == d.after) or (not p.during and p.before == d.after)
    return not p.during and p.pipeline == d.pipeline and p.before == d.after


def _cut(lines) -> tuple[str, ...]:
    lines = list(lines)
    out = [line if len(line) <= LINE_MAX else line[:LINE_MAX] + " …" for line in lines[:SNIPPET_LINES]]
    if len(lines) > SNIPPET_LINES:
        out.append(f"  … {len(lines) - SNIPPET_LINES} more lines")
    return tuple(out)


def _around(name: str, prev: PassText, cur: PassText, exact: bool) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """The lines `name` replaced in the dump before (as far as dataflow tells them), its own lines in the dump
    that first prints it (a fusion's with its body), and a note on how the first were told or why they cannot."""
    ins = cur.instructions[name]
    bodies = [line for called in ins.calls if called not in prev.computations
              for line in cur.computations.get(called, ())]
    after = _cut([ins.text, *bodies])
    where = ins.computation
    if where not in prev.computations:
        callers = cur.callers.get(where, ())
        by = f", which %{callers[0]} calls" if len(callers) == 1 else ""
        return (), (), f"made with %{where}{by} (new in this dump)"
    replaced = _taken_over(name, prev, cur)
    if len(replaced) != 1:
        why = "it took the place of no instruction that is gone" if not replaced else \
            f"it took the place of {len(replaced)} instructions that are gone"
        return (), after, f"what it replaced cannot be told: {why}"
    (r,) = replaced
    region = _gone_with(r, prev, cur)
    if ins.opcode == "fusion" and bodies:
        fused = Counter(cur.instructions[n].opcode for called in ins.calls if called not in prev.computations
                        for n in cur.members.get(called, ()) if cur.instructions[n].opcode != "parameter")
        if Counter(prev.instructions[n].opcode for n in region) == fused:
            lines = [prev.instructions[n].text for n in sorted(region, key=prev.order.__getitem__)]
            what = "the instruction" if len(region) == 1 else f"the {len(region)} instructions"
            return _cut(lines), after, f"{what} it fused (its body computes them one for one)"
        return _cut([prev.instructions[r].text]), after, \
            f"it took the place of %{r}; which other instructions it fused cannot be told (the instructions gone " \
            "with it are not its body's one for one)"
    return _cut([prev.instructions[r].text]), after, f"it took the place of %{r}"


def _taken_over(name: str, prev: PassText, cur: PassText) -> set[str]:
    """The instructions of the dump before, gone now, whose place `name` took: what its users (there before too)
    read at its place among their operands, and the root before where it is its computation's root."""
    ins = cur.instructions[name]
    out = set()
    for user in cur.users.get(name, ()):
        u = cur.instructions[user]
        if u.computation != ins.computation or name not in u.operands or user not in prev.instructions:
            continue
        before = prev.instructions[user].operands
        for at, operand in enumerate(u.operands):
            if operand == name and at < len(before) and before[at] not in cur.instructions:
                out.add(before[at])
    if cur.roots.get(ins.computation) == name:
        root = prev.roots.get(ins.computation)
        if root is not None and root not in cur.instructions:
            out.add(root)
    return out


def _gone_with(start: str, prev: PassText, cur: PassText) -> set[str]:
    """`start` and the instructions of its computation, gone now too, that fed it through gone ones."""
    where = prev.instructions[start].computation
    seen, todo = {start}, [start]
    while todo:
        for operand in prev.instructions[todo.pop()].operands:
            o = prev.instructions.get(operand)
            if o is not None and operand not in seen and operand not in cur.instructions and o.computation == where:
                seen.add(operand)
                todo.append(operand)
    return seen
