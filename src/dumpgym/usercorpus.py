"""The user's own corpus: programs added with `dumpgym add`, stored one JSON file each.

Layout of the folder: `index.json` (`{"schema": "dumpgym.user-corpus/1", "programs": [slugs]}`)
and `<slug>.json` per program, each a `dumpgym.corpus/1` program record. Every write is atomic,
and nothing is written until the program has traced, so a failure leaves the folder as it was.
"""
from __future__ import annotations

import inspect
import json
import os
import re
from pathlib import Path
from typing import Callable

from dumpgym.corpus import load_builtin, program_record, user_corpus_dir, write_atomic
from dumpgym.program import Program, ProgramError, load_entry, parse_arg

INDEX_SCHEMA = "dumpgym.user-corpus/1"


def _index(folder: Path) -> list[str]:
    path = folder / "index.json"
    if not path.is_file():
        return []
    try:
        return list(json.loads(path.read_text(encoding="utf-8"))["programs"])
    except (ValueError, KeyError, TypeError) as e:
        raise ProgramError(f"{path} is not a dumpgym corpus index ({e})") from e


def _check_writable(folder: Path) -> None:
    """Fail early, creating nothing, when `folder` (or the nearest existing folder above it) can't be written."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise ProgramError(f"cannot write to the corpus folder {folder}: {existing} is not a writable folder")


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ProgramError(f"cannot write to the corpus folder {folder}: {e.strerror or e}") from e


def _default_slug(function_name: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", function_name.lower().replace("_", "-")).strip("-") or "program"


def _check_arity(function, entry: str, count: int) -> None:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return  # builtins and some wrappers keep no signature; tracing will say
    try:
        signature.bind(*range(count))
    except TypeError:
        positional = [p for p in signature.parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
        raise ProgramError(
            f"{entry} takes {len(positional)} argument(s) but {count} --arg spec(s) were given"
        ) from None


def add(entry: str, arg_specs: list[str], slug: str | None = None, title: str | None = None,
        corpus_dir=None, progress: Callable[[str], None] | None = None, compiled: bool = False) -> dict:
    """Trace a user's function, build its facts, x-ray and record, and store it; returns the record."""
    folder = user_corpus_dir(corpus_dir)
    specs = [str(parse_arg(spec)) for spec in arg_specs]
    if not specs:
        raise ProgramError("give each argument of the function with --arg, e.g. --arg bf16[64,128]")
    target, _, name = entry.rpartition(":")
    if target.endswith(".py"):
        entry = f"{Path(target).resolve()}:{name}" if Path(target).is_file() else entry
    function = load_entry(entry)
    _check_arity(function, entry, len(specs))
    slug = slug or _default_slug(name)
    taken = {p["slug"] for p in load_builtin()["programs"]} | set(_index(folder))
    if slug in taken:
        raise ProgramError(f"slug {slug!r} is already in the corpus; choose another with --slug")
    program = Program(slug=slug, title=title or name, lesson=f"Your program {name}.", function=function,
                      args=tuple(specs), entry=entry)
    _check_writable(folder)
    try:
        record = program_record(program, progress, compiled=compiled)
    except ProgramError:
        raise
    except Exception as e:  # the user's code failed under tracing: say so in one line
        first_line = (str(e).strip().splitlines() or [""])[0]
        raise ProgramError(f"{name} raised {type(e).__name__} while tracing: {first_line}") from e
    _make_folder(folder)  # only now that the program has traced
    path = folder / f"{slug}.json"
    write_atomic(path, json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
    try:
        write_atomic(folder / "index.json", json.dumps({"schema": INDEX_SCHEMA, "programs": [*_index(folder), slug]}) + "\n")
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return record


def remove(slug: str, corpus_dir=None) -> None:
    """Remove an added program from the user's corpus."""
    folder = user_corpus_dir(corpus_dir)
    slugs = _index(folder)
    if slug not in slugs:
        known = " ".join(slugs) or "none"
        raise ProgramError(f"no added program {slug!r} (added programs: {known})")
    write_atomic(folder / "index.json", json.dumps({"schema": INDEX_SCHEMA, "programs": [s for s in slugs if s != slug]}) + "\n")
    (folder / f"{slug}.json").unlink(missing_ok=True)


def listing(corpus_dir=None) -> list[dict]:
    """One row per added program: slug, title, entry and equation count."""
    from dumpgym.corpus import load_user_programs

    return [
        {"slug": p["slug"], "title": p["title"], "entry": p["entry"], "equations": len(p["eqns"])}
        for p in load_user_programs(corpus_dir)
    ]
