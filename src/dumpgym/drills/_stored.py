"""Each program's drill items, made once and kept: an added program's beside its record (`SLUG.drills.json`),
the built-in programs' in the user's cache folder; made again only when the record or the code changes.

A program's items depend on its record, on the code that makes items (`CODE`: the drills and the modules
they import), and on the built-in corpus (the decisions' weights count its answers and questions,
`builtin_spread` and `builtin_asked`, and some typed and tapped steps' count their answers,
`_spread.builtin_answers`).
So a kept file names the digest of the bytes its record was read from and `code_digest()`, which covers
the code, dumpgym's version, the numpy and ml_dtypes that name dtypes, and the built-in corpus's bytes;
either differing, the items are made again and the file rewritten. A stale file is never read; a broken
one (cut short, edited) is said in one line and made again; a folder that cannot be written to (a
read-only corpus) only costs the making.

The built-in items are kept in the user's cache folder (`DUMPGYM_CACHE_DIR`, else the platform's), not
shipped: a shipped pool would have to be rebuilt and committed with every change to any drill kind,
and a stale one could only be refused at run time anyway; the cache is made by the code that reads it,
on the first start of that code (what every start used to cost, once). A file holds one line saying
what it was made from and by, then the items packed as `_packed.kept_text` writes them (a line of the
program's tables, then the rest), so `dumpgym drills` prints them as they are read, decoding only the
tables (`_packed.write`).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from dumpgym.atomic import write_atomic
from dumpgym.drills import _packed

SCHEMA = "dumpgym.stored-items/3"
INDEX_SCHEMA = "dumpgym.stored-builtins/1"
SUFFIX = ".drills.json"
CACHE_ENV = "DUMPGYM_CACHE_DIR"
KEEP_BUILTIN_POOLS = 4  # built-in pools of other code (other releases, other checkouts) kept beside the newest

_ROOT = Path(__file__).resolve().parents[1]  # src/dumpgym
# Every module whose code decides a program's items: the drills package and what it imports (the test
# `test_the_code_digest_covers_every_module_the_drills_import` walks the imports to hold this true).
CODE = ("record/schema.py", "record/typedjson.py", "record/primitives.py", "record/dtypes.py", "record/opcodes.py",
        "errors.py", "atomic.py", "cost/estimate.py", "cost/chips.py", "cost/compare.py", "cost/rows.py",
        "cost/closure.py", "__init__.py")  # the package's: it holds dumpgym's `__version__`
# The committed built-in corpus (`corpus.BUILTIN_PATH`), named here so that the drills import nothing of the
# stage that builds it.
BUILTIN = _ROOT / "data" / "corpus.json"


def digest(data: bytes) -> str:
    """The digest a kept file names its record by: sha256 of the bytes it was read from, shortened."""
    return hashlib.sha256(data).hexdigest()[:32]


@functools.cache
def builtin_bytes() -> bytes:
    """The committed built-in corpus file, read once per process."""
    return BUILTIN.read_bytes()


@functools.cache
def builtin_corpus():
    """The built-in corpus as a typed `Corpus`, parsed once per process (the pool, the decisions' spread and
    the page all read this one)."""
    from dumpgym.record.schema import Corpus

    return Corpus.from_json(json.loads(builtin_bytes()))


@functools.cache
def code_digest() -> str:
    """A digest of everything besides a record that decides its items: the code (`CODE` and the drills
    package; dumpgym's version with it), the numpy and ml_dtypes versions, and the built-in corpus."""
    from importlib import metadata

    h = hashlib.sha256(SCHEMA.encode())
    for dist in ("numpy", "ml_dtypes"):
        try:
            h.update(f"{dist}={metadata.version(dist)}".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{dist}=none".encode())
    for path in sorted([*_ROOT.joinpath("drills").glob("*.py"), *(_ROOT / name for name in CODE)]):
        h.update(path.relative_to(_ROOT).as_posix().encode())
        h.update(path.read_bytes())
    h.update(builtin_bytes())
    return h.hexdigest()[:16]


def record_digest(program: dict) -> str:
    """A digest of a program record given as parsed JSON (`build_pool`'s callers hold no bytes)."""
    text = json.dumps(program, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return digest(text.encode("utf-8"))


@dataclass(frozen=True)
class Kept:
    """One program's items as kept: the kinds they are of, the kinds skipped on it, and the items, as read
    (`text`: packed, `_packed.kept_text`) or as just made (`made`, encoded only when written)."""

    kinds: tuple[str, ...]
    skipped: tuple[dict, ...]
    text: bytes | memoryview | None = None
    made: list[dict] | None = field(default=None, repr=False)

    @classmethod
    def of(cls, items: list[dict], skipped: list[dict]) -> "Kept":
        """What is kept of items just made."""
        return cls(tuple(dict.fromkeys(item["drill"] for item in items)), tuple(skipped), made=items)

    def items(self) -> list[dict]:
        """The items (decoded, if read)."""
        if self.made is not None:
            return self.made
        return _packed.kept_items(self.text) if self.kinds else []

    def encoded(self) -> bytes | memoryview:
        """The items' packed text as a kept file holds it (empty for none)."""
        if self.text is not None:
            return self.text
        return _packed.kept_text(self.made) if self.made else b""


class StoredItems:
    """The kept items of the programs of one folder, each in `SLUG.drills.json`."""

    def __init__(self, folder: Path, warn: Callable[[str], None] | None = None):
        self.folder = Path(folder)
        self.warn = warn

    def path(self, slug: str) -> Path:
        """Where a program's items are kept (`slug` was checked when its record was listed)."""
        return self.folder / f"{slug}{SUFFIX}"

    def read(self, slug: str, record: str) -> Kept | None:
        """The program's kept items, or None when none are kept for this record (by its digest) and this code.

        A file that cannot be read as one this module wrote is said through `warn`, in one line."""
        path = self.path(slug)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        cut = data.find(b"\n")
        head, body = (data, b"") if cut < 0 else (data[:cut], memoryview(data)[cut + 1:])  # the items, not copied
        try:
            meta = json.loads(head)
            if not isinstance(meta, dict) or not str(meta.get("schema")).startswith(SCHEMA.split("/")[0] + "/"):
                raise ValueError("not a stored-items file")
            if meta["schema"] != SCHEMA or meta.get("code") != code_digest() or meta.get("record") != record:
                return None  # made from another record or by other code: stale, never read
            if len(body) != meta["bytes"] or hashlib.sha256(body).hexdigest() != meta["sha256"]:
                raise ValueError("its items are cut short or changed")
            kept = Kept(tuple(meta["kinds"]), tuple(meta["skipped"]), body)
        except (ValueError, KeyError, TypeError) as e:  # a JSONDecodeError and a UnicodeDecodeError are ValueErrors
            if self.warn is not None:
                why = str(e).splitlines()[0] if str(e) else type(e).__name__
                self.warn(f"ignoring the damaged drill items file {path} ({why}); making them again")
            return None
        return kept

    def write(self, slug: str, record: str, kept: Kept) -> Kept:
        """Keep the program's items (a folder that refuses the write keeps none); `kept` with its text."""
        body = bytes(kept.encoded())
        meta = {"schema": SCHEMA, "code": code_digest(), "record": record, "kinds": list(kept.kinds),
                "skipped": list(kept.skipped), "bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}
        head = json.dumps(meta, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        try:
            write_atomic(self.path(slug), head + b"\n" + body)
        except OSError:
            pass
        return Kept(kept.kinds, kept.skipped, body, kept.made)


def cache_dir() -> Path:
    """The user's cache folder for dumpgym: `DUMPGYM_CACHE_DIR`, else the platform's (`~/.cache/dumpgym`)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("dumpgym"))


class BuiltinStore(StoredItems):
    """The built-in programs' kept items, in a cache folder of this code's own (`builtin-CODE`), with an
    index of the built-in slugs in order, the decisions' spread and questions and the other steps'
    spreads, so that a start with everything kept parses no built-in record."""

    def __init__(self, warn: Callable[[str], None] | None = None):
        super().__init__(cache_dir() / "drills" / f"builtin-{code_digest()}", warn)

    def index(self) -> dict | None:
        """The kept index (`slugs`, `spread`, `asked`, `answers`) of this code, or None."""
        try:
            value = json.loads((self.folder / "index.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not (isinstance(value, dict) and value.get("schema") == INDEX_SCHEMA and value.get("code") == code_digest()
                and all(isinstance(value.get(k), list) for k in ("slugs", "spread", "asked"))):
            return None
        return value

    def write_index(self, slugs: list[str], spread: dict[tuple[str, str], int],
                    asked: dict[tuple[str, str, str, int], int],
                    answers: dict[tuple[str, str], int] | None = None) -> None:
        """Keep the built-in slugs, the spread, what the decisions ask (`_decision_why.builtin_asked`) and the
        other steps' spreads (`_spread.builtin_answers`), and remove the built-in pools of all but the newest
        other code."""
        rows = [[step, key, n] for (step, key), n in sorted(spread.items())]
        questions = [[*key, n] for key, n in sorted(asked.items())]
        kept = {"schema": INDEX_SCHEMA, "code": code_digest(), "slugs": slugs, "spread": rows, "asked": questions}
        if answers is not None:
            kept["answers"] = [[step, key, n] for (step, key), n in sorted(answers.items())]
        text = json.dumps(kept)
        try:
            write_atomic(self.folder / "index.json", (text + "\n").encode("utf-8"))
        except OSError:
            return
        remove_older(self.folder, _is_pool, KEEP_BUILTIN_POOLS)


def _is_pool(name: str) -> bool:
    """Whether a folder's name is a built-in pool's, `builtin-` and the 16 hex digits of its code's digest."""
    digest = name.removeprefix("builtin-")
    return len(name) - len(digest) == 8 and len(digest) == 16 and all(c in "0123456789abcdef" for c in digest)


def remove_older(folder: Path, named: Callable[[str], object], keep: int) -> None:
    """Remove the folders beside `folder` whose names are `named` (of other code), all but the `keep` newest."""
    others = {}
    for p in folder.parent.iterdir():
        if p != folder and named(p.name):
            try:
                others[p] = p.stat().st_mtime
            except OSError:  # another start removed it just now
                continue
    for old in sorted(others, key=others.get, reverse=True)[keep:]:
        shutil.rmtree(old, ignore_errors=True)


def builtin_store() -> BuiltinStore:
    """The built-in programs' store for this code in the cache folder (its warnings go to stderr)."""
    import sys

    return BuiltinStore(lambda line: print(f"dumpgym: warning: {line}", file=sys.stderr))


@dataclass
class ProgramSource:
    """One program as the pool reads it: its slug, whether the user added it, the digest of the bytes its
    record came from, where its items are kept, and its typed record, read when first asked for, once."""

    slug: str
    added: bool
    digest: str
    store: StoredItems | None
    read: Callable[[], object] | None = field(repr=False)
    _record: object = field(default=None, repr=False)

    def record(self):
        """The program's `ProgramRecord` (read and checked now if not yet; a damaged one raises)."""
        if self._record is None:
            self._record, self.read = self.read(), None  # the bytes it was read from go with the reader
        return self._record


def builtin_sources() -> list[ProgramSource]:
    """The built-in programs, in the corpus's order; with their items and index kept, no record is parsed."""
    store = builtin_store()
    index = store.index()
    slugs = index["slugs"] if index is not None else [p.slug for p in builtin_corpus().programs]
    return [ProgramSource(slug, False, "builtin", store, functools.partial(_builtin_record, i))
            for i, slug in enumerate(slugs)]


def _builtin_record(i: int):
    return builtin_corpus().programs[i]
