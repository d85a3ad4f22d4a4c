"""Each rule by which XLA's rewrites are attributed (docs/corpus.md, "How XLA's rewrites are attributed"),
on a program that shows it: the relation the rule needs is proven from JAX's own jaxpr (re-traced here),
what XLA did is read from the compiled text's opcodes, and the attribution must follow.

The TPU and GPU layers are what a fresh compile prints (tests/test_target.py, tests/test_hlo_gpu.py); the
CPU layer depends on this machine's CPU, so a CPU rule is checked on a fresh compile made here."""
from __future__ import annotations

import re

import numpy as np
import pytest

from dumpgym.record.targets import CPU
from fusion_work import body as _body

CALLS = re.compile(r"\b(?:calls|to_apply)=%([\w.\-]+)")


@pytest.fixture(scope="module")
def traced():
    """Each program's trace and facts, made by JAX here: the JAX equations behind each equation id."""
    from dumpgym.traced.facts import build_facts
    from dumpgym.programs import builtin_program
    from dumpgym.traced.trace import trace
    made = {}

    def get(slug):
        if slug not in made:
            program = builtin_program(slug)
            t = trace(program.function, program.example_args())
            made[slug] = (t, build_facts(t))
        return made[slug]

    return get


def _eqn_at(record, primitive, line):
    return next(e["id"] for e in record["eqns"] if e["primitive"] == primitive and e["jaxpr_lines"][0] == line)


def _consumers(facts, e):
    """The JAX equations that read an output of equation `e`, by id (same jaxpr)."""
    outs = set(map(id, facts.jax_eqns[e].outvars))
    return {n for n, eqn in facts.jax_eqns.items() if any(id(v) in outs for v in eqn.invars)}


def _instruction(layer, name):
    return next(i for i in layer["instructions"] if i["name"] == name)


def _called(layer, fusion):
    return re.search(r"calls=%([\w.\-]+)", layer["text"].splitlines()[fusion["line"] - 1]).group(1)


def _absorbed(ins) -> list[tuple[int, int]]:
    """A row's folded equations as (equation, rule)."""
    return [(a["eqn"], a["rule"]) for a in ins.get("absorbed", ())]


def test_rule_2_a_transpose_folded_into_a_dot_is_its_own_and_absorbs_the_dot(by_slug, traced):
    record = by_slug["train-step"]
    _, facts = traced("train-step")
    dot = _instruction(record["compiled"]["gpu"], "dot.6")
    assert dot["opcode"] == "dot" and dot["via"] == "tag"
    ((t,), [(d, rule)]) = dot["eqns"], _absorbed(dot)
    assert (facts.eqns[d].primitive, facts.eqns[t].primitive, rule) == ("dot_general", "transpose", 2)
    assert _consumers(facts, d) == {t}  # the jaxpr: the dot's one consumer is the transpose


def test_rule_2_an_iota_folded_into_a_compare_is_absorbed_by_it(by_slug, traced):
    record = by_slug["moe"]
    _, facts = traced("moe")
    iota, eq = _eqn_at(record, "iota", 7), _eqn_at(record, "eq", 8)
    assert _consumers(facts, iota) == {eq}
    for target in ("tpu", "gpu"):
        layer = record["compiled"][target]
        assert not [i for i in layer["instructions"] if iota in i["eqns"] and i["opcode"] != "fusion"], target
        holders = [i for i in layer["instructions"] if (iota, 2) in _absorbed(i)]
        assert holders and all(i["opcode"] == "iota" and i["eqns"] == [eq] for i in holders), target


def test_rule_2_a_broadcast_folded_into_its_consumer_through_stop_gradient(by_slug, traced):
    """softmax broadcasts the row max, stops its gradient and subtracts it: XLA's one broadcast, tagged
    `sub`, does the broadcast_in_dim's work too."""
    record = by_slug["softmax"]
    _, facts = traced("softmax")
    (sub,) = [e["id"] for e in record["eqns"] if e["primitive"] == "sub"]
    (bcast,) = [e for e in facts.jax_eqns if facts.eqns[e].primitive == "broadcast_in_dim" and sub in
                {c2 for c in _consumers(facts, e) for c2 in _consumers(facts, c)}]
    (stop,) = _consumers(facts, bcast)
    assert facts.eqns[stop].primitive == "stop_gradient" and _consumers(facts, stop) == {sub}
    for target in ("tpu", "gpu"):
        layer = record["compiled"][target]
        assert not [i for i in layer["instructions"] if bcast in i["eqns"] and i["opcode"] != "fusion"], target
        holders = [i for i in layer["instructions"] if (bcast, 2) in _absorbed(i)]
        assert holders and all(i["opcode"] == "broadcast" and i["eqns"] == [sub] for i in holders), target


def test_rule_3_two_slices_selecting_the_same_elements_are_one_instruction(by_slug, traced):
    """scan's slices on jaxpr lines 52 and 58 pick the same column (strides aside): XLA kept one slice,
    and the TPU's `%slice_add_fusion.1` computes both."""
    from jax import lax

    record = by_slug["scan"]
    _, facts = traced("scan")
    a, b = _eqn_at(record, "slice", 52), _eqn_at(record, "slice", 58)
    ea, eb = facts.jax_eqns[a], facts.jax_eqns[b]
    assert ea.params != eb.params and ea.invars[0] is eb.invars[0]  # different params, the same operand
    x = np.arange(np.prod(ea.invars[0].aval.shape), dtype=np.float32).reshape(ea.invars[0].aval.shape)
    assert np.array_equal(lax.slice_p.bind(x, **ea.params), lax.slice_p.bind(x, **eb.params))  # JAX computes both
    layer = record["compiled"]["tpu"]
    fusion = next(f for f in layer["fusions"] if f["name"] == "slice_add_fusion.1")
    assert {a, b} <= set(fusion["eqns"])
    (kept,) = [i for i in _body(layer, _called(layer, fusion))
               if i["opcode"] == "slice" and {a, b} & {*i["eqns"], *(e for e, _ in _absorbed(i))}]
    ((own,), [(folded, rule)]) = kept["eqns"], _absorbed(kept)  # one is its own, the other folded in
    assert {own, folded} == {a, b} and rule == 3


def test_rule_4_a_reduce_window_is_the_reduction_and_its_broadcast_not_its_tag(by_slug, traced):
    record = by_slug["sdpa"]
    _, facts = traced("sdpa")
    reduce_max, sub = _eqn_at(record, "reduce_max", 52), _eqn_at(record, "sub", 58)
    # the jaxpr: sub subtracts from reduce_max's operand what reduce_max made of it
    assert facts.jax_eqns[sub].invars[0] is facts.jax_eqns[reduce_max].invars[0]
    layer = record["compiled"]["tpu"]
    lines = layer["text"].splitlines()
    fusion = next(f for f in layer["fusions"] if f["name"] == "fusion.9")
    assert reduce_max in fusion["eqns"] and sub in fusion["eqns"]
    body = _body(layer, _called(layer, fusion))
    (window,) = [i for i in body if i["opcode"] == "reducewindow"]
    assert 'op_name="jit(sdpa)/vmap()/sub"' in lines[window["line"] - 1]  # XLA's tag names sub ...
    assert reduce_max in window["eqns"] and sub not in window["eqns"]  # ... but it computes the row max
    (region,) = CALLS.findall(lines[window["line"] - 1])
    combiner = [i for i in layer["instructions"] if i["computation"] == region]
    assert "maximum" in {i["opcode"] for i in combiner}
    assert all(sub not in i["eqns"] and reduce_max in i["eqns"] for i in combiner)


@pytest.mark.parametrize("target", ["tpu", "gpu"])
def test_rule_5_a_regions_instructions_compute_what_applies_them(corpus, target):
    """Every instruction of a to_apply region lists exactly the equations of the instructions applying it."""
    checked = 0
    for record in corpus["programs"]:
        layer = record["compiled"].get(target)
        if layer is None:
            continue
        lines = layer["text"].splitlines()
        applied = {}
        for ins in layer["instructions"]:
            for region in re.findall(r"\bto_apply=%([\w.\-]+)", lines[ins["line"] - 1]):
                applied.setdefault(region, set()).update(ins["eqns"])
        for ins in layer["instructions"]:
            if ins["computation"] in applied:
                # what applies it, not the reducer whose tag it carries (one copy serves equal reducers)
                assert applied[ins["computation"]] == set(ins["eqns"]), (record["slug"], ins["name"])
                checked += 1
    assert checked


def test_rule_6_stop_gradient_and_max_against_minus_infinity_have_no_instruction(by_slug, traced):
    record = by_slug["sdpa"]
    _, facts = traced("sdpa")
    stop, most = _eqn_at(record, "stop_gradient", 57), _eqn_at(record, "max", 53)
    assert [float(v.val) for v in facts.jax_eqns[most].invars if hasattr(v, "val")] == [-np.inf]
    for target in ("tpu", "gpu"):
        layer = record["compiled"][target]
        regions = set(re.findall(r"\bto_apply=%([\w.\-]+)", layer["text"]))
        for ins in layer["instructions"]:
            assert stop not in ins["eqns"], (target, ins["name"])
            if most in ins["eqns"]:  # only where rule 4 proves the window computes it
                assert ins["opcode"] in ("fusion", "reducewindow") or ins["computation"] in regions, ins["name"]


CONTRACTING = {"dot", "convolution", "customcall", "fusion"}
REWRITTEN = {"multiply", "reduce", "add", "convert", "reducewindow"}


def _contraction_free(layer, fusion) -> bool:
    """Whether a fusion's body (from the text's opcodes) can do no contraction: no dot, convolution, kernel,
    nested fusion, or arithmetic that a contraction may be rewritten into."""
    return not {i["opcode"] for i in _body(layer, _called(layer, fusion))} & (CONTRACTING | REWRITTEN)


def _check_no_layout_fusion_holds_a_dot(record, layer) -> int:
    checked = 0
    for fusion in layer["fusions"]:
        if _contraction_free(layer, fusion):
            assert not any(record["eqns"][e]["primitive"] == "dot_general" for e in fusion["eqns"]), \
                (record["slug"], fusion["name"])
            checked += 1
    return checked


@pytest.mark.parametrize("target", ["tpu", "gpu"])
def test_rule_7_a_fusion_that_only_moves_data_holds_no_dot(corpus, target):
    checked = sum(_check_no_layout_fusion_holds_a_dot(p, p["compiled"][target])
                  for p in corpus["programs"] if target in p["compiled"])
    assert checked


def test_rule_7_the_fsdp_partitioners_slicing_fusion_holds_no_dot(by_slug):
    layer = by_slug["fsdp-step"]["compiled"]["tpu"]
    fusion = next(f for f in layer["fusions"] if f["name"] == "constant_dynamic-slice_fusion")
    assert {i["opcode"] for i in _body(layer, _called(layer, fusion))} <= {"constant", "dynamicslice", "parameter"}
    assert fusion["eqns"] == []


@pytest.mark.parametrize("slug", ["sdpa", "decode-loop", "fsdp-step"])
def test_rule_7_on_a_fresh_cpu_compile_bitcasts_and_copies_do_not_compute_a_dot(slug, programs):
    from dumpgym.corpus.pipeline import program_record

    record = program_record(programs[slug], targets=[CPU]).to_json()
    layer = record["compiled"]["cpu"]
    assert _check_no_layout_fusion_holds_a_dot(record, layer)
    if slug == "sdpa":
        # the fusion that scales the probabilities, converts them to bf16 and lays them out for the
        # second matmul: it holds the div and the convert, not the dot
        div, convert = _eqn_at(record, "div", 64), _eqn_at(record, "convert_element_type", 65)
        (fusion,) = [f for f in layer["fusions"] if {div, convert} <= set(f["eqns"]) and
                     "transpose" in {i["opcode"] for i in _body(layer, _called(layer, f))}]
        assert not any(record["eqns"][e]["primitive"] == "dot_general" for e in fusion["eqns"])


def test_rule_8_an_untagged_all_reduce_computes_the_collective_its_combiner_is_tagged_with(by_slug, traced):
    """collective-matmul's TPU compile does its one reduce_scatter as an all-reduce with no metadata; the
    jaxpr has exactly one combining collective, over mesh axis y, and the all-reduce's replica groups are
    the mesh's devices grouped along y: it is that equation's work, inferred."""
    from dumpgym.programs.collective_matmul import MESH

    record = by_slug["collective-matmul"]
    _, facts = traced("collective-matmul")
    (scatter,) = [e for e, eqn in facts.jax_eqns.items() if eqn.primitive.name in ("reduce_scatter", "psum", "psum2")]
    assert facts.jax_eqns[scatter].params["axis_name"] == ("y",)
    assert MESH.axis_names == ("x", "y")
    ids = np.vectorize(lambda d: d.id)(MESH.devices)  # a row is one group along y
    along_y = sorted(sorted(int(i) for i in row) for row in ids)
    layer = record["compiled"]["tpu"]
    lines = layer["text"].splitlines()
    reduces = [i for i in layer["instructions"] if i["opcode"] == "allreduce"]
    assert reduces
    for ins in reduces:
        line = lines[ins["line"] - 1]
        assert "op_name=" not in line  # no metadata of its own
        written = re.search(r"replica_groups=\{((?:\{[\d,]+\},?)+)\}", line).group(1)
        groups = sorted(sorted(int(n) for n in g.split(",")) for g in re.findall(r"\{([\d,]+)\}", written))
        assert groups == along_y
        assert (ins["eqns"], ins["via"]) == ([scatter], "inferred")
