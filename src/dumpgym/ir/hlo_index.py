"""One linear streaming pass over an optimised HLO text too big to parse whole: the byte offset of every line
(the line index a window of the listing is read by), the computations' headers, the instructions counted by
opcode and the ENTRY's parameters, read from the head of each line (at most `HEAD` bytes of it: a 300 MB
constant printed on one line is skipped, never held). Memory: one chunk, one line's head, and the index at 8
bytes a line. `main` runs it in a process of its own (`python -m dumpgym.ir.hlo_index`), reporting to the server on stdout.

The pass costs a few C-level scans of each chunk, not Python work per line: its newlines found by numpy (the
line index), the first byte of every line taken at once (an indented line is an instruction's, `}` closes a
computation, anything else may be a header), and the opcodes of all the instructions in it found by one
regular expression whose every part is bounded and cannot backtrack (`_INSTRUCTION`). Python looks at a line
alone only where the expression declines it (a tuple shape, a line that is not an instruction), at headers
and closing braces, at the ENTRY's parameters, and at the one line each chunk ends within."""
from __future__ import annotations

import json
import os
import re
import select
import sys
import time
from array import array
from collections import Counter
from pathlib import Path

import numpy as np

from dumpgym.record.streamed import Computation, EntryParameter, StreamedHlo

CHUNK = 4 << 20  # bytes read at a time
HEAD = 64 * 1024  # the bytes of a line read for its facts; the rest of a longer line is only counted
_OPCODE_BYTES = b"abcdefghijklmnopqrstuvwxyz0123456789-_"
# At each newline before an indented line: that line's opcode where it reads `  [ROOT ]NAME = SHAPE OPCODE(`
# with a shape that is not a tuple, else b"" (the line is read alone, `_Pass.line`). Every part is bounded, so a
# match ends within the first 11 KiB of its line (well within `HEAD`): what it finds is what `_Pass.line` finds.
_INSTRUCTION = re.compile(rb"\n(?:[ \t]{1,1024}(?:ROOT )?[^ \n=]{0,4096} = [^ (\n][^ \n]{0,4096} "
                          rb"([a-z0-9_\-]{1,1024})\(|(?=[ \t]))")
_SPACE, _TAB, _NEWLINE, _CLOSE = 32, 9, 10, ord("}")


class _Pass:
    """The state of the pass between lines: the computation it is in and what it has counted. It reads bytes
    (a name is decoded only where it is kept)."""

    def __init__(self) -> None:
        self.computations: list[Computation] = []
        self.current: tuple[str, int, bool] | None = None  # (name, line, entry) of the computation being read
        self.instructions = 0  # of the computation being read
        self.opcodes: Counter = Counter()
        self.parameters: list[EntryParameter] = []
        self.unread = 0

    def line(self, number: int, head: bytes) -> None:
        """Read one line's head (its first `HEAD` bytes at most, without the newline)."""
        first = head[:1]
        if first == b" " or first == b"\t":
            if self.current is not None:
                self._instruction(number, head)
        elif first == b"}":
            self._close()
        elif first and not first.isdigit() and not head.startswith(b"HloModule") and (
                head.rstrip().endswith(b"{") or len(head) >= HEAD):
            self._close()
            text = head.decode("utf-8", "replace")
            entry = text.startswith("ENTRY ")
            name = text[6:] if entry else text
            self.current = (name.split(" ", 1)[0].split("(", 1)[0].lstrip("%"), number, entry)

    def lines(self, block: bytes, nl: np.ndarray, number: int) -> None:
        """Read the lines of `block` between its newlines `nl` (positions, ascending): line k starts after
        nl[k] and ends at nl[k+1]; the first is line `number`. What `line` would find for each, in one go."""
        if len(nl) < 2:
            return
        data = np.frombuffer(block, np.uint8)
        first = data[nl[:-1] + 1]  # each line's first byte; an empty line's is its newline
        indented = np.flatnonzero((first == _SPACE) | (first == _TAB))
        opcodes = _INSTRUCTION.findall(block, int(nl[0]), int(nl[-1]))
        if len(opcodes) != len(indented):  # one a newline before an indented line, nothing else
            raise AssertionError("the instructions found are not the indented lines")
        # declined[i]: how many of the first i indented lines the expression declined (b""); None where none
        declined = (np.concatenate(([0], np.cumsum(np.fromiter(map(len, opcodes), np.int64, len(opcodes)) == 0)))
                    if b"" in opcodes else None)
        events = np.flatnonzero((first != _SPACE) & (first != _TAB) & (first != _NEWLINE))
        inside: list[tuple[int, int]] = []  # the runs of indented lines within a computation
        low = 0
        for k, cut, byte in zip(events.tolist(), np.searchsorted(indented, events).tolist(), first[events].tolist()):
            if cut > low and self.current is not None:
                self._body(block, nl, number, indented, opcodes, declined, low, cut, inside)
            if byte == _CLOSE:
                self._close()
            else:
                start = int(nl[k]) + 1
                self.line(number + k, block[start:min(int(nl[k + 1]), start + HEAD)])
            low = cut
        if len(opcodes) > low and self.current is not None:
            self._body(block, nl, number, indented, opcodes, declined, low, len(opcodes), inside)
        if sum(high - low for low, high in inside) == len(opcodes):
            self.opcodes.update(opcodes)  # every indented line is within a computation (as XLA prints)
        else:
            for low, high in inside:
                self.opcodes.update(opcodes[low:high])
        self.opcodes.pop(b"", None)

    def _body(self, block, nl, number, indented, opcodes, declined, low, high, inside) -> None:
        """The indented lines `indented[low:high]`, within the computation being read: their opcodes found by
        `_INSTRUCTION` (counted by the caller, from `inside`), the lines it declined read alone."""
        inside.append((low, high))
        blank = 0 if declined is None else int(declined[high] - declined[low])
        self.instructions += high - low - blank
        for i in _where(opcodes, b"", low, high) if blank else ():
            k = int(indented[i])
            self._instruction(number + k, block[int(nl[k]) + 1:min(int(nl[k + 1]), int(nl[k]) + 1 + HEAD)])
        for i in _where(opcodes, b"parameter", low, high) if self.current[2] else ():  # the ENTRY's parameters
            k = int(indented[i])
            self._parameter(number + k, block[int(nl[k]) + 1:min(int(nl[k + 1]), int(nl[k]) + 1 + HEAD)])

    def _close(self) -> None:
        if self.current is not None:
            self.computations.append(Computation(*self.current, self.instructions))
            self.current, self.instructions = None, 0

    def _instruction(self, number: int, head: bytes) -> None:
        read = _read_instruction(head)
        if read is None:
            return  # not an instruction (a wrapped attribute, say): not counted either way
        if not read:
            self.unread += 1
            return
        self.instructions += 1
        self.opcodes[read] += 1
        if read == b"parameter" and self.current[2]:
            self._parameter(number, head)

    def _parameter(self, number: int, head: bytes) -> None:
        """Keep the ENTRY's `parameter(n)` instruction on line `number` (its head)."""
        eq = head.find(b" = ")
        at = eq + 3
        end = _shape_end(head, at)
        paren = head.find(b"(", end)
        close = head.find(b")", paren)
        digits = head[paren + 1:close]
        if digits.isdigit():
            name = head[:eq].lstrip()
            name = name[5:] if name.startswith(b"ROOT ") else name
            self.parameters.append(EntryParameter(int(digits), name.lstrip(b"%").decode("utf-8", "replace"),
                                                  head[at:end].decode("utf-8", "replace"),
                                                  _op_name(head[close:].decode("utf-8", "replace")), number))


def _where(items: list, value, low: int, high: int):
    """The indices of `value` in `items[low:high]` (found by the list's own search, not a Python loop)."""
    while True:
        try:
            low = items.index(value, low, high)
        except ValueError:
            return
        yield low
        low += 1


def _read_instruction(head: bytes) -> bytes | None:
    """An indented line's opcode, b"" where it reads as an instruction (`NAME = ...`) whose opcode is not
    found in `head`, None where it is no instruction."""
    eq = head.find(b" = ")
    if eq < 0:
        return None
    at = eq + 3
    end = _shape_end(head, at)
    paren = head.find(b"(", end) if end > 0 else -1
    opcode = head[end + 1:paren] if paren > 0 else b""
    return b"" if not opcode or opcode.translate(None, _OPCODE_BYTES) else opcode


def _shape_end(head: bytes, at: int) -> int:
    """Where the shape printed at `at` ends (just past a tuple's closing parenthesis, else at the next space), or -1."""
    return _closing(head, at) if head[at:at + 1] == b"(" else head.find(b" ", at)


def _closing(text: bytes, at: int) -> int:
    """The index just past the parenthesis that closes the one at `at` (a tuple shape), or -1."""
    depth = 0
    for i in range(at, len(text)):
        c = text[i]
        if c == 40:  # (
            depth += 1
        elif c == 41:  # )
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
    one more entry, the file's size. `report(bytes_read, offsets)` is called after each chunk, with the
    offsets so far (those of the lines read whole, and where the next starts)."""
    began, began_cpu = time.perf_counter(), time.process_time()
    offsets = array("Q", [0])
    state = _Pass()
    head = b""  # the head of the line the last chunk ended in
    longest = at = 0
    with open(path, "rb") as f:
        while block := f.read(chunk):
            nl = np.flatnonzero(np.frombuffer(block, np.uint8) == _NEWLINE)
            if len(nl):
                # The line the chunk begins within (begun in an earlier chunk, or at its start), read alone...
                state.line(len(offsets), head + block[:min(int(nl[0]), HEAD - len(head))] if len(head) < HEAD else head)
                ends = nl + (at + 1)
                longest = max(longest, int(ends[0]) - offsets[-1],
                              int(np.diff(ends).max()) if len(ends) > 1 else 0)
                # ...then the lines it holds whole, in one go.
                state.lines(block, nl, len(offsets) + 1)
                offsets.frombytes(ends.astype(np.uint64).tobytes())
                head = block[int(nl[-1]) + 1:int(nl[-1]) + 1 + HEAD]
            elif len(head) < HEAD:
                head += block[:HEAD - len(head)]
            at += len(block)
            if report is not None:
                report(at, offsets)
    if offsets[-1] != at:  # a last line without its newline
        state.line(len(offsets), head)
        longest = max(longest, at - offsets[-1])
        offsets.append(at)
    state._close()
    lines = len(offsets) - 1
    facts = StreamedHlo(size=at, lines=lines, computations=tuple(state.computations),
                        opcodes=tuple(sorted(((k.decode(), n) for k, n in state.opcodes.items()), key=lambda kv: (-kv[1], kv[0]))),
                        parameters=tuple(sorted(state.parameters, key=lambda p: p.number)), unread=state.unread,
                        head=HEAD, longest_line=longest, index_bytes=offsets.itemsize * len(offsets),
                        seconds=time.perf_counter() - began, peak_bytes=_peak(),
                        cpu_seconds=time.process_time() - began_cpu)
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
    `--wait`, first wait for a line on stdin (the server holds the pass with it). On stdout, binary: now and
    then `P <bytes read> <n>` and the n bytes of the offsets found since the last (unsigned 64-bit, this
    machine's byte order: the server serves the lines indexed so far), then `D <n>` and n bytes of the facts
    as JSON, then `O <n>` and the n bytes of the offsets not sent yet; or `E <one line>`.

    The `P` reports start once stdin has ended or holds a line (the server closes it when it listens): until
    then a report would fill the pipe and hold the pass until the server reads it, which it does only once
    the gym is made (its render workers are forked with no thread running)."""
    args = sys.argv[1:] if argv is None else argv
    out = sys.stdout.buffer
    if hasattr(os, "nice"):  # the server's answers (the first window, other pages) come first; the pass takes what is left
        os.nice(10)
    if args and args[0] == "--wait":
        args = args[1:]
        sys.stdin.readline()
    path = args[0]
    last, sent, heard = [0.0], [0], [False]

    def report(read: int, offsets: array) -> None:
        now = time.monotonic()
        if now - last[0] >= 0.2:
            last[0] = now
            heard[0] = heard[0] or _listening()
            if heard[0]:
                _send(out, "P", read, offsets, sent)
    try:
        facts, offsets = index_hlo(Path(path), report)
    except (OSError, MemoryError) as e:
        out.write(("E cannot read " + " ".join(f"{path}: {getattr(e, 'strerror', None) or e}".split()) + "\n")
                  .encode("utf-8", "backslashreplace"))
        return 1
    data = json.dumps(facts.to_json()).encode("utf-8")
    out.write(f"D {len(data)}\n".encode() + data)
    _send(out, "O", None, offsets, sent)
    return 0


def _listening() -> bool:
    """Whether the server reads what this process writes: its stdin ended or holds a line (or cannot be asked)."""
    try:
        return bool(select.select([sys.stdin], [], [], 0)[0])
    except (OSError, ValueError, TypeError):
        return True


def _send(out, kind: str, read: int | None, offsets: array, sent: list[int]) -> None:
    """Write the offsets after the `sent[0]` first (then all are sent), headed by `kind` (and `read`)."""
    body = memoryview(offsets)[sent[0]:].cast("B")
    out.write(" ".join(str(w) for w in (kind, read, len(body)) if w is not None).encode() + b"\n")
    out.write(body)
    out.flush()
    sent[0] = len(offsets)


if __name__ == "__main__":
    raise SystemExit(main())
