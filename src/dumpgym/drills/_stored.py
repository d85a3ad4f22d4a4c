"""An added program's drill items, kept beside its record (`SLUG.drills.json`) and made again only when
the record or the drills' code changes: a user's real-size model is drilled in the time it takes to read
its items, not to build them.

The file holds the items exactly as `items_for` gives them (JSON), what was skipped, and two digests:
the program record's (its canonical JSON, as the pool reads it) and the code's (every module that makes
items). Either differing, the items are made again and the file rewritten; a folder that cannot be
written to (a read-only corpus) only costs the making.
"""
from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

SCHEMA = "dumpgym.stored-items/1"
SUFFIX = ".drills.json"


@functools.cache
def code_digest() -> str:
    """A digest of every module whose code decides a program's items: the drills package and the record."""
    root = Path(__file__).resolve().parents[1]  # src/dumpgym
    files = sorted([*root.joinpath("drills").glob("*.py"), *(root / n for n in
                    ("record.py", "typedjson.py", "primitives.py", "dtypes.py", "target.py"))])
    h = hashlib.sha256()
    for path in files:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def record_digest(program: dict) -> str:
    """A digest of a program record as the pool reads it."""
    text = json.dumps(program, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class StoredItems:
    """The stored items of the added programs in one corpus folder."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def _path(self, slug: str) -> Path:
        return self.folder / f"{slug}{SUFFIX}"  # `slug` was checked when the record was read

    def read(self, program: dict) -> tuple[list[dict], list[dict]] | None:
        """The program's stored items and skipped kinds, or None when none are stored for this record and code."""
        try:
            stored = json.loads(self._path(program["slug"]).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not (isinstance(stored, dict) and stored.get("schema") == SCHEMA and stored.get("code") == code_digest()
                and stored.get("record") == record_digest(program) and isinstance(stored.get("items"), list)
                and isinstance(stored.get("skipped"), list)):
            return None
        return stored["items"], stored["skipped"]

    def write(self, program: dict, items: list[dict], skipped: list[dict]) -> None:
        """Keep the program's items beside its record; a folder that refuses the write keeps none."""
        from dumpgym.corpus import write_atomic

        text = json.dumps({"schema": SCHEMA, "code": code_digest(), "record": record_digest(program),
                           "items": items, "skipped": skipped}, ensure_ascii=False, separators=(",", ":"))
        try:
            write_atomic(self._path(program["slug"]), text + "\n")
        except OSError:
            pass
