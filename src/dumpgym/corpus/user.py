"""The user's own corpus: programs added with `dumpgym add`, one JSON file each, behind an index.

Layout of the folder: `index.json` (`{"schema": "dumpgym.user-corpus/1", "programs": [slugs]}`)
and `<slug>.json` per program, each a `dumpgym.corpus/2` program record (or a corpus/1 one an
earlier release wrote, which still reads). The index is the truth: a record file it does not name (left by an add that was killed before it finished) is
never listed, and a later add of that slug replaces it.

Writers (`add`, `remove`) hold an exclusive lock on the folder for their whole
read-modify-write, so parallel adds lose nothing and a slug is claimed once; readers hold a
shared one. The lock is `flock` on the folder itself, so taking it creates no file. Every
write is atomic, and nothing is written until the program has traced.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import sys
from pathlib import Path
from typing import Callable, Iterator

from dumpgym.errors import CorpusFolderError, ProgramError
from dumpgym.record.schema import ProgramRecord, RecordError, upgrade_program, valid_slug
from dumpgym.record.typedjson import TextAhead

INDEX_SCHEMA = "dumpgym.user-corpus/1"
# The longest title `add` takes: a heading's worth. The page lays a title out on one line in the drill
# header, the x-ray picker and the corpus card; a longer one is a mistake (or an attack on the layout).
TITLE_MAX = 200
# What `write_atomic` leaves behind when killed mid-write: `.<name>.json.<random>`.
_LEFTOVER = re.compile(r"\.[a-z0-9-]+(?:\.drills)?\.json\.[A-Za-z0-9_]{6,}")


def user_corpus_dir(corpus_dir: str | os.PathLike | None = None) -> Path:
    """Where added programs live: `corpus_dir`, else the platform's user data directory."""
    if corpus_dir is not None:
        return Path(corpus_dir)
    from platformdirs import user_data_dir

    return Path(user_data_dir("dumpgym")) / "corpus"


WAIT = 30.0  # seconds a command waits for the folder's lock by default (`--wait`); an add or remove holds it briefly
_SAY_WAITING_AFTER = 1.0


@contextlib.contextmanager
def locked(folder: Path, exclusive: bool, wait: float | None = None) -> Iterator[None]:
    """Hold the folder's lock (shared for readers, exclusive for writers); no lock where there is no folder.

    Waiting for it is said on stderr after a second; after `wait` seconds (default `WAIT`) it is a
    `CorpusFolderError`. Ctrl-C or SIGTERM while waiting stops with one line, having changed nothing.
    """
    try:
        import fcntl
    except ImportError:  # no flock on this platform: run unlocked, as before
        yield
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):  # no folder yet: nothing to guard
        yield
        return
    except OSError as e:
        raise CorpusFolderError(f"cannot open the corpus folder {folder}: {e.strerror or e}") from None
    try:
        _acquire(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, folder, WAIT if wait is None else wait)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _acquire(fd: int, mode: int, folder: Path, wait: float) -> None:
    import fcntl
    import time

    from dumpgym.terminal import printable

    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    start, said = time.monotonic(), False
    try:
        with sigterm_interrupts():
            while True:
                waited = time.monotonic() - start
                if not said and waited >= min(_SAY_WAITING_AFTER, wait):
                    print(f"dumpgym: waiting for the corpus lock on {printable(folder)} (held by another dumpgym)",
                          file=sys.stderr, flush=True)
                    said = True
                if waited >= wait:
                    raise CorpusFolderError(f"gave up after {wait:g} s waiting for the corpus lock on {folder}, held "
                                            "by another dumpgym; nothing was changed (wait longer with --wait SECONDS)")
                time.sleep(min(0.05, max(wait - waited, 0.001)))
                try:
                    fcntl.flock(fd, mode | fcntl.LOCK_NB)
                    return
                except BlockingIOError:
                    continue
    except KeyboardInterrupt:
        print(f"dumpgym: stopped while waiting for the corpus lock on {printable(folder)}; nothing was changed",
              file=sys.stderr, flush=True)
        raise


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (a `timeout` running us) raises KeyboardInterrupt for this block, in place of the handler
    jaxlib installs once JAX is imported, which prints a native stack trace before dying."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        # Python sees jaxlib's native handler as SIG_DFL: restoring that ends the process plainly on SIGTERM.
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def read_index(folder: Path) -> list[str]:
    """The slugs the index lists, checked; raises CorpusFolderError naming the file and what is wrong."""
    path = folder / "index.json"
    if not path.exists():
        return []
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CorpusFolderError(f"the corpus index {path} is damaged ({_reason(e)}); fix or move it, "
                           "or pass --corpus DIR") from None
    problem = _index_problem(value)
    if problem:
        raise CorpusFolderError(f"the corpus index {path} is damaged ({problem}); fix or move it, or pass --corpus DIR")
    return list(value["programs"])


def _index_problem(value) -> str:
    if not isinstance(value, dict) or value.get("schema") != INDEX_SCHEMA:
        return f'it is not an object with "schema": "{INDEX_SCHEMA}"'
    if set(value) != {"schema", "programs"} or not isinstance(value["programs"], list):
        return 'it must hold exactly "schema" and a "programs" list'
    seen = set()
    for slug in value["programs"]:
        if not valid_slug(slug):
            return f"{json.dumps(slug)} is not a slug"
        if slug in seen:
            return f"{slug!r} is listed twice"
        seen.add(slug)
    return ""


def _reason(e: Exception) -> str:
    if isinstance(e, OSError):
        return e.strerror or str(e)
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def read_program(folder: Path, slug: str) -> dict:
    """The record of one added program, validated; raises CorpusFolderError naming the file and field."""
    path = folder / f"{slug}.json"  # `slug` was checked by read_index: it cannot leave the folder
    value, _ = parsed(path, slug, read_bytes(path, slug))
    return upgrade_program(value)  # one an earlier release wrote ("dumpgym.corpus/1") reads as corpus/2


def read_bytes(path: Path, slug: str) -> bytes:
    """The bytes of an added program's file; CorpusFolderError if it is missing or cannot be read."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise CorpusFolderError(f"the corpus index lists {slug!r} but {path} is missing; "
                                f"remove it with 'dumpgym remove {slug}'") from None
    except OSError as e:
        raise CorpusFolderError(f"the program file {path} is damaged ({_reason(e)}); "
                                f"remove it with 'dumpgym remove {slug}'") from None


def parsed(path: Path, slug: str, data: bytes) -> tuple[dict, ProgramRecord]:
    """An added program's record from its file's bytes, as JSON and typed; CorpusFolderError names what is wrong."""
    try:
        value = json.loads(data.decode("utf-8"))
        record = ProgramRecord.from_json(value)
    except (UnicodeDecodeError, ValueError) as e:  # RecordError is a ValueError
        where = "" if isinstance(e, RecordError) or not isinstance(e, ValueError) else "not JSON: "
        raise CorpusFolderError(f"the program file {path} is damaged ({where}{_reason(e)}); "
                                f"remove it with 'dumpgym remove {slug}'") from None
    if record.slug != slug:
        raise CorpusFolderError(f"the program file {path} is damaged (it holds {record.slug!r}, not {slug!r}); "
                                f"remove it with 'dumpgym remove {slug}'")
    return value, record


def load_user_programs(corpus_dir=None, warn: Callable[[str], None] | None = None) -> list[dict]:
    """Programs added with `dumpgym add`, in the order they were added, each validated.

    Without `warn`, anything damaged raises CorpusFolderError (one line naming the file). With it, a
    damaged program (or index) is reported through `warn` and skipped, and the rest load.
    """
    folder = user_corpus_dir(corpus_dir)
    if not (folder / "index.json").exists():
        return []
    with locked(folder, exclusive=False):
        try:
            slugs = read_index(folder)
        except CorpusFolderError as e:
            if warn is None:
                raise
            warn(f"skipping your added programs: {e}")
            return []
        programs = []
        for slug in slugs:
            try:
                programs.append(read_program(folder, slug))
            except CorpusFolderError as e:
                if warn is None:
                    raise
                warn(f"skipping {slug}: {e}")
        return programs


def load_corpus(corpus_dir=None, warn: Callable[[str], None] | None = None) -> dict:
    """The built-in corpus with the user's added programs after it (no JAX import).

    Without `warn` a damaged added program raises CorpusFolderError; with it, it is skipped and reported.
    """
    from dumpgym.corpus.builtin import load_builtin

    corpus = load_builtin()
    corpus["programs"] = corpus["programs"] + [{**p, "added": True} for p in load_user_programs(corpus_dir, warn)]
    return corpus


def _write_index(folder: Path, slugs: list[str]) -> None:
    _write(folder / "index.json", json.dumps({"schema": INDEX_SCHEMA, "programs": slugs}) + "\n")


def _write(path: Path, text: str) -> None:
    """`write_atomic`, with a full disk or a read-only folder said as one line naming the file."""
    from dumpgym.corpus.builtin import write_atomic

    try:
        write_atomic(path, text)
    except OSError as e:  # "[Errno 28] No space left on device" alone says nothing of where
        raise CorpusFolderError(f"cannot write {path}: {e.strerror or e}; nothing was changed") from None


def _clean_leftovers(folder: Path) -> None:
    """Remove temp files of writes that were killed midway (only writers make them, under the lock)."""
    for path in folder.iterdir():
        if _LEFTOVER.fullmatch(path.name) and path.is_file():
            path.unlink(missing_ok=True)


def _check_writable(folder: Path) -> None:
    """Fail early, creating nothing, when `folder` (or the nearest existing folder above it) can't be written."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise CorpusFolderError(f"cannot write to the corpus folder {folder}: {existing} is not a writable folder")


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CorpusFolderError(f"cannot write to the corpus folder {folder}: {e.strerror or e}") from e


def _check_slug_free(slug: str, folder: Path, replace: bool = False) -> None:
    """Refuse a slug the corpus has: a built-in program's always, an added program's unless it is to be replaced."""
    if _is_builtin_slug(slug):
        raise ProgramError(f"slug {slug!r} is already in the corpus; choose another with --slug")
    if slug in read_index(folder) and not replace:
        raise ProgramError(f"slug {slug!r} is already in the corpus; choose another with --slug, "
                           "or give --replace to replace the program you added under it")


def _is_builtin_slug(slug: str) -> bool:
    """Whether a program of the built-in corpus has `slug`. A slug (`a-z0-9-`, nothing JSON escapes) that its
    file's text does not hold at all, in quotes, is no program's, and is known so without reading the file's
    megabytes of JSON (an add's own slug, most often); only one that it holds somewhere is looked up."""
    return _builtin_holds(json.dumps(slug).encode()) and slug in _builtin_slugs()


@functools.cache
def _builtin_holds(quoted: bytes) -> bool:
    from dumpgym.corpus.builtin import BUILTIN_PATH

    return quoted in BUILTIN_PATH.read_bytes()


@functools.cache
def _builtin_slugs() -> frozenset[str]:
    """The built-in corpus's slugs, read once a process: an add asks before it traces and again under the
    write lock, and the committed corpus (megabytes of JSON) does not change between the two."""
    from dumpgym.corpus.builtin import load_builtin
    from dumpgym.gcpause import collector_paused

    with collector_paused():  # parsing megabytes of JSON makes objects by the hundred thousand, and frees none
        return frozenset(p["slug"] for p in load_builtin()["programs"])


def store_records(records: list[ProgramRecord], corpus_dir=None, wait: float | None = None,
                  replace: bool = False, ahead: TextAhead | None = None) -> None:
    """Write records made elsewhere (a dump's modules, `dumps/record.py`) into the folder of added programs:
    all of them or, on any failure, none; with `replace`, each in the place of the one added under its slug;
    `ahead` writes their text (`_store`), and keeps it for the caller."""
    folder = user_corpus_dir(corpus_dir)
    with locked(folder, exclusive=False, wait=wait):
        taken = [r.slug for r in records if r.slug in read_index(folder)]
        if taken and not replace:  # a dump's module takes its slug from its name: no --slug to choose another
            raise ProgramError(f"slug {taken[0]!r} is already in the corpus (added before); give --replace to replace "
                               f"what you added under it, or remove it with 'dumpgym remove {taken[0]}'")
        for record in records:
            _check_slug_free(record.slug, folder, replace)
    _check_writable(folder)
    _make_folder(folder)
    _store(folder, records, wait, replace, ahead)


def _store(folder: Path, records: list[ProgramRecord], wait: float | None, replace: bool = False,
           ahead: TextAhead | None = None) -> list[str]:
    """Write each record and the index under the folder's lock; a failure removes what it wrote.

    With `replace`, a record whose slug an added program has takes that program's place: its file is swapped
    in one step (`write_atomic`), the index keeps its order, and its kept drill items go. A failure leaves the
    old program whole. Returns the slugs replaced. `ahead`: the text of some of the records' fields, made
    before (`typedjson.TextAhead`)."""
    from dumpgym.gcpause import collector_paused

    with locked(folder, exclusive=True, wait=wait):
        _clean_leftovers(folder)
        slugs = read_index(folder)
        replaced = [r.slug for r in records if replace and r.slug in slugs and not _is_builtin_slug(r.slug)]
        for record in records:
            if record.slug not in replaced:
                _check_slug_free(record.slug, folder)
        new = [record.slug for record in records]
        if len(set(new)) != len(new):  # one would overwrite the other and the index list it twice
            twice = next(slug for slug in new if new.count(slug) > 1)
            raise ProgramError(f"two of the programs to add have the slug {twice}; nothing was added")
        written = []
        try:
            ahead = ahead or TextAhead()
            for record in records:
                path = folder / f"{record.slug}.json"
                with collector_paused():  # the record's JSON is made of objects by the hundred thousand, freed at once
                    text = ahead.text(record) + "\n"
                _write(path, text)
                if record.slug not in replaced:  # a replaced file is whole, old or new: never removed
                    written.append(path)
            added = [record.slug for record in records if record.slug not in replaced]
            if added:
                _write_index(folder, [*slugs, *added])
        except BaseException:
            for path in written:
                path.unlink(missing_ok=True)
            raise
        for slug in replaced:  # the items kept for the program replaced (drills/_stored.py) are not the new one's
            (folder / f"{slug}.drills.json").unlink(missing_ok=True)
        return replaced


def _check_slug_syntax(slug: str | None) -> None:
    if slug is not None and not valid_slug(slug):
        raise ProgramError(f"--slug {slug!r} must use only a-z, 0-9 and '-' (at most 64, not starting with '-')")


def _check_title(title: str | None) -> None:
    if title is None:
        return
    _check_text(title, "--title", title)
    if len(title) > TITLE_MAX:
        raise ProgramError(f"--title is {len(title):,} characters long; a title may have at most {TITLE_MAX}")


def _check_text(value: str, what: str, shown: str) -> None:
    """Refuse `value` unless it is text the record can hold (Python decodes bytes that are not UTF-8 in a
    command line or a file name to lone surrogates, which no JSON file can be written with)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ProgramError(f"{what} {shown!r} is not valid UTF-8 (bytes from a terminal or file system in "
                           "another encoding); give it in UTF-8") from None


def remove(slug: str, corpus_dir=None, wait: float | None = None) -> None:
    """Remove an added program from the user's corpus (its record need not be readable)."""
    folder = user_corpus_dir(corpus_dir)
    with locked(folder, exclusive=True, wait=wait):
        slugs = read_index(folder)
        if slug not in slugs:
            known = " ".join(slugs) or "none"
            raise ProgramError(f"no added program {slug!r} (added programs: {known})")
        _clean_leftovers(folder)
        _write_index(folder, [s for s in slugs if s != slug])
        (folder / f"{slug}.json").unlink(missing_ok=True)
        (folder / f"{slug}.drills.json").unlink(missing_ok=True)  # its stored drill items (drills/_stored.py)


def listing(corpus_dir=None) -> list[dict]:
    """One row per added program: slug, title, entry and equation count."""
    return [
        {"slug": p["slug"], "title": p["title"], "entry": p["entry"], "equations": len(p["eqns"])}
        for p in load_user_programs(corpus_dir)
    ]
