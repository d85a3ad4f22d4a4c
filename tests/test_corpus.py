"""`corpus build --check` passes on the committed corpus and catches a hand edit."""
import json
import shutil

import pytest

from dumpgym import cli, corpus


@pytest.fixture
def committed_copy(tmp_path, monkeypatch):
    """A copy of the committed corpus that the CLI treats as the committed one."""
    path = tmp_path / "corpus.json"
    shutil.copy(corpus.BUILTIN_PATH, path)
    monkeypatch.setattr(corpus, "BUILTIN_PATH", path)
    return path


def test_check_passes_on_the_committed_corpus(committed_copy, capsys):
    assert cli.main(["corpus", "build", "--check"]) == 0
    assert "committed corpus matches tracing: 17 programs" in capsys.readouterr().out


def test_check_fails_when_a_listing_is_edited_by_hand(committed_copy, capsys):
    data = json.loads(committed_copy.read_text())
    rope = next(p for p in data["programs"] if p["slug"] == "rope")
    rope["stablehlo"] = rope["stablehlo"].replace("stablehlo.concatenate", "stablehlo.concat", 1)
    committed_copy.write_text(corpus.dumps(data))
    before = committed_copy.read_bytes()
    assert cli.main(["corpus", "build", "--check"]) == 1
    out = capsys.readouterr().out
    assert "rope: committed artifact differs from tracing" in out
    assert "stablehlo.concat" in out and "mlp:" not in out
    assert committed_copy.read_bytes() == before  # --check never writes


def test_build_writes_what_check_accepts(committed_copy, capsys):
    committed_copy.write_text("{}")
    assert cli.main(["corpus", "build"]) == 0
    assert "17 programs" in capsys.readouterr().out
    assert cli.main(["corpus", "build", "--check"]) == 0


def test_write_atomic_leaves_no_partial_file(tmp_path):
    target = tmp_path / "x.json"
    target.write_text("old")

    with pytest.raises(TypeError):
        corpus.write_atomic(target, 12345)  # not text: the write fails midway
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_summary_counts_are_computed():
    data = corpus.load_builtin()
    eqns = sum(len(p["eqns"]) for p in data["programs"])
    ops = sum(len({op["line"] for op in p["stablehlo_ops"]}) for p in data["programs"])
    groups = sum(len(p["xray"]) for p in data["programs"])
    assert corpus.summary(data) == (f"17 programs · {eqns} equations · {ops} StableHLO op lines · "
                                    f"{groups} x-ray groups · {ops} of {ops} op lines attributed")
    assert eqns == 291 and ops == 410
