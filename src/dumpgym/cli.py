"""The command line: each subcommand is a few lines that call the library.

Errors the user can fix become one line on stderr and exit status 2, here and only here.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from dumpgym.terminal import printable


class UsageError(Exception):
    """A mistake in what the user asked for; printed as one line, exit status 2."""


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is outside 0-65535")
    return port


def _jobs(text: str) -> int:
    try:
        jobs = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of jobs") from None
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {jobs}")
    return jobs


def _cores() -> int:
    """The cores this process may run on (what `--jobs` defaults to)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds, not {text}")
    return seconds


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not argparse's usage block
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _cmd_serve(args) -> int:
    from dumpgym.serve import server as serve

    serve.serve(host=args.host, port=args.port, open_browser=args.open, corpus_dir=args.corpus)
    return 0


def _read_dump(folders: list[str], only=()):
    from dumpgym.dumps.folder import read_folder
    from dumpgym.jax_internals import require_hlo_bindings

    # Before any file is read: a dump's texts are parsed by this jaxlib's bindings, whatever JAX wrote them.
    require_hlo_bindings("reading a dump", "; read it where a newer JAX is installed (a dump from JAX 0.6 on reads there)")
    return read_folder(*folders, only=only)


def _cmd_open(args) -> int:
    from urllib.parse import quote

    from dumpgym.serve import server as serve
    from dumpgym.dumps.record import shown_in_two, streamed_modules, too_big
    from dumpgym.serve.big import BigModule, BigModules

    folder = _read_dump(args.folders)
    problems = folder.problems()
    if len(problems) == len(folder.modules):
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UsageError(f"{problems[0]}{more}; no module of the dump can be shown")
    for line in folder.problems(helpers=False):  # the others are shown
        print(f"dumpgym: warning: {printable(line)}", file=sys.stderr)
    # A module too big to make a program of is shown streamed, by windows of its optimised HLO's lines.
    streamed = [BigModule(m.slug, m.name, m.files["hlo_after"], too_big(m)) for m in streamed_modules(folder)]
    big = BigModules(streamed, [sys.executable, "-m", "dumpgym.ir.hlo_index"]) if streamed else None
    if big is not None:  # its line index made by a process of its own while the programs and the gym are made
        big.start()
    # The first modules' programs are made now, the rest's while the gym is served (a big one takes seconds).
    records, notes, later = shown_in_two(folder)
    for line in notes:  # a module too big to show here, or one whose record cannot be made
        print(f"dumpgym: warning: {printable(line)}", file=sys.stderr)
    # The modules are programs of the gym, in front (their x-ray, cost and drills); the page opens on the first,
    # or on the streamed page of a module too big for that (the biggest of all).
    start = (f"big/{quote(streamed[0].slug)}.html" if streamed
             else f"?xray={quote(records[0].slug)}#xray" if records else "")
    serve.serve(host=args.host, port=args.port, open_browser=args.open, corpus_dir=args.corpus,
                start=start, shown=tuple(records), later=later, big=big)
    return 0


def _cmd_build(args) -> int:
    from dumpgym.site import build
    from dumpgym.site.inputs import gym_inputs

    data, pool = gym_inputs(args.corpus)  # a damaged added program is skipped with a warning
    removed = build.build_site(args.out, data, pool)
    if removed:
        print(printable(f"removed what {len(removed)} interrupted build(s) left beside it: "
                        + " ".join(p.name for p in removed)))
    programs = len(data.bases)  # variants at other shapes are not counted
    print(printable(f"wrote the gym to {args.out} ({programs} programs)"))
    return 0


def _cmd_corpus_build(args) -> int:
    from dumpgym.corpus import builtin as corpus
    from dumpgym.corpus.pipeline import build_corpus_json
    from dumpgym.programs import corpus_programs
    from dumpgym.record.schema import XrayStats
    progress = (lambda msg: print(msg, file=sys.stderr)) if args.verbose else None
    if args.no_hlo and (args.check or not args.out):
        raise UsageError("--no-hlo builds a partial corpus: use it only with --out FILE, not for the committed corpus")
    # Without the compiled layers a program's work is less than a worker process's start (importing JAX).
    jobs = args.jobs if args.jobs is not None else 1 if args.no_hlo else _cores()
    fresh = build_corpus_json(corpus_programs(), progress, compiled=not args.no_hlo, jobs=jobs)
    if args.check:
        committed = corpus.load_builtin() if corpus.BUILTIN_PATH.exists() else {}
        problems, notes = corpus.check(committed, fresh)
        for line in problems + notes:
            print(line)
        if problems:
            print(f"{len(problems)} difference(s); run 'dumpgym corpus build' to refresh the committed corpus")
            return 1
        print(f"committed corpus matches tracing: {corpus.summary(fresh)}")
        return 0
    out = args.out or corpus.BUILTIN_PATH
    corpus.write_atomic(out, corpus.dumps(fresh))
    width = max(len(p["slug"]) for p in fresh["programs"])
    for program in fresh["programs"]:
        print(f"  {program['slug']:<{width}}  {XrayStats.from_json(program['xray_stats']).line()}")
    print(f"wrote {out}: {corpus.summary(fresh)}")
    return 0


def _load(args) -> dict:
    from dumpgym.corpus import builtin as corpus
    from dumpgym.corpus import user as usercorpus

    data = usercorpus.load_corpus(args.corpus)
    try:
        return corpus.select(data, args.slugs)
    except KeyError as e:
        valid = " ".join(p["slug"] for p in data["programs"])
        raise UsageError(f"unknown program {' '.join(e.args[0])}; valid slugs: {valid}") from None


def _cmd_export(args) -> int:
    json.dump(_load(args), sys.stdout, indent=1, ensure_ascii=False)
    print()
    return 0


def _cmd_drills(args) -> int:
    from dumpgym import drills
    from dumpgym.site.inputs import load_sources

    warn = lambda line: print(f"dumpgym: warning: {line}", file=sys.stderr)  # noqa: E731
    sources = load_sources(args.corpus)  # as `export` reads them: a damaged added program is an error
    by_slug = {s.slug: s for s in sources}
    unknown = [slug for slug in args.slugs if slug not in by_slug]
    if unknown:
        raise UsageError(f"unknown program {' '.join(unknown)}; valid slugs: {' '.join(by_slug)}")
    # Each program's items as they were kept, printed packed, decoding only their tables (drills/_packed.py).
    parts = drills.kept_pool([by_slug[s] for s in args.slugs] or sources)
    together: list[dict] = []
    if args.slugs and not args.alone:  # a step the programs cannot even out alone is asked with others' items
        more, together = drills.asked_together(parts, lambda: drills.kept_pool(_others(sources, args.slugs), warn))
        parts = parts + more
        for step in together:
            print(f"dumpgym: note: {printable(step['why'])}", file=sys.stderr)
    sys.stdout.flush()
    if args.unpacked:  # every item whole, for jq and other readers without `read_pool`
        sys.stdout.buffer.write(json.dumps(drills.pool_of(parts, warn, together), ensure_ascii=False).encode("utf-8"))
    else:
        drills.write_pool(parts, sys.stdout.buffer, warn, together)
    sys.stdout.buffer.write(b"\n")
    sys.stdout.buffer.flush()
    return 0


def _others(sources: list, slugs: list[str]) -> list:
    """The sources of the programs outside `slugs` and their families (a built-in program and its traced
    variants at other shapes are one program's code: its habits, not another's answers)."""
    from dumpgym.drills._stored import builtin_bytes

    base = {p["slug"]: p["variant_of"] for p in json.loads(builtin_bytes())["programs"] if p.get("variant_of")}
    family = {base.get(slug, slug) for slug in slugs}
    return [s for s in sources if base.get(s.slug, s.slug) not in family]


def _cmd_cost(args) -> int:
    from dumpgym.cost import estimate as cost
    from dumpgym.cost import table as cost_table
    from dumpgym.record.schema import ProgramRecord

    (program,) = _load(argparse.Namespace(corpus=args.corpus, slugs=[args.slug]))["programs"]
    record = ProgramRecord.from_json(program)
    if args.target not in record.compiled:
        have = " ".join(record.compiled) or "none"
        raise UsageError(f"{args.slug} has no {args.target} layer (its layers: {have})")
    layer = record.compiled[args.target]
    if args.compile:
        layer = _fresh_layer(record, args.target)
    print(cost_table.table(cost.layer_cost(layer, args.target), layer, sort=args.sort, fused=args.fused))
    return 0


def _cmd_diff(args) -> int:
    from dumpgym.cost import compare
    from dumpgym.corpus import user as usercorpus
    from dumpgym.record.schema import ProgramRecord

    data = usercorpus.load_corpus(args.corpus)
    records = [ProgramRecord.from_json(p) for p in data["programs"]]
    base, changed = compare.pair_of(records, args.slug)
    diffs = compare.compare(base, changed, None if args.target is None else (args.target,))
    print("\n\n".join(compare.text(d) for d in diffs.values()))
    return 0


def _fresh_layer(record, target_id: str):
    """A built-in program's layer compiled here again, from its traced function."""
    from dumpgym.traced.facts import build_facts
    from dumpgym.compiled.layer import compile_layer
    from dumpgym.programs import corpus_programs
    from dumpgym.record.targets import TARGETS
    from dumpgym.traced.trace import trace
    program = next((p for p in corpus_programs() if p.slug == record.slug and not record.added), None)
    if program is None:
        raise UsageError(f"--compile compiles built-in programs only; {record.slug} was added")
    traced = trace(program.function, program.example_args())
    return compile_layer(traced, build_facts(traced), TARGETS[target_id].target, what=record.slug)


def _cmd_add(args) -> int:
    from dumpgym.corpus.add import add

    if args.dump:
        return _add_dump(args)
    if args.entry is None:
        raise UsageError("name the function to add (FILE.py:FUNC), or a dump folder with --dump DIR")
    if args.module:
        raise UsageError("--module picks modules of a dump: use it with --dump DIR")

    # Progress only for a person watching: a script reading stderr gets just the result or one error line.
    say = (lambda msg: print(printable(msg), file=sys.stderr)) if sys.stderr.isatty() else None  # noqa: E731
    from dumpgym.corpus import user as usercorpus

    from dumpgym.gcpause import collector_off

    before = usercorpus.read_index(usercorpus.user_corpus_dir(args.corpus)) if args.replace else []
    with collector_off():  # one record made, then the process ends: the collector's walks would free almost nothing
        record = add(args.entry, args.arg, slug=args.slug, title=args.title, corpus_dir=args.corpus,
                     progress=say, compiled=args.hlo, args_from=args.args_from, wait=args.wait, replace=args.replace)
    print(f"{'replaced' if record.slug in before else 'added'} {record.slug}: {len(record.eqns)} equations · "
          f"{record.xray_stats.line()}")
    return 0


def _add_dump(args) -> int:
    from dumpgym.dumps import record as dump_corpus

    if args.entry is not None or args.arg or args.args_from or args.hlo or args.slug or args.title:
        raise UsageError("--dump adds the modules of dump folders (JAX's and XLA's in two: --dump A B): it takes "
                         "--module, --replace, --corpus and --wait only")
    from dumpgym.corpus import user as usercorpus

    folder = _read_dump(args.dump, only=args.module)
    before = usercorpus.read_index(usercorpus.user_corpus_dir(args.corpus)) if args.replace else []
    from dumpgym.site.ahead import keep_pages

    added = dump_corpus.add_dump(folder, args.module, corpus_dir=args.corpus, wait=args.wait, replace=args.replace,
                                 stored=keep_pages)
    for record in added:
        layer = next(iter(record.compiled.values()))
        print(printable(f"{'replaced' if record.slug in before else 'added'} {record.slug}: {layer.device_kind} · {layer.stats.instructions} HLO instructions · "
                        f"{record.xray_stats.stablehlo_op_lines} StableHLO op lines"))
    helpers = [m.slug for m in folder.modules if m.helper] if not args.module else []
    if helpers:
        print(printable(f"left out {len(helpers)} helper modules JAX compiled itself ({' '.join(helpers[:4])}"
                        f"{' ...' if len(helpers) > 4 else ''}); add one with --module SLUG"))
    return 0


def _cmd_list(args) -> int:
    from dumpgym.corpus import user as usercorpus

    rows = usercorpus.listing(args.corpus)
    for row in rows:
        print(f"{row['slug']}\t{row['equations']} equations\t{printable(row['entry'])}")
    if not rows:
        print("no added programs (add one with 'dumpgym add FILE.py:FUNC --arg SPEC ...' or '--args-from FILE.py:MAKE')")
    return 0


def _cmd_remove(args) -> int:
    from dumpgym.corpus import user as usercorpus

    usercorpus.remove(args.slug, args.corpus, wait=args.wait)
    print(f"removed {args.slug}")
    return 0


def _wait_option(parser) -> None:
    parser.add_argument("--wait", type=_seconds, default=None, metavar="SECONDS",
                        help="how long to wait for the corpus folder's lock while another dumpgym holds it "
                             "(default 30; said after a second; then one line and exit 2)")


def _serve_options(parser, what: str) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=8000, help="port (default 8000)")
    parser.add_argument("--open", action="store_true", help=f"open {what} in a web browser")
    parser.add_argument("--corpus", metavar="DIR", help="folder of added programs (default: the user data dir)")


def make_parser() -> argparse.ArgumentParser:
    """The argument parser, with every subcommand and its help."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show a traceback on errors")
    parser = _Parser(prog="dumpgym", description="Drills for reading JAX compiler dumps on sight.")
    parser.add_argument("--debug", action="store_true", help="show a traceback on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _add_parser = sub.add_parser
    sub.add_parser = lambda *a, **k: _add_parser(*a, parents=[common], **k)  # --debug after any command too

    p = sub.add_parser("serve", help="serve the gym on localhost (the default command)")
    _serve_options(p, "the gym")
    p.set_defaults(run=_cmd_serve)

    p = sub.add_parser("build", help="write the gym as static files")
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write the site into")
    p.add_argument("--corpus", metavar="DIR", help="folder of added programs (default: the user data dir)")
    p.set_defaults(run=_cmd_build)

    p = sub.add_parser("corpus", help="build or check the committed built-in corpus")
    corpus_sub = p.add_subparsers(dest="corpus_command", metavar="ACTION", required=True, parser_class=_Parser)
    b = corpus_sub.add_parser("build", parents=[common],
                              help="re-trace the built-in programs and their variants, and write the corpus")
    b.add_argument("--check", action="store_true", help="compare with the committed corpus instead; exit 1 on a difference")
    b.add_argument("--verbose", action="store_true", help="report progress on stderr")
    b.add_argument("--out", metavar="FILE", help="write here instead of the package's committed corpus")
    b.add_argument("--no-hlo", action="store_true", help="skip the compiled HLO layer (with --out only; for timing)")
    b.add_argument("--jobs", type=_jobs, default=None, metavar="N",
                   help=f"programs built at once, each in its own process (default: this machine's cores, {_cores()}; "
                        "with --no-hlo, 1: in this process)")
    b.set_defaults(run=_cmd_corpus_build)

    p = sub.add_parser("open", help="serve the gym with the x-ray of a dump folder (JAX_DUMP_IR_TO, --xla_dump_to)")
    p.add_argument("folders", nargs="+", metavar="DIR", help="a folder JAX and XLA dumped into (several: read as one)")
    _serve_options(p, "the x-ray of the dump's biggest module")
    p.set_defaults(run=_cmd_open)

    p = sub.add_parser("add", help="trace your own function (or read a dump folder) and add it to your corpus")
    p.add_argument("entry", nargs="?", metavar="FILE.py:FUNC|MODULE:FUNC", help="the function to trace")
    p.add_argument("--dump", action="extend", nargs="+", default=[], metavar="DIR",
                   help="add the modules of this dump folder instead (JAX_DUMP_IR_TO and --xla_dump_to; several, "
                        "or a parent of the two, read as one: --dump A B), without JAX's own helper modules")
    p.add_argument("--module", action="append", default=[], metavar="NAME",
                   help="with --dump: only this module (its slug on the dump's page, e.g. jit-f-2, or its name as "
                        "the files spell it, e.g. jit_f; repeatable)")
    p.add_argument("--arg", action="append", default=[], metavar="SPEC",
                   help="one example argument in aval notation, e.g. bf16[64,128] or f32[] (repeat per argument)")
    p.add_argument("--args-from", metavar="FILE.py:MAKE|MODULE:MAKE",
                   help="a function returning the example arguments (a tuple, or {\"args\": ..., \"kwargs\": ...}): "
                        "arrays, ShapeDtypeStructs, pytrees and models; Python scalars traced as jax.jit traces them, "
                        "other leaves static")
    p.add_argument("--slug", help="its name in the gym (default: from the function name)")
    p.add_argument("--title", help="its title in the gym, at most 200 characters (default: the function name)")
    p.add_argument("--hlo", nargs="?", const="cpu", default=None, metavar="TARGET",
                   help="also compile it with XLA and add the compiled HLO layer: cpu (the default, this host), "
                        "tpu (a v5e slice, compiled without a TPU; needs dumpgym[tpu]), tpu:GEN:SHAPE (tpu:v6e:2x2), "
                        "gpu or gpu:a100 (an H100 or A100, compiled without a GPU, GEMMs not autotuned; needs dumpgym[gpu])")
    p.add_argument("--replace", action="store_true",
                   help="replace the program you added under the same slug (swapped in one step once the new one "
                        "has traced: a failure leaves the old one whole; with --dump, the modules of a dump added "
                        "before); without it a taken slug is refused")
    p.add_argument("--corpus", metavar="DIR", help="folder of added programs (default: the user data dir)")
    _wait_option(p)
    p.set_defaults(run=_cmd_add)

    p = sub.add_parser("list", help="list the programs you added")
    p.add_argument("--corpus", metavar="DIR", help="folder of added programs (default: the user data dir)")
    p.set_defaults(run=_cmd_list)

    p = sub.add_parser("remove", help="remove a program you added")
    p.add_argument("slug", metavar="SLUG")
    p.add_argument("--corpus", metavar="DIR", help="folder of added programs (default: the user data dir)")
    _wait_option(p)
    p.set_defaults(run=_cmd_remove)

    p = sub.add_parser("cost", help="print what each compiled instruction costs, and the program's sums beside XLA's")
    p.add_argument("slug", metavar="SLUG", help="a program of the corpus")
    p.add_argument("--target", default="cpu", metavar="ID",
                   help="which compiled layer: cpu (the default), tpu (v5e) or gpu (H100); the chip's peaks time it")
    p.add_argument("--sort", choices=("line", "time", "flops", "bytes", "sends"), default="line",
                   help="order of the rows (default: as printed; time: by estimated time, largest first; sends: "
                        "by bytes a collective sends)")
    p.add_argument("--fused", action="store_true", help="also list the instructions inside fusions and regions")
    p.add_argument("--compile", action="store_true",
                   help="compile the program here again instead of reading its recorded layer (needs JAX; for a "
                        "record made before the cost facts were kept)")
    p.add_argument("--corpus", metavar="DIR", help="folder of added programs (default: the user data dir)")
    p.set_defaults(run=_cmd_cost)

    p = sub.add_parser("diff", help="set a program's compile beside its compile with one change (mlp and mlp-f32)")
    p.add_argument("slug", metavar="SLUG", help="the changed program (mlp-f32), or the program it changes")
    p.add_argument("--target", metavar="ID", help="one compiled layer: cpu, tpu (v5e) or gpu (H100); default every one")
    p.add_argument("--corpus", metavar="DIR", help="folder of added programs (default: the user data dir)")
    p.set_defaults(run=_cmd_diff)

    for name, run, text in (
        ("export", _cmd_export, "print the corpus as JSON (schema dumpgym.corpus/2)"),
        ("drills", _cmd_drills, "print the drill item pool as packed JSON (schema dumpgym.drills/2)"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("slugs", nargs="*", metavar="SLUG",
                       help="only these programs (default: all)" if name == "export" else
                       "these programs' items (default: all), with any partners --alone leaves out")
        p.add_argument("--corpus", metavar="DIR", help="folder of added programs (default: the user data dir)")
        if name == "drills":
            p.add_argument("--unpacked", action="store_true",
                           help="print every item whole, as drills.read_pool gives it back (about four times the bytes)")
            p.add_argument("--alone", action="store_true",
                           help="with SLUGs, print their own items only; without it, a step whose answers these "
                                "programs cannot even out alone is printed with a few items of other programs "
                                "(the pool's `together` list says which, and why)")
        p.set_defaults(run=run)
    return parser


def _end_if_compiling(status: int = 130) -> None:
    """End the process at once (with `status`) while XLA still compiles, or analyses a compile, on its
    thread: Ctrl-C stopped the wait for it, or an error ended the add meanwhile. XLA cannot be stopped
    halfway, nor should the exit wait for it, and a thread in XLA's code when the interpreter shuts down
    aborts the process."""
    layer = sys.modules.get("dumpgym.compiled.layer")  # not imported: nothing was ever compiled
    if layer is not None and layer.xla_running():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv
    parser = make_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            args = parser.parse_args([*argv, "serve"])
        return args.run(args)
    except BrokenPipeError:  # e.g. `dumpgym export | head`: the reader left, nothing to report
        sys.stderr.close()
        return 0
    except UsageError as e:
        if debug:
            raise
        print(f"dumpgym: error: {printable(e)}", file=sys.stderr)
        return 2
    except Exception as e:
        from dumpgym.errors import GymError

        if debug or not isinstance(e, (GymError, OSError)):
            raise
        print(f"dumpgym: error: {printable(e)}", file=sys.stderr)
        _end_if_compiling(2)
        return 2
    except KeyboardInterrupt:
        _end_if_compiling()
        return 130
