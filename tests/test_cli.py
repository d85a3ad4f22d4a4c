"""The command line: exit statuses, one-line errors, and JSON that other tools can read."""
import json
import subprocess
import sys

import pytest

from dumpgym import cli


def run(*args):
    return subprocess.run([sys.executable, "-m", "dumpgym", *args], capture_output=True, text=True, timeout=120)


def test_export_prints_the_corpus_schema():
    result = run("export")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["schema"] == "dumpgym.corpus/1"
    assert len(data["programs"]) == 17


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
