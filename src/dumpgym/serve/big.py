"""The pages of a dump's modules too big to make programs of (`open`): each module's optimised HLO shown in
windows of lines read from the file by byte offsets, never whole.

A process of its own (a fresh interpreter, sharing neither this process's lock on the interpreter nor its
memory) makes each module's line index in one streaming pass (`python -m dumpgym.ir.hlo_index`, the command
handed in as `indexer`: the server imports nothing that reads compiler text) and sends it back on its
stdout: the facts of the pass, then the byte offset of every line (8 bytes a line). Until it is there the page shows the first window, read
from the head of the file, and says the rest is coming. A window is read by a thread of its own lane, one
line at a time where lines are long: what it costs is the window, cut to `CUT` bytes a line.
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import os
import subprocess
import threading
from array import array
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from dumpgym.record.streamed import StreamedHlo
from dumpgym.site.big_page import BIG_CSS, Window, render_index, render_page
from dumpgym.site.files import CSP

WINDOW = 2_000  # lines a window shows
CUT = 1_000  # bytes of a line shown; the rest is said, never sent
_READ = 1 << 20
_WHOLE_READ = 4 << 20  # a window spanning at most this many bytes is read in one go
_HEAD_READ = 8 << 20  # the most the first window reads of the file's head before the line index is made
# A window's page sends a GET form (go to a line, to a computation) to itself: allowed here, on these pages.
BIG_CSP = CSP.replace("form-action 'none'", "form-action 'self'") + "; frame-ancestors 'none'"


@dataclass(frozen=True)
class BigModule:
    """A module shown streamed: its slug (the page's name), its name as the files spell it, its optimised
    HLO's path, and why it is not a program of the gym (one clause)."""

    slug: str
    name: str
    path: Path
    why: str


class _Index:
    """One module's line index as it is made: its state, how far the pass has read, and when done its
    facts and offsets (or the one line that says why it could not be made)."""

    def __init__(self, module: BigModule):
        self.module = module
        self.state = "waiting"  # waiting, reading, done, error
        self.read = self.lines = 0
        self.facts = None
        self.offsets: array | None = None
        self.error = ""
        try:
            st = module.path.stat()
            self.size, self.stamp = st.st_size, (st.st_size, st.st_mtime_ns)
        except OSError as e:
            self.size, self.stamp, self.state = 0, None, "error"
            self.error = f"cannot read {module.path}: {e.strerror or e}"

    def changed(self) -> bool:
        """Whether the file is not the one indexed (its size or time changed since)."""
        try:
            st = self.module.path.stat()
        except OSError:
            return True
        return (st.st_size, st.st_mtime_ns) != self.stamp


class BigModules:
    """The streamed modules of one `open`, their indexes made one after another, each by a process of its own
    (`start`), and their pages (`answer`). `indexer` is the command that indexes the file named after it
    (`python -m dumpgym.ir.hlo_index`); `gate`, where given, is an event the pass waits for once its process
    has started (tests hold the pass with it)."""

    def __init__(self, modules, indexer: list[str], window: int = WINDOW, cut: int = CUT, gate=None):
        self.indexes = {m.slug: _Index(m) for m in modules}
        self.indexer, self.window, self.cut, self.gate = list(indexer), window, cut, gate
        self._process: subprocess.Popen | None = None
        self._closed = False
        self._lock = threading.Lock()

    def links(self) -> tuple[tuple[str, str, str], ...]:
        """(page path, module name, why) of each module, for the gym's page to link to."""
        return tuple((f"big/{i.module.slug}.html", i.module.name, i.module.why) for i in self.indexes.values())

    def start(self) -> None:
        """Start the first module's indexing process (no thread: `open` calls this before the gym is made and
        its render workers forked, so that the pass runs while the gym starts; it reports what it has found
        only once `listen` closes its stdin, and its last report waits on its pipe for `listen`)."""
        first = next((i for i in self.indexes.values() if i.state == "waiting"), None)
        if first is not None:
            self._spawn(first)

    def listen(self) -> None:
        """Read the indexes in a thread, one module after another, starting each one's process in turn."""
        threading.Thread(target=self._make_all, name="dumpgym-big-index", daemon=True).start()

    def close(self) -> None:
        """Stop the indexing process, if one runs."""
        with self._lock:
            self._closed = True
            if self._process is not None and self._process.poll() is None:
                self._process.kill()

    def _make_all(self) -> None:
        for index in self.indexes.values():
            if index.state in ("waiting", "reading"):
                try:
                    self._make(index)
                except (OSError, ValueError) as e:  # the process could not start, or said what no pass says
                    index.error, index.state = f"its line index could not be made ({e})", "error"

    def _spawn(self, index: _Index) -> subprocess.Popen | None:
        with self._lock:
            if self._closed:
                return None
            wait = ["--wait"] if self.gate is not None else []
            self._process = subprocess.Popen([*self.indexer, *wait, str(index.module.path)], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            index.state = "reading"
            return self._process

    def _make(self, index: _Index) -> None:
        process = self._process if index.state == "reading" else self._spawn(index)
        if process is None:
            return
        try:
            if self.gate is not None:
                self.gate.wait()
                process.stdin.write(b"go\n")
            process.stdin.close()
            out = process.stdout
            offsets = array("Q")
            while line := out.readline():
                kind, _, rest = line.decode("utf-8", "replace").rstrip("\n").partition(" ")
                if kind == "P":  # the offsets found since the last: the lines read whole so far are served
                    read, size = (int(n) for n in rest.split())
                    offsets.frombytes(out.read(size))
                    index.offsets, index.read, index.lines = offsets, read, len(offsets) - 1
                elif kind == "D":
                    facts = StreamedHlo.from_json(json.loads(out.read(int(rest))))
                    kind, _, rest = out.readline().decode().partition(" ")
                    offsets.frombytes(out.read(int(rest)))
                    index.facts, index.offsets = facts, offsets
                    index.read, index.lines, index.state = facts.size, facts.lines, "done"
                    return
                elif kind == "E":
                    index.error, index.state = rest, "error"
                    return
            index.error, index.state = "the process that read it stopped before it was done", "error"
        finally:
            process.stdout.close()
            process.wait()

    def serves(self, target: str) -> bool:
        """Whether `target` is one of these pages, or the page one of these modules had before (`dump/SLUG.html`)."""
        path = urlsplit(target).path
        return path.startswith("/big/") or self._moved(path) is not None

    def _moved(self, path: str) -> str | None:
        slug = path.removeprefix("/dump/").removesuffix(".html")
        return f"/big/{slug}.html" if path.startswith("/dump/") and slug in self.indexes else None

    def answer(self, target: str, gzip_ok: bool = False) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, body) for a GET of a page of the streamed modules: `big/` (their list),
        `big/SLUG.html` (a window: `?line=N` from line N, `?computation=NAME` from its header), `big/big.css`."""
        parts = urlsplit(target)
        moved = self._moved(parts.path)
        if moved is not None:  # a link kept from before leads to the module's page now
            status, headers, body = _answer(HTTPStatus.FOUND, "text/plain; charset=utf-8",
                                            f"moved to {moved}\n".encode(), False)
            return status, {**headers, "Location": moved}, body
        rel = parts.path[len("/big/"):]
        if rel == "big.css":
            return _answer(HTTPStatus.OK, "text/css; charset=utf-8", BIG_CSS.encode("utf-8"), gzip_ok)
        if rel in ("", "index.html"):
            return _answer(HTTPStatus.OK, "text/html; charset=utf-8", render_index(self.links()), gzip_ok)
        index = self.indexes.get(rel[:-len(".html")] if rel.endswith(".html") else "")
        if index is None:
            return _answer(HTTPStatus.NOT_FOUND, "text/plain; charset=utf-8", f"not found: {parts.path}\n".encode(), False)
        try:
            query = parse_qs(parts.query, max_num_fields=4)
        except ValueError:  # more fields than any form of the page sends
            return _answer(HTTPStatus.BAD_REQUEST, "text/plain; charset=utf-8", b"refused: too many fields\n", False)
        status, window, asked = self._window(index, query)
        return _answer(status, "text/html; charset=utf-8", render_page(index, window, asked, self.window, self.cut),
                       gzip_ok)

    def _window(self, index: _Index, query: dict) -> tuple[int, Window | None, str]:
        """The window a query asks for (None where it cannot be read now), and what the page should say of
        the asking (a line number out of range, a computation not found), or ""."""
        line_text = (query.get("line") or [""])[0].strip()
        name = (query.get("computation") or [""])[0].strip()
        if index.state == "error" or index.changed():
            return HTTPStatus.OK, None, ""
        done, offsets = index.state == "done", index.offsets
        known = len(offsets) - 1 if offsets is not None else 0  # the lines indexed so far (all, when done)
        if name:
            if not done:
                return HTTPStatus.OK, None, "the computations are found when the line index is made"
            found = next((c for c in index.facts.computations if c.name == name), None)
            if found is None:
                return HTTPStatus.NOT_FOUND, None, f"no computation is named {name[:200]!r}"
            first = found.line
        elif line_text:
            if not line_text.isdigit() or int(line_text) < 1 or (done and int(line_text) > max(known, 1)):
                last = f"1 to {known:,}" if done else "from 1"
                return HTTPStatus.NOT_FOUND, None, f"line {line_text[:40]!r} is not a line of it ({last})"
            first = int(line_text)
        else:
            first = 1
        if first <= known:
            window = _indexed_window(index.module.path, offsets, first, self.window, self.cut)
            return HTTPStatus.OK, window if done else dataclasses.replace(window, total=None), ""
        if first == 1:  # nothing indexed yet: the first window is read from the file's head
            return HTTPStatus.OK, _head_window(index.module.path, self.window, self.cut), ""
        return HTTPStatus.OK, None, ""


def _answer(status: int, kind: str, body: bytes, gzip_ok: bool) -> tuple[int, dict[str, str], bytes]:
    headers = {"Content-Type": kind, "Content-Security-Policy": BIG_CSP}
    if len(body) >= 1024:
        headers["Vary"] = "Accept-Encoding"
        if gzip_ok:
            body = gzip.compress(body, 5)  # zlib lets go of the interpreter as it compresses
            headers["Content-Encoding"] = "gzip"
    headers["Content-Length"] = str(len(body))
    return status, headers, body


def _indexed_window(path: Path, offsets: array, first: int, count: int, cut: int) -> Window:
    """Lines `first`.. (1-based, at most `count`) read by their offsets, each cut to `cut` bytes."""
    lines = len(offsets) - 1
    last = min(lines, first + count - 1)
    shown = []
    with open(path, "rb") as f:
        start, end = offsets[first - 1], offsets[last]
        ends_nl = True  # the file's last line ends in a newline (every other does)
        if last == lines and end > start:
            f.seek(end - 1)
            ends_nl = f.read(1) == b"\n"
        block = None
        if end - start <= _WHOLE_READ:
            f.seek(start)
            block = f.read(end - start)
        for i in range(first - 1, last):
            content = offsets[i + 1] - offsets[i] - (1 if i < lines - 1 or ends_nl else 0)
            if content and (i < lines - 1 or ends_nl):  # a line ending in CR LF: the CR is its ending's
                if block is not None:
                    cr = block[offsets[i] - start + content - 1] == 13
                else:
                    f.seek(offsets[i] + content - 1)
                    cr = f.read(1) == b"\r"
                content -= cr
            if block is not None:
                raw = block[offsets[i] - start:offsets[i] - start + min(content, cut)]
            else:
                f.seek(offsets[i])
                raw = f.read(min(content, cut))
            shown.append((raw, content - len(raw)))
    return Window(first=first, lines=tuple(shown), total=lines, size=offsets[-1] if lines else 0)


def _head_window(path: Path, count: int, cut: int, budget: int = _HEAD_READ) -> Window:
    """The first `count` lines read from the file's head (no index yet), each cut to `cut` bytes, reading at
    most `budget` bytes: what it costs is bounded, never the file's longest line. A line that ends within them
    says how many bytes it leaves out; the one they end within (a constant printed on one line) is shown cut,
    what it leaves out not known (None) until the line index is made, and ends the window. `total` is known
    only where the file ended within the window."""
    shown: list[tuple[bytes, int | None]] = []
    line, left_out = b"", 0
    last = b""  # the line's last byte read so far: a CR before its newline is its ending's
    ended = spent = False
    with open(path, "rb") as f:
        while len(shown) < count:
            if f.tell() >= budget:
                spent = True
                break
            block = f.read(min(_READ, budget - f.tell()))
            if not block:
                ended = True
                break
            start = 0
            while len(shown) < count:
                nl = block.find(b"\n", start)
                piece = block[start:] if nl < 0 else block[start:nl]
                room = cut - len(line)
                line, left_out = line + piece[:max(room, 0)], left_out + max(len(piece) - max(room, 0), 0)
                last = piece[-1:] or last
                if nl < 0:
                    break
                if last == b"\r":
                    line, left_out = (line, left_out - 1) if left_out else (line[:-1], 0)
                shown.append((line, left_out))
                line, left_out, last = b"", 0, b""
                start = nl + 1
    if ended and (line or left_out):
        shown.append((line, left_out))
    elif spent and (line or left_out):
        shown.append((line, None))
    size = os.path.getsize(path)
    return Window(first=1, lines=tuple(shown), total=len(shown) if ended else None, size=size)
