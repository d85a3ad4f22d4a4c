"""Spot the decision: every target line holds the op its kind names, and it is the first such line."""
import jax
import jax.numpy as jnp
import pytest

from dumpgym.corpus import program_record
from dumpgym.drills import decisions
from dumpgym.program import Program
from dumpgym.record import ProgramRecord

# What a line must show for each kind, per layer: jaxpr primitive names and StableHLO op names.
JAXPR_OPS = {
    "hidden-broadcast": {"broadcast_in_dim"},
    "upcast": {"convert_element_type"},
    "remat": {"remat", "remat2", "checkpoint"},
    "collective": {"psum", "psum2", "psum_invariant", "all_gather", "ppermute", "all_to_all", "psum_scatter"},
    "iota-mask": {"iota"},
    "transpose": {"transpose"},
}
STABLEHLO_OPS = {
    "hidden-broadcast": {"stablehlo.broadcast_in_dim"},
    "upcast": {"stablehlo.convert"},
    "remat": {"stablehlo.optimization_barrier"},
    "collective": {"stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.collective_permute",
                   "stablehlo.all_to_all", "stablehlo.reduce_scatter"},
    "iota-mask": {"stablehlo.iota"},
    "transpose": {"stablehlo.transpose"},
}
# Checked by reading each program's dumps.
EXPECTED = {
    ("mlp", "hidden-broadcast"), ("layernorm", "upcast"), ("remat", "remat"), ("psum", "collective"),
    ("causal", "iota-mask"), ("attention", "transpose"), ("moe", "transpose"), ("grads", "transpose"),
    ("moe", "iota-mask"), ("softmax", "upcast"), ("dequant", "hidden-broadcast"),
}
# Absent from the jaxpr (StableHLO may still show some, e.g. remat's GELU constants are broadcast there).
ABSENT = {
    ("sharded", "collective"), ("mlp", "transpose"), ("mlp", "upcast"), ("attention", "iota-mask"),
    ("remat", "hidden-broadcast"), ("gqa", "hidden-broadcast"), ("dequant", "upcast"),
}


def _items(program: dict):
    return decisions.decisions_pool(ProgramRecord.from_json(program))


@pytest.fixture(scope="module")
def pool(corpus):
    return {p["slug"]: _items(p) for p in corpus["programs"]}


def test_expected_kinds_have_a_jaxpr_item(pool):
    for slug, kind in EXPECTED:
        assert any(i["kind"] == kind and i["layer"] == "jaxpr" for i in pool[slug]), (slug, kind)


def test_kinds_that_do_not_occur_have_no_item(pool):
    for slug, kind in ABSENT:
        assert not any(i["kind"] == kind and i["layer"] == "jaxpr" for i in pool[slug]), (slug, kind)
    assert not any(i["kind"] == "collective" for i in pool["sharded"])
    assert pool["rope"] == [] and pool["gqa"] == [] and pool["scan"] == []


def test_a_kind_appears_exactly_when_its_primitive_does(corpus, pool):
    simple = {"hidden-broadcast", "remat", "collective", "transpose"}
    for program in corpus["programs"]:
        primitives = {e["primitive"] for e in program["eqns"]}
        for kind in simple:
            occurs = bool(primitives & JAXPR_OPS[kind])
            has = any(i["kind"] == kind and i["layer"] == "jaxpr" for i in pool[program["slug"]])
            assert occurs == has, (program["slug"], kind)


def test_jaxpr_targets_hold_the_op_inside_the_eqn_span(corpus, pool):
    for program in corpus["programs"]:
        lines = program["jaxpr"].splitlines()
        eqns = {e["id"]: e for e in program["eqns"]}
        for item in pool[program["slug"]]:
            if item["layer"] != "jaxpr":
                continue
            eqn = eqns[item["eqn"]]
            first, last = eqn["jaxpr_lines"]
            assert first <= item["answer_line"] <= last
            text = lines[item["answer_line"] - 1]
            assert eqn["primitive"] in JAXPR_OPS[item["kind"]]
            assert f"= {eqn['primitive']}" in text, (program["slug"], item["kind"], text)
            assert f"Line {item['answer_line']}:" in item["feedback"]


def test_jaxpr_targets_are_the_first_such_line(corpus, pool):
    # Read straight off the printed text: no earlier line binds the same kind of op.
    for program in corpus["programs"]:
        lines = program["jaxpr"].splitlines()
        for item in pool[program["slug"]]:
            if item["layer"] != "jaxpr" or item["kind"] not in {"hidden-broadcast", "transpose", "remat", "collective"}:
                continue
            earlier = lines[:item["answer_line"] - 1]
            assert not any(f"= {op}[" in t or f"= {op} " in t for t in earlier for op in JAXPR_OPS[item["kind"]])


def test_upcast_targets_widen_a_float(corpus, pool):
    for program in corpus["programs"]:
        eqns = {e["id"]: e for e in program["eqns"]}
        widening = [e for e in program["eqns"] if e["primitive"] == "convert_element_type"
                    and e["inputs"][0]["dtype"] in ("bfloat16", "float16") and e["outputs"][0]["dtype"] == "float32"]
        items = [i for i in pool[program["slug"]] if i["kind"] == "upcast" and i["layer"] == "jaxpr"]
        assert len(items) == (1 if widening else 0), program["slug"]
        if items:
            target = eqns[items[0]["eqn"]]
            assert target in widening
            assert target["jaxpr_lines"][0] == min(e["jaxpr_lines"][0] for e in widening)


def test_stablehlo_targets_hold_the_op(corpus, pool):
    count = 0
    for program in corpus["programs"]:
        lines = program["stablehlo"].splitlines()
        ops = {(op["line"], op["name"]) for op in program["stablehlo_ops"]}
        for item in pool[program["slug"]]:
            if item["layer"] != "stablehlo":
                continue
            names = {name for line, name in ops if line == item["answer_line"]} & STABLEHLO_OPS[item["kind"]]
            assert names, (program["slug"], item)
            assert any(name in lines[item["answer_line"] - 1] for name in names)
            assert item["eqn"] is None
            count += 1
    assert count >= 20


def test_stablehlo_targets_are_traced_to_their_writer(corpus, pool):
    for program in corpus["programs"]:
        for item in pool[program["slug"]]:
            if item["layer"] == "stablehlo" and item["source_eqn"] is not None:
                group = next(g for g in program["xray"] if g["eqn"] == item["source_eqn"])
                assert item["answer_line"] in group["stablehlo_lines"]


def test_stablehlo_item_exists_exactly_when_the_op_does(corpus, pool):
    # For kinds that the op name alone identifies; converts, iotas and barriers also need their writer.
    for program in corpus["programs"]:
        names = {op["name"] for op in program["stablehlo_ops"]}
        for kind in ("hidden-broadcast", "transpose", "collective"):
            has_op = bool(names & STABLEHLO_OPS[kind])
            has_item = any(i["kind"] == kind and i["layer"] == "stablehlo" for i in pool[program["slug"]])
            assert has_op == has_item, (program["slug"], kind)


def test_real_targets(by_slug, pool):
    mlp = {(i["kind"], i["layer"]): i for i in pool["mlp"]}
    assert mlp["hidden-broadcast", "jaxpr"]["answer_line"] == 6  # g:bf16[1,512] = broadcast_in_dim ... c
    assert mlp["hidden-broadcast", "stablehlo"]["answer_line"] == 4  # %1 = stablehlo.broadcast_in_dim %arg2
    psum = {(i["kind"], i["layer"]): i for i in pool["psum"]}
    assert "psum_invariant" in psum["collective", "jaxpr"]["feedback"]
    assert psum["collective", "stablehlo"]["answer_line"] == 6  # "stablehlo.all_reduce"
    causal = {(i["kind"], i["layer"]): i for i in pool["causal"]}
    assert "tril" in causal["iota-mask", "jaxpr"]["feedback"]
    remat = {(i["kind"], i["layer"]): i for i in pool["remat"]}
    assert remat["remat", "jaxpr"]["answer_line"] == 2 and ("remat", "stablehlo") not in remat


def remat_grad(x, w):
    f = jax.checkpoint(lambda y: jnp.sin(y @ w))
    return jax.grad(lambda y: jnp.sum(f(y)))(x)


def test_remat_under_grad_points_at_the_optimization_barrier():
    record = program_record(Program(slug="remat-grad", title="t", lesson="l", function=remat_grad,
                                    args=("f32[8,16]", "f32[16,16]"))).to_json()
    items = {(i["kind"], i["layer"]): i for i in _items(record)}
    line = items["remat", "stablehlo"]["answer_line"]
    assert "stablehlo.optimization_barrier" in record["stablehlo"].splitlines()[line - 1]
    assert "remat2[" in record["jaxpr"].splitlines()[items["remat", "jaxpr"]["answer_line"] - 1]


def plain(x):
    return jnp.sin(x) * 2.0


def test_scalar_operand_broadcast_shows_only_in_stablehlo():
    # `* 2.0` keeps the scalar as a literal in the jaxpr; StableHLO spells out its broadcast.
    record = program_record(Program(slug="plain", title="t", lesson="l", function=plain, args=("f32[8]",))).to_json()
    items = _items(record)
    assert [(i["kind"], i["layer"]) for i in items] == [("hidden-broadcast", "stablehlo")]
    mul = next(e for e in record["eqns"] if e["primitive"] == "mul")
    assert items[0]["source_eqn"] == mul["id"]
    assert "stablehlo.broadcast_in_dim" in record["stablehlo"].splitlines()[items[0]["answer_line"] - 1]


def sine(x):
    return jnp.sin(x)


def test_program_without_decisions_gets_no_items():
    record = program_record(Program(slug="sine", title="t", lesson="l", function=sine, args=("f32[8]",))).to_json()
    assert _items(record) == []
