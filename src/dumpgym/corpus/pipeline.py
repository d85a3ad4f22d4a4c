"""The one pipeline that makes a program record: trace, facts and x-ray, then each compiled layer.

Building the built-in corpus, `dumpgym add` and the notebook's x-ray all call `program_record` (or
its stages, `traced_program` and `compiled_layers`), so that a record is made one way.
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Callable, Iterable

from dumpgym.record.schema import SCHEMA, Corpus, ProgramRecord
from dumpgym.record.targets import TARGETS, Target, builtin_targets, target_id
from dumpgym.record.typedjson import TextAhead


def program_record(program, progress: Callable[[str], None] | None = None,
                   targets: Iterable[Target] = (), ahead: TextAhead | None = None) -> ProgramRecord:
    """Trace one `Program` and gather everything the export says about it, compiled for each of
    `targets` (a TPU or a GPU without one, this host's CPU) that its platform lowers for. With `ahead`,
    the JSON text of the equations and the x-ray is made in it while XLA compiles, for the record's write."""
    from dumpgym.traced.facts import build_facts
    from dumpgym.traced.trace import mesh_of, trace
    from dumpgym.traced.xray import build_xray

    say = progress or (lambda _msg: None)
    say(f"{program.slug}: tracing and lowering")
    # A program that lowers for TPU alone (a Mosaic kernel) has no CPU or GPU compile.
    targets = [t for t in targets if program.platform == "cpu" or t.platform == program.platform]
    first = []  # XLA compiles the first on a thread from the lowering on, while the texts are printed and the facts made
    if targets:
        from dumpgym.compiled.layer import compile_layer, start_compiles  # jaxlib's HLO bindings, only when a layer is asked for

    def start(lowered):
        try:
            first.append(start_compiles(lowered, targets[0]))
        except Exception as e:  # noqa: BLE001 (raised below, once the trace is whole: a failure to start
            first.append(e)  # the compile is a later stage's, not the trace's, as `_raised_while_tracing` tells them)

    traced = trace(program.function, program.example_args(), start if targets else None)
    compiles = first[0] if first else None
    if isinstance(compiles, Exception):
        raise compiles
    say(f"{program.slug}: facts for every equation")
    facts = build_facts(traced)
    say(f"{program.slug}: x-ray ({len(facts.eqns)} equations)")
    xray = build_xray(traced, facts)
    if ahead is not None and compiles is not None:  # Python's work, while XLA compiles on its own thread
        ahead.make(facts.eqns, xray.groups, xray.ops)
    layers = {}
    for n, target in enumerate(targets):
        say(f"{program.slug}: compiling with XLA{_words(target)}")  # the first began with the facts
        # After the first, the x-ray is made: a CPU compile may take the trace's tagged lowering over.
        started = compiles if n == 0 else start_compiles(traced, target, take_tagged=True)
        layers[target_id(target)] = compile_layer(traced, facts, target, started, program.slug)
    # In the registry's order, whatever order the targets were given in.
    compiled = {t: layers[t] for t in TARGETS if t in layers}
    if program.mesh is not None:
        mesh, in_specs = program.mesh, [list(p) for p in program.in_specs] if program.in_specs else None
    else:  # an added program: the mesh its arguments are sharded over, or its shard_map's
        mesh, in_specs = mesh_of(traced)
    return ProgramRecord(
        slug=program.slug,
        title=program.title,
        lesson=program.lesson,
        entry=program.entry,
        # An added program's are the jaxpr's inputs, as its staging traced them.
        args=tuple(program.args) if program.args else in_avals(traced),
        mesh=mesh,
        in_specs=in_specs,
        source=traced.source,
        jaxpr=traced.jaxpr,
        stablehlo=traced.stablehlo,
        eqns=facts.eqns,
        xray=xray.groups,
        stablehlo_ops=xray.ops,
        lowered_to_nothing=xray.lowered_to_nothing,
        xray_stats=xray.stats,
        compiled=compiled,
        platform=program.platform,
        lowered=xray.lowered,
        variant_of=program.variant_of,
        change=program.change,
        call=program.call,
        arg_binders=facts.arguments,
    )


def in_avals(traced) -> tuple[str, ...]:
    """Each input of the traced jaxpr as the jaxpr prints its aval (`f32[64,128]`), in order."""
    from dumpgym.traced.facts import dtype_name
    from dumpgym.traced.program import ArgSpec

    return tuple(str(ArgSpec(tuple(a.shape), dtype_name(a.dtype))) for a in traced.closed_jaxpr.in_avals)


def _words(target: Target) -> str:
    """How progress names a compile: nothing for this CPU, else the platform and topology."""
    if target.platform == "cpu":
        return ""
    return f" for {target.platform.upper()} ({target.topology or 'v5e, sized to the program'})"


def build_corpus(programs: Iterable, progress=None, compiled: bool = True, jobs: int = 1) -> Corpus:
    """The whole corpus for `programs`, stamped with the JAX version that traced it (`compiled`: with
    every built-in compiled layer of the registry, `record/targets.py`: `builtin_targets`: today the default TPU,
    the default GPU and this host's CPU; the TPU needs libtpu and the GPU JAX's CUDA plugin).

    `jobs` > 1 builds built-in programs (found by slug) in that many worker processes: XLA compiles a
    program on one core, and compiling is most of a build.
    """
    import jax

    records = _records(programs, progress, compiled, jobs)
    if records and isinstance(records[0], dict):
        records = [ProgramRecord.from_json(record, record["slug"]) for record in records]
    return Corpus(SCHEMA, jax.__version__, tuple(records))


def build_corpus_json(programs: Iterable, progress=None, compiled: bool = True, jobs: int = 1) -> dict:
    """`build_corpus(...).to_json()`: the workers' records as they sent them, not read back into types only to be
    written out again (a second of a build's work)."""
    import jax

    records = _records(programs, progress, compiled, jobs)
    written = [r if isinstance(r, dict) else r.to_json() for r in records]
    return {**Corpus(SCHEMA, jax.__version__, ()).to_json(), "programs": written}


def _records(programs: Iterable, progress, compiled: bool, jobs: int) -> list:
    """Each program's record: a `ProgramRecord` made here, or its JSON as a worker process sent it (`jobs` > 1)."""
    if compiled:  # before tracing anything: one line, not a failure halfway through
        for entry in builtin_targets():
            entry.target.require()
    programs = list(programs)
    from dumpgym.gcpause import kept_alive

    with kept_alive():
        return _records_kept(programs, progress, compiled, jobs)


def _records_kept(programs: list, progress, compiled: bool, jobs: int) -> list:
    if jobs > 1 and len(programs) > 1:
        from dumpgym.programs import builtin_program, is_builtin

        if any(not is_builtin(p.slug) or p is not builtin_program(p.slug) for p in programs):  # a worker finds its program by slug
            raise ValueError("build_corpus(jobs > 1) builds built-in programs only; use jobs=1 for others")
        return _build_in_workers([p.slug for p in programs], progress is not None, compiled, jobs)
    return [_paused_record(p, progress, compiled) for p in programs]


def _paused_record(program, progress, compiled: bool, as_json: bool = False):
    """`program_record` of a built-in program (and its JSON, `as_json`), Python's cyclic garbage collector held off
    meanwhile, then one young collection (`gcpause.collector_paused`): what a program leaves in cycles is freed
    at its end, while the collector's walks during it would look again and again at every record built before."""
    from dumpgym.gcpause import collector_paused, keep_alive_now

    with collector_paused():
        record = program_record(program, progress, _builtin_compiles(compiled))
        record = record.to_json() if as_json else record
    keep_alive_now()  # it and what came before are kept to the end of the build: no full collection walks them again
    return record


def _builtin_compiles(compiled: bool) -> list[Target]:
    return [entry.target for entry in builtin_targets()] if compiled else []


def _build_in_workers(slugs: list[str], verbose: bool, compiled: bool, jobs: int) -> list[dict]:
    """`program_record` of each built-in program, as JSON, in the order of `slugs`: built by this process and
    `jobs` - 1 fresh ones, each taking the next program as soon as it is free.

    This process builds too, rather than wait: a worker's start (importing JAX, warming its caches and each
    compiler) is paid once less, and it has JAX loaded already. A worker is handed its next program when it
    sends a record (by the future's callback), not when this process is between two of its own: no worker
    waits while this process builds a long one, and none holds a program queued while this one has none.
    Workers are spawned, not forked: JAX may already be running threads in this process.
    """
    import multiprocessing
    import threading
    from concurrent.futures import ProcessPoolExecutor, wait

    from dumpgym.programs import builtin_program

    records: list = [None] * len(slugs)
    progress = _progress(verbose)
    queued = iter(range(len(slugs)))
    taking = threading.Lock()  # this process and the callbacks take programs from `queued`
    sent: list = []  # (a worker's record under way, its place)
    workers = min(jobs, len(slugs)) - 1
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:

        def hand_out(_done=None):
            """The next program to a worker: on start, and whenever a worker has sent a record."""
            with taking:
                n = next(queued, None)
                if n is None:
                    return
                future = pool.submit(_builtin_record_json, slugs[n], verbose, compiled)
                sent.append((future, n))
            future.add_done_callback(hand_out)

        for _ in range(workers):
            hand_out()
        while True:
            with taking:
                n = next(queued, None)
            if n is None:
                break
            records[n] = _paused_record(builtin_program(slugs[n]), progress, compiled, as_json=True)
        wait([future for future, _ in sent])  # none is sent once `queued` is empty
        for future, n in sent:
            records[n] = future.result()
    return records


def _progress(verbose: bool):
    """Progress lines on stderr, flushed (a worker's and this process's interleave), or None."""
    import sys

    return (lambda msg: print(msg, file=sys.stderr, flush=True)) if verbose else None


def _builtin_record_json(slug: str, verbose: bool, compiled: bool) -> dict:
    """In a worker: one built-in program's record, as JSON (what crosses back to the parent)."""
    from dumpgym.gcpause import keeping_to_exit
    from dumpgym.programs import builtin_program

    keeping_to_exit()  # a spawned worker lives for the build alone
    return _paused_record(builtin_program(slug), _progress(verbose), compiled, as_json=True)


def function_record(function: Callable, args: tuple, kwargs: dict, *, slug: str, title: str, entry: str, name: str,
                    targets: Iterable[Target] = (), progress: Callable[[str], None] | None = None,
                    ahead: TextAhead | None = None) -> ProgramRecord:
    """The record of a user's `function` on example values (pytrees, models, static leaves): `dumpgym add`'s and
    the notebook's. A failure while JAX traces it becomes one ProgramError saying whose fault it is. `ahead`:
    as `program_record`'s."""
    from dumpgym.errors import ProgramError
    from dumpgym.traced.program import partition, trace_failure

    targets = list(targets)

    def attempt(partitioned, targets, platform="cpu"):
        """The record, or the error JAX raised while tracing (a later stage's failure propagates: a dumpgym
        bug, not the user's, and it keeps its traceback)."""
        try:
            return _partitioned_record(partitioned, slug, title, entry, docstring_lesson(function, name), targets,
                                       progress, platform, ahead), None
        except ProgramError:
            raise
        except Exception as e:
            if not _raised_while_tracing(e):
                raise
            return None, e

    # A Python scalar the function reads as a value (`range(k)`, `if train:`) cannot be traced: it is then
    # static, as `jax.jit(f, static_argnums=...)` makes it, tried again once with every Python scalar static.
    for static_scalars in (False, True) if _python_scalars(function, args, kwargs) else (False,):
        partitioned = partition(function, args, kwargs, static_scalars=static_scalars)
        record, failure = attempt(partitioned, targets)
        if record is not None:
            return record
        if not _needs_concrete(failure):
            break
    # A program this CPU cannot lower (a Pallas kernel for GPU or TPU) when a GPU or TPU is asked for: traced
    # and lowered for that chip, as `Program.platform` has the built-in Mosaic kernel; if it fails there too,
    # the refusal quoted is that chip's, not the CPU's.
    chip = [t for t in targets if t.platform != "cpu"][:1]
    on_chip = _on_chip(partitioned.structs, chip[0]) if chip else None
    if on_chip is not None:
        partitioned = dataclasses.replace(partitioned, structs=on_chip)
        record, failure = attempt(partitioned, chip, chip[0].platform)
        if record is not None:
            return record
    # JAX alone says whose fault it is: the program's, with JAX's advice, or dumpgym's.
    raise trace_failure(failure, function, partitioned, args=args, kwargs=kwargs) from failure


def _partitioned_record(partitioned, slug, title, entry, lesson, targets, progress, platform="cpu",
                        ahead=None) -> ProgramRecord:
    from dumpgym.traced.program import Program

    # Its `args` are read from the jaxpr it traces (`in_avals`): only its staging knows its inputs.
    program = Program(slug=slug, title=title, lesson=lesson, function=partitioned.function,
                      args=(), entry=entry, structs=partitioned.structs, platform=platform)
    return program_record(program, progress, targets, ahead)


def _on_chip(structs: tuple, target: Target) -> tuple | None:
    """`structs` with every array placed on the first chip of `target`'s topology (a libtpu or CUDA plugin
    description, no chip attached); None where an argument is sharded over several devices, or a leaf is
    not an array (another library's staging traces its own arguments)."""
    import jax
    from jax.sharding import SingleDeviceSharding

    from dumpgym.traced.devices import topology_devices

    leaves = jax.tree.leaves(structs)
    if not leaves or not all(isinstance(a, jax.ShapeDtypeStruct) for a in leaves):
        return None
    if any(a.sharding is not None and len(a.sharding.device_set) > 1 for a in leaves):
        return None
    chip = SingleDeviceSharding(topology_devices(target.topology_for(1))[0])
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=chip, weak_type=a.weak_type),
                        structs)


def _python_scalars(function, args, kwargs) -> bool:
    """Whether `partition` traced Python scalars of the arguments (it does unless the function stages itself)."""
    import jax

    from dumpgym.traced.program import is_python_scalar
    from dumpgym.traced.trace import has_own_staging

    return not has_own_staging(function) and any(is_python_scalar(v) for v in jax.tree.leaves((args, kwargs)))


def _needs_concrete(error: BaseException) -> bool:
    """Whether tracing failed because the function needed a traced value concretely (a Python int or bool)."""
    import jax

    return isinstance(error, (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError,
                              jax.errors.TracerBoolConversionError, jax.errors.TracerArrayConversionError))


LESSON_MAX = 600  # characters of a docstring's first paragraph a card shows


def docstring_lesson(function: Callable, name: str) -> str:
    """What an added program's card says of it: the first paragraph of the function's own docstring (its lines
    joined, at most `LESSON_MAX` characters, cut at a word with "…"), else `Your program NAME.`. A callable
    whose `__doc__` is only its type's (a `functools.partial`, a model without one) has none of its own."""
    doc = getattr(function, "__doc__", None)
    if not isinstance(doc, str) or doc == getattr(type(function), "__doc__", None):
        doc = ""
    first = inspect.cleandoc(doc).split("\n\n", 1)[0]
    words = " ".join(first.split())
    if len(words) > LESSON_MAX:
        words = words[:LESSON_MAX - 1].rsplit(" ", 1)[0] + "…"
    return words or f"Your program {name}."


def _raised_while_tracing(error: BaseException) -> bool:
    """Whether `error` came out of tracing the user's function (`trace.trace`), not a later stage of ours."""
    from dumpgym.traced.trace import trace
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is trace.__code__:
            return True
        tb = tb.tb_next
    return False
