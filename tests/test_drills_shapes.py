"""The shape oracle: answers agree with jax.eval_shape and the facts; distractors are distinct and explained."""
import jax
import jax.numpy as jnp
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from jax import lax

from dumpgym.drills import shapes
from dumpgym.drills._misreadings import distractor_rules
from dumpgym.facts import build_facts
from dumpgym.record import EqnFact, ProgramRecord

DTYPES = [jnp.float32, jnp.bfloat16, jnp.float16, jnp.int32, jnp.int8]
# Sizes start at 2: with size-1 axes several misreadings collapse into one aval (see
# test_f32_scalar_unary_equation_is_skipped_for_want_of_misreadings for what happens then).
SIZES = st.integers(2, 6)
PROPERTY = settings(max_examples=40, deadline=None)


def jax_aval(shape, dtype) -> str:
    """JAX's own short aval text, e.g. `bf16[64,512]`."""
    return jax.core.ShapedArray(tuple(shape), jnp.dtype(dtype)).str_short(short_dtypes=True)


def only_item(fn, *args):
    """Trace `fn` (one equation), build its facts, and return (shapes item, expected aval text)."""
    specs = [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in args]
    records = build_facts(jax.make_jaxpr(fn)(*specs)).to_json()
    out = jax.eval_shape(fn, *specs)
    if not records:  # lax skips no-op calls (identity transpose, same-dtype convert)
        return None, None
    assert len(records) == 1, records
    return shapes.shapes_item(EqnFact.from_json(records[0]), "prop"), jax_aval(out.shape, out.dtype)


def check_item(item, expected: str):
    assert item is not None
    assert item.options[item.answer] == expected
    assert item.options.count(expected) == 1
    assert len(set(item.options)) == len(item.options) >= 3
    assert len(item.reasons) == len(item.rules) == len(item.options)
    for i, (reason, rule) in enumerate(zip(item.reasons, item.rules)):
        assert (reason == "" and rule == "") == (i == item.answer)


@st.composite
def arrays(draw, min_rank=1, max_rank=4, dtypes=DTYPES):
    shape = tuple(draw(st.lists(SIZES, min_size=min_rank, max_size=max_rank)))
    return shape, draw(st.sampled_from(dtypes))


@PROPERTY
@given(x=arrays(), data=st.data(), op=st.sampled_from([lax.reduce_sum, lax.reduce_max, lax.reduce_min]))
def test_reduction_answer_matches_eval_shape(x, data, op):
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, len(x[0]) - 1), min_size=1))))
    item, expected = only_item(lambda a: op(a, axes), x)
    check_item(item, expected)


@PROPERTY
@given(x=arrays(dtypes=[jnp.float32, jnp.bfloat16, jnp.int32]), data=st.data())
def test_argmax_answer_matches_eval_shape(x, data):
    axis = data.draw(st.integers(0, len(x[0]) - 1))
    item, expected = only_item(lambda a: lax.argmax(a, axis, jnp.int32), x)
    check_item(item, expected)
    if x[1] != jnp.int32:
        assert jax_aval(jax.eval_shape(lambda a: lax.argmax(a, axis, jnp.int32), jax.ShapeDtypeStruct(*x)).shape,
                        x[1]) in item.options  # the index-dtype misreading is offered


@PROPERTY
@given(out=arrays(max_rank=4), data=st.data())
def test_broadcast_in_dim_answer_matches_eval_shape(out, data):
    shape, dtype = out
    dims = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1)))))
    operand = tuple(data.draw(st.sampled_from([shape[d], 1])) for d in dims)
    item, expected = only_item(lambda a: lax.broadcast_in_dim(a, shape, dims), (operand, dtype))
    assume(expected is not None)
    check_item(item, expected)


@PROPERTY
@given(x=arrays(), data=st.data())
def test_transpose_answer_matches_eval_shape(x, data):
    perm = tuple(data.draw(st.permutations(range(len(x[0])))))
    item, expected = only_item(lambda a: lax.transpose(a, perm), x)
    assume(expected is not None)
    check_item(item, expected)


@PROPERTY
@given(x=arrays(min_rank=0), new=st.sampled_from(DTYPES + [jnp.bool_]))
def test_convert_answer_matches_eval_shape(x, new):
    item, expected = only_item(lambda a: lax.convert_element_type(a, new), x)
    assume(expected is not None)
    check_item(item, expected)
    old = jax_aval(x[0], x[1])
    assert old in item.options and item.rules[item.options.index(old)] == "forgot-convert"


@PROPERTY
@given(x=arrays(min_rank=0), literal=st.sampled_from([0.5, 2.0, -1.0]))
def test_literal_operand_answer_matches_eval_shape(x, literal):
    assume(jnp.issubdtype(x[1], jnp.floating))
    item, expected = only_item(lambda a: a * literal, x)
    check_item(item, expected)


def test_reduce_sum_distractors_name_their_rules():
    fn = lambda a: lax.reduce_sum(a, (1,))  # noqa: E731
    item, expected = only_item(fn, ((64, 128), jnp.float32))
    wrong = {rule: option for option, rule in zip(item.options, item.rules) if rule}
    assert expected == "f32[64]"
    assert wrong["kept-reduced-axis"] == "f32[64,1]"
    assert wrong["dropped-wrong-axis"] == "f32[128]"


def test_transpose_offers_the_inverse_permutation():
    item, expected = only_item(lambda a: lax.transpose(a, (2, 0, 1)), ((64, 32, 4), jnp.bfloat16))
    assert expected == "bf16[4,64,32]"
    assert item.options[item.rules.index("inverted-permutation")] == "bf16[32,4,64]"


# -- the real corpus -------------------------------------------------------------------------------

def _shape_items(program):
    return {item["eqn"]: item for item in shapes.shapes_items(ProgramRecord.from_json(program))}


def test_every_single_output_equation_has_a_shapes_item(corpus):
    for program in corpus["programs"]:
        items = _shape_items(program)
        for eqn in program["eqns"]:
            if len(eqn["outputs"]) == 1:
                assert eqn["id"] in items, (program["slug"], eqn["primitive"], eqn["id"])
            else:
                assert eqn["id"] not in items


def test_corpus_shape_answers_equal_the_output_facts(corpus):
    for program in corpus["programs"]:
        items = _shape_items(program)
        for eqn in program["eqns"]:
            if eqn["id"] in items:
                out = eqn["outputs"][0]
                item = items[eqn["id"]]
                assert item["options"][item["answer"]] == jax_aval(out["shape"], out["dtype"])


def test_corpus_shape_options_are_distinct_and_every_wrong_one_has_a_reason(corpus):
    sizes = []
    for program in corpus["programs"]:
        for item in shapes.shapes_items(ProgramRecord.from_json(program)):
            assert len(set(item["options"])) == len(item["options"]) >= 3
            assert len(item["reasons"]) == len(item["options"])
            for i, reason in enumerate(item["reasons"]):
                assert (reason == "") == (i == item["answer"]), item
            sizes.append(len(item["options"]))
    assert sizes.count(4) > 0.8 * len(sizes)  # four options whenever the rules allow, which is nearly always


def test_corpus_distractors_come_from_registered_rules(corpus):
    names = {fn.__name__.replace("_", "-") for fns in distractor_rules.values() for fn in fns}
    for program in corpus["programs"]:
        for item in shapes.shapes_items(ProgramRecord.from_json(program)):
            assert {r for r in item["rules"] if r} <= names


def test_mlp_bias_broadcast_item(by_slug):
    item = _shape_items(by_slug["mlp"])[1]  # g:bf16[1,512] = broadcast_in_dim[broadcast_dimensions=(1,)] c
    assert item["options"][item["answer"]] == "bf16[1,512]"
    assert item["show"]["inputs"] == ["bf16[512]"]
    wrong = dict(zip(item["rules"], item["options"]))
    assert wrong["misread-broadcast-dimensions"] == "bf16[512,1]"


def test_moe_argmax_offers_the_values_dtype(by_slug):
    argmax = next(e for e in by_slug["moe"]["eqns"] if e["primitive"] == "argmax")
    item = _shape_items(by_slug["moe"])[argmax["id"]]
    assert item["options"][item["answer"]] == "i32[64]"
    assert dict(zip(item["rules"], item["options"]))["index-dtype"] == "f32[64]"


def test_f32_scalar_unary_equation_is_skipped_for_want_of_misreadings():
    # `neg` of an f32[] has one plausible slip only (f32[] read as f32[1]): no axes to misplace,
    # no operand of another aval, no literal, no narrower dtype. Padding it with an invented
    # shape would break the rule that every wrong option is a real misreading, so it is skipped.
    record = build_facts(jax.make_jaxpr(lax.neg)(jax.ShapeDtypeStruct((), jnp.float32))).to_json()[0]
    assert shapes.shapes_item(EqnFact.from_json(record)) is None
    # Likewise a full reduce_sum of an f32[1]: keeping the axis, copying the operand and reading
    # the scalar as a vector all give f32[1].
    record = build_facts(jax.make_jaxpr(lambda a: lax.reduce_sum(a, (0,)))(
        jax.ShapeDtypeStruct((1,), jnp.float32))).to_json()[0]
    assert shapes.shapes_item(EqnFact.from_json(record)) is None
    # The same op on a bf16[] has a second slip (expecting the default f32), so it gets an item.
    record = build_facts(jax.make_jaxpr(lax.neg)(jax.ShapeDtypeStruct((), jnp.bfloat16))).to_json()[0]
    assert shapes.shapes_item(EqnFact.from_json(record)).options.count("bf16[]") == 1


@pytest.mark.parametrize("primitive", ["reduce_sum", "dot_general", "broadcast_in_dim", "transpose",
                                       "convert_element_type", "argmax"])
def test_rule_table_is_keyed_by_primitive(primitive):
    assert distractor_rules[primitive]
