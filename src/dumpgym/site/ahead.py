"""An added program's page files made when it is added (`dumpgym add`, `add --dump`), not when the page first asks.

The files the page fetches for one program (its record, listings, compiled layers and costs: `files.program_splits`)
are kept by that program's record (`kept.py`): by the digest of the bytes its record file holds, which the add
has just written. So the add renders them, and their compressed bytes, into the very cache folder a start reads
them from, and the first visit to the program after `serve` starts reads them and renders nothing. A record
added again differently has other bytes, hence another key: what was kept for the old one is never read for it.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import threading

from dumpgym.drills._stored import digest
from dumpgym.record.schema import SCHEMA, Corpus, ProgramRecord
from dumpgym.record.typedjson import TextAhead
from dumpgym.site.files import _json, gzipped, program_anchors, program_splits
from dumpgym.site.kept import KeptFiles


def keep_pages(records: list[ProgramRecord], ahead: TextAhead) -> None:
    """Make the page files of records an add just wrote (with `ahead`, which wrote their files) into the cache a
    start reads (`keep_added`); what `dumpgym add`, `add --dump` and `dumpgym.add` call once they have written.
    Only a saving: a failure says one line, and `serve` makes the files as it would have."""
    from dumpgym.terminal import printable

    for record in records:
        try:
            keep_added(record, ahead.text(record) + "\n", ahead.text(dataclasses.replace(record, added=True)) + "\n")
        except Exception as e:  # noqa: BLE001 (the program is added; its page is made on its first visit instead)
            print(f"dumpgym: warning: {record.slug} was added, but its page files could not be made ahead "
                  f"({printable(f'{type(e).__name__}: {e}')}); serve makes them", file=sys.stderr)


def keep_added(record: ProgramRecord, text: str, served: str) -> bool:
    """Make and keep the page files of `record`, added to the folder of added programs as `text` (the record
    file's whole text), `served` being the text of its record as a start reads it back (`added` set): none
    kept already is made again. Whether every file is kept (a cache that refuses writes keeps none).

    Where a process can be forked (Linux, no thread running: `add --dump`, which never imports JAX), a child
    makes every other file on the second core: a big program's files take seconds of pure Python each."""
    program = dataclasses.replace(record, added=True)
    own = Corpus(SCHEMA, record.jax_version or "", (program,))
    kept = KeptFiles(own, digests={record.slug: digest(text.encode("utf-8"))})
    record_file = f"data/programs/{record.slug}.json"
    makers = {path: (lambda: served.encode("utf-8")) if path == record_file else (lambda make=make: _json(make()))
              for path, make in program_splits(program, program_anchors(program)).items()
              if kept.length(path) is None or kept.length(path + ".gz") is None}

    def keep(paths) -> bool:
        for path in paths:
            body = makers[path]()
            if not (kept.write(path, body) and kept.write(path + ".gz", gzipped(body))):
                return False
        return True
    paths = list(makers)
    if len(paths) < 2 or not _forkable():
        return keep(paths)
    child = os.fork()
    if child == 0:  # the child: its half, then out at once (no exit handlers, no buffers of the parent's flushed)
        kept_all = False
        try:
            kept_all = keep(paths[1::2])
        finally:
            os._exit(0 if kept_all else 1)
    try:
        mine = keep(paths[0::2])
    finally:
        _, status = os.waitpid(child, 0)
    return mine and os.waitstatus_to_exitcode(status) == 0


def _forkable() -> bool:
    """Whether this process may fork a child that runs Python: Linux, no thread but this one (a lock another
    thread holds would stay held forever in the child), and no JAX (its runtime's threads are not Python's)."""
    return (sys.platform.startswith("linux") and hasattr(os, "fork") and threading.active_count() == 1
            and "jax" not in sys.modules)
