"""One linear streaming pass over an optimised HLO text too big to parse whole: the byte offset of every line
(the line index a window of the listing is read by), the computations' headers, the instructions counted by
opcode and the ENTRY's parameters, read from the head of each line (at most `HEAD` bytes of it: a 300 MB
constant printed on one line is skipped, never held). Memory: one chunk, one line's head, and the index at 8
bytes a line. `main` runs it in a process of its own (`python -m dumpgym.ir.hlo_index`), reporting to the server on stdout."""
from __future__ import annotations

import json
import os
import sys
import time
from array import array
from collections import Counter
from pathlib import Path

from dumpgym.record.streamed import Computation, EntryParameter, StreamedHlo

CHUNK = 1 << 20  # bytes read at a time
HEAD = 64 * 1024  # the bytes of a line read for its facts; the rest of a longer line is only counted
_OPCODE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")


class _Pass:
    """The state of the pass between lines: the computation it is in and what it has counted."""

    def __init__(self) -> None:
        self.computations: list[Computation] = []
        self.current: list | None = None  # [name, line, entry, instructions] of the computation being read
        self.opcodes: Counter[str] = Counter()
        self.parameters: list[EntryParameter] = []
        self.unread = 0

    def line(self, number: int, head: bytes) -> None:
        """Read one line's head (its first `HEAD` bytes at most, without the newline)."""
        if not head:
            return
        first = head[:1]
        if first in (b" ", b"\t"):
            if self.current is not None:
                self._instruction(number, head.decode("utf-8", "replace").strip())
        elif first == b"}":
            self._close()
        elif not first.isdigit() and not head.startswith(b"HloModule") and (
                head.rstrip().endswith(b"{") or len(head) >= HEAD):
            self._close()
            text = head.decode("utf-8", "replace")
            entry = text.startswith("ENTRY ")
            name = text[6:] if entry else text
            name = name.split(" ", 1)[0].split("(", 1)[0].lstrip("%")
            self.current = [name, number, entry, 0]

    def _close(self) -> None:
        if self.current is not None:
            self.computations.append(Computation(*self.current))
            self.current = None

    def _instruction(self, number: int, text: str) -> None:
        if text.startswith("ROOT "):
            text = text[5:]
        eq = text.find(" = ")
        if eq < 0:
            return  # not an instruction (a wrapped attribute, say): not counted either way
        name, rest = text[:eq].lstrip("%"), text[eq + 3:]
        end = _closing(rest) if rest.startswith("(") else rest.find(" ")
        paren = rest.find("(", end) if end > 0 else -1
        opcode = rest[end:paren].strip() if paren > 0 else ""
        if not opcode or not set(opcode) <= _OPCODE_CHARS:
            self.unread += 1
            return
        self.current[3] += 1
        self.opcodes[opcode] += 1
        if opcode == "parameter" and self.current[2]:
            close = rest.find(")", paren)
            digits = rest[paren + 1:close]
            if digits.isdigit():
                self.parameters.append(EntryParameter(int(digits), name, rest[:end], _op_name(rest[close:]), number))


def _closing(text: str) -> int:
    """The index just past the parenthesis that closes the one `text` starts with (a tuple shape), or -1."""
    depth = 0
    for i, c in enumerate(text):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


def _op_name(attributes: str) -> str:
    """The `op_name="..."` of an instruction's attributes (its C escapes left as printed), or ""."""
    at = attributes.find('op_name="')
    if at < 0:
        return ""
    start = i = at + len('op_name="')
    while True:
        i = attributes.find('"', i)
        if i < 0:
            return ""
        if attributes[i - 1] != "\\":
            return attributes[start:i]
        i += 1


def index_hlo(path: Path, report=None, chunk: int = CHUNK) -> tuple[StreamedHlo, array]:
    """The facts of `path` (an HLO text file) and its line index: `offsets[i]` is where line i+1 starts, and
    one more entry, the file's size. `report(bytes_read, lines)` is called after each chunk."""
    began = time.perf_counter()
    offsets = array("Q", [0])
    state = _Pass()
    head = b""  # the head of the line the last chunk ended in
    longest = at = 0
    with open(path, "rb") as f:
        while block := f.read(chunk):
            start = 0
            while (nl := block.find(b"\n", start)) >= 0:
                if head:
                    state.line(len(offsets), head + block[start:min(nl, start + HEAD - len(head))])
                    head = b""
                else:
                    state.line(len(offsets), block[start:min(nl, start + HEAD)])
                longest = max(longest, at + nl + 1 - offsets[-1])
                offsets.append(at + nl + 1)
                start = nl + 1
            if len(head) < HEAD:
                head += block[start:start + HEAD - len(head)]
            at += len(block)
            if report is not None:
                report(at, len(offsets) - 1)
    if offsets[-1] != at:  # a last line without its newline
        state.line(len(offsets), head)
        longest = max(longest, at - offsets[-1])
        offsets.append(at)
    state._close()
    lines = len(offsets) - 1
    facts = StreamedHlo(size=at, lines=lines, computations=tuple(state.computations),
                        opcodes=tuple(sorted(state.opcodes.items(), key=lambda kv: (-kv[1], kv[0]))),
                        parameters=tuple(sorted(state.parameters, key=lambda p: p.number)), unread=state.unread,
                        head=HEAD, longest_line=longest, index_bytes=offsets.itemsize * len(offsets),
                        seconds=time.perf_counter() - began, peak_bytes=_peak())
    return facts, offsets


def _peak() -> int:
    """This process's peak resident memory in bytes (Linux's VmHWM), 0 where it cannot be read."""
    try:
        status = Path(f"/proc/{os.getpid()}/status").read_text()
    except OSError:
        return 0
    line = next((r for r in status.splitlines() if r.startswith("VmHWM:")), "")
    return int(line.split()[1]) * 1024 if line else 0


def main(argv: list[str] | None = None) -> int:
    """`python -m dumpgym.ir.hlo_index FILE`: index FILE for the server that started this process. With
    `--wait`, first wait for a line on stdin (the server holds the pass with it). On stdout, binary:
    `P <bytes read> <lines>` lines now and then, then `D <n>` and n bytes of the facts as JSON, then
    `O <n>` and the n bytes of the offsets (unsigned 64-bit, this machine's byte order); or `E <one line>`."""
    args = sys.argv[1:] if argv is None else argv
    out = sys.stdout.buffer
    if args and args[0] == "--wait":
        args = args[1:]
        sys.stdin.readline()
    path = args[0]
    last = [0.0]

    def report(read: int, lines: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 0.2:
            last[0] = now
            out.write(f"P {read} {lines}\n".encode())
            out.flush()
    try:
        facts, offsets = index_hlo(Path(path), report)
    except (OSError, MemoryError) as e:
        out.write(("E cannot read " + " ".join(f"{path}: {getattr(e, 'strerror', None) or e}".split()) + "\n")
                  .encode("utf-8", "backslashreplace"))
        return 1
    data = json.dumps(facts.to_json()).encode("utf-8")
    out.write(f"D {len(data)}\n".encode() + data)
    body = memoryview(offsets).cast("B")
    out.write(f"O {len(body)}\n".encode())
    out.write(body)
    out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
