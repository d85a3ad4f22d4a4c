"""`dumpgym add`, `list` and `remove`: programs unlike the corpus, and every kind of bad input."""
import hashlib
import json
import sys
from pathlib import Path

import jax
import pytest

from dumpgym import cli
from dumpgym.facts import build_facts
from dumpgym.program import load_entry, parse_arg

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
    assert record["jaxpr"] == str(jax.make_jaxpr(function)(*args))
    assert record["stablehlo"] == jax.jit(function).lower(*args).as_text()
    assert primitive in {e["primitive"] for e in record["eqns"]}
    facts = build_facts(jax.make_jaxpr(function)(*args))
    assert [e.primitive for e in facts.eqns] == [e["primitive"] for e in record["eqns"]]
    assert judge(record, jax.jit(function).lower(*args).compiler_ir("stablehlo"), facts.jax_eqns) == []
    stats = record["xray_stats"]
    assert stats["mapped_stablehlo_op_lines"] >= 0.99 * stats["stablehlo_op_lines"]


def test_list_and_remove(corpus_dir, capsys):
    assert add(corpus_dir, "stack_of_identical_layers", ["f32[4,8]", "f32[8,8]"], "--slug", "relu-stack") == 0
    capsys.readouterr()
    assert cli.main(["list", "--corpus", str(corpus_dir)]) == 0
    function = load_entry(f"{PROGRAMS}:stack_of_identical_layers")
    count = len(_printed_eqns(jax.make_jaxpr(function)(*_example_args(["f32[4,8]", "f32[8,8]"])).jaxpr))
    assert capsys.readouterr().out.startswith(f"relu-stack\t{count} equations\t")
    assert cli.main(["drills", "relu-stack", "--corpus", str(corpus_dir)]) == 0
    assert {i["program"] for i in json.loads(capsys.readouterr().out)["items"]} == {"relu-stack"}
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
]


@pytest.mark.parametrize("label, argv, message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_one_line_status_2_and_changes_nothing(label, argv, message, tmp_path, corpus_dir, capfd):
    assert add(corpus_dir, "cond_branch", ["f32[]", "f32[3]"], "--slug", "kept") == 0
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
    from dumpgym.program import ProgramError

    with pytest.raises(ProgramError, match="has no function 'nope'"):
        cli.main(["--debug", "add", f"{PROGRAMS}:nope", "--arg", "f32[3]", "--corpus", str(corpus_dir)])


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
    from dumpgym.program import ProgramError

    with pytest.raises(ProgramError, match="has no function 'nope'"):
        cli.main(["add", f"{PROGRAMS}:nope", "--arg", "f32[3]", "--corpus", str(corpus_dir), "--debug"])
