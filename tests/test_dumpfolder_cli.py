"""`dumpgym open DIR` and `dumpgym add --dump DIR` on dump folders made in the tests: the gym's programs, the
buffers checked against JAX's own memory analysis, viewing without JAX, and every bad input one line,
exit status 2, nothing written."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from dump_programs import load, make_dump, module_name
from dumpgym import cli, drills
from dumpgym.dumps.folder import read_folder

NAMES = ["basic", "sgd", "scan_rnn", "mlp"]


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    return make_dump(tmp_path_factory.mktemp("dump") / "cpu", NAMES)


def _module(folder, name):
    return next(m for m in read_folder(folder).modules if m.name == module_name(name))


def _one_error_line(capsys, *words):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dumpgym: error: "), err
    for word in words:
        assert word in err[0], err[0]
    return err[0]


def test_the_buffers_shown_are_what_jax_says_the_compiled_module_holds(dump):
    import jax

    for name in NAMES:
        program = load(name)
        function = program.function if hasattr(program.function, "lower") else jax.jit(program.function)
        stats = function.lower(*program.example_args()).compile().memory_analysis()
        report = _module(dump, name).memory()
        assert report.bytes_of("parameter") == stats.argument_size_in_bytes, name
        assert report.bytes_of("output") == stats.output_size_in_bytes, name
        assert report.bytes_of("temp") == stats.temp_size_in_bytes, name
        # The peak is XLA's live-range report's: the buffers it lists live then add up to it.
        assert report.peak_bytes == sum(size for _buffer, size in report.live_at_peak) > 0, name


def _opened(folders, monkeypatch):
    """What `dumpgym open FOLDERS` hands the server: its keyword arguments."""
    from dumpgym.serve import server as serve

    served = []
    monkeypatch.setattr(serve, "serve", lambda **kwargs: served.append(kwargs))
    assert cli.main(["open", *map(str, folders)]) == 0
    assert len(served) == 1
    return served[0]


def test_open_is_the_gym_with_the_dumps_modules_in_front_biggest_first(dump, tmp_path, monkeypatch):
    import jax

    from dumpgym.serve.server import Site

    served = _opened([dump], monkeypatch)
    records = list(served["shown"])
    if served["later"] is not None:
        records += served["later"]()[0]
    # Every program dumped is a program of the gym, the biggest optimised HLO (as the files are) first, where
    # the page lands.
    modules = {r.dump.module: r for r in records}
    assert set(modules) == {module_name(name) for name in NAMES}
    sizes = [_module(dump, name).files["hlo_after"].stat().st_size for name in NAMES]
    biggest = module_name(NAMES[sizes.index(max(sizes))])
    assert served["start"] == f"?xray={modules[biggest].slug}#xray" and served["shown"][0] is modules[biggest]
    site = Site.build(tmp_path / "corpus", shown=tuple(records))
    assert site.get("/")[0] == 200
    for name in NAMES:
        record = modules[module_name(name)]
        program = json.loads(site.get(f"/data/programs/{record.slug}.json")[2])
        assert program["added"] and program["compiled"]["cpu"]["text"]
        # The buffers the page shows are what JAX's own memory analysis says the compiled module holds.
        loaded = load(name)
        function = loaded.function if hasattr(loaded.function, "lower") else jax.jit(loaded.function)
        stats = function.lower(*loaded.example_args()).compile().memory_analysis()
        kinds = program["dump"]["buffers"]["bytes_by_kind"]
        assert (kinds["parameter"], kinds["output"], kinds["temp"]) == (
            stats.argument_size_in_bytes, stats.output_size_in_bytes, stats.temp_size_in_bytes), name
        # The HLO before optimisations is XLA's file, and the listings the x-ray fetches hold it.
        before = _module(dump, name).files["hlo_before"].read_text()
        assert program["dump"]["hlo_before"] == before
        listings = json.loads(site.get(f"/data/listings/{record.slug}.json")[2])
        assert len(listings["hlo_before"]) == len(before.split("\n"))  # a line after the last newline too
        # A link kept from the module's old page leads to its program in the x-ray.
        status, headers, _ = site.get(f"/dump/{record.slug.removeprefix('dump-')}.html")
        assert status == 302 and headers["Location"] == f"/?xray={record.slug}#xray"


def test_viewing_a_dump_imports_no_jax_and_needs_no_tpu_compiler(dump, tmp_path):
    (tmp_path / "block").mkdir()
    (tmp_path / "block" / "sitecustomize.py").write_text("import sys\nsys.modules['libtpu'] = None\n")
    script = (
        "import sys\n"
        "from dumpgym.dumps.folder import read_folder\n"
        "from dumpgym.dumps.record import shown_records\n"
        "from dumpgym.serve.server import Site\n"
        f"records, notes = shown_records(read_folder({str(dump)!r}))\n"
        f"site = Site.build({str(tmp_path / 'corpus')!r}, shown=tuple(records))\n"
        "pages = [p for r in records for p in site.files if p.endswith('/' + r.slug + '.json')]\n"
        "assert all(site.get('/' + p)[0] == 200 for p in pages), pages\n"
        "print(len(records), sorted(m for m in sys.modules if m == 'jax' or m.startswith('jax.')))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "block"), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    count, modules = run.stdout.split(" ", 1)
    assert int(count) == len(NAMES) and modules.strip() == "[]"


def test_add_dump_puts_the_modules_in_the_corpus_and_drills_come_from_them(dump, tmp_path, capsys):
    import jax

    from dumpgym.ir.parse import ir_context, parse_stablehlo
    from dumpgym.ir.stablehlo import read_lowered

    corpus = tmp_path / "corpus"
    assert cli.main(["add", "--dump", str(dump), "--corpus", str(corpus)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(NAMES) and all(line.startswith("added dump-jit-") for line in out)
    assert cli.main(["export", "--corpus", str(corpus)]) == 0
    exported = {p["slug"]: p for p in json.loads(capsys.readouterr().out)["programs"]}
    sgd = exported[f"dump-{_module(dump, 'sgd').slug}"]
    # The donation the record holds is the one JAX lowers for the same function.
    program = load("sgd")
    lowered = read_lowered(parse_stablehlo(program.function.lower(*program.example_args()).as_text(), "sgd",
                                           ir_context()))
    assert [a["aliasing_output"] if "aliasing_output" in a else None for a in sgd["lowered"]["main"]["args"]] == \
        [a.aliasing_output for a in lowered.main.args] == [0, None]
    assert sgd["compiled"]["cpu"]["text"] == _module(dump, "sgd").text("hlo_after")
    # Each dot MLIR read in the dumped StableHLO has the dims and operand shapes JAX traced for it.
    mlp, program = exported[f"dump-{_module(dump, 'mlp').slug}"], load("mlp")
    dumped = sorted((d["lhs_contracting"], d["rhs_contracting"], d["lhs_batch"], d["rhs_batch"], d["lhs"]["shape"],
                     d["rhs"]["shape"]) for d in (op.get("dot") for op in mlp["stablehlo_ops"]) if d)
    traced = sorted(([*lc], [*rc], [*lb], [*rb], [*e.invars[0].aval.shape], [*e.invars[1].aval.shape])
                    for e in jax.make_jaxpr(program.function)(*program.example_args()).eqns
                    if e.primitive.name == "dot_general" for (lc, rc), (lb, rb) in [e.params["dimension_numbers"]])
    assert dumped == traced and len(traced) == 2
    assert cli.main(["drills", "--corpus", str(corpus)]) == 0
    pool = drills.read_pool(json.loads(capsys.readouterr().out))
    drawn = {(i["drill"], i["program"]) for i in pool["items"] if i["program"].startswith("dump-")}
    assert ("buffers", sgd["slug"]) in drawn
    del jax


def test_add_dump_module_picks_one_and_an_unknown_name_is_one_line(dump, tmp_path, capsys):
    corpus = tmp_path / "corpus"
    slug = _module(dump, "basic").slug
    assert cli.main(["add", "--dump", str(dump), "--module", slug, "--corpus", str(corpus)]) == 0
    assert capsys.readouterr().out.startswith(f"added dump-{slug}:")
    assert json.loads((corpus / "index.json").read_text())["programs"] == [f"dump-{slug}"]
    before = sorted(p.name for p in corpus.iterdir())
    assert cli.main(["add", "--dump", str(dump), "--module", "no-such", "--corpus", str(corpus)]) == 2
    _one_error_line(capsys, "no module 'no-such'")
    assert cli.main(["add", "--dump", str(dump), "--module", slug, "--corpus", str(corpus)]) == 2
    _one_error_line(capsys, "already in the corpus")
    assert sorted(p.name for p in corpus.iterdir()) == before


def _copy_of(dump, tmp_path, name):
    """A folder holding only one program's dump files."""
    module = _module(dump, name)
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in [*module.files.values(), module.buffer_assignment, module.memory_report, module.live_range]:
        shutil.copy(path, copy / path.name)
    return copy, module


def _damaged(kind, dump, tmp_path):
    copy, module = _copy_of(dump, tmp_path, "basic")
    if kind == "truncated":
        path = copy / module.files["stablehlo"].name
        path.write_text(path.read_text()[: len(path.read_text()) // 2])
        return copy, "does not parse as StableHLO"
    if kind == "binary":
        (copy / module.files["hlo_after"].name).write_bytes(b"HloModule \x00\x01\x02")
        return copy, "is not text"
    if kind == "one-layer":
        for path in copy.iterdir():  # the jaxpr alone: as if the run had JAX_DUMP_IR_MODES=jaxpr and no XLA flag
            if not path.name.endswith(".jaxpr.txt"):
                path.unlink()
        return copy, "only one layer"
    if kind == "unknown-backend":
        for path in copy.iterdir():
            if "cpu_after_optimizations" in path.name:
                path.rename(copy / path.name.replace("cpu_after", "xpu_after"))
        return copy, "unknown backend 'xpu'"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["truncated", "binary", "one-layer", "unknown-backend"])
def test_a_damaged_module_is_one_line_and_changes_nothing(kind, dump, tmp_path, capsys, monkeypatch):
    from dumpgym.serve import server as serve

    served = []
    monkeypatch.setattr(serve, "serve", lambda **kwargs: served.append(kwargs))
    folder, words = _damaged(kind, dump, tmp_path)
    corpus = tmp_path / "corpus"
    assert cli.main(["add", "--dump", str(folder), "--corpus", str(corpus)]) == 2
    _one_error_line(capsys, words, "nothing was added")
    assert not corpus.exists()
    modules = read_folder(folder).modules
    bad = [m for m in modules if m.problem or m.unread]
    assert any(words in (m.problem or " ".join(m.unread.values())) for m in bad)
    status = cli.main(["open", str(folder)])
    err = capsys.readouterr().err.strip().splitlines()
    assert words in err[0], err
    if all(m.problem for m in modules):  # nothing else to show: one line, exit status 2, nothing served
        assert status == 2 and len(err) == 1 and err[0].startswith("dumpgym: error: ") and not served
    else:  # what the folder still holds is served (a truncated StableHLO leaves XLA's two layers, linked by
        # their source lines), one warning line per module that is not whole, and a note on its page
        assert status == 0 and len(served) == 1
        assert len(err) == len(bad) and all(line.startswith("dumpgym: warning: ") for line in err)
        shown = served[0]["shown"][0]
        assert any(words in n for n in shown.dump.notes), shown.dump.notes
        if kind == "truncated":  # XLA's layers, linked by their source lines
            assert not shown.stablehlo and shown.dump.source_lines and shown.dump.hlo_before and shown.compiled
        else:  # JAX's layers, linked, without a compiled layer: a note says why
            assert shown.xray and not shown.compiled


@pytest.mark.parametrize("make", ["empty", "missing", "other-files"])
def test_a_folder_that_is_not_a_dump_is_one_line(make, tmp_path, capsys, monkeypatch):
    from dumpgym.serve import server as serve

    monkeypatch.setattr(serve, "serve", lambda **kwargs: pytest.fail("served a folder that is not a dump"))
    folder = tmp_path / "folder"
    if make != "missing":
        folder.mkdir()
    if make == "other-files":
        (folder / "notes.txt").write_text("not a dump\n")
    for command in (["open", str(folder)], ["add", "--dump", str(folder), "--corpus", str(tmp_path / "c")]):
        assert cli.main(command) == 2
        _one_error_line(capsys, str(folder))
    assert not (tmp_path / "c").exists()


def test_add_dump_keeps_what_open_shows_and_build_writes_it_as_served(dump, tmp_path, monkeypatch, capsys):
    served = _opened([dump], monkeypatch)
    shown = {r.slug: r.to_json() for r in served["shown"]}
    corpus, out = tmp_path / "corpus", tmp_path / "site"
    assert cli.main(["add", "--dump", str(dump), "--corpus", str(corpus)]) == 0
    assert cli.main(["build", "--out", str(out), "--corpus", str(corpus)]) == 0
    capsys.readouterr()
    for slug, record in shown.items():
        added = json.loads((corpus / f"{slug}.json").read_text())
        # The same record, apart from `open`'s mark that it is shown as the user's.
        assert {**added, "added": True} == record, slug
        built = json.loads((out / "data" / "programs" / f"{slug}.json").read_text())
        assert built["dump"] == record["dump"]
        listings = json.loads((out / "data" / "listings" / f"{slug}.json").read_text())
        assert len(listings["hlo_before"]) == record["dump"]["hlo_before"].count("\n") + 1


@pytest.mark.parametrize("made", [False, True], ids=["no-folder", "empty-folder"])
def test_open_with_no_programs_added_serves_the_dumps_modules_and_writes_nothing(made, dump, tmp_path):
    import urllib.request

    from dumpgym.drills._stored import cache_dir

    corpus = tmp_path / "added"
    if made:
        corpus.mkdir()
    cache = tmp_path / "cache"
    cache.mkdir()
    if (cache_dir() / "drills").is_dir():  # the built-in programs' kept items: read, not made again
        (cache / "drills").symlink_to(cache_dir() / "drills", target_is_directory=True)
    env = {**os.environ, "DUMPGYM_CACHE_DIR": str(cache), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "dumpgym", "open", str(dump), "--port", "0", "--corpus", str(corpus)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        line = proc.stdout.readline()
        assert " at http://127.0.0.1:" in line, line + proc.stderr.read()
        url = line.split(" at ", 1)[1].split()[0]
        root, start = url.split("?xray=")
        slug = start.split("#")[0]

        def get(path):
            with urllib.request.urlopen(root + path, timeout=120) as r:
                return r.status, r.read()
        status, page = get("")
        assert status == 200 and slug.encode() in page
        program = json.loads(get(f"data/programs/{slug}.json")[1])
        # The page it lands on is a module of the dump, its compiled layer XLA's own optimised HLO file.
        module = next(m for m in read_folder(dump).modules if m.name == program["dump"]["module"])
        assert program["compiled"]["cpu"]["text"] == module.files["hlo_after"].read_text()
        for path in (f"data/listings/{slug}.json", f"data/compiled/cpu/{slug}.json", f"data/cost/cpu/{slug}.json"):
            assert get(path)[0] == 200, path
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    # Nothing is written to the folder of added programs.
    assert (sorted(corpus.iterdir()) == []) if made else not corpus.exists()
