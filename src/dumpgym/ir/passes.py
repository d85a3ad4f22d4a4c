"""XLA's per-pass dumps (`--xla_dump_hlo_pass_re`): where each file was written, and what each one prints.

XLA names a dump written between two passes `module_NNNN.NAME.SSSS.PIPELINE.after_PASS.before_NEXT.txt`
(`SSSS` counts the module's dumps; `after_pipeline-start` is a pipeline's start, `before_pipeline-end` its
end) and one written inside a pass `module_NNNN.NAME.SSSS.PASS.STEP.txt` (copy insertion's steps). A
pipeline's name may itself start `after_` (`after_layout_assignment`), so the names are split from the
right. The texts are read line by line, once each, with string scans: no pattern, so no backtracking.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dumpgym.ir.parse import read_text
from dumpgym.record.schema import PassDump


def pass_dump(rest: str) -> PassDump | None:
    """Where a per-pass file was written, from its name after `module_NNNN.NAME.` (`0014.PIPELINE.after_fusion.
    before_fusion-wrapper.txt`); None for any other file of the module."""
    if not rest.endswith(".txt"):
        return None
    step, dot, rest = rest[:-4].partition(".")
    if not (dot and step.isdigit() and len(step) >= 4 and rest):
        return None
    head, mark, before = rest.rpartition(".before_")
    if mark:
        pipeline, mark, after = head.rpartition(".after_")
        if mark and pipeline and after and before:
            return PassDump(int(step), pipeline, after, before)
        return None
    pass_name, dot, during = rest.partition(".")
    if dot and pass_name and during:
        return PassDump(int(step), "", pass_name, "", during)
    return None


def dump_options(path: Path | None) -> dict[str, str]:
    """The options a module's `debug_options` file sets to a string (XLA writes the file beside the module when a
    flag is set: `xla_dump_hlo_pass_re: ".*"`); none where the folder has no such file or it cannot be read."""
    if path is None:
        return {}
    try:
        text = read_text(path)
    except Exception:  # a damaged options file leaves the dumps unjudged, not the module unread
        return {}
    out = {}
    for line in text.splitlines():
        key, colon, value = line.partition(":")
        value = value.strip()
        if colon and len(value) >= 2 and value[0] == value[-1] == '"':
            out[key.strip()] = value[1:-1].replace('\\\\', '\\')
    return out


@dataclass
class PassInstruction:
    """One instruction as a pass dump prints it: its line, computation, opcode and operands (by name)."""

    text: str
    computation: str
    opcode: str
    operands: tuple[str, ...]
    calls: tuple[str, ...]
    parameter: int | None = None  # a parameter's number (`parameter(2)`)


@dataclass
class PassText:
    """One pass dump read: its instructions by name, each computation's printed lines, and its root."""

    instructions: dict[str, PassInstruction] = field(default_factory=dict)
    computations: dict[str, list[str]] = field(default_factory=dict)
    roots: dict[str, str] = field(default_factory=dict)
    order: dict[str, int] = field(default_factory=dict)  # name -> its place in print order
    users: dict[str, list[str]] = field(default_factory=dict)  # name -> the instructions naming it as an operand
    members: dict[str, list[str]] = field(default_factory=dict)  # computation -> its instructions, in order


def read_pass_text(path: Path) -> PassText:
    """The instructions and computations of one HLO text (a pass dump), read once, front to back."""
    return hlo_text_parts(read_text(path))


def hlo_text_parts(text: str) -> PassText:
    """The instructions and computations an HLO module's text prints, by name, in one scan of its lines."""
    out = PassText()
    computation = None
    for line in text.splitlines():
        if computation is None:
            name = _computation_header(line)
            if name is not None:
                computation = name
                out.computations[name] = [line]
            continue
        out.computations[computation].append(line)
        stripped = line.strip()
        if stripped == "}":
            computation = None
            continue
        root = stripped.startswith("ROOT ")
        head = stripped[5:] if root else stripped
        if not head.startswith("%"):
            continue
        name, eq, rhs = head[1:].partition(" = ")
        if not eq or not name:
            continue
        opcode, operands, calls = _right_side(rhs)
        out.order[name] = len(out.order)
        number = None
        if opcode == "parameter":
            digits = rhs[rhs.find(" parameter(") + 11:].partition(")")[0]
            number = int(digits) if digits.isdigit() else None
        out.instructions[name] = PassInstruction(line, computation, opcode, operands, calls, number)
        out.members.setdefault(computation, []).append(name)
        for operand in dict.fromkeys(operands):
            out.users.setdefault(operand, []).append(name)
        if root:
            out.roots[computation] = name
    return out


def _computation_header(line: str) -> str | None:
    """The name a computation's first line gives (`%fused_computation (p: f32[4]) -> f32[4] {`, `ENTRY %main ...`)."""
    if not line.endswith("{") or line[:1] in (" ", "\t"):
        return None
    head = line[6:] if line.startswith("ENTRY ") else line
    if not head.startswith("%"):
        return None
    name, space, _ = head[1:].partition(" ")
    return name if space and name else None


def _right_side(rhs: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """An instruction's opcode, operand names and called computations from what follows its ` = `: the result
    shape (a tuple's in parentheses, `/*index=5*/` comments inside), the opcode, its parenthesised operands."""
    i = 0
    if rhs.startswith("("):
        i = _closing(rhs, 0) + 1
    space = rhs.find(" ", i)
    if space < 0:
        return "", (), ()
    open_at = rhs.find("(", space + 1)
    if open_at < 0:
        return "", (), ()
    opcode = rhs[space + 1:open_at]
    close = _closing(rhs, open_at)
    operands = tuple(_names(rhs[open_at + 1:close]))
    calls = []
    for key in ("calls=%", "to_apply=%", "body=%", "condition=%"):
        at = rhs.find(key, close)
        while at >= 0:
            start = at + len(key)
            end = _name_end(rhs, start)
            if end > start:
                calls.append(rhs[start:end])
            at = rhs.find(key, end)
    return opcode, operands, tuple(calls)


def _closing(text: str, start: int) -> int:
    """Where the parenthesis opened at `start` closes (the text's end if it never does): each search only moves on."""
    depth, at = 0, start
    opening = text.find("(", start)
    while True:
        close = text.find(")", at)
        while opening >= 0 and (close < 0 or opening < close):
            depth += 1
            opening = text.find("(", opening + 1)
        if close < 0:
            return len(text)
        depth -= 1
        if depth == 0:
            return close
        at = close + 1


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def _name_end(text: str, start: int) -> int:
    i = start
    while i < len(text) and text[i] in _NAME_CHARS:
        i += 1
    return i


def _names(text: str) -> list[str]:
    """Every `%name` in `text`, in order."""
    out = []
    at = text.find("%")
    while at >= 0:
        end = _name_end(text, at + 1)
        if end > at + 1:
            out.append(text[at + 1:end])
        at = text.find("%", end if end > at else at + 1)
    return out
