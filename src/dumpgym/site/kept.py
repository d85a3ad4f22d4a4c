"""The gym's rendered files kept on disk, so that `dumpgym serve` started again on the same programs renders
none of them: each listing, compiled layer, cost and change file is read back as the first start made it.

The files kept (`site.site_files(kept=True)`: the JSON made from the corpus; not the drill pool's files,
quick to split and possibly of a pool still being made) are a function of the corpus's records and of
the code that renders them. So they are kept in a folder of the cache (`DUMPGYM_CACHE_DIR`, else the
platform's) named by both: `render_digest()` (`_stored.code_digest()`, which covers the built-in corpus,
and besides it every file of the package, the template engine's, highlighter's, zlib's and Python's versions) and
`corpus_digest()` (each record in order: a built-in one by its place in the built-in corpus, an added one
by the digest of its JSON). Anything else differing, the folder differs: a stale file is never read. Each
file names what it holds (key, path, length and sha256 of the bytes): a broken one (cut short, edited,
another site's) is said in one line and made again; a cache that cannot be written to only costs the
making. A file compressed for the wire is kept beside it (`PATH.gz`), made when first asked for. The two
newest other sites stay (a site is about 60 MB with every file made): a start on the programs before an
add, or on another checkout, finds its own. On a first start `serve`'s render worker processes write
them (`serve/render_pool.py`), and the server reads them back here.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sys
import threading
import zlib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Callable

from dumpgym.atomic import write_atomic
from dumpgym.drills._stored import (BUILTIN, builtin_corpus, cache_dir, code_digest, digest, record_digest,
                                    remove_older)

SCHEMA = "dumpgym.kept-file/1"
SUFFIX = ".kept"
KEEP_SITES = 2  # kept sites of other programs or code (before an add, another checkout) kept beside this one
_ROOT = Path(__file__).resolve().parents[1]  # src/dumpgym
_LIBRARIES = ("jinja2", "markupsafe", "pygments")


def kept_root() -> Path:
    """Where the kept sites are: one folder each, under the user's cache folder."""
    return cache_dir() / "site"


@functools.cache
def render_digest() -> str:
    """A digest of everything besides the records that decides the site's files: `code_digest()` and every
    file of the package (its code, templates, static files and tables; the built-in corpus is in
    `code_digest`), the versions of the libraries that render (Jinja2, MarkupSafe, Pygments), of zlib
    and of Python."""
    from importlib import metadata

    h = hashlib.sha256(SCHEMA.encode())
    h.update(code_digest().encode())
    for dist in _LIBRARIES:
        try:
            h.update(f"{dist}={metadata.version(dist)}".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{dist}=none".encode())
    h.update(f"zlib={zlib.ZLIB_RUNTIME_VERSION} python={sys.version}".encode())
    for path in sorted(p for p in _ROOT.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p != BUILTIN):
        h.update(path.relative_to(_ROOT).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def corpus_digest(corpus, digests: Mapping[str, str] = MappingProxyType({})) -> str:
    """A digest of the corpus's records in order: a built-in one (the very record `_stored.builtin_corpus()`
    read, whose bytes `code_digest()` covers) by its place, any other by `program_digest`."""
    places = _builtin_places()
    parts = [corpus.schema, corpus.jax_version]
    parts += [program_digest(p, digests, places) for p in corpus.programs]
    return digest("\n".join(parts).encode("utf-8"))[:16]


def _builtin_places() -> dict[int, int]:
    """Each built-in record's place in the built-in corpus, by the record's id; none when that corpus is not
    read (a record of a corpus not read is not one of its records, and reading it here would cost a second)."""
    builtin = builtin_corpus() if builtin_corpus.cache_info().currsize else None
    return {id(p): i for i, p in enumerate(builtin.programs)} if builtin is not None else {}


def program_digest(program, digests: Mapping[str, str] = MappingProxyType({}), places=None) -> str:
    """What one record is named by in the cache: a built-in one by its place; an added one by the digest of the
    bytes it was read from (`digests`, by slug: what `inputs.load_sources` and an add took), else by the digest
    of its JSON (a record held in memory only, as `open`'s)."""
    place = (_builtin_places() if places is None else places).get(id(program))
    if place is not None:
        return f"builtin:{place}"
    return digests.get(program.slug) or record_digest(program.to_json())


# The files made from one program's record and the code alone (its record, listings, each compiled layer and
# its costs): kept by that record, not by the whole corpus's, so that an add, a remove or an `open` beside them
# renders none of the other programs' again, and an add can keep the new program's ahead of any start.
_PROGRAM_FILE = re.compile(r"data/(?:programs|listings|compiled/[a-z0-9_-]+|cost/[a-z0-9_-]+)/([a-z0-9-]+)\.json")


class KeptFiles:
    """The rendered files of one site (its corpus, this code) in their cache folder, by site path."""

    def __init__(self, corpus, warn: Callable[[str], None] | None = None, root: Path | None = None,
                 digests: Mapping[str, str] = MappingProxyType({})):
        self._corpus, self._root, self.warn = corpus, root, warn or _warn
        self._digests = dict(digests)  # slug -> digest of the bytes its record was read from, where known
        self._programs = {p.slug: p for p in corpus.programs} if corpus is not None else {}
        self._program_keys: dict[str, str] = {}
        self._key: str | None = None
        self._lock = threading.Lock()
        self._pruned = False

    @property
    def key(self) -> str:
        """The site's key, `render_digest()-corpus_digest()`, taken when first asked for (an added program's
        record is digested then, not at start-up)."""
        with self._lock:
            if self._key is None:
                self._key = f"{render_digest()}-{corpus_digest(self._corpus, self._digests)}"
                self._corpus = None
            return self._key

    @property
    def folder(self) -> Path:
        """The folder this site's files are kept in."""
        return (self._root or kept_root()) / self.key

    def added(self) -> frozenset[str]:
        """The slugs of the added programs (the user's own, and `open`'s modules) among this site's."""
        return frozenset(slug for slug, p in self._programs.items() if p.added)

    def key_of(self, path: str) -> str:
        """The key the file at `path` is kept under: its program's (`_PROGRAM_FILE`), else the site's."""
        return self._program_key(path) or self.key

    def _program_key(self, path: str) -> str | None:
        """`render_digest()-DIGEST` of the program whose file `path` is (`_PROGRAM_FILE`), or None."""
        m = _PROGRAM_FILE.fullmatch(path.removesuffix(".gz"))
        program = self._programs.get(m.group(1)) if m else None
        if program is None:
            return None
        with self._lock:
            key = self._program_keys.get(program.slug)
        if key is None:  # digested outside the lock: a record held in memory takes its JSON's digest (seconds)
            named = program_digest(program, self._digests)
            key = f"{render_digest()}-{digest(named.encode('utf-8'))[:16]}"
            with self._lock:
                self._program_keys[program.slug] = key
                if program.added:  # the site's key names it so too, digested once
                    self._digests.setdefault(program.slug, named)
        return key

    def _folder_of(self, path: str) -> Path:
        root = self._root or kept_root()
        key = self._program_key(path)
        return root / self.key if key is None else root / PROGRAMS / Path(*key.split("-"))

    def _file(self, path: str) -> Path:
        return self._folder_of(path) / f"{path}{SUFFIX}"

    def read(self, path: str) -> bytes | None:
        """The kept bytes of the site file `path`, or None when none are kept (or they are broken: said in one line)."""
        file = self._file(path)
        try:
            data = file.read_bytes()
        except OSError:
            return None
        cut = data.find(b"\n")
        try:
            meta = json.loads(data[:cut] if cut >= 0 else data)
            if not isinstance(meta, dict) or meta.get("schema") != SCHEMA:
                raise ValueError("not a kept site file")
            if meta.get("key") != self.key_of(path) or meta.get("path") != path:
                raise ValueError(f"it names {meta.get('path')!r} of site {meta.get('key')!r}")
            body = data[cut + 1:]
            if len(body) != meta["bytes"] or hashlib.sha256(body).hexdigest() != meta["sha256"]:
                raise ValueError("its bytes are cut short or changed")
        except (ValueError, KeyError, TypeError) as e:  # a JSONDecodeError and a UnicodeDecodeError are ValueErrors
            why = str(e).splitlines()[0] if str(e) else type(e).__name__
            self.warn(f"ignoring the damaged kept site file {file} ({why}); making it again")
            return None
        return body

    def length(self, path: str) -> int | None:
        """The length of the site file `path` as its kept file's first line says, reading no more; None when
        none is kept for this site (`read` checks the bytes themselves)."""
        try:
            with open(self._file(path), "rb") as f:
                meta = json.loads(f.readline(4096))
            if meta["schema"] == SCHEMA and meta["key"] == self.key_of(path) and meta["path"] == path:
                return int(meta["bytes"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return None

    def write(self, path: str, body: bytes) -> bool:
        """Keep `body` as the site file `path`; whether it was (a cache that refuses the write keeps nothing)."""
        meta = {"schema": SCHEMA, "key": self.key_of(path), "path": path, "bytes": len(body),
                "sha256": hashlib.sha256(body).hexdigest()}
        try:
            write_atomic(self._file(path), json.dumps(meta, separators=(",", ":")).encode("utf-8") + b"\n" + body)
        except OSError:
            return False
        if not self._pruned:
            self._pruned = True
            self._prune()
        return True

    def _prune(self) -> None:
        """Mark this site the newest, and remove the kept sites of other keys but the `KEEP_SITES` newest; the
        same for the programs' files kept by other code."""
        programs = (self._root or kept_root()) / PROGRAMS / render_digest()
        for folder, named in ((self.folder, _KEY.fullmatch), (programs, _CODE.fullmatch)):
            try:
                os.utime(folder)
            except OSError:
                continue
            remove_older(folder, named, KEEP_SITES)


_KEY = re.compile(r"[0-9a-f]{16}-[0-9a-f]{16}")
_CODE = re.compile(r"[0-9a-f]{16}")
PROGRAMS = "programs"  # the folder under `kept_root()` of the files kept by program (`_PROGRAM_FILE`)


def _warn(line: str) -> None:
    from dumpgym.terminal import printable

    print(f"dumpgym: warning: {printable(line)}", file=sys.stderr)
