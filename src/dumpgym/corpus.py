"""Stage four: the corpus artifact ("dumpgym.corpus/1"), built from programs and read without JAX."""
from __future__ import annotations

import difflib
import json
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterable

from dumpgym.record import SCHEMA, Corpus, ProgramRecord
from dumpgym.target import CPU, Target

BUILTIN_PATH = Path(__file__).parent / "data" / "corpus.json"


def program_record(program, progress: Callable[[str], None] | None = None, compiled: bool = False,
                   tpu: Target | None = None, gpu: Target | None = None) -> ProgramRecord:
    """Trace one `Program` and gather everything the export says about it (`compiled`: the CPU's HLO
    layer too; `tpu`, `gpu`: a TPU's or a GPU's, compiled without one)."""
    from dumpgym.facts import build_facts
    from dumpgym.trace import trace
    from dumpgym.attribution import build_xray

    say = progress or (lambda _msg: None)
    say(f"{program.slug}: tracing and lowering")
    traced = trace(program.function, program.example_args())
    say(f"{program.slug}: facts for every equation")
    facts = build_facts(traced)
    say(f"{program.slug}: x-ray ({len(facts.eqns)} equations)")
    xray = build_xray(traced, facts)

    def compiled_for(target: Target, words: str):
        from dumpgym.hlo import compile_layer  # jaxlib's HLO bindings, only when a layer is asked for

        say(f"{program.slug}: compiling with XLA{words}")
        return compile_layer(traced, facts, target)

    # A program that lowers for TPU alone (a Mosaic kernel) has no CPU or GPU compile.
    on_cpu = program.platform == "cpu"
    hlo = compiled_for(CPU, "") if compiled and on_cpu else None
    hlo_gpu = compiled_for(gpu, f" for GPU ({gpu.topology})") if gpu is not None and on_cpu else None
    hlo_tpu = compiled_for(tpu, f" for TPU ({tpu.topology or 'v5e, sized to the program'})") if tpu is not None else None
    return ProgramRecord(
        slug=program.slug,
        title=program.title,
        lesson=program.lesson,
        entry=program.entry,
        args=tuple(program.args),
        mesh=program.mesh,
        in_specs=[list(p) for p in program.in_specs] if program.in_specs else None,
        source=traced.source,
        jaxpr=traced.jaxpr,
        stablehlo=traced.stablehlo,
        eqns=facts.eqns,
        xray=xray.groups,
        stablehlo_ops=xray.ops,
        lowered_to_nothing=xray.lowered_to_nothing,
        xray_stats=xray.stats,
        hlo=hlo,
        hlo_tpu=hlo_tpu,
        hlo_gpu=hlo_gpu,
        platform=program.platform,
        lowered=xray.lowered,
    )


def build_corpus(programs: Iterable, progress=None, compiled: bool = True, jobs: int = 1) -> Corpus:
    """The whole corpus for `programs`, stamped with the JAX version that traced it (`compiled`: with
    the three compiled layers, this host's CPU, the default TPU and the default GPU; the TPU needs
    libtpu and the GPU JAX's CUDA plugin).

    `jobs` > 1 builds built-in programs (found by slug) in that many worker processes: XLA compiles a
    program on one core, and compiling is most of a build.
    """
    import jax

    from dumpgym.target import GPU, TPU, require_cuda_plugin, require_libtpu

    if compiled:  # before tracing anything: one line, not a failure halfway through
        require_libtpu()
        require_cuda_plugin()
    programs = list(programs)
    if jobs > 1 and len(programs) > 1:
        from dumpgym.programs import SLUGS, builtin_program

        if any(p.slug not in SLUGS or p is not builtin_program(p.slug) for p in programs):  # a worker finds its program by slug
            raise ValueError("build_corpus(jobs > 1) builds built-in programs only; use jobs=1 for others")
        records = _build_in_workers([p.slug for p in programs], progress is not None, compiled, jobs)
    else:
        tpu, gpu = (TPU, GPU) if compiled else (None, None)
        records = [program_record(p, progress, compiled, tpu, gpu) for p in programs]
    return Corpus(SCHEMA, jax.__version__, tuple(records))


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
    from dumpgym.target import GPU, TPU

    progress = (lambda msg: print(msg, file=sys.stderr, flush=True)) if verbose else None
    tpu, gpu = (TPU, GPU) if compiled else (None, None)
    return program_record(builtin_program(slug), progress, compiled, tpu, gpu).to_json()


def dumps(corpus: dict) -> str:
    """The canonical text of a corpus: what is committed and what `--check` compares."""
    return json.dumps(corpus, indent=1, ensure_ascii=False, sort_keys=False) + "\n"


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so that readers see the old file or the new one, never a half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check(committed: dict, fresh: dict) -> tuple[list[str], list[str]]:
    """Differences between the committed corpus and a fresh trace: (problems, notes), each with a short diff.

    XLA's CPU code generation depends on the host, so the CPU's compiled layer (`hlo`) is compared
    only when the committed one was compiled on a host like this one (same `host_id`); elsewhere one
    note says so, and only the other layers are compared. The TPU layer (`hlo_tpu`) depends on
    the topology and libtpu alone, and the GPU layer (`hlo_gpu`) on the GPU's description and the
    CUDA plugin, so both are always compared.
    """
    problems, notes = [], []
    if committed.get("jax_version") != fresh["jax_version"]:
        problems.append(f"jax_version: committed {committed.get('jax_version')}, installed {fresh['jax_version']}")
    old = {p["slug"]: p for p in committed.get("programs", [])}
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
        compare_hlo = _same_host(before.get("hlo"), after.get("hlo"))
        if not compare_hlo:
            other_hosts.add(before["hlo"].get("host", "?"))
            before, after = _without_hlo(before), _without_hlo(after)
            if before == after:
                continue
        problems.append(f"{slug}: committed artifact differs from tracing\n" + _short_diff(before, after))
    if other_hosts:
        here = next((p["hlo"]["host"] for p in fresh["programs"] if p.get("hlo")), "?")
        notes.append(f"note: the committed compiled HLO was made on {', '.join(sorted(other_hosts))}, not on "
                     f"this host ({here}); XLA's CPU code depends on the host, so it was not compared")
    return problems, notes


def _same_host(before: dict | None, after: dict | None) -> bool:
    """Whether two compiled layers came from hosts whose XLA CPU code is comparable."""
    if before is None or after is None:
        return True  # one has a compiled layer and the other none: a real difference
    return before.get("host_id") == after.get("host_id")


def _without_hlo(program: dict) -> dict:
    return {k: v for k, v in program.items() if k != "hlo"}


def _short_diff(before: dict, after: dict) -> str:
    diff = difflib.unified_diff(dumps(before).splitlines(), dumps(after).splitlines(),
                                "committed", "traced now", n=0, lineterm="")
    return "\n".join("    " + line for line in list(diff)[2:12])


def load_builtin() -> dict:
    """The committed built-in corpus (no JAX import)."""
    return json.loads(BUILTIN_PATH.read_text(encoding="utf-8"))


def load_corpus(corpus_dir=None, warn: Callable[[str], None] | None = None) -> dict:
    """The built-in corpus with the user's added programs after it (no JAX import).

    Without `warn` a damaged added program raises CorpusFolderError; with it, it is skipped and reported.
    """
    from dumpgym.usercorpus import load_user_programs

    corpus = load_builtin()
    corpus["programs"] = corpus["programs"] + [{**p, "added": True} for p in load_user_programs(corpus_dir, warn)]
    return corpus


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
    eqns = sum(len(p["eqns"]) for p in programs)
    ops = sum(p["xray_stats"]["stablehlo_op_lines"] for p in programs)
    mapped = sum(p["xray_stats"]["mapped_stablehlo_op_lines"] for p in programs)
    groups = sum(len(p["xray"]) for p in programs)
    return (
        f"{len(programs)} programs · {eqns} equations · {ops} StableHLO op lines · "
        f"{groups} x-ray groups · {mapped} of {ops} op lines attributed"
    )
