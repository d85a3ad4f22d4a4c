"""Compile targets are data: one registry entry adds a compiled layer to the record, the page, the
x-ray's switch and the drills, and records of the previous schema ("dumpgym.corpus/1") still read."""
import copy
import json
import os
import subprocess
import sys

import pytest

from dumpgym.record import targets as target_module
from dumpgym.corpus.pipeline import program_record
from dumpgym.drills import build_pool
from dumpgym.traced.program import Program
from dumpgym.record.schema import SCHEMA, Corpus, ProgramRecord, RecordError, upgrade_program
from dumpgym.site.files import site_files
from dumpgym.record.targets import TARGETS, CompileTarget, Target, builtin_targets, register_target, target_id

V6E = CompileTarget("tpu-v6e", "v6e", "TPU v6e (2x2), compiled without a TPU", Target("tpu", "v6e:2x2"))


@pytest.fixture
def v6e():
    """The registry with one more TPU layer after the built-in ones, for one test."""
    register_target(V6E)
    yield V6E
    del TARGETS[V6E.id]


def _corpus1(program: dict) -> dict:
    """`program` as "dumpgym.corpus/1" wrote it: each compiled layer in a field of its own."""
    old = {k: v for k, v in program.items() if k != "compiled"}
    for target, field in (("cpu", "hlo"), ("tpu", "hlo_tpu"), ("gpu", "hlo_gpu")):
        if target in program["compiled"]:
            old[field] = program["compiled"][target]
    return old


def test_the_registry_lists_the_built_in_layers_in_the_pages_order():
    assert list(TARGETS) == ["tpu", "gpu", "cpu"]
    assert [t.platform for t in TARGETS.values()] == ["tpu", "gpu", "cpu"]
    assert [t.id for t in builtin_targets("tpu")] == ["tpu"]  # a Pallas kernel: the TPU's layers alone
    assert target_id(target_module.CPU) == "cpu" and target_id(Target("tpu", "v6e:2x4")) == "tpu"


def test_a_target_id_is_checked_and_taken_once():
    with pytest.raises(ValueError, match="registered twice"):
        register_target(CompileTarget("cpu", "CPU", "again", target_module.CPU))
    for bad in ("jaxpr", "stablehlo", "Tpu", "tpu/v6e", ""):
        with pytest.raises(ValueError, match="compile target id"):
            register_target(CompileTarget(bad, "x", "x", target_module.CPU))


def test_the_corpus_is_corpus_2_with_every_built_in_layer(corpus):
    assert corpus["schema"] == SCHEMA == "dumpgym.corpus/2"
    for p in corpus["programs"]:
        assert "hlo" not in p and "hlo_tpu" not in p and "hlo_gpu" not in p
        wanted = ["tpu"] if p.get("platform", "cpu") == "tpu" else ["tpu", "gpu", "cpu"]  # omitted when "cpu"
        assert list(p["compiled"]) == wanted, p["slug"]
        assert {k: v["backend"] for k, v in p["compiled"].items()} == {k: k for k in wanted}


def test_a_corpus_1_file_reads_as_the_same_corpus(corpus):
    old = {**corpus, "schema": "dumpgym.corpus/1", "programs": [_corpus1(p) for p in corpus["programs"]]}
    assert "hlo_tpu" in old["programs"][0] and "compiled" not in old["programs"][0]
    assert Corpus.from_json(old).to_json() == corpus
    assert ProgramRecord.from_json(old["programs"][0]).to_json() == corpus["programs"][0]


def test_a_corpus_1_record_that_holds_a_gpu_layer_as_hlo_reads_it_as_the_gpus(by_slug):
    mlp = by_slug["mlp"]
    old = {k: v for k, v in mlp.items() if k != "compiled"} | {"hlo": mlp["compiled"]["gpu"]}
    assert list(upgrade_program(old)["compiled"]) == ["gpu"]


def test_an_added_program_of_the_previous_release_still_loads(tmp_path, by_slug):
    """A user's folder written by the release before corpus/2 (added with --hlo tpu): listed, exported as corpus/2, drilled."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    record = {**_corpus1({**by_slug["rmsnorm"], "compiled": {"tpu": by_slug["rmsnorm"]["compiled"]["tpu"]}}),
              "slug": "mine", "jax_version": "0.10.2"}
    (folder / "mine.json").write_text(json.dumps(record))
    (folder / "index.json").write_text(json.dumps({"schema": "dumpgym.user-corpus/1", "programs": ["mine"]}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-m", "dumpgym", "export", "--corpus", str(folder), "mine"],
                         capture_output=True, text=True, env=env, check=True).stdout
    exported = json.loads(out)
    assert exported["schema"] == SCHEMA
    (mine,) = exported["programs"]
    assert list(mine["compiled"]) == ["tpu"] and "hlo_tpu" not in mine
    assert mine["compiled"]["tpu"] == by_slug["rmsnorm"]["compiled"]["tpu"]
    assert any(i["program"] == "mine" and i["layer"] == "tpu" for i in build_pool(exported)["items"])


def test_a_compiled_layer_under_an_id_that_is_no_id_is_refused(by_slug):
    bad = copy.deepcopy(by_slug["mlp"])
    bad["compiled"]["TPU v5e"] = bad["compiled"].pop("tpu")
    with pytest.raises(RecordError, match="is not a compile target id"):
        ProgramRecord.from_json(bad)


def test_one_registry_entry_carries_a_layer_to_record_page_switch_and_drills(v6e, by_slug):
    """A TPU v6e layer, registered and nothing else: the build compiles for it, the page ships its listing
    and offers it on the x-ray's switch, and the TPU drills ask about it."""
    import jax.numpy as jnp

    from dumpgym.compiled.layer import compile_layer  # noqa: F401  (the compiled layer needs jaxlib's HLO bindings)

    def ffn(x, w1, w2):
        return jnp.dot(jnp.maximum(jnp.dot(x, w1), 0), w2)

    program = Program(slug="ffn", title="ffn", lesson="a test's", function=ffn,
                      args=("bf16[64,256]", "bf16[256,512]", "bf16[512,256]"))
    v6e.target.require()
    record = program_record(program, targets=[TARGETS["tpu"].target, v6e.target])
    assert list(record.compiled) == ["tpu", "tpu-v6e"]  # the registry's order
    layer = record.compiled["tpu-v6e"]
    assert (layer.backend, layer.topology, layer.device_kind) == ("tpu", "v6e:2x2", "TPU v6 lite")
    assert layer.text != record.compiled["tpu"].text  # another chip, another compile

    corpus = {"schema": SCHEMA, "jax_version": by_slug["mlp"].get("jax_version", "0.10.2"),
              "programs": [record.to_json()]}
    pool = build_pool(Corpus.from_json(corpus).to_json())
    layers = {(i["drill"], i["layer"]) for i in pool["items"] if "layer" in i}
    # Every kind that reads a TPU layer's facts asks about both (ffn's buffers all sit in HBM, so the layouts
    # kind's memory-space step has no question on either layer: a fusion's intermediates hold no buffer).
    for kind in ("fusions", "buffers", "units"):
        assert (kind, "tpu-v6e") in layers and (kind, "tpu") in layers, kind

    files = site_files(corpus, pool)
    assert "data/compiled/tpu-v6e/ffn.json" in files and "data/compiled/tpu/ffn.json" in files
    page = files["index.html"].decode()
    switch = page[page.index("data-xray-targets"):page.index("</span>", page.index("data-xray-targets"))]
    assert 'data-xray-target="tpu"' in switch and 'data-xray-target="tpu-v6e"' in switch
    assert ">v6e</button>" in switch and 'title="TPU v6e (2x2), compiled without a TPU"' in switch
    assert 'data-xray-target="cpu"' not in switch  # no program of this corpus has a CPU layer
