"""What `dumpgym drills`, `serve` and `build` read: the built-in and added programs as sources, and from them
the typed corpus and the drill pool, with each record parsed at most once per process.

A source (`drills/_stored.ProgramSource`) is a program's file read and digested now, under the folder's
lock, and its record parsed only when first asked for: when its items are not kept (`drills/_stored.py`)
or the page needs it. A warm `dumpgym drills` parses none; `serve` and `build` parse each once.
"""
from __future__ import annotations

import dataclasses
import functools
import sys
from pathlib import Path
from typing import Callable

from dumpgym.drills import kept_parts, kept_pool, pool_of, tell_skipped
from dumpgym.drills._stored import ProgramSource, StoredItems, builtin_corpus, builtin_sources, digest
from dumpgym.errors import CorpusFolderError
from dumpgym.gcpause import collector_paused
from dumpgym.record.schema import SCHEMA, Corpus, ProgramRecord
from dumpgym.terminal import printable
from dumpgym.corpus.user import locked, parsed, read_bytes, read_index, user_corpus_dir


def load_sources(corpus_dir=None, warn: Callable[[str], None] | None = None) -> list[ProgramSource]:
    """The built-in programs and then the user's added ones as `_stored.ProgramSource`s: each file read
    now (under the folder's lock) and its digest taken, each record parsed only when first asked for.

    What `dumpgym drills`, `serve` and `build` read: with every program's items kept, no record is
    parsed at all. A damaged index, a missing file and an added slug that a built-in program has taken
    are said through `warn` and skipped (raised without it); a damaged record, when it is parsed.
    """
    sources = builtin_sources()
    taken = {s.slug for s in sources}
    folder = user_corpus_dir(corpus_dir)
    if not (folder / "index.json").exists():
        return sources
    store = StoredItems(folder, warn)

    def skip(error: CorpusFolderError, what: str) -> None:
        if warn is None:
            raise error
        warn(f"skipping {what}: {error}")

    with locked(folder, exclusive=False):
        try:
            slugs = read_index(folder)
        except CorpusFolderError as e:
            skip(e, "your added programs")
            return sources
        for slug in slugs:
            path = folder / f"{slug}.json"
            try:
                data = read_bytes(path, slug)
            except CorpusFolderError as e:
                skip(e, slug)
                continue
            if slug in taken:
                skip(CorpusFolderError(f"{path} has the slug of a built-in program of this release; add it again "
                                       f"with another --slug, and remove it with 'dumpgym remove {slug}'"), slug)
                continue
            read = functools.partial(_added_record, path, slug, data)
            sources.append(ProgramSource(slug, True, digest(data), store, read))
    return sources


def _added_record(path: Path, slug: str, data: bytes) -> ProgramRecord:
    """The typed record of an added program's file bytes, marked as added (as `load_corpus` marks them)."""
    return dataclasses.replace(parsed(path, slug, data)[1], added=True)


def gym_inputs(corpus_dir=None, warn: Callable[[str], None] | None = None) -> tuple[Corpus, dict]:
    """The typed corpus (built-in plus the user's added programs) and its drill pool, each record parsed once
    and each program's items read where they were kept (`drills/_stored.py`), made only where missing.

    A damaged added program and a drill kind that fails on one program are skipped with a one-line
    warning (on stderr unless `warn` is given): the page still serves everything else.
    """
    start = gym_start(corpus_dir, warn)
    return start.corpus, start.whole_pool()


@dataclasses.dataclass
class GymStart:
    """The gym as far as it is there at once: the typed corpus, the pool of the programs whose items were
    kept (`pool`), and the programs whose items are still to make (`pending`, slugs in corpus order);
    `whole_pool()` makes those (keeping them) and gives the pool of every program. `serve` answers with
    the first while a worker makes the second: an add or an upgrade costs the page no wait."""

    corpus: Corpus
    pool: dict
    pending: tuple[str, ...]
    _sources: list[ProgramSource] = dataclasses.field(repr=False)
    _parts: list = dataclasses.field(repr=False)  # each source's kept items, None where still to make
    _warn: Callable[[str], None] = dataclasses.field(repr=False)
    _whole: dict | None = dataclasses.field(default=None, repr=False)

    def digests(self) -> dict[str, str]:
        """The digest of the bytes each added program's record was read from, by slug (`kept.KeptFiles` keeps
        a program's files by it)."""
        return {s.slug: s.digest for s in self._sources if s.added and s.digest}

    def whole_pool(self, ready: Callable[[dict, tuple[str, ...]], None] | None = None,
                   before: Callable[[list[str]], None] | None = None) -> dict:
        """The pool of every program, in corpus order: the pending programs' items made now and kept (once).

        The built-in programs' are made first, then each added program's: after each of these but the
        last, `ready(pool, pending)` is given the pool so far and the slugs still pending. `before(slugs)`,
        called before each of these stages, may have another process make and keep them (`serve`'s item
        maker): they are read where kept, and only those still missing made here."""
        if self._whole is None:
            parts = list(self._parts)
            todo = [i for i, kept in enumerate(parts) if kept is None]
            stages = [[i for i in todo if not self._sources[i].added]] + [[i] for i in todo if self._sources[i].added]
            stages = [stage for stage in stages if stage]
            for n, stage in enumerate(stages):
                if before is not None:  # a wait of seconds, with the collector on: the server answers meanwhile
                    before([self._sources[i].slug for i in stage])
                # The items read or made, decoded into the pool, and the stage's gym given to `ready`: objects by the
                # hundred thousand, all kept, which the collector's walks would free none of (in `serve` they are a
                # tenth of the CPU a stage's swap-in holds Python's lock for, beside the answers).
                with collector_paused():
                    made = kept_pool([self._sources[i] for i in stage], self._warn)  # every record is parsed
                    tell_skipped(made, self._warn)
                    for i, kept in zip(stage, made):
                        parts[i] = kept
                    if ready is not None and n < len(stages) - 1:
                        ready(pool_of([kept for kept in parts if kept is not None]),
                              tuple(self._sources[i].slug for stage in stages[n + 1:] for i in stage))
            with collector_paused():
                self._whole = pool_of(parts) if todo else self.pool
        return self._whole


def gym_start(corpus_dir=None, warn: Callable[[str], None] | None = None, shown: tuple = ()) -> GymStart:
    """The typed corpus, each record parsed once, and the pool of the programs whose items are kept; the
    rest (after an add, or an upgrade: no items kept) are made by `GymStart.whole_pool`, when asked.
    `shown`: records held in memory only (`dumpgym open`'s dump modules), first, as added programs; an
    added program of the same slug is not shown beside one (said through `warn`).

    Warnings as `gym_inputs`'s (a kind skipped on a program is told once, by whichever pool holds it).
    Python's collector is held off meanwhile: the records read are objects by the hundred thousand, all kept."""
    with collector_paused():
        return _gym_start(corpus_dir, warn, shown)


def _gym_start(corpus_dir, warn, shown: tuple) -> GymStart:
    warn = warn or (lambda line: print(f"dumpgym: warning: {printable(line)}", file=sys.stderr))
    sources, records = [], []
    mine = [ProgramSource(r.slug, True, "", None, (lambda r=r: r)) for r in shown]
    taken = {r.slug for r in shown}
    rest = load_sources(corpus_dir, warn)
    for source in rest:
        if source.slug in taken:
            warn(f"not showing your added program {source.slug}: the dump's module of that slug is shown instead")
    for source in [*mine, *(s for s in rest if s.slug not in taken)]:
        try:
            records.append(source.record())
        except CorpusFolderError as e:  # a damaged added record: the rest are served
            warn(f"skipping {source.slug}: {e}")
            continue
        sources.append(source)
    corpus = Corpus(SCHEMA, builtin_corpus().jax_version, tuple(records))
    parts = kept_parts(sources)
    pending = tuple(s.slug for s, kept in zip(sources, parts) if kept is None)
    pool = pool_of([kept for kept in parts if kept is not None], warn)
    return GymStart(corpus, pool, pending, sources, parts, warn)
