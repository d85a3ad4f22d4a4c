"""What XLA's buffer reports say of a dumped module: the buffer assignment's allocations, the
memory-usage report's total, and the live-range report's peak (the bytes live at once at its
worst, the instruction scheduled there, the buffers live then). Read with patterns: these reports
are XLA's own text, with no parser in the bindings.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dumpgym.ir.parse import read_text



@dataclass(frozen=True)
class MemoryReport:
    """What XLA's buffer assignment, memory-usage report and live ranges say of one module."""

    total_bytes: int | None  # the memory-usage report's `Total bytes` (default memory space)
    allocations: tuple[tuple[int, int, str, str], ...]  # (number, bytes, kind, largest value), largest first
    peak_bytes: int | None = None  # the live-range report's peak: the bytes live at once at its worst
    peak_at: str = ""  # the instruction the schedule runs at the peak
    live_at_peak: tuple[tuple[str, int], ...] = ()  # (buffer, bytes) live at the peak, as XLA lists them

    def allocated(self) -> int:
        """The bytes of every allocation the buffer assignment lists."""
        return sum(a[1] for a in self.allocations)

    def bytes_of(self, kind: str) -> int:
        """The bytes of the allocations that hold `kind`: parameter, output (with maybe-live-out), temp, constant."""
        words = ("output", "maybe-live-out") if kind == "output" else (kind,)
        return sum(a[1] for a in self.allocations if any(w in a[2] for w in words))


def read_memory(buffer_assignment: Path | None, memory_report: Path | None,
                live_range: Path | None) -> MemoryReport | None:
    """The buffer assignment, memory-usage report and peak live buffers of a module, where XLA wrote them."""
    if buffer_assignment is None and memory_report is None and live_range is None:
        return None
    allocations = []
    if buffer_assignment is not None:
        current = None
        for line in read_text(buffer_assignment).splitlines():
            if m := re.match(r"allocation (\d+): size (\d+), (.*):$", line):
                current = [int(m.group(1)), int(m.group(2)), _allocation_kind(m.group(3)), "", -1]
                allocations.append(current)
            elif current is not None and (m := re.match(r" value: <\d+ (\S+) @\d+> \(size=(\d+)", line)):
                if int(m.group(2)) > current[4]:
                    current[3], current[4] = m.group(1), int(m.group(2))
    total = None
    if memory_report is not None:
        m = re.search(r"^Total bytes: (\d+)", read_text(memory_report), re.M)
        total = int(m.group(1)) if m else None
    rows = tuple(sorted(((a[0], a[1], a[2], a[3]) for a in allocations), key=lambda a: (-a[1], a[0])))
    peak = _peak(read_text(live_range)) if live_range is not None else (None, "", ())
    return MemoryReport(total, rows, *peak)


def _peak(text: str) -> tuple[int | None, str, tuple[tuple[str, int], ...]]:
    """The live-range report's peak: its bytes, the instruction scheduled there, and the buffers live then."""
    at = re.search(r"^  Live ranges at (\d+) \(peak\):$", text, re.M)
    if at is None:
        return None, "", ()
    sequence = dict(re.findall(r"^    (\d+):(\S+)$", text[:at.start()], re.M))
    live, cumulative = [], None
    for line in text[at.end():].splitlines()[1:]:
        m = re.match(r"    (\S+): (\d+) bytes \(cumulative: (\d+) bytes\)$", line)
        if m is None:
            break
        live.append((_buffer_name(m.group(1)), int(m.group(2))))
        cumulative = int(m.group(3))
    return cumulative, sequence.get(at.group(1), ""), tuple(live)


def _buffer_name(printed: str) -> str:
    """A live buffer's name without the shape index XLA prints after it (`fusion.3{0}` -> `fusion.3`), cut
    by searching, not by a pattern that rescans a line of braces."""
    if not printed.endswith("}"):
        return printed
    at = printed.find("{", max(printed.rfind("}", 0, len(printed) - 1) + 1, 1))
    return printed[:at] if at > 0 else printed


_KINDS = (("parameter", r"parameter \d+"), ("output", r"output shape"), ("maybe-live-out", r"maybe-live-out"),
          ("constant", r"constant"), ("thread-local", r"thread-local"), ("temp", r"preallocated-temp"),
          ("color", r"color \d+"))


def _allocation_kind(text: str) -> str:
    """What an allocation holds, in the buffer assignment's own words (`parameter 0`, `output`, `temp`)."""
    words = []
    for word, pattern in _KINDS:
        if m := re.search(pattern, text):
            words.append(m.group(0) if word in ("parameter", "color") else word)
    return ", ".join(words) or text.split(",")[0]
