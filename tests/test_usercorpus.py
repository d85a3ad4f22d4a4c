"""`dumpgym add`, `list` and `remove`: programs unlike the corpus, every kind of bad input, a folder that loses nothing."""
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jax
import pytest

from dumpgym import cli, drills

from dumpgym.site import build

from dumpgym.corpus import user as usercorpus
from dumpgym.traced.facts import build_facts
from dumpgym.traced.program import load_entry, parse_arg
from dumpgym.serve.server import Site
from dumpgym.site.files import render_site

from test_facts import _printed_eqns
from xray_oracle import judge

HERE = Path(__file__).parent
PROGRAMS = HERE / "user_programs.py"

UNLIKE_THE_CORPUS = [
    ("scan_rnn", ["f32[6,4]", "f32[4,4]"], "scan"),
    ("while_halving", ["f32[5]"], "while"),
    ("cond_branch", ["f32[]", "f32[3]"], "cond"),
    ("custom_vjp_grad", ["f32[4]"], "custom_vjp_call"),
    ("vmapped_dot", ["f32[3,4]", "f32[3,4]"], "dot_general"),
    ("conv2d", ["f32[1,8,8,3]", "f32[3,3,3,5]"], "conv_general_dilated"),
    ("gather_rows", ["f32[10,4]", "i32[3]"], "gather"),
    ("sort_and_topk", ["f32[2,8]"], "top_k"),
]

# Primitives that older JAX (scripts/test-compat) names differently.
OLDER_NAMES = {"custom_vjp_call": "custom_vjp_call_jaxpr"}


def snapshot(folder: Path) -> dict:
    """Every file under `folder` by relative path, with a hash of its bytes."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def corpus_dir(tmp_path):
    return tmp_path / "corpus"


def add(corpus_dir, name, specs, *extra):
    args = ["add", f"{PROGRAMS}:{name}", *[f"--arg={s}" for s in specs], "--corpus", str(corpus_dir), *extra]
    return cli.main(args)


def _no_addresses(text: str) -> str:
    """`text` without object addresses: JAX 0.6 prints custom_vjp_call's thunks as `<function … at 0x…>`."""
    return re.sub(r" at 0x[0-9a-f]+>", " at 0x…>", text)


def _example_args(specs):
    return [parse_arg(s).to_struct() for s in specs]


@pytest.mark.parametrize("name, specs, primitive", UNLIKE_THE_CORPUS)
def test_programs_unlike_the_corpus_are_added_and_exact(name, specs, primitive, corpus_dir, capsys):
    assert add(corpus_dir, name, specs) == 0
    assert capsys.readouterr().out.startswith(f"added {name.replace('_', '-')}:")
    assert cli.main(["export", name.replace("_", "-"), "--corpus", str(corpus_dir)]) == 0
    record = json.loads(capsys.readouterr().out)["programs"][0]
    function = load_entry(record["entry"])
    args = _example_args(specs)
    assert record["entry"] == f"{PROGRAMS.resolve()}:{name}"
    assert _no_addresses(record["jaxpr"]) == _no_addresses(str(jax.make_jaxpr(function)(*args)))
    assert record["stablehlo"] == jax.jit(function).lower(*args).as_text()
    assert {primitive, OLDER_NAMES.get(primitive)} & {e["primitive"] for e in record["eqns"]}
    facts = build_facts(jax.make_jaxpr(function)(*args))
    assert [e.primitive for e in facts.eqns] == [e["primitive"] for e in record["eqns"]]
    assert judge(record, jax.jit(function).lower(*args).compiler_ir("stablehlo"), facts.jax_eqns) == []
    stats = record["xray_stats"]
    assert stats["mapped_stablehlo_op_lines"] >= 0.99 * stats["stablehlo_op_lines"]


def test_hlo_on_a_jaxlib_without_hlo_bindings_is_one_line(corpus_dir, capfd):
    from dumpgym.jax_internals import JaxVersionError, require_hlo_bindings

    try:
        require_hlo_bindings()
    except JaxVersionError:
        pass
    else:
        pytest.skip("this jaxlib binds compiled HLO (the oldest JAX of scripts/test-compat does not)")
    assert add(corpus_dir, "while_halving", ["f32[5]"], "--hlo") == 2
    err = capfd.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "compiled HLO layer needs jaxlib 0.10.2" in err
    assert snapshot(corpus_dir) == {}


def test_list_and_remove(corpus_dir, capsys):
    assert add(corpus_dir, "stack_of_identical_layers", ["f32[4,8]", "f32[8,8]"], "--slug", "relu-stack") == 0
    capsys.readouterr()
    assert cli.main(["list", "--corpus", str(corpus_dir)]) == 0
    function = load_entry(f"{PROGRAMS}:stack_of_identical_layers")
    count = len(_printed_eqns(jax.make_jaxpr(function)(*_example_args(["f32[4,8]", "f32[8,8]"])).jaxpr))
    assert capsys.readouterr().out.startswith(f"relu-stack\t{count} equations\t")
    assert cli.main(["drills", "relu-stack", "--corpus", str(corpus_dir), "--alone"]) == 0
    assert {i["program"] for i in drills.read_pool(json.loads(capsys.readouterr().out))["items"]} == {"relu-stack"}
    assert cli.main(["remove", "relu-stack", "--corpus", str(corpus_dir)]) == 0
    capsys.readouterr()
    assert cli.main(["list", "--corpus", str(corpus_dir)]) == 0
    assert "no added programs" in capsys.readouterr().out


BAD_INPUTS = [
    ("missing file", ["add", "/nonexistent/prog.py:f", "--arg", "f32[3]"], "no such file"),
    ("missing module", ["add", "no_such_module_xyz:f", "--arg", "f32[3]"], "no module named"),
    ("syntax error", ["add", "{syntax}:f", "--arg", "f32[3]"], "syntax error"),
    ("missing function", ["add", f"{PROGRAMS}:nope", "--arg", "f32[3]"], "has no function 'nope'"),
    ("raises while tracing", ["add", f"{PROGRAMS}:raises_while_tracing", "--arg", "f32[3,4]"], "raised TypeError while tracing"),
    ("malformed spec", ["add", f"{PROGRAMS}:while_halving", "--arg", "f32[3"], "not an array spec"),
    ("non-array spec", ["add", f"{PROGRAMS}:while_halving", "--arg", "3.0"], "not an array spec"),
    ("unknown dtype", ["add", f"{PROGRAMS}:while_halving", "--arg", "f33[3]"], "unknown dtype 'f33'"),
    ("too few arguments", ["add", f"{PROGRAMS}:scan_rnn", "--arg", "f32[6,4]"], "takes 2 argument(s) but 1"),
    ("too many arguments", ["add", f"{PROGRAMS}:while_halving", "--arg", "f32[3]", "--arg", "f32[3]"], "takes 1 argument(s) but 2"),
    ("no arguments", ["add", f"{PROGRAMS}:while_halving"], "give each argument"),
    ("slug clashes with a built-in", ["add", f"{PROGRAMS}:while_halving", "--arg", "f32[3]", "--slug", "mlp"], "already in the corpus"),
    ("slug clashes with an added one", ["add", f"{PROGRAMS}:while_halving", "--arg", "f32[3]", "--slug", "kept"], "already in the corpus"),
    ("bad slug", ["add", f"{PROGRAMS}:while_halving", "--arg", "f32[3]", "--slug", "Bad Slug"], "must use only"),
    ("remove unknown", ["remove", "nope"], "no added program 'nope'"),
    ("title too long", ["add", f"{PROGRAMS}:while_halving", "--arg", "f32[3]", "--title", "x" * (usercorpus.TITLE_MAX + 1)],
     f"a title may have at most {usercorpus.TITLE_MAX}"),
]


@pytest.fixture(scope="module")
def kept_folder(tmp_path_factory):
    """A corpus folder holding one added program, 'kept', traced once and copied for every bad input."""
    folder = tmp_path_factory.mktemp("kept") / "corpus"
    assert add(folder, "cond_branch", ["f32[]", "f32[3]"], "--slug", "kept") == 0
    return folder


@pytest.mark.parametrize("label, argv, message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_one_line_status_2_and_changes_nothing(label, argv, message, tmp_path, corpus_dir, kept_folder,
                                                            capfd):
    shutil.copytree(kept_folder, corpus_dir)
    broken = tmp_path / "broken.py"
    broken.write_text("def f(x)\n    return x\n")
    argv = [a.replace("{syntax}", str(broken)) for a in argv]
    before = snapshot(corpus_dir)
    capfd.readouterr()
    assert cli.main([*argv, "--corpus", str(corpus_dir)]) == 2
    out, err = capfd.readouterr()
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("dumpgym: error: ") and message in err and "Traceback" not in err
    assert snapshot(corpus_dir) == before


def test_unwritable_corpus_dir(tmp_path, capfd):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    corpus_dir = blocker / "corpus"
    assert cli.main(["add", f"{PROGRAMS}:while_halving", "--arg", "f32[3]", "--corpus", str(corpus_dir)]) == 2
    err = capfd.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "cannot write to the corpus folder" in err
    assert blocker.read_text() == "not a folder"


def test_debug_shows_the_traceback(corpus_dir, capfd):
    from dumpgym.traced.program import ProgramError

    with pytest.raises(ProgramError, match="has no function 'nope'"):
        cli.main(["--debug", "add", f"{PROGRAMS}:nope", "--arg", "f32[3]", "--corpus", str(corpus_dir)])


def test_a_title_that_is_not_utf8_is_one_line_before_tracing(tmp_path, corpus_dir):
    traced = tmp_path / "traced"
    program = tmp_path / "prog.py"
    program.write_text(f"def f(x):\n    open({str(traced)!r}, 'w').close()\n    return x\n")
    # Bytes that are not UTF-8 on the command line reach Python as lone surrogates ("caf\udce9").
    argv = [sys.executable, "-m", "dumpgym", "add", f"{program}:f", "--arg", "f32[3]", "--title", b"caf\xe9",
            "--corpus", str(corpus_dir)]
    result = subprocess.run(argv, capture_output=True, timeout=120, env={**os.environ, "PYTHONPATH": SRC})
    err = result.stderr.decode()
    assert result.returncode == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("dumpgym: error: --title 'caf\\udce9' is not valid UTF-8") and "Traceback" not in err
    assert not traced.exists() and not corpus_dir.exists()


def test_the_help_says_the_title_cap():
    assert f"at most {usercorpus.TITLE_MAX} characters" in " ".join(_cli("add", "--help").stdout.split())


def test_large_program_is_added(corpus_dir, capsys):
    sys.path.insert(0, str(HERE.parent / "benchmarks"))
    from transformer_stack import ARGS

    entry = f"{HERE.parent / 'benchmarks' / 'transformer_stack.py'}:transformer_stack"
    assert cli.main(["add", entry, *[f"--arg={a}" for a in ARGS], "--corpus", str(corpus_dir)]) == 0
    out = capsys.readouterr().out
    assert "added transformer-stack:" in out
    record = json.loads((corpus_dir / "transformer-stack.json").read_text())
    assert len(record["eqns"]) > 1400
    stats = record["xray_stats"]
    assert stats["mapped_stablehlo_op_lines"] == stats["stablehlo_op_lines"]


@pytest.mark.parametrize("command", [["export"], ["drills"], ["list"], ["add", f"{PROGRAMS}:while_halving", "--arg", "f32[3]"]])
def test_a_damaged_corpus_folder_is_one_line(command, corpus_dir, capfd):
    corpus_dir.mkdir()
    (corpus_dir / "index.json").write_text("{not json")
    before = snapshot(corpus_dir)
    assert cli.main([*command, "--corpus", str(corpus_dir)]) == 2
    err = capfd.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(corpus_dir) in err and "Traceback" not in err
    assert snapshot(corpus_dir) == before


def test_a_failed_add_creates_no_folder(tmp_path, capfd):
    corpus_dir = tmp_path / "fresh" / "deep" / "corpus"
    assert cli.main(["add", f"{PROGRAMS}:raises_while_tracing", "--arg", "f32[3,4]", "--corpus", str(corpus_dir)]) == 2
    assert not (tmp_path / "fresh").exists()
    assert len(capfd.readouterr().err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, message", [
    (["add", f"{PROGRAMS}:while_halving", "--arg", "bf16[,]"], "not an array spec"),
    (["add", f"{PROGRAMS}:while_halving", "--arg", "f32[1,,2]"], "not an array spec"),
    (["serve", "--port", "99999"], "outside 0-65535"),
    (["serve", "--port", "-1"], "outside 0-65535"),
    (["add", "tests.no_such_package_here.mod:f", "--arg", "f32[3]"], "no module named"),
    (["add", "json:nope", "--arg", "f32[3]"], "has no function 'nope'"),
])
def test_more_bad_input_is_one_line(argv, message, corpus_dir, capfd):
    if argv[0] == "add":
        argv = [*argv, "--corpus", str(corpus_dir)]
    assert cli.main(argv) == 2
    err = capfd.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err
    assert not corpus_dir.exists()


def test_a_module_that_fails_on_import_is_one_line(tmp_path, monkeypatch, corpus_dir, capfd):
    (tmp_path / "broken_on_import.py").write_text("import not_a_real_package_xyz\ndef f(x):\n    return x\n")
    (tmp_path / "exits_on_import.py").write_text("raise SystemExit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for entry, message in (("broken_on_import:f", "raised ModuleNotFoundError on import"),
                           (f"{tmp_path / 'exits_on_import.py'}:f", "raised SystemExit on import")):
        assert cli.main(["add", entry, "--arg", "f32[3]", "--corpus", str(corpus_dir)]) == 2
        err = capfd.readouterr().err
        assert len(err.strip().splitlines()) == 1 and message in err


def test_debug_after_the_command_is_accepted(corpus_dir):
    from dumpgym.traced.program import ProgramError

    with pytest.raises(ProgramError, match="has no function 'nope'"):
        cli.main(["add", f"{PROGRAMS}:nope", "--arg", "f32[3]", "--corpus", str(corpus_dir), "--debug"])


# The folder: locked read-modify-writes, leftovers of killed runs, damaged files.

SRC = str(Path(__file__).parents[1] / "src")


def _cli(*args, timeout=180):
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-m", "dumpgym", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def _listed(corpus_dir) -> list[str]:
    return [row["slug"] for row in usercorpus.listing(corpus_dir)]


def _locked_elsewhere(folder: Path) -> bool:
    """Whether some other holder has the folder's lock (tried without waiting, from a fresh descriptor)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_add_writes_the_record_and_index_under_the_folder_lock(corpus_dir, monkeypatch, capsys):
    seen = []
    write_index = usercorpus._write_index
    monkeypatch.setattr(usercorpus, "_write_index",
                        lambda folder, slugs: (seen.append(_locked_elsewhere(folder)), write_index(folder, slugs)))
    assert add(corpus_dir, "while_halving", ["f32[5]"], "--slug", "one") == 0
    assert cli.main(["remove", "one", "--corpus", str(corpus_dir)]) == 0
    assert seen == [True, True]


def test_ten_parallel_adds_lose_nothing_and_claim_a_slug_once(corpus_dir):
    """Five distinct slugs and five adds of one slug, all at once: the five land, one 'dup' wins."""
    corpus_dir.mkdir()
    slugs = [f"p{n}" for n in range(5)] + ["dup"] * 5
    with ThreadPoolExecutor(10) as pool:
        results = list(pool.map(
            lambda slug: _cli("add", f"{PROGRAMS}:while_halving", "--arg", "f32[5]", "--slug", slug,
                              "--corpus", str(corpus_dir)),
            slugs))
    codes = [r.returncode for r in results]
    assert codes[:5] == [0] * 5, [r.stderr for r in results[:5]]
    assert sorted(codes[5:]) == [0] + [2] * 4
    waiting = WAITING.format(corpus_dir)  # an add that waited a second for another's lock says so, once
    for r in results[5:]:
        if r.returncode == 2:
            lines = [line for line in r.stderr.strip().splitlines() if line != waiting]
            assert len(lines) == 1 and "'dup' is already in the corpus" in lines[0]
    assert sorted(_listed(corpus_dir)) == sorted(set(slugs))


def test_leftovers_of_a_killed_add_are_never_listed_and_are_cleaned(corpus_dir, capsys):
    assert add(corpus_dir, "while_halving", ["f32[5]"], "--slug", "kept") == 0
    (corpus_dir / ".k10.json.rkexsiyp").write_text('{"half": ')           # a temp file cut short
    (corpus_dir / ".index.json.a1b2c3d4").write_text('{"schema"')
    (corpus_dir / "k10.json").write_text((corpus_dir / "kept.json").read_text().replace('"kept"', '"k10"', 1))
    assert _listed(corpus_dir) == ["kept"]                               # the record not in the index
    assert cli.main(["list", "--corpus", str(corpus_dir)]) == 0
    assert "k10" not in capsys.readouterr().out
    assert add(corpus_dir, "while_halving", ["f32[5]"], "--slug", "k10") == 0
    assert not (corpus_dir / ".k10.json.rkexsiyp").exists() and not (corpus_dir / ".index.json.a1b2c3d4").exists()
    assert _listed(corpus_dir) == ["kept", "k10"]


def test_sigkill_at_random_moments_leaves_a_working_folder(corpus_dir):
    assert add(corpus_dir, "while_halving", ["f32[5]"], "--slug", "base") == 0  # the folder before: no kill here
    env = {**os.environ, "PYTHONPATH": SRC}
    for n, delay in enumerate((0.4, 1.3, 2.2)):  # importing, tracing, writing (more in the 20-kill run of the note)
        proc = subprocess.Popen([sys.executable, "-m", "dumpgym", "add", f"{PROGRAMS}:while_halving", "--arg",
                                 "f32[5]", "--slug", f"k{n}", "--corpus", str(corpus_dir)],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    slugs = _listed(corpus_dir)
    assert slugs[0] == "base" and set(slugs) <= {"base", "k0", "k1", "k2"}
    results = {}
    for command in ("list", "export", "drills"):
        results[command] = result = _cli(command, "--corpus", str(corpus_dir))
        assert result.returncode == 0 and result.stderr == "", (command, result.stderr)
    exported = json.loads(results["export"].stdout)  # the folder is as it was for that export
    assert [p["slug"] for p in exported["programs"] if p.get("added")] == slugs  # after the built-in ones and their variants


def _index(folder, programs):
    (folder / "index.json").write_text(json.dumps({"schema": usercorpus.INDEX_SCHEMA, "programs": programs}))


DAMAGED = {
    "an empty program file": (lambda d: (d / "good.json").write_text("{}"), "good.json is damaged"),
    "xray is a string": (lambda d: (d / "good.json").write_text(
        (d / "good.json").read_text().replace('"xray":[', '"xray":"oops","was":[', 1)), "good.json is damaged"),
    "the index lists a missing file": (lambda d: _index(d, ["good", "x"]), "lists 'x' but"),
    "the index lists a bad slug": (lambda d: _index(d, ["good", "Bad Slug"]), '"Bad Slug" is not a slug'),
    "the index lists a path out": (lambda d: _index(d, ["good", "../../x"]), '"../../x" is not a slug'),
    "the index is not JSON": (lambda d: (d / "index.json").write_text("{not json"), "index.json is damaged"),
    "the index is a list": (lambda d: (d / "index.json").write_text("[]"), "index.json is damaged"),
    "a program file of bytes": (lambda d: (d / "good.json").write_bytes(b"\xff\xfe"), "good.json is damaged"),
}


@pytest.fixture(scope="module")
def good_folder(tmp_path_factory):
    """A corpus folder holding one program, 'good', traced once for every damaged copy."""
    folder = tmp_path_factory.mktemp("good") / "corpus"
    assert add(folder, "while_halving", ["f32[5]"], "--slug", "good") == 0
    return folder


@pytest.fixture
def damaged(corpus_dir, good_folder, request):
    shutil.copytree(good_folder, corpus_dir)
    edit, message = DAMAGED[request.param]
    edit(corpus_dir)
    (corpus_dir.parent / "x.json").write_text("{}")  # what '../../x'-like slugs would reach
    return corpus_dir, message


@pytest.mark.parametrize("damaged", list(DAMAGED), indirect=True)
@pytest.mark.parametrize("command", [["list"], ["export"], ["drills"]])
def test_a_damaged_folder_is_one_line_and_status_2(damaged, command, capfd):
    corpus_dir, message = damaged
    before = snapshot(corpus_dir)
    assert cli.main([*command, "--corpus", str(corpus_dir)]) == 2
    captured = capfd.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in captured.err
    assert snapshot(corpus_dir) == before


@pytest.fixture(scope="module")
def render_once():
    """`render_site`, remembered by the content of its inputs: the builds of folders that skip to the same
    programs render the same gym from equal inputs, so it is rendered once. What these tests check (the
    loading that skips and warns, serving, writing) all still runs; serve makes only what it is asked for."""
    rendered: dict[str, dict[str, bytes]] = {}

    def render(corpus, drills):
        data = corpus.to_json() if hasattr(corpus, "to_json") else corpus  # `build` hands it the typed corpus
        key = hashlib.sha256(json.dumps([data, drills], sort_keys=True).encode()).hexdigest()
        if key not in rendered:
            rendered[key] = render_site(corpus, drills)
        return dict(rendered[key])

    return render


@pytest.mark.parametrize("damaged", ["xray is a string", "the index lists a missing file", "the index is not JSON"],
                         indirect=True)  # a damaged record, a missing one, a damaged index: every way to skip
def test_serve_and_build_skip_a_damaged_program_with_a_warning(damaged, tmp_path, capfd, monkeypatch, render_once):
    monkeypatch.setattr(build, "render_site", render_once)
    corpus_dir, message = damaged
    site = Site.build(corpus_dir)
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dumpgym: warning: skipping") and message in err[0]
    assert site.get("/")[0] == 200 and site.get("/data/programs/mlp.json")[0] == 200
    assert cli.main(["build", "--out", str(tmp_path / "site"), "--corpus", str(corpus_dir)]) == 0
    captured = capfd.readouterr()
    assert "warning: skipping" in captured.err and "wrote the gym" in captured.out


@pytest.mark.parametrize("damaged", ["an empty program file", "the index lists a missing file"], indirect=True)
def test_a_damaged_program_can_still_be_removed(damaged, capfd):
    corpus_dir, _ = damaged
    slug = "good" if (corpus_dir / "good.json").read_text() == "{}" else "x"
    assert cli.main(["remove", slug, "--corpus", str(corpus_dir)]) == 0
    assert cli.main(["list", "--corpus", str(corpus_dir)]) == 0


def test_a_bad_slug_from_the_command_line_is_refused(corpus_dir, capfd):
    assert add(corpus_dir, "while_halving", ["f32[5]"], "--slug", "../x") == 2
    err = capfd.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--slug '../x' must use only" in err and not corpus_dir.exists()


# Waiting for the folder's lock: said after a second, bounded by --wait, stopped cleanly.

def _shared_lock(folder: Path) -> int:
    """A shared lock on `folder`, as a reader (another user's `dumpgym list`, say) holds it; close the fd to free it."""
    fd = os.open(folder, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


WAITING = "dumpgym: waiting for the corpus lock on {} (held by another dumpgym)"


def test_a_remove_waiting_on_the_lock_says_so_and_gives_up_after_wait(kept_folder, corpus_dir):
    shutil.copytree(kept_folder, corpus_dir)
    before = snapshot(corpus_dir)
    fd = _shared_lock(corpus_dir)
    try:
        result = _cli("remove", "kept", "--corpus", str(corpus_dir), "--wait", "2")
    finally:
        os.close(fd)
    lines = result.stderr.splitlines()
    assert result.returncode == 2 and len(lines) == 2, result.stderr
    assert lines[0] == WAITING.format(corpus_dir)
    assert lines[1].startswith(f"dumpgym: error: gave up after 2 s waiting for the corpus lock on {corpus_dir}")
    assert snapshot(corpus_dir) == before
    assert _cli("remove", "kept", "--corpus", str(corpus_dir)).returncode == 0  # free again: no wait, no line


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_add_stopped_while_waiting_on_the_lock_leaves_nothing_and_no_native_stack(sig, kept_folder, corpus_dir):
    shutil.copytree(kept_folder, corpus_dir)
    before = snapshot(corpus_dir)
    fd = _shared_lock(corpus_dir)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "dumpgym", "add", f"{PROGRAMS}:while_halving", "--arg", "f32[3]",
                                 "--corpus", str(corpus_dir), "--wait", "120"], stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": SRC})
        seen = []
        for line in proc.stderr:  # traced (JAX imported), then waiting for the exclusive lock
            seen.append(line)
            if line.startswith("dumpgym: waiting"):
                break
        proc.send_signal(sig)
        rest = proc.stderr.read()
        proc.wait(timeout=60)
    finally:
        os.close(fd)
    err = "".join(seen) + rest
    assert seen[-1].rstrip("\n") == WAITING.format(corpus_dir), err
    assert proc.returncode == 130, err
    assert rest == f"dumpgym: stopped while waiting for the corpus lock on {corpus_dir}; nothing was changed\n", err
    assert snapshot(corpus_dir) == before


def test_the_help_says_the_default_wait():
    assert f"(default {usercorpus.WAIT:g};" in " ".join(_cli("add", "--help").stdout.split())


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS], ids=["disk full", "read-only"])
def test_a_write_that_fails_names_the_file(code, kept_folder, corpus_dir, monkeypatch, capfd):
    from dumpgym.corpus import builtin as corpus

    shutil.copytree(kept_folder, corpus_dir)
    before = snapshot(corpus_dir)

    def failing(path, text):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(corpus, "write_atomic", failing)
    assert cli.main(["remove", "kept", "--corpus", str(corpus_dir)]) == 2
    err = capfd.readouterr().err
    assert err == f"dumpgym: error: cannot write {corpus_dir / 'index.json'}: {os.strerror(code)}; nothing was changed\n"
    assert snapshot(corpus_dir) == before


# `add --replace` and the card's words.

def test_the_card_says_the_first_paragraph_of_the_functions_docstring(corpus_dir, capsys):
    import inspect

    import user_programs

    assert add(corpus_dir, "documented_scale", ["f32[4,8]"], "--slug", "doc") == 0
    assert add(corpus_dir, "while_halving", ["f32[5]"], "--slug", "nodoc") == 0
    lessons = {p["slug"]: p["lesson"] for p in usercorpus.load_user_programs(corpus_dir)}
    first = inspect.getdoc(user_programs.documented_scale).split("\n\n")[0]
    assert lessons["doc"] == " ".join(first.split()) == "Scale each row by its own maximum, so that every row peaks at one."
    assert lessons["nodoc"] == "Your program while_halving."
    page = render_site(*_gym(corpus_dir))["index.html"].decode("utf-8")
    assert "Scale each row by its own maximum, so that every row peaks at one." in page


def _gym(corpus_dir):
    from dumpgym.site.inputs import gym_inputs

    return gym_inputs(corpus_dir)


def test_a_taken_slug_is_refused_without_replace_and_replaced_in_place_with_it(corpus_dir, capsys):
    assert add(corpus_dir, "while_halving", ["f32[5]"], "--slug", "a") == 0
    assert add(corpus_dir, "cond_branch", ["f32[]", "f32[3]"], "--slug", "mine") == 0
    assert add(corpus_dir, "while_halving", ["f32[5]"], "--slug", "z") == 0
    (corpus_dir / "mine.drills.json").write_text("{}")  # items kept for the program to be replaced
    capsys.readouterr()
    before = snapshot(corpus_dir)
    assert add(corpus_dir, "scan_rnn", ["f32[6,4]", "f32[4,4]"], "--slug", "mine") == 2
    err = capsys.readouterr().err
    assert "'mine' is already in the corpus" in err and "--replace" in err and len(err.strip().splitlines()) == 1
    assert snapshot(corpus_dir) == before
    assert add(corpus_dir, "scan_rnn", ["f32[6,4]", "f32[4,4]"], "--slug", "mine", "--replace") == 0
    assert capsys.readouterr().out.startswith("replaced mine: ")
    assert _listed(corpus_dir) == ["a", "mine", "z"]  # in its place
    record = json.loads((corpus_dir / "mine.json").read_text())
    assert record["entry"].endswith(":scan_rnn") and "scan" in {e["primitive"] for e in record["eqns"]}
    assert not (corpus_dir / "mine.drills.json").exists()
    # --replace of a slug nothing has is an add
    assert add(corpus_dir, "while_halving", ["f32[5]"], "--slug", "new", "--replace") == 0
    assert capsys.readouterr().out.startswith("added new: ")
    assert _listed(corpus_dir) == ["a", "mine", "z", "new"]


def test_a_replace_that_fails_leaves_the_old_program_whole(corpus_dir, monkeypatch, capsys):
    assert add(corpus_dir, "cond_branch", ["f32[]", "f32[3]"], "--slug", "mine") == 0
    before = snapshot(corpus_dir)
    # It fails while tracing: nothing written.
    assert cli.main(["add", f"{PROGRAMS}:raises_while_tracing", "--arg", "f32[3,4]", "--slug", "mine", "--replace",
                     "--corpus", str(corpus_dir)]) == 2
    assert snapshot(corpus_dir) == before
    capsys.readouterr()
    # It fails as the record is written (a full disk): the old record is still there, whole, and listed.
    from dumpgym.corpus import builtin

    def full(path, text):
        Path(f"{path}.tmp-full").write_text(text[:10])  # what a write cut short would leave beside it
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(builtin, "write_atomic", full)
    assert add(corpus_dir, "scan_rnn", ["f32[6,4]", "f32[4,4]"], "--slug", "mine", "--replace") == 2
    err = capsys.readouterr().err
    assert "No space left on device" in err and len(err.strip().splitlines()) == 1
    monkeypatch.undo()
    after = {k: v for k, v in snapshot(corpus_dir).items() if not k.endswith(".tmp-full")}
    assert after == before
    assert _listed(corpus_dir) == ["mine"]
    assert json.loads((corpus_dir / "mine.json").read_text())["entry"].endswith(":cond_branch")


def test_replace_never_replaces_a_built_in_program(corpus_dir, capsys):
    assert add(corpus_dir, "while_halving", ["f32[5]"], "--slug", "mlp", "--replace") == 2
    assert "'mlp' is already in the corpus" in capsys.readouterr().err
    assert not corpus_dir.exists()


def test_slug_is_for_a_traced_function_not_a_dump(tmp_path, capsys):
    # A dump's module takes its slug from its name (--replace swaps in a dump added again: test_dump_user_names.py).
    assert cli.main(["add", "--dump", str(tmp_path), "--slug", "s", "--corpus", str(tmp_path / "corpus")]) == 2
    err = capsys.readouterr().err
    assert "--dump adds the modules of dump folders" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "corpus").exists()


def test_a_slug_is_a_built_in_one_exactly_when_the_committed_corpus_has_it(whole_corpus):
    """The check that refuses a built-in slug, which reads the committed corpus's text before its JSON, says yes
    for every program's slug there (variants too) and no for the rest: words the file holds in quotes that no
    program is named (a dtype, a backend, a field's value) and a variant's slug cut short included."""
    from dumpgym.corpus.user import _is_builtin_slug

    slugs = {p["slug"] for p in whole_corpus["programs"]}
    assert all(_is_builtin_slug(slug) for slug in slugs)
    assert "mlp-2" in slugs and "float32" in json.dumps(whole_corpus) and "cpu" in json.dumps(whole_corpus)
    for other in ("gpt-train-step", "float32", "cpu", "mlp-", "ml", "program", "x"):
        assert not _is_builtin_slug(other)
