"""What a card or a lesson claims of the corpus (which ops appear, how many, what is recomputed) is what
JAX and the compiled layers show: each claim is recomputed here from a fresh trace or lowering, or read
from the committed corpus's compiled layers, never taken from the card's own words."""
from __future__ import annotations

import re

import pytest

from dumpgym.reference import card_for

NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "a pair of": 2, "a": 1}


def _jaxpr(program):
    import jax

    return jax.make_jaxpr(program.function)(*program.example_args()).jaxpr


def _custom_call_targets(function, *args) -> set[str]:
    """The `call_target_name` of every custom_call JAX's lowering of `function` emits, read with the MLIR bindings."""
    import jax
    from jax.interpreters import mlir
    from jaxlib.mlir import ir

    module = ir.Module.parse(jax.jit(function).lower(*args).as_text(), context=mlir.make_ir_context())
    found = set()

    def visit(op):
        for region in op.regions:
            for block in region.blocks:
                for child in block.operations:
                    if child.operation.name == "stablehlo.custom_call":
                        found.add(ir.StringAttr(child.operation.attributes["call_target_name"]).value)
                    visit(child.operation)

    visit(module.operation)
    return found


def test_the_custom_call_card_names_the_targets_cholesky_and_pure_callback_lower_to():
    import jax
    import jax.numpy as jnp
    import numpy as np

    x = jax.ShapeDtypeStruct((4, 4), jnp.float32)
    card = card_for("stablehlo.custom_call", "stablehlo")
    text = " ".join((card.looks, card.misread))
    callback = lambda a: jax.pure_callback(lambda v: np.asarray(v) * 2, jax.ShapeDtypeStruct(a.shape, a.dtype), a)
    for function in (jnp.linalg.cholesky, callback):
        (target,) = _custom_call_targets(function, x)
        assert f"@{target}" in text, target


def _while_count(layer) -> int:
    return sum(1 for i in layer["instructions"] if i["opcode"] == "while")


def _loops(record) -> list[str]:
    return [e["primitive"] for e in record["eqns"] if e["primitive"] in ("scan", "while")]


def test_the_compiled_while_card_says_which_programs_loop_as_their_compiles_do(by_slug):
    card = card_for("while", "hlo")
    text = card.misread
    # dropout writes no loop, yet its CPU compile has one (threefry's rounds)
    assert "dropout" in text and not _loops(by_slug["dropout"]) and _while_count(by_slug["dropout"]["compiled"]["cpu"])
    # every scan of the corpus stays a while on every backend: the card must not say one unrolls
    for slug, record in by_slug.items():
        scans = _loops(record).count("scan")
        for target, layer in record["compiled"].items():
            assert _while_count(layer) >= scans, (slug, target)
    assert "unroll it" not in text
    for slug in ("rnn-bptt", "scan-layers"):
        assert slug in text and _loops(by_slug[slug]).count("scan") >= 1
    # the scan program has neither a loop in its jaxpr nor a while in any compile
    assert "the scan program has none" in text
    assert not _loops(by_slug["scan"]) and not any(_while_count(l) for l in by_slug["scan"]["compiled"].values())


def _dtype_of(layer, ins) -> str | None:
    """The element type of an instruction's result, from the record's shapes and buffers (one array only)."""
    if "shape" not in ins:
        return None
    members = layer["shapes"][ins["shape"]]["buffers"]
    return layer["buffers"][members[0]]["dtype"] if len(members) == 1 else None


def test_the_compiled_copy_card_names_a_copy_that_converts_and_the_corpus_has_it(by_slug):
    card = card_for("copy", "hlo")
    assert "fsdp-step" in card.misread and "f32" in card.misread and "bf16" in card.misread
    layer = by_slug["fsdp-step"]["compiled"]["tpu"]
    by_line = {i["line"]: i for i in layer["instructions"]}
    converting = [(_dtype_of(layer, by_line[i["operands"][0]]), _dtype_of(layer, i))
                  for i in layer["instructions"] if i["opcode"] == "copy" and i.get("operands")]
    assert ("f32", "bf16") in converting


def test_the_fusion_card_names_every_fusion_kind_the_corpus_prints(corpus):
    card = card_for("fusion", "hlo")
    printed = {f["kind"] for p in corpus["programs"] for layer in p["compiled"].values() for f in layer["fusions"]}
    assert "kCustom" in printed
    assert {k for k in printed if k not in card.looks} == set()


def _lesson(slug):
    from dumpgym.programs import builtin_program

    return builtin_program(slug)


def _consumers(jaxpr):
    uses = {}
    for eqn in jaxpr.eqns:
        for v in eqn.invars:
            if not hasattr(v, "val"):
                uses.setdefault(v, []).append(eqn)
    return uses


def test_the_sdpa_lesson_counts_the_transposes_after_the_second_matmul(programs):
    """From the last dot_general to the result, JAX's jaxpr has as many transposes as the lesson says."""
    jaxpr = _jaxpr(programs["sdpa"])
    last = max(i for i, e in enumerate(jaxpr.eqns) if e.primitive.name == "dot_general")
    after = [e.primitive.name for e in jaxpr.eqns[last + 1:]]
    assert after[-1] == "reshape"
    match = re.search(r"(a pair of|\w+) transposes? and a reshape give back", _lesson("sdpa").lesson)
    assert match and NUMBERS[match.group(1)] == after.count("transpose") == 2


def test_the_rnn_bptt_lesson_lists_every_xs_of_the_backward_scan(programs):
    jaxpr = _jaxpr(programs["rnn-bptt"])
    (backward,) = [e for e in jaxpr.eqns if e.primitive.name == "scan" and e.params["reverse"]]
    xs = backward.invars[backward.params["num_consts"] + backward.params["num_carry"]:]
    lesson = _lesson("rnn-bptt").lesson
    match = re.search(r"reads (\w+) xs", lesson)
    assert match and NUMBERS[match.group(1)] == len(xs)
    # the one xs that is not a stacked [12, batch, ...] array: each step's energy cotangent
    (per_step,) = [v for v in xs if v.aval.ndim == 1]
    assert per_step.aval.str_short(short_dtypes=True) in lesson


def test_the_ckpt_policy_lesson_names_every_equation_remat_computes_again(programs):
    """The primitives that run both in the forward pass and again inside remat2's body (dots aside,
    which the policy saves) are the ones the lesson says are computed again."""
    jaxpr = _jaxpr(programs["ckpt-policy"])
    (remat,) = [e for e in jaxpr.eqns if e.primitive.name == "remat2"]
    outside = {e.primitive.name for e in jaxpr.eqns}
    again = {e.primitive.name for e in remat.params["jaxpr"].eqns} & outside - {"dot_general"}
    assert again == {"sin", "tanh"}
    (sentence,) = [s for s in re.split(r"(?<=\.) ", _lesson("ckpt-policy").lesson) if "computed again" in s]
    assert {p for p in again if re.search(rf"\b{p}\b", sentence)} == again
