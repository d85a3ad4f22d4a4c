"""A compiled HLO module's graph (`CompiledGraph`), as the bindings and each instruction's printed form give it.

The HLO Python bindings give computations, instruction names, opcodes, operands and users, but
not metadata, called computations or parameter numbers: those are read from each instruction's
own printed form (`HloInstruction.to_string()`), and each instruction's tag from its source file
(`ir/tags.py`). `compiled/layer.py` builds the graph from its compile; `compiled/attribution.py` walks it to decide each instruction's equations.
"""
from __future__ import annotations

import functools
import re
from collections import defaultdict

from dumpgym.ir.tags import tag_choices, tag_choices_of

# What an instruction's printed form names: the computation a fusion or call runs, the reducer it applies.
CALLS_RE = re.compile(r"\bcalls=%([\w.\-]+)")
TO_APPLY_RE = re.compile(r"\bto_apply=%([\w.\-]+)")
PARAMETER_RE = re.compile(r"\bparameter\((\d+)\)")
# An instruction's `op_name="..."`, as XLA prints it: a quote inside it escaped (`jit(a\"b)/sin`, a function whose
# name holds one), so the text runs to the first quote no backslash escapes (one way to read each character).
OP_NAME_RE = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')
_LOOP_RE = re.compile(r"\b(?:body|condition)=%([\w.\-]+)")
# `%name = SHAPE opcode(`: no ` word(` occurs inside a printed shape (tiles and spaces follow `:`).
_DEFINITION = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = (.+?) ([a-z][a-z0-9\-]*)\(")


def unescaped(text: str) -> str:
    """An HLO string attribute as it was given: XLA prints bytes outside ASCII as C escapes (`\\342\\200\\256`
    for U+202E) and a quote as `\\"`, which the StableHLO's locations hold as the characters themselves."""
    if "\\" not in text:
        return text
    import codecs

    try:
        return codecs.escape_decode(text.encode("ascii", "backslashreplace"))[0].decode("utf-8", "replace")
    except ValueError:
        return text


def defined(line: str) -> tuple[str, str, str] | None:
    """(name, result shape, opcode) as an instruction's printed line has them; None for any other line."""
    found = _DEFINITION.match(line)
    return (found.group(1), found.group(2), found.group(3)) if found else None


def definition_lines(text: str) -> tuple[dict[str, int], set[str]]:
    """The 1-based line on which each instruction `%name = ...` is printed, and the names printed as ROOT."""
    out, roots = {}, set()
    for n, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        head = stripped.removeprefix("ROOT ")
        if head.startswith("%") and " = " in head:
            name = head[1:].split(" = ", 1)[0]
            out.setdefault(name, n)
            if stripped.startswith("ROOT "):
                roots.add(name)
    return out, roots


def opcode_of(instruction) -> str:
    """An instruction's opcode from the bindings' enum, lower case without its `k` (`HloOpcode.kAllReduce`: `allreduce`)."""
    # By the member's name (`kAllReduce`), a plain string: hashing the enum member itself, or printing it,
    # runs Python code, and the pair of compiles asks this of every instruction several times.
    return _opcode_name(instruction.opcode._name_)


@functools.lru_cache(maxsize=None)
def _opcode_name(member: str) -> str:
    return member.removeprefix("k").lower()


@functools.lru_cache(maxsize=4096)  # a module's instructions share few result shapes: each is parsed once
def _floating(shape_text: str) -> bool:
    """Whether a printed result shape holds floating-point numbers (a tuple: whether any member does)."""
    import numpy as np
    from jaxlib import xla_client  # XLA's own shape parser

    shape = xla_client.Shape(re.sub(r"/\*.*?\*/", "", shape_text))  # a long tuple's `/*index=5*/`
    members = shape.tuple_shapes() if shape.is_tuple() else [shape]
    return any(_floating(str(m)) if m.is_tuple() else
               not (np.issubdtype(m.numpy_dtype(), np.integer) or m.numpy_dtype() == np.bool_) for m in members)


class CompiledGraph:
    """A compile's instructions by name: opcode, operands and users (from the HLO bindings), the
    computations fusions call and reducers apply, and each instruction's own tag (`hlo_tags`)."""

    def __init__(self, listed, roots: set[str], entry: str, eqn_of_tag, names, metadata: dict | None = None):
        """`metadata`: each instruction's metadata fields by name, where the module's text was read already
        (`tags.shown_text_and_metadata`); an instruction it does not name is read from its own printed form."""
        self.entry = entry
        self.roots = roots
        self.opcode, self.computation, self.operands, self.users = {}, {}, {}, {}
        self.tag: dict[str, int | None] = {}
        # Whether the result holds floating-point values (an index computation's integers do no equation's
        # arithmetic on floats): from XLA's reading of the printed result shape.
        self.floating: dict[str, bool] = {}
        self.has_op_name: dict[str, bool] = {}
        self.calls: dict[str, list[str]] = {}
        self.param_number: dict[str, int] = {}
        self.members: dict[str, list[str]] = defaultdict(list)
        self.callers: dict[str, list[str]] = defaultdict(list)  # fused computation -> fusion instructions
        self.holders: dict[str, list[str]] = defaultdict(list)  # region -> instructions applying it
        self.loop_of: dict[str, str] = {}  # a while's body or condition computation -> the while
        nameless: dict[str, int] = {}  # instruction -> the equation of the nameless call its op_name may stand for
        for computation, instruction in listed:
            name = instruction.name
            # Metadata, called computations and parameter numbers are not in the bindings: read
            # from the instruction's own printed form.
            printed = instruction.to_string()
            meta = printed.split(", metadata={", 1)[1] if ", metadata={" in printed else ""
            fields = metadata.get(name) if meta and metadata is not None else None
            tag_number, call_tag = (tag_choices_of(fields, names) if fields is not None
                                    else tag_choices(printed, names) if meta else (None, None))
            self.tag[name] = eqn_of_tag[tag_number] if tag_number is not None else None
            if call_tag is not None:
                nameless[name] = eqn_of_tag[call_tag]
            self.has_op_name[name] = "op_name=" in meta
            self.opcode[name] = opcode_of(instruction)
            head = defined(printed)
            self.floating[name] = head is None or _floating(head[1])
            self.computation[name] = computation
            self.operands[name] = [o.name for o in instruction.operands()]
            # Each pattern only where its attribute is printed at all: most instructions name no computation.
            self.calls[name] = CALLS_RE.findall(printed) if "calls=" in printed else []
            self.members[computation].append(name)
            if "to_apply=" in printed:
                for region in TO_APPLY_RE.findall(printed):
                    self.holders[region].append(name)
            if "body=" in printed or "condition=" in printed:
                for loop_computation in _LOOP_RE.findall(printed):
                    self.loop_of[loop_computation] = name
            if self.opcode[name] == "fusion":
                for callee in self.calls[name]:
                    self.callers[callee].append(name)
            elif self.opcode[name] == "parameter":
                self.param_number[name] = int(PARAMETER_RE.search(printed).group(1))
        # Each instruction's users, those whose operands name it (once each): what the bindings' `users()`
        # gives, without asking them again for every instruction.
        self.users = {name: [] for name in self.operands}
        for name, operands in self.operands.items():
            for operand in dict.fromkeys(operands):
                self.users[operand].append(name)
        self.params_of = {(self.computation[p], k): p for p, k in self.param_number.items()}
        self.region_of: dict[str, str] = {}  # instruction -> the region computation holding it (any depth)
        for region in self.holders:
            for name in self.members[region]:
                self.region_of[name] = region
        self._read_nameless(nameless)

    def _read_nameless(self, nameless: dict[str, int]) -> None:
        """An op_name ending at a call chain whose function makes a nameless call (`tags.tag_choices`) names
        either a nameless op of that function's body (JAX lowers a literal with no location: its tag is the
        chain's) or one of the nameless call's body (threefry's constants under `random_bits`). It is the
        call's when everything tagged it reaches first is the call's equation: it works for that call alone."""
        chain = {name: self.tag[name] for name in nameless}
        for name in nameless:
            self.tag[name] = None  # while each is read: what one such op feeds is read through the others
        for name, call in nameless.items():
            reached = self.after(name)
            chain[name] = call if reached and reached <= {call} else chain[name]
        self.tag.update(chain)

    def own(self, name: str) -> int | None:
        """The equation an instruction's own tag names (fusions and region instructions: none)."""
        if self.opcode[name] == "fusion" or name in self.region_of:
            return None
        return self.tag[name]

    def after(self, name: str) -> set[int]:
        """The tagged equations this instruction's result reaches first, through untagged
        instructions and fusion bounds."""
        out: set[int] = set()
        seen, stack = {name}, [name]
        while stack:
            cur = stack.pop()
            steps: list[str] = []
            if cur in self.roots:  # a fused computation's result is its fusion's
                steps += self.callers.get(self.computation[cur], ())
            for user in self.users[cur]:
                if self.opcode[user] == "fusion":  # into the fused computation, at the matching parameter
                    callee = self.calls[user][0]
                    steps += [self.params_of[(callee, k)] for k, o in enumerate(self.operands[user])
                              if o == cur and (callee, k) in self.params_of]
                elif self.own(user) is not None:
                    out.add(self.own(user))
                else:
                    steps.append(user)
            for step in steps:
                if step not in seen:
                    seen.add(step)
                    stack.append(step)
        return out

    def before(self, name: str) -> tuple[set[int], set[int]]:
        """The tagged equations and the program arguments (entry parameter numbers) this
        instruction's operands come from, through untagged instructions and fusion bounds."""
        out, arguments, _loops = self.sources(name)
        return out, arguments

    def sources(self, name: str) -> tuple[set[int], set[int], set[int]]:
        """As `before`, and the equations of the while loops whose carried values it reads (a loop
        body's parameter is both the loop's input and the previous iteration's result)."""
        out: set[int] = set()
        arguments: set[int] = set()
        loops: set[int] = set()
        seen, stack = {name}, list(self.operands[name])
        while stack:
            cur = stack.pop()
            if cur in seen:
                continue
            seen.add(cur)
            op, comp = self.opcode[cur], self.computation[cur]
            if op == "fusion":
                stack += [r for r in self.members[self.calls[cur][0]] if r in self.roots]
            elif op == "parameter":
                if comp == self.entry:
                    arguments.add(self.param_number[cur])
                for fusion in self.callers.get(comp, ()):
                    stack.append(self.operands[fusion][self.param_number[cur]])
                if comp in self.loop_of and self.tag[self.loop_of[comp]] is not None:
                    loops.add(self.tag[self.loop_of[comp]])
            elif self.own(cur) is not None:
                out.add(self.own(cur))
            else:
                stack += self.operands[cur]
        return out, arguments, loops


# What names a reducer (an instruction applying a region with `to_apply=`) and an instruction's name.
_REDUCER = re.compile(r"\b(?:reduce|reduce-window|scatter|all-reduce|reduce-scatter)\(")
_HLO_NAME = re.compile(r"[\w.\-]+")


def reducer_regions(text: str) -> list[tuple[str, str]]:
    """(instruction, the region it applies) of each reducer of an HLO text, a line at a time (a pattern
    spanning lines rescans blank runs and long lines: quadratic)."""
    out = []
    for line in text.split("\n"):
        head = line.strip().removeprefix("ROOT").lstrip()
        at = head.find("to_apply=%")
        equals = head.find("=")
        if at <= 0 or equals <= 0 or not head[at - 1].isspace() and head[at - 1] != ",":
            continue
        name = head[:equals].strip().removeprefix("%")
        region = _HLO_NAME.match(head, at + len("to_apply=%"))
        if _HLO_NAME.fullmatch(name) and region and _REDUCER.search(head, equals, at):
            out.append((name, region.group(0)))
    return out
