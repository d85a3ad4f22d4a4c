"""Stage seven: the static site folder, written whole and swapped in, replacing nothing but an earlier build.

A build leaves a `.dumpgym-site` marker holding its manifest: every file it wrote, with its size and
sha256. A later build replaces the folder only when its contents are exactly that manifest's.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

from dumpgym.errors import BuildFolderError
from dumpgym.site import render_site

MARKER = ".dumpgym-site"
MANIFEST_SCHEMA = "dumpgym.site-manifest/1"


def build_site(out_dir, corpus: dict, drills: dict) -> None:
    """Write the gym as static files under `out_dir`, replacing only a new path, an empty folder or an unchanged build.

    The site is written to a sibling temporary folder and swapped into place, so a rebuild leaves no
    stale files and a failure leaves the old build whole. A folder holding anything the last build
    did not write, or a build file since edited, is refused with a `BuildFolderError` naming it. A
    symlink `out_dir` is followed: the build goes into its target, under the same rules, and the link stays.
    """
    out = _target(Path(out_dir).absolute())
    _check_replaceable(out)
    files = render_site(corpus, drills)
    files[MARKER] = manifest(files)
    out.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=f".{out.name}.new-", dir=out.parent))
    try:
        for rel, body in files.items():
            path = fresh / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(body)
        fresh.chmod(0o755)
        _swap(fresh, out)
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)  # made by this run, holds only what it wrote
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
    """Put `fresh` at `out`; an earlier build there is moved aside, checked again, and only then deleted."""
    if not out.exists():
        fresh.rename(out)
        return
    # A scratch folder only this run knows, so no name of the user's (".site.old") is ever touched.
    aside = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    old = aside / "old"
    try:
        out.rename(old)
    except BaseException:
        aside.rmdir()
        raise
    try:
        problem = _first_foreign(old)  # again: something may have been added since the first check
        if problem:
            raise BuildFolderError(f"{out} {problem} (since the build began); nothing was replaced")
        fresh.rename(out)
    except BaseException:
        old.rename(out)
        aside.rmdir()
        raise
    shutil.rmtree(aside)  # made by this run, holding only a build just checked against its manifest
