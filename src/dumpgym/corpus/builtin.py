"""The built-in corpus ("dumpgym.corpus/2"): the committed file, read without JAX, and compared with a fresh build."""
from __future__ import annotations

import difflib
import json
from pathlib import Path

from dumpgym.atomic import write_atomic  # noqa: F401  (callers write through corpus.write_atomic)
from dumpgym.record.schema import upgrade_program

BUILTIN_PATH = Path(__file__).parents[1] / "data" / "corpus.json"


def dumps(corpus: dict) -> str:
    """The canonical text of a corpus: what is committed and what `--check` compares: `json.dumps(corpus,
    indent=1, ensure_ascii=False)` and a newline, byte for byte (`_indented`, which the standard library's
    encoder takes over for any value but JSON's own types)."""
    try:
        return _indented(corpus) + "\n"
    except TypeError:
        return json.dumps(corpus, indent=1, ensure_ascii=False, sort_keys=False) + "\n"


def _indented(value) -> str:
    """`json.dumps(value, indent=1, ensure_ascii=False)` for str, int, float, bool, None, lists and dicts with
    str keys (TypeError for anything else): the standard library writes an indented text in Python, a
    generator per container, and the corpus's twenty megabytes take it most of a second; this writes the
    same text, each string by the standard library's own C escaping, in a third of that."""
    from json.encoder import encode_basestring as quoted

    out: list[str] = []
    put = out.append

    def write(v, pad: str) -> None:
        t = type(v)
        if t is str:
            put(quoted(v))
        elif t is dict:
            if not v:
                put("{}")
                return
            inner, opening = pad + " ", "{\n"
            for key, item in v.items():
                put(opening + inner + quoted(key) + ": ")  # a key that is not a str: TypeError
                opening = ",\n"
                write(item, inner)
            put("\n" + pad + "}")
        elif t is list or t is tuple:
            if not v:
                put("[]")
                return
            inner, opening = pad + " ", "[\n"
            for item in v:
                put(opening + inner)
                opening = ",\n"
                write(item, inner)
            put("\n" + pad + "]")
        elif v is None:
            put("null")
        elif v is True:
            put("true")
        elif v is False:
            put("false")
        elif t is int:
            put(int.__repr__(v))
        elif t is float:
            put(json.dumps(v))  # NaN and the infinities as the standard library writes them
        else:
            raise TypeError(f"not JSON's own type: {t.__name__}")

    write(value, "")
    return "".join(out)


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
