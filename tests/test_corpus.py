"""`corpus build --check`: the committed corpus is what tracing gives, judged host by host for the compiled layer.

The whole comparison (all programs traced, lowered and compiled now) is `scripts/test`'s first step,
`dumpgym corpus build --check`, so it runs once per test run. The tests here give `check` and the
command edited copies of the committed corpus, as if tracing had printed them on this host or another.
"""
import json

import pytest

from dumpgym import cli
from dumpgym.corpus import builtin as corpus_module
from dumpgym.corpus import pipeline
from dumpgym.compiled.layer import host, host_id
from dumpgym.programs import SLUGS
from dumpgym.corpus.pipeline import build_corpus, build_corpus_json
from dumpgym.record.schema import Corpus


def _copy(data: dict) -> dict:
    return json.loads(json.dumps(data))  # a deep copy, several times faster than copy.deepcopy here


def _traced_here(data: dict) -> dict:
    """`data` as a fresh build on this host would give it when nothing has changed: its CPU layers
    stamped with this host, as `compile_layer` stamps them."""
    data = _copy(data)
    for p in (p for p in data["programs"] if "cpu" in p["compiled"]):  # a TPU-only program has no CPU layer
        p["compiled"]["cpu"].update(host=host(), host_id=host_id())
    return data


def _compiled_elsewhere(data: dict) -> dict:
    """`data` as if its compiled layer had been made on another CPU, whose XLA code differs."""
    data = _copy(data)
    for p in (p for p in data["programs"] if "cpu" in p["compiled"]):
        p["compiled"]["cpu"].update(host="x86_64 AMD EPYC 7B13", host_id="0123456789abcdef",
                        text=p["compiled"]["cpu"]["text"].replace("is_scheduled=true", "is_scheduled=true, elsewhere"))
    return data


def _edit_rope(data: dict) -> dict:
    data = _copy(data)
    rope = next(p for p in data["programs"] if p["slug"] == "rope")
    rope["stablehlo"] = rope["stablehlo"].replace("stablehlo.concatenate", "stablehlo.concat", 1)
    return data


@pytest.fixture(scope="module")
def traced(corpus):
    """What tracing gives here, when the code has not changed since the corpus was committed."""
    return _traced_here(corpus)


@pytest.fixture(scope="module")
def traced_text(traced):
    """`traced` as the committed file's text (`dumps`, a few hundred milliseconds: made once)."""
    return corpus_module.dumps(traced)


@pytest.fixture
def committed_copy(tmp_path, monkeypatch, traced, traced_text):
    """A copy of the committed corpus (compiled on this host) that the CLI treats as the committed
    one; `corpus build` gives `traced` without tracing."""
    path = tmp_path / "corpus.json"
    path.write_text(traced_text, encoding="utf-8")
    monkeypatch.setattr(corpus_module, "BUILTIN_PATH", path)
    monkeypatch.setattr(pipeline, "build_corpus_json", lambda *a, **k: Corpus.from_json(traced).to_json())
    return path


def test_the_same_corpus_on_the_same_host_has_nothing_to_say(corpus, traced):
    assert corpus_module.check(_traced_here(corpus), traced) == ([], [])


def test_the_corpus_text_is_the_standard_librarys_indented_json(corpus):
    import json

    odd = {"s": ['é"\\\n\x01\u2028', "", "\ud800"], "n": [0, -3, 10**30, 1.0, -0.0, 2.5e-7, 1e300,
           float("nan"), float("inf"), -float("inf")], "e": [{}, [], {"": None}], "b": [True, False, None]}
    for value in (corpus, odd, [], {}, "x", 1.5):
        assert corpus_module.dumps(value) == json.dumps(value, indent=1, ensure_ascii=False) + "\n"
    # a value JSON's own types do not hold, or a key that is no string: as the standard library takes it
    assert corpus_module.dumps({1: (2, 3)}) == json.dumps({1: (2, 3)}, indent=1, ensure_ascii=False) + "\n"


def test_check_passes_through_the_cli(committed_copy, capsys):
    assert cli.main(["corpus", "build", "--check"]) == 0
    out = capsys.readouterr().out
    assert f"committed corpus matches tracing: {len(SLUGS)} programs" in out and "note:" not in out


def test_a_listing_edited_by_hand_is_named_and_nothing_else(corpus, traced):
    problems, notes = corpus_module.check(_edit_rope(corpus), traced)
    assert [p.splitlines()[0] for p in problems] == ["rope: committed artifact differs from tracing"]
    assert "stablehlo.concat" in problems[0]


def test_every_layer_of_a_program_is_compared(corpus, traced):
    """A change in any field of any program is named, compiled layers included (TPU and GPU always)."""
    for slug, field in (("mlp", "jaxpr"), ("attention", "eqns"), ("moe", "tpu"), ("rmsnorm", "gpu"),
                        ("pallas-matmul", "tpu"), ("layernorm", "cpu")):
        edited = {**traced, "programs": [_copy(p) if p["slug"] == slug else p for p in traced["programs"]]}
        program = next(p for p in edited["programs"] if p["slug"] == slug)
        if field in program["compiled"]:
            program["compiled"][field]["text"] += "\n"
        else:
            program[field] = program[field][:-1]
        problems, _ = corpus_module.check(edited, traced)
        assert [p.splitlines()[0] for p in problems] == [f"{slug}: committed artifact differs from tracing"], field


def test_a_program_added_or_gone_is_named(traced):
    fewer = _copy(traced)
    gone = fewer["programs"].pop(3)["slug"]
    assert corpus_module.check(fewer, traced)[0] == [f"{gone}: missing from the committed corpus"]
    assert corpus_module.check(traced, fewer)[0] == [f"{gone}: committed but no longer a program"]


def test_another_jax_is_a_problem(traced):
    older = {**traced, "jax_version": "0.6.0"}
    assert corpus_module.check(older, traced)[0] == [f"jax_version: committed 0.6.0, installed {traced['jax_version']}"]


def test_a_compile_from_another_cpu_is_one_note_not_a_failure(corpus, traced):
    problems, notes = corpus_module.check(_compiled_elsewhere(corpus), traced)
    assert problems == []
    assert len(notes) == 1 and "AMD EPYC 7B13" in notes[0] and "not compared" in notes[0]
    assert not any(f"{p['slug']}:" in notes[0] for p in corpus["programs"])


def test_on_another_cpu_a_hand_edit_is_still_caught_and_its_diff_has_no_compiled_text(corpus, traced):
    problems, notes = corpus_module.check(_edit_rope(_compiled_elsewhere(corpus)), traced)
    assert [p.splitlines()[0] for p in problems] == ["rope: committed artifact differs from tracing"]
    assert "elsewhere" not in problems[0] and len(notes) == 1


def test_on_the_same_cpu_a_compiled_difference_is_a_failure(traced):
    committed = _copy(traced)
    mlp = committed["programs"][0]
    mlp["compiled"]["cpu"]["text"] += "\n"
    problems, notes = corpus_module.check(committed, traced)
    assert [p.splitlines()[0] for p in problems] == ["mlp: committed artifact differs from tracing"]
    assert notes == []


def test_cli_check_exits_1_naming_the_program_and_writes_nothing(committed_copy, corpus, capsys):
    committed_copy.write_text(corpus_module.dumps(_edit_rope(corpus)))
    before = committed_copy.read_bytes()
    assert cli.main(["corpus", "build", "--check"]) == 1
    out = capsys.readouterr().out
    assert "rope: committed artifact differs from tracing" in out and "mlp:" not in out
    assert committed_copy.read_bytes() == before  # --check never writes


def test_cli_check_on_another_cpu_passes_with_one_note(committed_copy, corpus, capsys):
    committed_copy.write_text(corpus_module.dumps(_compiled_elsewhere(corpus)))
    assert cli.main(["corpus", "build", "--check"]) == 0
    out = capsys.readouterr().out
    assert out.count("note:") == 1 and "committed corpus matches tracing" in out


def test_build_writes_what_check_accepts(committed_copy, capsys):
    committed_copy.write_text("{}")
    assert cli.main(["corpus", "build"]) == 0
    assert f"{len(SLUGS)} programs" in capsys.readouterr().out
    assert cli.main(["corpus", "build", "--check"]) == 0


def test_write_atomic_leaves_no_partial_file(tmp_path):
    target = tmp_path / "x.json"
    target.write_text("old")

    with pytest.raises(TypeError):
        corpus_module.write_atomic(target, 12345)  # not text: the write fails midway
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_summary_counts_are_computed(corpus):
    eqns = sum(len(p["eqns"]) for p in corpus["programs"])
    ops = sum(len({op["line"] for op in p["stablehlo_ops"]}) for p in corpus["programs"])
    groups = sum(len(p["xray"]) for p in corpus["programs"])
    # one line is no equation's: JAX's sharding constraint on dropout's typed key argument
    assert corpus_module.summary(corpus) == (f"{len(SLUGS)} programs · {eqns} equations · {ops} StableHLO op lines · "
                                             f"{groups} x-ray groups · {ops - 1} of {ops} op lines attributed")
    seed = corpus["programs"][:17]
    assert sum(len(p["eqns"]) for p in seed) == 291
    assert sum(len({op["line"] for op in p["stablehlo_ops"]}) for p in seed) == 410
    assert (eqns, ops) == (890, 1488)


# -- building in worker processes ------------------------------------------------------------------

def test_a_build_in_worker_processes_is_the_build_in_this_one(corpus):
    from dumpgym.programs import builtin_program

    slugs = ["mlp", "scan", "sharded"]  # one plain, one with a loop, one on eight devices
    here = build_corpus([builtin_program(s) for s in slugs], compiled=False, jobs=1).to_json()
    spread = build_corpus([builtin_program(s) for s in slugs], compiled=False, jobs=2).to_json()
    assert spread == here
    assert build_corpus_json([builtin_program(s) for s in slugs], compiled=False, jobs=2) == here
    assert [p["slug"] for p in spread["programs"]] == slugs
    committed = {p["slug"]: p for p in corpus["programs"]}
    for p in spread["programs"]:  # and both are what JAX traced for the committed corpus
        assert (p["jaxpr"], p["stablehlo"], p["eqns"]) == tuple(committed[p["slug"]][k] for k in ("jaxpr", "stablehlo", "eqns"))


@pytest.mark.parametrize("flags, jobs", [(["--no-hlo"], 1), (["--no-hlo", "--jobs", "2"], 2), ([], cli._cores()),
                                          (["--jobs", "1"], 1)])
def test_a_build_without_the_compiled_layers_runs_in_this_process_unless_told(flags, jobs, tmp_path, monkeypatch,
                                                                              traced):
    asked = []
    monkeypatch.setattr(pipeline, "build_corpus_json", lambda *a, **k: asked.append(k["jobs"]) or traced)
    assert cli.main(["corpus", "build", *flags, "--out", str(tmp_path / "corpus.json")]) == 0
    assert asked == [jobs]


@pytest.mark.parametrize("jobs", ["0", "two"])
def test_a_bad_jobs_count_is_one_line_and_status_2(jobs, capsys):
    assert cli.main(["corpus", "build", "--check", "--jobs", jobs]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--jobs" in err


def test_workers_refuse_a_program_they_could_not_find_by_slug(programs):
    import dataclasses

    renamed = dataclasses.replace(programs["mlp"], title="not the built-in mlp")
    with pytest.raises(ValueError, match="built-in programs only"):
        build_corpus([renamed, programs["scan"]], compiled=False, jobs=2)
