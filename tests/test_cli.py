"""The command line: exit statuses, one-line errors, and JSON that other tools can read."""
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from dumpgym import cli, drills
from dumpgym.traced.program import parse_arg
from dumpgym.programs import SLUGS


def run(*args):
    return subprocess.run([sys.executable, "-m", "dumpgym", *args], capture_output=True, text=True, timeout=120)


def test_export_prints_the_corpus_schema():
    result = run("export")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["schema"] == "dumpgym.corpus/2"
    # the built-in programs, then their traced variants at other shapes
    assert tuple(p["slug"] for p in data["programs"] if "variant_of" not in p) == SLUGS


def test_export_selected_slugs_in_order(capsys):
    assert cli.main(["export", "rope", "mlp"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [p["slug"] for p in data["programs"]] == ["rope", "mlp"]


def test_unknown_slug_is_one_line_and_status_2():
    result = run("export", "mlp", "nope")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown program nope" in lines[0] and "mlp layernorm rmsnorm" in lines[0]
    assert result.stdout == "" and "Traceback" not in result.stderr


def test_unknown_command_is_one_line():
    result = run("frobnicate")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1


def test_help_lists_every_command():
    result = run("--help")
    assert result.returncode == 0
    for command in ("serve", "build", "corpus", "export", "drills", "add", "list", "remove"):
        assert command in result.stdout


def test_export_does_not_import_jax():
    code = "import sys; from dumpgym import cli; cli.main(['export', 'mlp']); assert 'jax' not in sys.modules"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("command", sorted(cli.make_parser()._subparsers._group_actions[0].choices))
def test_every_command_is_documented_in_the_readme(command):
    from pathlib import Path

    readme = (Path(__file__).parents[1] / "README.md").read_text()
    assert f"dumpgym {command}" in readme


RANDOM_PROGRAMS = Path(__file__).parent / "random_programs.py"


@pytest.mark.parametrize("name, specs", [
    ("dropout", ["f32[8,32]", "key<fry>[]"]),
    ("dropout_raw", ["float32[8,32]", "uint32[2]"]),
])
def test_add_a_program_that_draws_randomness(name, specs, tmp_path, capsys):
    corpus = tmp_path / "corpus"
    slug = "my-" + name.replace("_", "-")  # `dropout` is a built-in program's slug
    args = ["add", f"{RANDOM_PROGRAMS}:{name}", *[f"--arg={s}" for s in specs], "--slug", slug, "--corpus", str(corpus)]
    assert cli.main(args) == 0, capsys.readouterr().err
    record = json.loads((corpus / f"{slug}.json").read_text())
    printed = [str(parse_arg(s)) for s in specs]
    assert record["args"] == printed and all(f":{p}" in record["jaxpr"] for p in printed)
    assert "key<fry>[]" in record["jaxpr"]
    capsys.readouterr()
    assert cli.main(["drills", "--corpus", str(corpus), slug]) == 0
    pool = drills.read_pool(json.loads(capsys.readouterr().out))
    assert pool["schema"] == "dumpgym.drills/2"
    shapes = [item for item in pool["items"] if item["drill"] == "shapes" and item["program"] == slug]
    assert shapes
    for item in shapes:
        for aval in (item["answer"]["value"], *item["answer"].get("misread", {})):
            assert str(parse_arg(aval)) == aval  # the answer and every misreading, key<fry>[] included, as printed


def test_an_unknown_key_is_one_line_and_status_2(tmp_path):
    result = run("add", f"{RANDOM_PROGRAMS}:dropout", "--arg", "f32[8,32]", "--arg", "key<nope>[]",
                 "--corpus", str(tmp_path / "corpus"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown dtype 'key<nope>'" in lines[0]


def test_our_own_crash_does_not_blame_the_users_function(tmp_path, monkeypatch):
    from dumpgym.corpus.add import add
    from dumpgym.traced import facts

    def broken(*_args, **_kwargs):
        raise TypeError("a bug in dumpgym")

    monkeypatch.setattr(facts, "build_facts", broken)
    with pytest.raises(TypeError, match="a bug in dumpgym"):  # not a ProgramError naming dropout
        add(f"{RANDOM_PROGRAMS}:dropout", ["f32[8,32]", "key<fry>[]"], slug="my-dropout",
            corpus_dir=tmp_path / "corpus")


def test_a_function_named_like_a_built_in_program_is_asked_for_a_slug(tmp_path):
    result = run("add", f"{RANDOM_PROGRAMS}:dropout", "--arg", "f32[8,32]", "--arg", "key<fry>[]",
                 "--corpus", str(tmp_path / "corpus"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == "dumpgym: error: slug 'dropout' is already in the corpus; choose another with --slug"
    assert not (tmp_path / "corpus").exists()


DONATING = '''
from functools import partial

import jax


@partial(jax.jit, donate_argnums=0)
def sgd(w, g):
    return w - 0.1 * g
'''


@pytest.mark.compiled_hlo
def test_a_jitted_function_keeps_its_donation(tmp_path, capsys):
    import importlib.util

    import jax

    (tmp_path / "opt.py").write_text(DONATING)
    corpus = tmp_path / "corpus"
    assert cli.main(["add", f"{tmp_path / 'opt.py'}:sgd", "--arg", "f32[8]", "--arg", "f32[8]", "--hlo",
                     "--corpus", str(corpus)]) == 0, capsys.readouterr().err
    record = json.loads((corpus / "sgd.json").read_text())
    spec = importlib.util.spec_from_file_location("opt_for_test", tmp_path / "opt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    args = [jax.ShapeDtypeStruct((8,), jax.numpy.float32)] * 2
    assert record["stablehlo"] == module.sgd.lower(*args).as_text()  # as the user prints it
    assert "tf.aliasing_output = 0" in record["stablehlo"]
    assert "input_output_alias={ {}: (0, {}, may-alias) }" in record["compiled"]["cpu"]["text"]
    assert not any(e["primitive"] == "jit" for e in record["eqns"])


# As if the tpu extra were not installed: `import libtpu` fails and importlib finds no spec for it.
NO_LIBTPU = "import sys\nsys.modules['libtpu'] = None\n"


def test_viewing_the_gym_needs_no_tpu_compiler(tmp_path, capsys):
    """export, drills and build work as before without the tpu extra; add --hlo tpu says how to get it."""
    (tmp_path / "block").mkdir()
    (tmp_path / "block" / "sitecustomize.py").write_text(NO_LIBTPU)
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "block")}

    def run_without(*args):
        return subprocess.run([sys.executable, "-m", "dumpgym", *args], capture_output=True, text=True, timeout=300,
                              env=env)

    assert subprocess.run([sys.executable, "-c", "import importlib.util, sys; "
                           "sys.exit(importlib.util.find_spec('libtpu') is None)"], env=env).returncode == 1
    (tmp_path / "f.py").write_text("def f(x):\n    return x * 2\n")
    # The four commands share nothing (build and add write to folders of their own): they run at once.
    with ThreadPoolExecutor(4) as pool:
        runs = {name: pool.submit(run_without, *args) for name, args in (
            ("export", ["export"]),
            ("drills", ["drills"]),
            ("build", ["build", "--out", str(tmp_path / "site")]),
            ("add", ["add", f"{tmp_path / 'f.py'}:f", "--arg", "f32[4]", "--hlo", "tpu",
                     "--corpus", str(tmp_path / "corpus")]),
        )}
        for command in (["export"], ["drills"]):
            assert cli.main(command) == 0  # in this process, which has libtpu
            here = capsys.readouterr().out
            without = runs[command[0]].result()
            assert without.returncode == 0, without.stderr
            assert without.stdout == here
        built = runs["build"].result()
        added = runs["add"].result()
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "data" / "compiled" / "tpu").is_dir()  # the committed TPU layer is shown all the same
    assert added.returncode == 2 and "pip install 'dumpgym[tpu]'" in added.stderr
    assert len(added.stderr.strip().splitlines()) == 1


# A function that writes, as JAX traces it, whether Python's cyclic garbage collector is on.
GC_PROBE = '''
import gc
from pathlib import Path

def probe(x):
    Path(__file__).with_suffix(".seen").write_text(str(gc.isenabled()))
    return x * 2

def broken(x):
    Path(__file__).with_suffix(".seen").write_text(str(gc.isenabled()))
    raise ValueError("the user's own bug")
'''


def test_add_holds_the_collector_off_while_it_works_and_turns_it_back_on(tmp_path, capsys):
    """`dumpgym add` makes one record and exits: the collector stays off while it traces (and on after, for a
    caller that goes on), whether the add succeeds or fails."""
    import gc

    (tmp_path / "gcprobe.py").write_text(GC_PROBE)
    seen = tmp_path / "gcprobe.seen"
    corpus = str(tmp_path / "corpus")
    assert gc.isenabled()
    assert cli.main(["add", f"{tmp_path / 'gcprobe.py'}:probe", "--arg", "f32[4]", "--corpus", corpus]) == 0
    assert seen.read_text() == "False" and gc.isenabled()
    seen.unlink()
    assert cli.main(["add", f"{tmp_path / 'gcprobe.py'}:broken", "--arg", "f32[4]", "--corpus", corpus]) == 2
    assert seen.read_text() == "False" and gc.isenabled()
    capsys.readouterr()
