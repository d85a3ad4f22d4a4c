"""Stage four: the corpus artifact ("dumpgym.corpus/2"), built from programs and read without JAX."""
from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Callable, Iterable

from dumpgym.atomic import write_atomic  # noqa: F401  (callers write through corpus.write_atomic)
from dumpgym.record import SCHEMA, Corpus, ProgramRecord, upgrade_program
from dumpgym.target import TARGETS, Target, builtin_targets, target_id

BUILTIN_PATH = Path(__file__).parent / "data" / "corpus.json"


def program_record(program, progress: Callable[[str], None] | None = None,
                   targets: Iterable[Target] = ()) -> ProgramRecord:
    """Trace one `Program` and gather everything the export says about it, compiled for each of
    `targets` (a TPU or a GPU without one, this host's CPU) that its platform lowers for."""
    from dumpgym.facts import build_facts
    from dumpgym.trace import mesh_of, trace
    from dumpgym.attribution import build_xray

    say = progress or (lambda _msg: None)
    say(f"{program.slug}: tracing and lowering")
    traced = trace(program.function, program.example_args())
    # A program that lowers for TPU alone (a Mosaic kernel) has no CPU or GPU compile.
    targets = [t for t in targets if program.platform == "cpu" or t.platform == program.platform]
    compiles = None
    if targets:
        from dumpgym.hlo import compile_layer, start_compiles  # jaxlib's HLO bindings, only when a layer is asked for

        compiles = start_compiles(traced, targets[0])  # XLA compiles the first on threads while facts are made
    say(f"{program.slug}: facts for every equation")
    facts = build_facts(traced)
    say(f"{program.slug}: x-ray ({len(facts.eqns)} equations)")
    xray = build_xray(traced, facts)
    layers = {}
    for n, target in enumerate(targets):
        say(f"{program.slug}: compiling with XLA{_words(target)}")  # the first began with the facts
        layers[target_id(target)] = compile_layer(traced, facts, target, compiles if n == 0 else None)
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
        args=tuple(program.args),
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
    )


def _words(target: Target) -> str:
    """How progress names a compile: nothing for this CPU, else the platform and topology."""
    if target.platform == "cpu":
        return ""
    return f" for {target.platform.upper()} ({target.topology or 'v5e, sized to the program'})"


def build_corpus(programs: Iterable, progress=None, compiled: bool = True, jobs: int = 1) -> Corpus:
    """The whole corpus for `programs`, stamped with the JAX version that traced it (`compiled`: with
    every built-in compiled layer of the registry, `target.builtin_targets`: today the default TPU,
    the default GPU and this host's CPU; the TPU needs libtpu and the GPU JAX's CUDA plugin).

    `jobs` > 1 builds built-in programs (found by slug) in that many worker processes: XLA compiles a
    program on one core, and compiling is most of a build.
    """
    import jax

    if compiled:  # before tracing anything: one line, not a failure halfway through
        for entry in builtin_targets():
            entry.target.require()
    programs = list(programs)
    if jobs > 1 and len(programs) > 1:
        from dumpgym.programs import builtin_program, is_builtin

        if any(not is_builtin(p.slug) or p is not builtin_program(p.slug) for p in programs):  # a worker finds its program by slug
            raise ValueError("build_corpus(jobs > 1) builds built-in programs only; use jobs=1 for others")
        records = _build_in_workers([p.slug for p in programs], progress is not None, compiled, jobs)
    else:
        records = [program_record(p, progress, _builtin_compiles(compiled)) for p in programs]
    return Corpus(SCHEMA, jax.__version__, tuple(records))


def _builtin_compiles(compiled: bool) -> list[Target]:
    return [entry.target for entry in builtin_targets()] if compiled else []


def _build_in_workers(slugs: list[str], verbose: bool, compiled: bool, jobs: int) -> list[ProgramRecord]:
    """`program_record` of each built-in program, in `jobs` fresh processes, in the order of `slugs`.

    Workers are spawned, not forked: JAX may already be running threads in this process.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(min(jobs, len(slugs)), mp_context=context) as pool:
        found = pool.map(_builtin_record_json, slugs, [verbose] * len(slugs), [compiled] * len(slugs))
        return [ProgramRecord.from_json(record, slug) for slug, record in zip(slugs, found)]


def _builtin_record_json(slug: str, verbose: bool, compiled: bool) -> dict:
    """In a worker: one built-in program's record, as JSON (what crosses back to the parent)."""
    import sys

    from dumpgym.programs import builtin_program

    progress = (lambda msg: print(msg, file=sys.stderr, flush=True)) if verbose else None
    return program_record(builtin_program(slug), progress, _builtin_compiles(compiled)).to_json()


def dumps(corpus: dict) -> str:
    """The canonical text of a corpus: what is committed and what `--check` compares."""
    return json.dumps(corpus, indent=1, ensure_ascii=False, sort_keys=False) + "\n"


def check(committed: dict, fresh: dict) -> tuple[list[str], list[str]]:
    """Differences between the committed corpus and a fresh trace: (problems, notes), each with a short diff.

    XLA's CPU code generation depends on the host, so a program's CPU layer (`compiled.cpu`) is
    compared only when the committed one was compiled on a host like this one (same `host_id`);
    elsewhere one note says so, and only the other layers are compared. A TPU layer depends on the
    topology and libtpu alone, and a GPU layer on the GPU's description and the CUDA plugin, so both
    are always compared. A committed corpus/1 file is read as corpus/2 first.
    """
    problems, notes = [], []
    if committed.get("jax_version") != fresh["jax_version"]:
        problems.append(f"jax_version: committed {committed.get('jax_version')}, installed {fresh['jax_version']}")
    if committed.get("schema") != fresh.get("schema"):
        problems.append(f"schema: committed {committed.get('schema')}, written now {fresh.get('schema')}")
    old = {p["slug"]: upgrade_program(p) for p in committed.get("programs", [])}
    new = {p["slug"]: p for p in fresh["programs"]}
    for slug in sorted(old.keys() - new.keys()):
        problems.append(f"{slug}: committed but no longer a program")
    other_hosts = set()
    for slug in new:
        if slug not in old:
            problems.append(f"{slug}: missing from the committed corpus")
            continue
        before, after = old[slug], new[slug]
        if before == after:
            continue
        cpu_before, cpu_after = _cpu_layer(before), _cpu_layer(after)
        if not _same_host(cpu_before, cpu_after):
            other_hosts.update(layer.get("host", "?") for layer in cpu_before.values())
            before, after = _without_cpu(before), _without_cpu(after)
            if before == after:
                continue
        problems.append(f"{slug}: committed artifact differs from tracing\n" + _short_diff(before, after))
    if other_hosts:
        here = next((layer["host"] for p in fresh["programs"] for layer in (_cpu_layer(p) or {}).values()), "?")
        notes.append(f"note: the committed compiled HLO was made on {', '.join(sorted(other_hosts))}, not on "
                     f"this host ({here}); XLA's CPU code depends on the host, so it was not compared")
    return problems, notes


def _cpu_layer(program: dict) -> dict | None:
    """A program's layers compiled by XLA for a CPU (the host's), as one dict, or None."""
    cpu = {k: v for k, v in program.get("compiled", {}).items() if v.get("backend") == "cpu"}
    return cpu or None


def _same_host(before: dict | None, after: dict | None) -> bool:
    """Whether two programs' CPU layers came from hosts whose XLA CPU code is comparable."""
    if before is None or after is None:
        return True  # one has a compiled layer and the other none: a real difference
    if before.keys() != after.keys():
        return True
    return all(before[k].get("host_id") == after[k].get("host_id") for k in before)


def _without_cpu(program: dict) -> dict:
    compiled = {k: v for k, v in program.get("compiled", {}).items() if v.get("backend") != "cpu"}
    return {**program, "compiled": compiled}


def _short_diff(before: dict, after: dict) -> str:
    diff = difflib.unified_diff(dumps(before).splitlines(), dumps(after).splitlines(),
                                "committed", "traced now", n=0, lineterm="")
    return "\n".join("    " + line for line in list(diff)[2:12])


def load_builtin() -> dict:
    """The committed built-in corpus (no JAX import)."""
    return json.loads(BUILTIN_PATH.read_text(encoding="utf-8"))


def select(corpus: dict, slugs: list[str]) -> dict:
    """The corpus narrowed to `slugs`, in the order given; raises KeyError naming unknown ones."""
    by_slug = {p["slug"]: p for p in corpus["programs"]}
    unknown = [s for s in slugs if s not in by_slug]
    if unknown:
        raise KeyError(unknown)
    return {**corpus, "programs": [by_slug[s] for s in slugs]} if slugs else corpus


def summary(corpus: dict) -> str:
    """Counts for the CLI: programs, equations, StableHLO op lines, x-ray groups and coverage."""
    programs = corpus["programs"]
    changes = sum("change" in p for p in programs)
    variants = sum("variant_of" in p for p in programs) - changes
    eqns = sum(len(p["eqns"]) for p in programs)
    ops = sum(p["xray_stats"]["stablehlo_op_lines"] for p in programs)
    mapped = sum(p["xray_stats"]["mapped_stablehlo_op_lines"] for p in programs)
    groups = sum(len(p["xray"]) for p in programs)
    also = [f"{variants} variants at other shapes"] * bool(variants) + [f"{changes} compiles with one change"] * bool(changes)
    traced = f"{len(programs) - variants - changes} programs" + (f" (and {', '.join(also)})" if also else "")
    return (
        f"{traced} · {eqns} equations · {ops} StableHLO op lines · "
        f"{groups} x-ray groups · {mapped} of {ops} op lines attributed"
    )
