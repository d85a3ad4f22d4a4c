"""A module's pass pipeline from its per-pass dumps (`--xla_dump_hlo_pass_re`): which pass made each optimised
instruction, which passes changed it after, and the texts around it before and after.

The dumps are read in XLA's order, each once (`ir/passes.py`), keeping only the one before. An instruction is
made by the first dump that prints its name. That dump's pass made it for certain when nothing else ran
since the dump before: XLA dumps after every pass that changed the module when the pattern is `.*`, and
otherwise the dump before must be the one written just before that pass (`before_PASS`, in its pipeline). A
dump at a pipeline's start that first prints it says only that it was made between the two.

What it replaced is told by dataflow, never by likeness: its users that were there before read, at its
place among their operands, an instruction that is gone now (or, for a computation's root, the root
before). A fusion's body is walked from its root beside the dump before from that instruction: where each
body instruction has its partner's opcode and operand count, down to the body's parameters (each the
fusion's operand there, or one gone now), the partners are what it fused (some copied in, still there for
other users); else only the one it took the place of is shown, and the note says the rest cannot be told.
A fusion whose users are new too (made in the same pass) is walked beside every instruction gone of its
root's opcode: where exactly one graph of the text before matches, it is that one; else none is named.
"""
from __future__ import annotations

import heapq
from pathlib import Path

from dumpgym.ir.passes import PassText, read_pass_text
from dumpgym.record.schema import PassDump, PassHistory, PassOrigin

# Each snippet line is cut to this many characters, and a snippet to this many lines: a fusion of a
# thousand instructions shows its first lines and how many more it has.
LINE_MAX = 240
SNIPPET_LINES = 20
_START = "pipeline-start"


def pass_history(files: list[tuple[PassDump, Path]], optimised: dict[str, int], pass_re: str,
                 budget: int, every_pipeline: bool = True) -> PassHistory:
    """The pipeline of a module's per-pass dumps (`files`, dumped with `pass_re`, in every pipeline unless a
    pipeline pattern narrowed them), and the origin of each optimised instruction (by name: its line) some dump
    prints; the before and after texts kept in all come to at most `budget` characters, given to fusions first,
    then to the rest, each in the optimised listing's order."""
    every_pass = pass_re == ".*" and every_pipeline
    files = sorted(files, key=lambda f: f[0].step)
    dumps = tuple(d for d, _path in files)
    first: dict[str, int] = {}
    changed: dict[str, list[int]] = {}
    snippets: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {}
    kept: list[tuple[int, int, str]] = []  # the texts kept, the last to give up first (heap[0])
    dropped: set[str] = set()
    spent = 0
    last: dict[str, str] = {}
    seen: dict[str, int] = {}  # every name printed -> the first dump that prints it (what a rename names)
    prev: PassText | None = None
    for k, (_dump, path) in enumerate(files):
        cur = read_pass_text(path)
        for name, ins in cur.instructions.items():
            seen.setdefault(name, k)
            if name not in optimised:
                continue
            last_text, last[name] = last.get(name), ins.text
            if name not in first:
                first[name] = k
                if prev is None:
                    continue
                snippets[name] = _around(name, prev, cur, lambda gone: _pass_words(dumps[seen[gone]]))
                size = _size(snippets[name])
                if size:
                    heapq.heappush(kept, (-(ins.opcode != "fusion"), -optimised[name], name))
                    spent += size
                while spent > budget:
                    _rank, _line, worst = heapq.heappop(kept)
                    spent -= _size(snippets[worst])
                    snippets[worst] = ((), (), snippets[worst][2])
                    dropped.add(worst)
            elif name not in prev.instructions or last_text != ins.text:
                changed.setdefault(name, []).append(k)
        prev = cur
    origins = []
    for name, k in sorted(first.items(), key=lambda item: optimised[item[0]]):
        before, after, note = snippets.get(name, ((), (), ""))
        if name in dropped:
            note = (f"{note} " if note else "") + "(its texts are left out: a module keeps them up to the size of " \
                "its optimised HLO, fusions first)"
        origins.append(PassOrigin(line=optimised[name], made=k, exact=bool(k) and _exact(dumps, k, every_pass),
                                  changed=tuple(changed.get(name, ())), before=before, after=after, note=note))
    return PassHistory(dumps=dumps, pass_re=pass_re, origins=tuple(origins))


def _size(snippet) -> int:
    before, after, _note = snippet
    return sum(map(len, before)) + sum(map(len, after))


def _exact(dumps: tuple[PassDump, ...], k: int, every_pass: bool) -> bool:
    """Whether dump `k`'s own pass made what it prints first: it was written after a pass (not at a pipeline's
    start), and nothing that changed the module ran since the dump before (`every_pass`: the run dumped after
    every pass of every pipeline that changed the module, `.*` with no pipeline pattern)."""
    d = dumps[k]
    if not k or d.after == _START:
        return False
    if every_pass:  # XLA then dumps after every pass that says it changed the module
        return True
    p = dumps[k - 1]
    if d.during:  # inside a pass: the dump before is that pass's own step, or the one just before it
        return (bool(p.during) and p.after == d.after) or (not p.during and p.before == d.after)
    return not p.during and p.pipeline == d.pipeline and p.before == d.after


def _cut(lines) -> tuple[str, ...]:
    lines = list(lines)
    out = [line if len(line) <= LINE_MAX else line[:LINE_MAX] + " …" for line in lines[:SNIPPET_LINES]]
    if len(lines) > SNIPPET_LINES:
        out.append(f"  … {len(lines) - SNIPPET_LINES} more lines")
    return tuple(out)


def _pass_words(d: PassDump) -> str:
    """A dump as the pass it follows: `pass fusion (pipeline P)`, a step of a pass, or a pipeline's start."""
    if d.during:
        return f"pass {d.after} (its step {d.during})"
    if d.after == _START:
        return f"the start of pipeline {d.pipeline}"
    return f"pass {d.after} (pipeline {d.pipeline})"


def _around(name: str, prev: PassText, cur: PassText, made_by) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """The lines `name` replaced in the dump before (as far as dataflow tells them), its own lines in the dump
    that first prints it (a fusion's with its body), and a note on how the first were told or why they cannot
    (`made_by(name)`: the pass that first printed an instruction gone now, for one it renames)."""
    ins = cur.instructions[name]
    bodies = [line for called in ins.calls if called not in prev.computations
              for line in cur.computations.get(called, ())]
    after = _cut([ins.text, *bodies])
    where = ins.computation
    if where not in prev.computations:  # made with its computation (a fusion's body): no text of its own, no note
        return (), (), ""
    replaced = _taken_over(name, prev, cur)
    new_bodies = [called for called in ins.calls if called not in prev.computations]
    body = new_bodies[0] if ins.opcode == "fusion" and len(new_bodies) == 1 else None
    if len(replaced) != 1:
        why = "it took the place of no instruction that is gone" if not replaced else \
            f"it took the place of {len(replaced)} instructions that are gone"
        found = _fused_anywhere(ins, body, prev, cur) if body is not None else []
        if len(found) != 1:
            more = f"; {len(found)} graphs of the text before match its body" if found else ""
            return (), after, f"what it replaced cannot be told: {why}{more}"
        (r, fused), = found
        return _cut(_lines(prev, fused)), after, \
            f"{_fused_words(fused, cur)}: its body computes them one for one, from %{r} up (its users are new in " \
            "this dump too: the only graph of the text before that it copies)"
    (r,) = replaced
    if _renames(ins, body, r, prev, cur):
        return _cut([prev.instructions[r].text]), after, \
            f"a new name for %{r}, the same {ins.opcode}{' of the same body' if body else ''} on the same operands, " \
            f"which {made_by(r)} made"
    if body is not None:
        fused = _fused_from(ins, body, r, prev, cur)
        if fused is not None:
            return _cut(_lines(prev, fused)), after, \
                f"{_fused_words(fused, cur)}: its body computes them one for one, from %{r} up"
        return _cut([prev.instructions[r].text]), after, \
            f"it took the place of %{r}; which other instructions it fused cannot be told (its body is not the " \
            "graph above it one for one)"
    return _cut([prev.instructions[r].text]), after, f"it took the place of %{r}"


# A fusion whose place cannot be told by its users (all made in the same pass) is looked for among this many
# instructions gone of its root's opcode, at most: past it, it is said not to be told.
_CANDIDATES = 256


def _fused_anywhere(ins, body: str, prev: PassText, cur: PassText) -> list[tuple[str, set[str]]]:
    """Each instruction gone since the dump before, in the fusion's computation, from which its body's graph is
    the graph of the text before one for one (`_fused_from`), with what it fused; none where there are too many
    to try."""
    root = cur.roots.get(body)
    if root is None:
        return []
    opcode = cur.instructions[root].opcode
    candidates = [p for p in prev.members.get(ins.computation, ())
                  if prev.instructions[p].opcode == opcode and p not in cur.instructions]
    if len(candidates) > _CANDIDATES:
        return []
    out = []
    for p in candidates:
        fused = _fused_from(ins, body, p, prev, cur)
        if fused is not None:
            out.append((p, fused))
    return out


def _lines(prev: PassText, names) -> list[str]:
    return [prev.instructions[n].text for n in sorted(names, key=prev.order.__getitem__)]


def _fused_words(fused: set[str], cur: PassText) -> str:
    copied = sum(n in cur.instructions for n in fused)
    what = "the instruction it fused" if len(fused) == 1 else f"the {len(fused)} instructions it fused"
    return what + (f" ({copied} copied in, kept for their other users)" if copied else "")


def _renames(ins, body: str | None, r: str, prev: PassText, cur: PassText) -> bool:
    """Whether `ins` is `r` of the dump before under a new name: the same opcode on the same operands (each the
    same instruction, or both new and gone), and for a fusion a body of the same graph (its own name new too)."""
    pr = prev.instructions[r]
    if pr.opcode != ins.opcode or len(pr.operands) != len(ins.operands):
        return False
    for o_new, o_old in zip(ins.operands, pr.operands):
        if o_new != o_old and (o_new in prev.instructions or o_old in cur.instructions):
            return False
    if body is None:
        return not ins.calls and not pr.calls
    if len(pr.calls) != 1 or pr.calls[0] not in prev.computations:
        return False
    return _same_graph(cur, body, prev, pr.calls[0])


def _same_graph(cur: PassText, body: str, prev: PassText, old: str) -> bool:
    """Whether computation `body` of this dump and `old` of the one before are one graph: walked from their roots,
    each pair of the same opcode and operand count, parameters of the same number, instructions paired one to one."""
    a, b = cur.roots.get(body), prev.roots.get(old)
    if a is None or b is None:
        return False
    paired: dict[str, str] = {}
    todo = [(a, b)]
    while todo:
        x, y = todo.pop()
        if x in paired:
            if paired[x] != y:
                return False
            continue
        xi, yi = cur.instructions.get(x), prev.instructions.get(y)
        if xi is None or yi is None or xi.computation != body or yi.computation != old or xi.opcode != yi.opcode \
                or len(xi.operands) != len(yi.operands) or xi.parameter != yi.parameter:
            return False
        paired[x] = y
        todo.extend(zip(xi.operands, yi.operands))
    return len(set(paired.values())) == len(paired) == len(cur.members.get(body, ())) == len(prev.members.get(old, ()))


def _fused_from(ins, body: str, root: str, prev: PassText, cur: PassText) -> set[str] | None:
    """The instructions of the dump before that the fusion `ins` holds copies of, walking its body from its root
    and the dump before from `root` (the instruction it took the place of) side by side: each body instruction
    must have the opcode and operand count of its partner, and a body parameter `k` stands for the fusion's
    operand `k` (the same instruction where it is still there, else one gone now). None where they differ."""
    start = cur.roots.get(body)
    if start is None:
        return None
    paired: dict[str, str] = {}
    todo = [(start, root)]
    while todo:
        b, p = todo.pop()
        if paired.get(b, p) != p:
            return None
        if b in paired:
            continue
        bi, pi = cur.instructions.get(b), prev.instructions.get(p)
        if bi is None or pi is None or bi.computation != body or pi.computation != ins.computation:
            return None
        if bi.opcode == "parameter":
            k = bi.parameter
            if k is None or k >= len(ins.operands):
                return None
            operand = ins.operands[k]
            if (operand in prev.instructions and p != operand) or (operand not in prev.instructions and p in cur.instructions):
                return None
            paired[b] = p
            continue
        if bi.opcode != pi.opcode or len(bi.operands) != len(pi.operands):
            return None
        paired[b] = p
        todo.extend(zip(bi.operands, pi.operands))
    fused = [p for b, p in paired.items() if cur.instructions[b].opcode != "parameter"]
    if len(set(fused)) != len(fused) or len(fused) != sum(
            cur.instructions[n].opcode != "parameter" for n in cur.members.get(body, ())):
        return None  # two body instructions for one before, or a body instruction the walk never reached
    return set(fused)


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


