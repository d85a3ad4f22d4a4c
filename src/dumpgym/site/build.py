"""A static site folder: the gym's files written whole and swapped in, replacing nothing but an earlier build.

A build leaves a `.dumpgym-site` marker holding its manifest: every file it wrote, with its size and
sha256. A later build replaces the folder only when its contents are exactly that manifest's.

The swap is one step: on Linux, `renameat2(RENAME_EXCHANGE)` exchanges the new folder's directory
entry with the old one's, so a reader opening `DIR/index.html` finds the old build or the new one and
never neither, and a build killed at any moment leaves the old build at `DIR`. What a killed build
leaves beside `DIR` (`.DIR.new-*`, holding its marker first and then only files that marker lists)
is removed by the next build, which says so. Where the exchange is not available (another system, a
file system without it), the old build is moved aside and the new one moved in: two renames.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import re
import stat
import sys
import tempfile
from pathlib import Path

try:
    import fcntl
except ImportError:  # no flock on this platform: builds of one folder at once are not guarded
    fcntl = None

from dumpgym.errors import BuildFolderError
from dumpgym.record.schema import Corpus
from dumpgym.site.files import render_site

MARKER = ".dumpgym-site"
MANIFEST_SCHEMA = "dumpgym.site-manifest/1"


def build_site(out_dir, corpus: Corpus | dict, drills: dict) -> list[Path]:
    """Write the gym as static files under `out_dir`, replacing only a new path, an empty folder or an unchanged build.

    The site is written to a sibling temporary folder and swapped into place in one step, so a rebuild
    leaves no stale files and a failure (or a kill) leaves the old build whole. A folder holding
    anything the last build did not write, or a build file since edited, is refused with a
    `BuildFolderError` naming it. A symlink `out_dir` is followed: the build goes into its target,
    under the same rules, and the link stays. Returns the leftovers of killed builds it removed.
    """
    out = _target(Path(out_dir).absolute())
    _check_replaceable(out)
    rendered = render_site(corpus, drills)
    # The marker first: a build killed while writing leaves a folder whose every file its marker lists.
    files = {MARKER: manifest(rendered), **rendered}
    out.parent.mkdir(parents=True, exist_ok=True)
    removed = _remove_leftovers(out)
    fresh = Path(tempfile.mkdtemp(prefix=f".{out.name}.new-", dir=out.parent))
    with _held(fresh):
        _fill(fresh, files, out)
        _swap(fresh, out)
    return removed


@contextlib.contextmanager
def _held(folder: Path):
    """Hold an exclusive `flock` on `folder` while this build writes it, so that a build of the same `DIR`
    running beside this one never takes it for a leftover (`_remove_leftovers` skips a locked folder)."""
    if fcntl is None:  # no flock (nor folders opened as files) here
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _in_use(folder: Path) -> bool:
    if fcntl is None:
        return False
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _fill(fresh: Path, files: dict[str, bytes], out: Path) -> None:
    """Write `files` under `fresh` (made by this run); on any failure remove it, naming the file that failed."""
    try:
        for rel, body in files.items():
            path = fresh / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                path.write_bytes(body)
            except OSError as e:  # a full disk or a read-only folder: say where
                raise BuildFolderError(f"cannot write {out / rel} (writing {path}): {e.strerror or e}") from None
        fresh.chmod(0o755)
    except BaseException:
        _remove_build(fresh)  # made by this run, holds only what it wrote
        raise


def manifest(files: dict[str, bytes]) -> bytes:
    """The marker's text: the schema and, for each written file by relative path, its size and sha256."""
    entries = {rel: {"size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
               for rel, body in sorted(files.items())}
    return (json.dumps({"schema": MANIFEST_SCHEMA, "files": entries}, indent=1) + "\n").encode("utf-8")


def _target(out: Path) -> Path:
    """Where the build goes: `out`, or the folder a symlink `out` points to (the link itself is never replaced)."""
    if not out.is_symlink():
        return out
    try:
        return out.resolve()
    except (OSError, RuntimeError) as e:  # a symlink loop
        raise BuildFolderError(f"{out} is a symlink that cannot be followed ({e}); give a folder") from None


def _check_replaceable(out: Path) -> None:
    """Raise `BuildFolderError` naming the first thing in `out` that an earlier build did not write as it is."""
    if not out.exists():
        return
    if not out.is_dir():
        raise BuildFolderError(f"{out} is not a folder; give an empty or new folder, or an earlier build")
    problem = _first_foreign(out)
    if problem:
        raise BuildFolderError(f"{out} {problem}; dumpgym build replaces only an empty folder or an unchanged "
                           "earlier build, so move that away or give a new folder")


def _first_foreign(folder: Path) -> str | None:
    """What in `folder` stops it being replaced, as the end of a sentence, or None if it is empty or exactly a build."""
    entries = dict(sorted(_walk(folder)))
    listed: dict[str, tuple[int, str]] | None = {}
    if MARKER in entries:
        try:
            listed = _read_manifest(folder / MARKER) if entries[MARKER] == "file" else None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            listed = None
        if listed is None:
            # An old marker ("written by dumpgym build") or a damaged one lists nothing, so none of the
            # folder's files can be told from the user's: treat them all as theirs.
            return f"holds {MARKER!r} with no dumpgym build manifest in it, so its files cannot be told from yours"
    dirs = {parent.as_posix() for rel in listed for parent in Path(rel).parents}
    foreign_dir = None  # named only if it holds no file to name: "src/main.py" says more than "src"
    for rel, kind in entries.items():
        if (rel == MARKER and kind == "file") or (kind == "dir" and rel in dirs):
            continue
        if kind == "dir":
            foreign_dir = foreign_dir or rel
            continue
        if kind != "file" or rel not in listed:
            return f"holds {rel!r}, which dumpgym build did not write"
        # Contents, not just sizes: a build file the user edited is their work now (a same-size edit
        # included), and hashing a few megabytes costs little next to rendering them.
        size, digest = listed[rel]
        path = folder / rel
        if path.stat().st_size != size or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            return f"holds {rel!r}, changed since dumpgym build wrote it"
    if foreign_dir:
        return f"holds {foreign_dir!r}, which dumpgym build did not write"
    # The set must match too: a build with files gone is not the folder the manifest vouches for.
    missing = sorted(set(listed) - {rel for rel, kind in entries.items() if kind == "file"})
    if missing:
        return f"lacks {missing[0]!r}, which the earlier build wrote, so it is not that build as it was"
    return None


def _walk(folder: Path):
    """Every entry under `folder` as (relative posix path, "file" | "dir" | "other"), links never followed."""
    def fail(error):
        raise error  # an unreadable subfolder could hide the user's files: never skip it

    for root, dirs, names in os.walk(folder, onerror=fail):
        base = Path(root).relative_to(folder)
        for name in dirs + names:
            mode = os.lstat(os.path.join(root, name)).st_mode
            kind = "dir" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else "other"
            yield (base / name).as_posix(), kind


def _read_manifest(marker: Path) -> dict[str, tuple[int, str]]:
    """The files a marker lists, as relative path -> (size, sha256); raises if it holds no manifest."""
    data = json.loads(marker.read_text(encoding="utf-8"))
    if data["schema"] != MANIFEST_SCHEMA:
        raise ValueError(f"unknown manifest schema {data['schema']!r}")
    return {str(rel): (int(entry["size"]), str(entry["sha256"])) for rel, entry in data["files"].items()}


def _swap(fresh: Path, out: Path) -> None:
    """Put `fresh` at `out` in one step; an earlier build there is checked again, and only then deleted."""
    if not out.exists():
        try:
            fresh.rename(out)  # onto nothing: one step already
        except BaseException:
            _remove_build(fresh)
            raise
        return
    try:
        exchanged = _exchange(fresh, out)
    except BaseException:
        _remove_build(fresh)
        raise
    if not exchanged:
        _swap_by_renames(fresh, out)
        return
    # `fresh` now names the old build. Check it again: something may have been added since the first check.
    problem = _first_foreign(fresh)
    if problem:
        _exchange(fresh, out)  # back: the user's folder returns whole, and the new build goes
        _remove_build(fresh)
        raise BuildFolderError(f"{out} {problem} (since the build began); nothing was replaced")
    _remove_build(fresh)  # an earlier build just checked against its manifest


def _swap_by_renames(fresh: Path, out: Path) -> None:
    """Where no exchange exists: the old build moved aside, checked again, the new one moved in (two renames)."""
    # A scratch folder only this run knows, so no name of the user's (".site.old") is ever touched.
    aside = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    old = aside / "old"
    try:
        out.rename(old)
    except BaseException:
        aside.rmdir()
        _remove_build(fresh)
        raise
    try:
        problem = _first_foreign(old)
        if problem:
            raise BuildFolderError(f"{out} {problem} (since the build began); nothing was replaced")
        fresh.rename(out)
    except BaseException:
        old.rename(out)
        aside.rmdir()
        _remove_build(fresh)
        raise
    _remove_build(old)
    aside.rmdir()


_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Exchange the directory entries `a` and `b` atomically; False where this system or file system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)  # glibc 2.28 and later, musl 1.2.5 and later
    if renameat2 is None:
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):  # an old kernel, or a file system without it
        return False
    raise OSError(code, f"cannot swap the new build into place: {os.strerror(code)}", str(b))


def _remove_leftovers(out: Path) -> list[Path]:
    """Remove what killed builds of `out` left beside it (`.OUT.new-*`, `.OUT.old-*`), only where each is
    provably a build's: its files all listed by its marker. Returns what was removed."""
    pattern = re.compile(rf"\.{re.escape(out.name)}\.(new|old)-[A-Za-z0-9_]{{6,}}")
    removed = []
    for path in sorted(out.parent.iterdir()):
        if not pattern.fullmatch(path.name) or path.is_symlink() or not path.is_dir() or _in_use(path):
            continue
        inner = path / "old"  # an earlier release moved the old build aside to `.OUT.old-*/old`
        if os.listdir(path) == ["old"] and not inner.is_symlink() and inner.is_dir():
            if not _leftover_of_a_build(inner):
                continue
            _remove_build(inner)
        elif not _leftover_of_a_build(path):
            continue
        _remove_build(path)
        removed.append(path)
    return removed


def _leftover_of_a_build(folder: Path) -> bool:
    """Whether `folder` holds nothing but a build's own files (its marker first, as a build writes it)."""
    entries = dict(_walk(folder))
    if not entries:
        return True
    if entries.get(MARKER) != "file":
        return False
    try:
        listed = _read_manifest(folder / MARKER)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return list(entries) == [MARKER]  # killed while writing the marker itself
    dirs = {parent.as_posix() for rel in listed for parent in Path(rel).parents}
    return all(rel == MARKER or (kind == "file" and rel in listed) or (kind == "dir" and rel in dirs)
               for rel, kind in entries.items())


def _remove_build(folder: Path) -> None:
    """Delete a folder this module wrote, its marker last, so that a kill midway leaves a folder the next
    build still recognises as a leftover of its own."""
    if not folder.exists():
        return
    for root, dirs, names in os.walk(folder, topdown=False):
        for name in names:
            if not (root == str(folder) and name == MARKER):
                os.unlink(os.path.join(root, name))
        for name in dirs:
            path = os.path.join(root, name)
            os.unlink(path) if os.path.islink(path) else os.rmdir(path)
    (folder / MARKER).unlink(missing_ok=True)
    folder.rmdir()
