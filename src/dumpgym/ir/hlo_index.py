"""One linear streaming pass over an optimised HLO text too big to parse whole: the byte offset of every line
(the line index a window of the listing is read by), the computations' headers, the instructions counted by
opcode and the ENTRY's parameters, read from the head of each line (at most `HEAD` bytes of it: a 300 MB
constant printed on one line is skipped, never held), the index at 8 bytes a line. `main` runs it in a
process of its own (`python -m dumpgym.ir.hlo_index`), reporting to the server on stdout.

The pass costs two C-level scans of each chunk and array work a line, not Python work per line (`_Pass.lines`):
numpy finds the chunk's newlines (the line index) and spaces, takes every line's first byte at once (an indented
line is an instruction's, `}` closes a computation, a line ending in `{` opens one), finds each instruction's
` = ` and shape at the spaces after its indent, its opcode's `(` in the 8-byte words that follow the shape, and
counts the opcodes by those words, each distinct opcode read by Python once a chunk. Python reads a line alone
only where that reading may not be `_Pass.line`'s (a tuple shape, an opcode longer than `_KEY` bytes, a line
that is no instruction, one longer than `HEAD`), decodes the chunk's headers' names at once, and reads the
ENTRY's parameters and the one line each chunk ends within. Every reader is linear: no search goes back over
what it has passed, none looks further than a line's head.
Memory: one chunk, a few arrays of its lines' and spaces' positions, one line's head, and the index."""
from __future__ import annotations

import dataclasses
import json
import os
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
_SPACE, _TAB, _NEWLINE, _CLOSE, _OPEN, _PAREN, _EQUALS = 32, 9, 10, 125, 123, 40, 61
_WHITESPACE = np.array([32, 9, 10, 13, 11, 12], np.uint8)  # what bytes.rstrip strips
_PAD = 64  # zero bytes after a chunk's buffer: an 8-byte word may be read at any byte of the chunk
_KEY = 32  # an opcode up to this long is counted by its bytes read as four words; a longer one is read alone
_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(9)], np.uint64)  # the low k bytes of a word
_ENTRY = np.uint64(int.from_bytes(b"ENTRY ", "little"))
_ROOT = np.uint64(int.from_bytes(b"ROOT ", "little"))
_MIX = np.uint64(0x9E3779B97F4A7C15)  # spreads a key's bits over a word's high bits (a bucket, `_Pass._codes`)
_BUCKET_BITS = 16
# Finding a `(` in a word eight bytes at a time: a byte of `word ^ _PARENS` is 0 where the word's is `(`.
_PARENS, _ONES, _HIGHS = (np.uint64(int.from_bytes(bytes([b]) * 8, "little")) for b in (_PAREN, 1, 128))
_ONE, _SEVEN, _FIFTY_SIX = np.uint64(1), np.uint64(7), np.uint64(56)
_BYTE = [np.uint64(8 * i) for i in range(8)]  # shifts that bring a word's byte i to its low byte
_INDENT = np.uint64(int.from_bytes(b"  ", "little"))
_EQUALS_SPACED = np.uint64(int.from_bytes(b" = ", "little"))
_BYTE_INDEX = np.uint64(0x0001020304050607)  # (1 << 8i) * this has i in its top byte


class _Pass:
    """The state of the pass between lines: the computation it is in and what it has counted. It reads bytes
    (a name is decoded only where it is kept)."""

    def __init__(self) -> None:
        self.computations: list[tuple[str, int, bool, int]] = []  # a `Computation`'s fields, in their order
        self.current: tuple[str, int, bool] | None = None  # (name, line, entry) of the computation being read
        self.instructions = 0  # of the computation being read
        self.opcodes: Counter = Counter()
        self.parameters: list[EntryParameter] = []
        self.unread = 0
        self._ids: dict[bytes, int] = {}  # an opcode's number in `_names` (the codes of `_codes`)
        self._names: list[bytes] = []

    def line(self, number: int, head: bytes) -> None:
        """Read one line's head (its first `HEAD` bytes at most, without the newline)."""
        first = head[:1]
        if first == b" " or first == b"\t":
            if self.current is not None:
                self._instruction(number, head)
        elif first == b"}":
            self._close()
        elif _header(head):
            self._close()
            text = head.decode("utf-8", "replace")
            entry = text.startswith("ENTRY ")
            name = text[6:] if entry else text
            self.current = (name.split(" ", 1)[0].split("(", 1)[0].lstrip("%"), number, entry)

    def lines(self, buf: bytearray, n: int, nl: np.ndarray, number: int) -> None:
        """Read the lines of the chunk `buf[:n]` between its newlines `nl` (positions, ascending): line k starts
        after nl[k] and ends at nl[k+1]; the first is line `number`. What `line` would find for each, in one go.
        `buf` holds `_PAD` bytes more than any chunk (an 8-byte word read at a byte of the chunk stays in it)."""
        if len(nl) < 2:
            return
        data = np.frombuffer(buf, np.uint8)
        words = np.ndarray((len(buf) - 7,), "<u8", buffer=buf, strides=(1,))  # words[i]: the 8 bytes from i
        starts, ends = nl[:-1] + 1, nl[1:]
        first = data[starts]  # each line's first byte; an empty line's is its newline
        indented = (first == _SPACE) | (first == _TAB)
        events = first == _CLOSE  # the lines that close or open a computation
        # A header: a line that is none of these, nor a digit's, nor `HloModule`'s, whose head ends in `{`
        # (before any whitespace) or is `HEAD` long. Where its last byte is `{` (and it is shorter), one; where
        # it is whitespace, it is that long, or it may be `HloModule`'s, `_header` reads it.
        maybe = np.flatnonzero(~indented & ~events & (first != _NEWLINE) & ((first < 48) | (first > 57)))
        last = data[ends[maybe] - 1]
        long = ends[maybe] - starts[maybe] >= HEAD
        unsure = np.isin(last, _WHITESPACE) | long | (first[maybe] == ord("H"))
        events[maybe[(last == _OPEN) & ~unsure]] = True
        for k in maybe[unsure].tolist():
            s = int(starts[k])
            if _header(bytes(buf[s:min(int(ends[k]), s + HEAD)])):
                events[k] = True
        opens = events & (first != _CLOSE)
        ev = np.flatnonzero(events)  # the runs of indented lines lie between these: run r after ev[r-1]
        heads = np.flatnonzero(opens[ev])  # which events are headers
        hs = starts[ev[heads]]
        entry = (words[hs] & _MASKS[6]) == _ENTRY
        # Which runs are within a computation, and within the ENTRY: run 0 as the pass stands, run r+1 as
        # event r leaves it.
        inside = np.zeros(len(ev) + 1, bool)
        inside[0] = self.current is not None
        inside[heads + 1] = True
        in_entry = np.zeros(len(ev) + 1, bool)
        in_entry[0] = self.current is not None and self.current[2]
        in_entry[heads + 1] = entry
        ind = np.flatnonzero(indented)
        run = np.cumsum(events)[ind]  # the events before each indented line (it is none)
        kept = inside[run]
        ind, run = ind[kept], run[kept]
        limit = int(nl[-1])  # past every line of the chunk
        # The chunk's spaces, with sentinels past every line's end.
        spaces = np.flatnonzero(data[:limit] == _SPACE)
        spaces = np.concatenate((spaces, np.full(4, limit + 1, spaces.dtype)))
        codes = self._codes(buf, data, words, starts[ind], ends[ind], limit, spaces)
        counted = codes >= 0
        per_run = np.bincount(run[counted], minlength=len(ev) + 1)
        self.unread += int(np.count_nonzero(codes == -2))
        if counted.any():
            counts = np.bincount(codes[counted])
            for i in np.flatnonzero(counts).tolist():
                self.opcodes[self._names[i]] += int(counts[i])
        if b"parameter" in self._ids:
            for k in ind[(codes == self._ids[b"parameter"]) & in_entry[run]].tolist():
                s = int(starts[k])
                self._parameter(number + k, bytes(buf[s:min(int(ends[k]), s + HEAD)]))
        # The computations: the one the chunk began in ends at its first event; each header's runs to the next.
        if self.current is not None:
            self.instructions += int(per_run[0])
        if not len(ev):
            return
        self._close()
        names = _names(data, hs + np.where(entry, 6, 0), ends[ev[heads]], hs + HEAD, spaces)
        lines = (number + ev[heads]).tolist()
        entries = entry.tolist()
        sizes = per_run[heads + 1].tolist()
        last_open = bool(opens[ev[-1]])
        done = len(names) - last_open
        self.computations.extend(zip(names[:done], lines[:done], entries[:done], sizes[:done]))
        if last_open:
            self.current, self.instructions = (names[-1], lines[-1], entries[-1]), sizes[-1]

    def _codes(self, buf, data, words, s: np.ndarray, e: np.ndarray, limit: int, spaces: np.ndarray) -> np.ndarray:
        """The indented lines from `s` to `e` (before their newlines): each one's opcode as its number in
        `_names`, -2 where `_read_instruction` finds b"" (unread), -1 where it finds no instruction.

        A line read here is `  [ROOT ]NAME = SHAPE OPCODE(...` with its ` = ` after the first space past the
        indent (past `ROOT `), a shape not a tuple, and an opcode of at most `_KEY` bytes: its opcode is the
        bytes between the space that ends the shape and the first `(` after it, as `_read_instruction` reads
        them; the others are read by it, alone. `limit` is the chunk's last newline (past every line), `spaces`
        where its spaces are (then four sentinels past `limit`)."""
        codes = np.full(len(s), -1, np.int64)
        if not len(s):
            return codes
        w = words[s]  # each line's first 8 bytes, its first in the low byte
        ok = (e - s <= HEAD) & ((w & _MASKS[2]) == _INDENT)
        c2 = (w >> _BYTE[2]) & _MASKS[1]
        ok &= (c2 != _SPACE) & (c2 != _TAB) & (c2 != _EQUALS)
        root = ((w >> _BYTE[2]) & _MASKS[5]) == _ROOT
        ok &= ~root | ((w >> _BYTE[7]) != _EQUALS)
        k = np.searchsorted(spaces, s + 2) + root  # the space before ` = `, if the line is read here
        p = spaces[k]
        after = words[p]
        ok &= (p + 2 < e) & ((after & _MASKS[3]) == _EQUALS_SPACED)
        ok &= ((after >> _BYTE[3]) & _MASKS[1]) != _PAREN  # a tuple shape: read alone
        end = spaces[k + 2]  # the first space at or after the shape's start
        codes[ok & (end >= e)] = -2  # no space after the shape within the line
        lines = np.flatnonzero(ok & (end < e))
        slow = np.flatnonzero(~ok)
        if len(lines):
            codes[lines], alone = self._keyed(buf, words, end[lines] + 1)
            slow = np.union1d(slow, lines[alone])
        for i in slow.tolist():
            start = int(s[i])
            read = _read_instruction(bytes(buf[start:min(int(e[i]), start + HEAD)]))
            codes[i] = -1 if read is None else -2 if not read else self._id(read)
        return codes

    def _keyed(self, buf, words, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The code of the opcode at each of `at` (it ends at the first `(` after), and which of them are to be
        read alone instead. Read in 8-byte words: the first `(` within `_KEY` bytes found in each (a line with
        none is read alone), the bytes before it as four words masked to them, the opcodes with the same words
        given one code (by the bucket of their words' mix; one whose bucket holds other words is read alone).
        Each distinct opcode is checked once. Where the `(` is past the line's end, the opcode holds its
        newline and is no opcode: unread, as `_read_instruction` finds it (no `(` within the line)."""
        size = np.full(len(at), -1, np.int64)  # the bytes before the `(`
        first = words[at]
        todo = np.arange(len(at))
        for j in range(_KEY // 8):
            word = first if j == 0 else words[at[todo] + 8 * j]
            x = word ^ _PARENS
            found = (x - _ONES) & ~x & _HIGHS  # the lowest bit set is the first `(`'s byte's (none: 0)
            hit = found != 0
            lowest = found[hit] & (~found[hit] + _ONE)
            size[todo[hit]] = 8 * j + (((lowest >> _SEVEN) * _BYTE_INDEX) >> _FIFTY_SIX).astype(np.int64)
            todo = todo[~hit]
            if not len(todo):
                break
        parts = [first & _MASKS[np.clip(size, 0, 8)]]
        mixed = (size.astype(np.uint64) ^ parts[0]) * _MIX
        for j in range(1, _KEY // 8):
            has = np.flatnonzero(size > 8 * j)
            if not len(has):
                break
            part = np.zeros(len(at), np.uint64)
            part[has] = words[at[has] + 8 * j] & _MASKS[np.minimum(size[has] - 8 * j, 8)]
            parts.append(part)
            mixed = (mixed ^ part) * _MIX
        bucket = (mixed >> np.uint64(64 - _BUCKET_BITS)).astype(np.int64)
        holder = np.zeros(1 << _BUCKET_BITS, np.int64)
        holder[bucket] = np.arange(len(at))  # one line of each bucket: the one its code is read from
        rep = holder[bucket]
        same = (size == size[rep]) & (size > 0)
        for part in parts:
            same &= part == part[rep]
        table = np.full(1 << _BUCKET_BITS, -2, np.int64)
        used = np.zeros(1 << _BUCKET_BITS, bool)
        used[bucket] = True
        for i in holder[used].tolist():
            if size[i] > 0:
                opcode = bytes(buf[int(at[i]):int(at[i]) + int(size[i])])
                table[bucket[i]] = -2 if opcode.translate(None, _OPCODE_BYTES) else self._id(opcode)
        codes = table[bucket]
        codes[size == 0] = -2  # an empty opcode
        return codes, np.flatnonzero(~same & (size != 0))

    def _id(self, opcode: bytes) -> int:
        i = self._ids.get(opcode)
        if i is None:
            i = self._ids[opcode] = len(self._names)
            self._names.append(opcode)
        return i

    def _close(self) -> None:
        if self.current is not None:
            self.computations.append((*self.current, self.instructions))
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


def _header(head: bytes) -> bool:
    """Whether a line's head (not indented, not `}`) opens a computation."""
    return bool(head) and not head[:1].isdigit() and not head.startswith(b"HloModule") and (
        head.rstrip().endswith(b"{") or len(head) >= HEAD)


def _names(data: np.ndarray, at: np.ndarray, ends: np.ndarray, limits: np.ndarray, spaces: np.ndarray) -> list[str]:
    """The name of each header whose name starts at `at` (past `ENTRY `): to its first space or `(`, within its
    line (ending at `ends`) and its head (ending at `limits`), without its leading `%`s, decoded as `_Pass.line`
    decodes it. The names are gathered into one text (each ended by a newline, which no name holds) decoded at
    once: an invalid byte is replaced alone, never with the newline after it."""
    if not len(at):
        return []
    stop = np.minimum(np.minimum(ends, limits), spaces[np.searchsorted(spaces, at)])
    skip = (data[at] == ord("%")) & (at < stop)
    at = at + skip
    sizes = stop - at + 1  # each name and the byte after it, made a newline
    places = np.repeat(at - np.concatenate(([0], np.cumsum(sizes)[:-1])), sizes) + np.arange(int(sizes.sum()))
    joined = data[places]
    joined[np.cumsum(sizes) - 1] = _NEWLINE
    names = joined.tobytes().decode("utf-8", "replace").split("\n")[:-1]
    if np.any(joined == _PAREN) or np.any(data[at[skip]] == ord("%")):  # a `(` in a name, or `%%`: as `line` reads it
        names = [name.split("(", 1)[0].lstrip("%") for name in names]
    return names


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
    facts, computations, offsets = _index(path, report, chunk)
    return dataclasses.replace(facts, computations=tuple(Computation(*c) for c in computations)), offsets


def _index(path: Path, report, chunk: int) -> tuple[StreamedHlo, list[tuple[str, int, bool, int]], array]:
    """`index_hlo`'s facts without their computations, the computations' fields (a hundred thousand
    `Computation`s take a fifth of a second to make: the process that sends them as JSON makes none), and
    the offsets."""
    began, began_cpu = time.perf_counter(), time.process_time()
    offsets = array("Q", [0])
    state = _Pass()
    head = b""  # the head of the line the last chunk ended in
    longest = at = 0
    buf = bytearray(chunk + _PAD)  # one chunk at a time, read into the same bytes
    data = np.frombuffer(buf, np.uint8)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(memoryview(buf)[:chunk]):
            nl = np.flatnonzero(data[:n] == _NEWLINE)
            if len(nl):
                # The line the chunk begins within (begun in an earlier chunk, or at its start), read alone...
                first = int(nl[0])
                state.line(len(offsets), head + bytes(buf[:min(first, HEAD - len(head))]) if len(head) < HEAD else head)
                ends = nl + (at + 1)
                longest = max(longest, int(ends[0]) - offsets[-1],
                              int(np.diff(ends).max()) if len(ends) > 1 else 0)
                # ...then the lines it holds whole, in one go.
                state.lines(buf, n, nl, len(offsets) + 1)
                offsets.frombytes(ends.astype(np.uint64).tobytes())
                head = bytes(buf[int(nl[-1]) + 1:min(n, int(nl[-1]) + 1 + HEAD)])
            elif len(head) < HEAD:
                head += bytes(buf[:min(n, HEAD - len(head))])
            at += n
            if report is not None:
                report(at, offsets)
    if offsets[-1] != at:  # a last line without its newline
        state.line(len(offsets), head)
        longest = max(longest, at - offsets[-1])
        offsets.append(at)
    state._close()
    lines = len(offsets) - 1
    facts = StreamedHlo(size=at, lines=lines, computations=(),
                        opcodes=tuple(sorted(((k.decode(), n) for k, n in state.opcodes.items()), key=lambda kv: (-kv[1], kv[0]))),
                        parameters=tuple(sorted(state.parameters, key=lambda p: p.number)), unread=state.unread,
                        head=HEAD, longest_line=longest, index_bytes=offsets.itemsize * len(offsets),
                        seconds=time.perf_counter() - began, peak_bytes=_peak(),
                        cpu_seconds=time.process_time() - began_cpu)
    return facts, state.computations, offsets


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
        facts, computations, offsets = _index(Path(path), report, CHUNK)
    except (OSError, MemoryError) as e:
        out.write(("E cannot read " + " ".join(f"{path}: {getattr(e, 'strerror', None) or e}".split()) + "\n")
                  .encode("utf-8", "backslashreplace"))
        return 1
    data = facts.to_json()
    data["computations"] = computations  # as `to_json` writes them: each a list of its fields
    data = json.dumps(data).encode("utf-8")
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
