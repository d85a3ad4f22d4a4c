"""`dumpgym add` and `dumpgym.add`: a user's function traced into a record (the pipeline's `program_record`)
and stored in the folder of added programs (`user.py`)."""
from __future__ import annotations

import contextlib
import dataclasses
import inspect
import re
import sys
from pathlib import Path
from typing import Callable, Iterator

from dumpgym.corpus.user import (_check_slug_free, _check_slug_syntax, _check_text, _check_title, _check_writable,
                                 _make_folder, _store, locked, sigterm_interrupts, user_corpus_dir)
from dumpgym.errors import ProgramError, Stopped
from dumpgym.record.schema import ProgramRecord


def _default_slug(function_name: str) -> str:
    slug = re.sub(r"[^a-z0-9-]+", "-", function_name.lower().replace("_", "-")).strip("-")[:64].strip("-")
    return slug or "program"


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


def add(entry: str, arg_specs: list[str] = (), slug: str | None = None, title: str | None = None,
        corpus_dir=None, progress: Callable[[str], None] | None = None, compiled: bool | str = False,
        args_from: str | None = None, wait: float | None = None, replace: bool = False) -> ProgramRecord:
    """`dumpgym add`: import `entry`, make its example arguments (`--arg` specs or `--args-from` MAKE), trace and store it.

    `compiled`: False, True or "cpu" (this host's XLA), "tpu" or "tpu:GEN:SHAPE" (a TPU, without one),
    "gpu" or "gpu:NAME" (an H100 or A100, without one). `replace`: an added program of the same slug is
    replaced (`add_function`).
    """
    from dumpgym.traced.program import load_entry, load_examples, parse_arg

    _compile_target(compiled)  # a bad target or a missing compiler fails before any import or trace
    if arg_specs and args_from:
        raise ProgramError("give the example arguments with --arg or with --args-from, not both")
    if args_from is None:
        specs = [parse_arg(spec) for spec in arg_specs]
        if not specs:
            raise ProgramError("give each argument of the function with --arg, e.g. --arg bf16[64,128], "
                               "or a function making them with --args-from FILE.py:MAKE")
    _check_slug_syntax(slug)
    _check_text(entry, "the entry", entry)
    _check_title(title)
    entry, name = _resolved(entry)
    files: dict = {}
    function = load_entry(entry, files)
    if args_from is None:
        _check_arity(function, entry, len(specs))
        args, kwargs = tuple(s.to_struct() for s in specs), {}
    else:
        args, kwargs = load_examples(_resolved(args_from)[0], files)
    return add_function(function, args, kwargs, entry=entry, name=name, slug=slug, title=title,
                        corpus_dir=corpus_dir, progress=progress, compiled=compiled, wait=wait, replace=replace)


def _compile_target(compiled):
    """The compile target `compiled` names (None for none); one line if it is unknown or its compiler is missing."""
    from dumpgym.record.targets import CPU, Target, parse_target

    if compiled is None or compiled is False:
        return None
    target = compiled if isinstance(compiled, Target) else CPU if compiled is True else parse_target(str(compiled))
    target.require()
    return target


def add_function(function: Callable, args: tuple, kwargs: dict, *, entry: str, name: str, slug: str | None = None,
                 title: str | None = None, corpus_dir=None, progress: Callable[[str], None] | None = None,
                 compiled: bool | str = False, wait: float | None = None, replace: bool = False) -> ProgramRecord:
    """Trace `function` on example values (pytrees, models, static leaves), build its record, and store it.

    The one path of every added program, from the command line and from Python (`dumpgym.add`).
    Nothing is written until it has traced; the write holds the folder's lock (waiting for it at most
    `wait` seconds, default `WAIT`). With `replace`, an added program of the same slug is replaced in one
    step once the new one has traced (a failure before leaves it as it was); a built-in slug is refused.
    """
    import jax

    from dumpgym.corpus.pipeline import function_record
    from dumpgym.record.typedjson import TextAhead

    _check_slug_syntax(slug)
    _check_title(title)
    _check_text(entry, "the entry", entry)
    _check_text(name, "the function's name", name)
    folder = user_corpus_dir(corpus_dir)
    slug = slug or _default_slug(name)
    with locked(folder, exclusive=False, wait=wait):
        _check_slug_free(slug, folder, replace)  # fail before the slow part; checked again under the write lock
    target = _compile_target(compiled)
    _check_writable(folder)
    ahead = TextAhead()  # the file's text of the equations and the x-ray, made while XLA compiles
    with _stoppable(name):
        record = function_record(function, args, kwargs, slug=slug, title=title or name, entry=entry, name=name,
                                 targets=[target] if target is not None else [], progress=progress, ahead=ahead)
    record = dataclasses.replace(record, jax_version=jax.__version__)
    _make_folder(folder)  # only now that the program has traced
    _store(folder, [record], wait, replace, ahead)
    return record


@contextlib.contextmanager
def _stoppable(name: str) -> Iterator[None]:
    """Ctrl-C or SIGTERM while the program traces, lowers, compiles or its record is built stops with one
    line and `errors.Stopped`, before anything is written (a long compile's wait says its own line)."""
    from dumpgym.terminal import printable

    try:
        with sigterm_interrupts():
            yield
    except Stopped:
        raise
    except KeyboardInterrupt:
        print(f"dumpgym: stopped while adding {printable(name)}; nothing was written", file=sys.stderr, flush=True)
        raise Stopped from None


def _resolved(entry: str) -> tuple[str, str]:
    """`entry` with a FILE.py made absolute (as the record keeps it), and the function's name."""
    target, _, name = entry.rpartition(":")
    if target.endswith(".py") and Path(target).is_file():
        entry = f"{Path(target).resolve()}:{name}"
    return entry, name


def entry_of(function: Callable) -> str:
    """Where a notebook's function can be imported from (`module:qualname`), else `<notebook>:name`."""
    import importlib

    module, qualname = getattr(function, "__module__", None), getattr(function, "__qualname__", None)
    if module and module != "__main__" and qualname:
        try:
            if getattr(importlib.import_module(module), qualname, None) is function:
                return f"{module}:{qualname}"
        except Exception:  # noqa: BLE001 (importing it again is only a check; any failure means "not importable")
            pass
    return f"<notebook>:{getattr(function, '__name__', type(function).__name__)}"
