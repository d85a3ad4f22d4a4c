"""The shape oracle: answers agree with jax.eval_shape, items must be read, and distractors are real misreadings."""
import re
import textwrap

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec

from dumpgym.drills import shapes
from dumpgym.drills._misreadings import FILLER, distractor_rules, distractors
from dumpgym.drills.answer import read_aval
from dumpgym.record.dtypes import is_extended
from dumpgym.traced.facts import build_facts
from dumpgym.record.schema import EqnFact, ProgramRecord
from pool_checks import readable

DTYPES = [jnp.float32, jnp.bfloat16, jnp.float16, jnp.int32, jnp.int8]
# Sizes start at 2: with size-1 axes several misreadings collapse into one aval (see
# test_full_reduction_of_a_one_element_f32_is_skipped_for_want_of_misreadings for what happens then).
SIZES = st.integers(2, 6)
PROPERTY = settings(max_examples=40, deadline=None)
SKILLS = {"contraction", "reduction", "broadcast", "reshape", "transpose", "slice-pad", "concat", "gather-scatter",
          "promotion", "sharding", "cast", "comparison", "other", "none"}


def jax_dtype(name):
    """JAX's dtype for a record's dtype name; a typed key's (`key<fry>`) from a key JAX makes with each PRNG impl."""
    if not (isinstance(name, str) and is_extended(name)):
        return jnp.dtype(name)
    keys = (jax.eval_shape(lambda: jax.random.key(0, impl=impl)) for impl in ("threefry2x32", "rbg", "unsafe_rbg"))
    return next(k.dtype for k in keys if str(k.dtype) == name)


def jax_aval(shape, dtype) -> str:
    """JAX's own short aval text, e.g. `bf16[64,512]`, `key<fry>[]`."""
    return jax.core.ShapedArray(tuple(shape), jax_dtype(dtype)).str_short(short_dtypes=True)


def traced(fn, *args):
    """Trace `fn` (one equation) and return (its EqnFact, the jaxpr text, expected aval text), or Nones."""
    specs = [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in args]
    closed = jax.make_jaxpr(fn)(*specs)
    records = build_facts(closed).to_json()
    out = jax.eval_shape(fn, *specs)
    if not records:  # lax skips no-op calls (identity transpose, same-dtype convert)
        return None, None, None
    assert len(records) == 1, records
    return EqnFact.from_json(records[0]), str(closed), jax_aval(out.shape, out.dtype)


def only_item(fn, *args):
    """The shapes item of `fn`'s one equation (or None) and the expected aval text."""
    eqn, text, expected = traced(fn, *args)
    return (shapes.shapes_item(eqn, text, "prop") if eqn else None), expected


def wrong_by_rule(item) -> dict:
    """rule -> the aval its misreading gives, for a ShapesItem or a readable pool item."""
    misread = item.misread if hasattr(item, "misread") else item["misread"]
    return {(m[0] if isinstance(m, tuple) else m["rule"]): aval for aval, m in misread.items()}


def check_item(item, expected: str):
    assert item is not None
    assert item.answer == expected and expected not in item.misread
    assert item.misread and all(rule and reason for rule, reason in item.misread.values())
    assert not any(expected in block or "…" in block for block in item.shown)
    assert item.skill in SKILLS and item.weight >= 0
    assert item.feedback and item.feedback.endswith(expected) and "\n" not in item.feedback
    typed = item.typed()
    assert typed.check(expected).right and typed.check(" " + expected.replace(",", ", ") + " ").right
    for aval, (rule, reason) in item.misread.items():  # a typed misreading gets its own reason back
        verdict = typed.check(aval)
        assert not verdict.right and (verdict.rule, verdict.reason) == (rule, reason)


def check_or_skipped(fn, *args):
    """Either a well-formed item whose answer is eval_shape's, or a skip the drill's own rules explain."""
    eqn, text, expected = traced(fn, *args)
    if eqn is None:
        return None
    item = shapes.shapes_item(eqn, text, "prop")
    if item is None:
        # Visible as text: an operand of that aval, or one that contains it (`bf16[]` holds `f16[]`).
        visible = any(expected in str(x) for x in eqn.input_avals)
        own = [w for w in distractors(eqn, eqn.outputs[0]) if w.rule not in FILLER]
        assert visible or not own, (expected, own)
        return None
    check_item(item, expected)
    return item


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
    assert "kept-reduced-axis" in wrong_by_rule(item)


def test_a_reduction_whose_axes_happen_to_equal_its_output_shape_is_still_asked():
    # reduce_sum over axes (2, 3) of a [2,3,2,2] gives [2,3]: the axes say nothing about the shape.
    item, expected = only_item(lambda a: lax.reduce_sum(a, (2, 3)), ((2, 3, 2, 2), jnp.float32))
    check_item(item, expected)


def test_a_slice_whose_limits_print_its_output_shape_is_not_asked():
    item, _ = only_item(lambda a: lax.slice(a, (0, 0), (2, 3)), ((4, 5), jnp.float32))
    assert item is None


@PROPERTY
@given(x=arrays(dtypes=[jnp.float32, jnp.bfloat16, jnp.int32]), data=st.data())
def test_argmax_answer_matches_eval_shape(x, data):
    axis = data.draw(st.integers(0, len(x[0]) - 1))
    item, expected = only_item(lambda a: lax.argmax(a, axis, jnp.int32), x)
    check_item(item, expected)
    if x[1] != jnp.int32:
        assert jax_aval(jax.eval_shape(lambda a: lax.argmax(a, axis, jnp.int32), jax.ShapeDtypeStruct(*x)).shape,
                        x[1]) in item.misread  # the index-dtype misreading is named


@PROPERTY
@given(out=arrays(max_rank=4), data=st.data())
def test_broadcast_in_dim_is_not_asked_because_its_shape_param_states_the_answer(out, data):
    shape, dtype = out
    dims = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1)))))
    operand = tuple(data.draw(st.sampled_from([shape[d], 1])) for d in dims)
    item, expected = only_item(lambda a: lax.broadcast_in_dim(a, shape, dims), (operand, dtype))
    assert item is None


@PROPERTY
@given(x=arrays(), data=st.data())
def test_reshape_and_iota_are_not_asked_because_their_params_state_the_answer(x, data):
    shape, dtype = x
    eqn, text, _ = traced(lambda a: lax.reshape(a, (*shape[::-1],)), x)
    if eqn is not None:
        assert shapes.shapes_item(eqn, text) is None
    eqn, text, _ = traced(lambda: lax.broadcasted_iota(jnp.int32, shape, len(shape) - 1))
    assert shapes.shapes_item(eqn, text) is None


@PROPERTY
@given(x=arrays(min_rank=3), data=st.data())
def test_transpose_answer_matches_eval_shape(x, data):
    perm = tuple(data.draw(st.permutations(range(len(x[0])))))
    check_or_skipped(lambda a: lax.transpose(a, perm), x)


@PROPERTY
@given(x=arrays(min_rank=0), new=st.sampled_from(DTYPES + [jnp.bool_]))
def test_convert_answer_matches_eval_shape(x, new):
    item = check_or_skipped(lambda a: lax.convert_element_type(a, new), x)
    if item is not None:
        old = jax_aval(x[0], x[1])
        assert item.misread[old][0] == "forgot-convert"
        assert item.skill == "cast" and item.weight < 1


@PROPERTY
@given(x=arrays(min_rank=0), literal=st.sampled_from([0.5, 2.0, -1.0]))
def test_elementwise_op_with_a_literal_is_not_asked_because_its_operand_shows_the_answer(x, literal):
    if not jnp.issubdtype(x[1], jnp.floating):
        return
    item, expected = only_item(lambda a: a * literal, x)
    assert item is None


@PROPERTY
@given(lhs=arrays(min_rank=2, max_rank=3, dtypes=[jnp.bfloat16, jnp.float32]), n=SIZES)
def test_matmul_answer_matches_eval_shape(lhs, n):
    shape, dtype = lhs
    rhs = ((shape[-1], n), dtype)
    item = check_or_skipped(lambda a, b: lax.dot_general(a, b, (((len(shape) - 1,), (0,)), ((), ()))), lhs, rhs)
    if item is not None:
        assert item.skill == "contraction"


def test_reduce_sum_distractors_name_their_rules():
    fn = lambda a: lax.reduce_sum(a, (1,))  # noqa: E731
    item, expected = only_item(fn, ((64, 128), jnp.float32))
    wrong = wrong_by_rule(item)
    assert expected == "f32[64]"
    assert wrong["kept-reduced-axis"] == "f32[64,1]"
    assert wrong["dropped-wrong-axis"] == "f32[128]"
    assert wrong["reduced-every-axis"] == "f32[]"


def test_transpose_offers_the_inverse_permutation():
    item, expected = only_item(lambda a: lax.transpose(a, (2, 0, 1)), ((64, 32, 4), jnp.bfloat16))
    assert expected == "bf16[4,64,32]"
    assert wrong_by_rule(item)["inverted-permutation"] == "bf16[32,4,64]"


def test_pad_offers_interior_and_row_order_misreadings():
    fn = lambda a: lax.pad(a, 0.0, ((0, 0, 0), (1, 2, 1)))  # noqa: E731
    item, expected = only_item(fn, ((8, 4), jnp.float32))
    wrong = wrong_by_rule(item)
    assert expected == "f32[8,10]"
    assert wrong["ignored-interior-padding"] == "f32[8,7]"
    assert wrong["interior-after-every-element"] == "f32[8,11]"
    assert not any("f64" in o for o in item.misread)  # x64 is off: a Python scalar never makes f64


def test_strided_slice_offers_the_rounded_down_count():
    item, expected = only_item(lambda a: lax.slice(a, (0, 1), (8, 128), (1, 2)), ((8, 128), jnp.float32))
    wrong = wrong_by_rule(item)
    assert expected == "f32[8,64]"
    assert wrong["stride-rounded-down"] == "f32[8,63]"
    assert wrong["ignored-strides"] == "f32[8,127]"


def test_full_reduction_of_a_one_element_f32_names_the_one_aval_its_slips_share():
    # Keeping the axis, copying the operand and reading the scalar as a vector all give f32[1]: one
    # misread entry, under the first rule that gives it (the reduction's own), never an invented aval.
    fn = lambda a: lax.reduce_sum(a, (0,))  # noqa: E731
    item, expected = only_item(fn, ((1,), jnp.float32))
    check_item(item, expected)
    assert list(item.misread) == ["f32[1]"] and item.misread["f32[1]"][0] == "kept-reduced-axis"
    # The same on a bf16[1] has a second slip (expecting the f32 accumulator).
    item, expected = only_item(fn, ((1,), jnp.bfloat16))
    check_item(item, expected)
    assert set(item.misread) == {"bf16[1]", "f32[]"}


# -- the real corpus -------------------------------------------------------------------------------

def _shape_items(program):
    record = ProgramRecord.from_json(program)
    return {item.eqn: readable(item, record) for item in shapes.shapes_items(record)}


def _all_items(corpus):
    return [(p, item) for p in corpus["programs"] for item in _shape_items(p).values()]


@pytest.fixture(scope="module")
def pool_items(read_pool):
    return [i for i in read_pool if i["drill"] == "shapes"]


def test_corpus_shape_answers_equal_the_output_facts(corpus):
    for program in corpus["programs"]:
        items = _shape_items(program)
        for eqn in program["eqns"]:
            if eqn["id"] in items:
                assert len(eqn["outputs"]) == 1
                out = eqn["outputs"][0]
                item = items[eqn["id"]]
                assert item["value"] == jax_aval(out["shape"], out["dtype"])


def test_equations_whose_params_state_the_output_are_not_asked(corpus):
    for program, item in _all_items(corpus):
        eqn = program["eqns"][item["eqn"]]
        assert eqn["primitive"] not in ("broadcast_in_dim", "reshape", "iota")
        # An empty param (a jit's `compiler_options_kvs=()`) states no scalar's shape.
        assert all(v != eqn["outputs"][0]["shape"] for v in eqn["params"].values() if v), (program["slug"], eqn)


def test_corpus_answer_text_never_shows_and_no_equation_is_cut(corpus):
    for program, item in _all_items(corpus):
        answer = item["value"]
        assert isinstance(item["shown"], list) and len(item["shown"]) == 2
        for block in item["shown"]:
            assert answer not in block, (program["slug"], item["eqn"], block)
            assert "…" not in block and "..." not in block


def test_shown_equation_is_the_jaxpr_lines_with_the_output_masked(corpus):
    for program, item in _all_items(corpus):
        eqn = program["eqns"][item["eqn"]]
        first, last = item["jaxpr_lines"]
        printed = program["jaxpr"].splitlines()[first - 1:last]
        head = item["shown"][0].splitlines()[0]
        assert re.fullmatch(rf"\w+:\? = {eqn['primitive']}\b.*", head), head
        assert head.split(" = ")[0].split(":")[0] == printed[0].split(":")[0].strip()
        # Every shown line is a printed line, or a printed line with a binder masked or noise params dropped.
        assert item["shown"][0].count("\n") <= last - first


def test_operand_block_lists_every_operand_with_its_aval(corpus):
    for program, item in _all_items(corpus):
        eqn = program["eqns"][item["eqn"]]
        entries = item["shown"][1].split("  ") if item["shown"][1] else []  # axis_index reads no operand
        assert len(entries) == len(eqn["inputs"])
        for entry, x in zip(entries, eqn["inputs"]):
            if "literal" in x:
                assert entry.startswith(x["literal"] + ":")
            else:
                printed = re.sub(r"\{[^}]*\}$", "", re.sub(r"@(\w+|\([\w,]*\))", "", entry.split(":", 1)[1]))
                assert printed == jax_aval(x["shape"], x["dtype"])


def test_shown_params_leave_out_the_noise(corpus):
    noise = ("compiler_options_kvs", "ctx_mesh", "in_shardings", "out_shardings", "donated_invars", "inline=",
             "keep_unused", "name=", "sharding=None", "weak_type", "check_vma", "prevent_cse")
    for program, item in _all_items(corpus):
        for word in noise:
            # `name=` as a param of its own, not the end of another's (`axis_name=x` says which axis)
            assert not re.search(rf"(?<![\w]){re.escape(word)}", item["shown"][0]), (program["slug"], item["eqn"], word)


def test_remat_item_shows_the_whole_body_with_the_answers_binders_masked(by_slug):
    item = _shape_items(by_slug["remat"])[0]
    assert item["shown"][0] == textwrap.dedent("""\
        d:? = remat2[
          jaxpr={ lambda ; e:bf16[128,512] f:bf16[64,128]. let
              g:? = dot_general[
                dimension_numbers=(([1], [0]), ([], []))
                preferred_element_type=bfloat16
              ] f e
              h:? = integer_pow[y=3] g
              i:? = mul 0.044677734375:bf16[] h
              j:? = add g i
              k:? = mul 0.796875:bf16[] j
              l:? = tanh k
              m:? = add 1.0:bf16[] l
              n:? = mul 0.5:bf16[] m
              o:? = mul g n
            in (o,) }
        ] b a""")
    assert item["shown"][1] == "b:bf16[128,512]  a:bf16[64,128]"
    assert item["skill"] == "contraction"


def test_mlp_matmul_item_shows_the_masked_equation_and_its_operands(by_slug):
    item = _shape_items(by_slug["mlp"])[0]
    assert item["shown"] == [
        "f:? = dot_general[\n  dimension_numbers=(([1], [0]), ([], []))\n  preferred_element_type=bfloat16\n] a b",
        "a:bf16[64,128]  b:bf16[128,512]",
    ]
    assert item["value"] == "bf16[64,512]" and item["skill"] == "contraction"
    assert item["feedback"] == ("dot_general writes batch [], then lhs's free [64], then rhs's free [512] and sums "
                                "away the contracted 128, in bf16: bf16[64,512]")


def test_corpus_answers_are_typed_avals_and_every_misreading_has_a_reason_and_rule(corpus):
    counts = []
    for _, item in _all_items(corpus):
        assert item["spelling"] == "aval" and read_aval(item["value"]) == item["value"]
        assert item["value"] not in item["misread"]
        for aval, m in item["misread"].items():
            assert read_aval(aval) == aval and m["reason"] and m["rule"], item
        counts.append(len(item["misread"]))
    assert sum(n >= 3 for n in counts) > 0.7 * len(counts)  # most items name three misreadings or more


def test_every_corpus_item_says_in_one_line_why_its_answer_is_right(corpus):
    for program, item in _all_items(corpus):
        assert item["feedback"].endswith(item["value"]) and "\n" not in item["feedback"], (program["slug"], item)


def test_each_item_has_at_most_one_filler_and_a_misreading_of_its_own(corpus):
    for _, item in _all_items(corpus):
        rules = [m["rule"] for m in item["misread"].values()]
        assert len([r for r in rules if r in FILLER]) <= 1
        assert len([r for r in rules if r not in FILLER]) >= 1


def test_a_stretch_is_named_only_where_the_operands_broadcast(corpus):
    # Issue 33: a gather's or a squeeze's reason said "its size-1 axes stretch".
    for program, item in _all_items(corpus):
        eqn = program["eqns"][item["eqn"]]
        out = eqn["outputs"][0]["shape"]
        arrays = [x["shape"] for x in eqn["inputs"] if "shape" in x]
        elementwise = all(len(x) == len(out) and all(d in (o, 1) for d, o in zip(x, out)) for x in arrays)
        for m in item["misread"].values():
            if "stretch" in m["reason"] and "in the body's" not in m["reason"]:
                assert elementwise, (program["slug"], eqn["primitive"], m["reason"])


def test_a_body_whose_size_only_a_dropped_param_says_is_not_asked(by_slug):
    # Issue 33: embed-xent's take_along_axis jit fills `broadcast_in_dim 0.0:f32[]`, printed without its
    # shape=, and scatter-adds into it: nothing shown decides the result's shape.
    program = by_slug["embed-xent"]
    record = ProgramRecord.from_json(program)
    for eqn in record.eqns:
        if eqn.primitive == "broadcast_in_dim" and "shape=" not in "\n".join(
                program["jaxpr"].splitlines()[eqn.jaxpr_lines[0] - 1:eqn.jaxpr_lines[1]]):
            holder = eqn.parent
            if holder is not None and record.eqns[holder].outputs[0].same(eqn.outputs[0]):
                assert holder not in _shape_items(program)
                break
    else:
        pytest.fail("embed-xent no longer has a broadcast printed without its shape")


def test_no_f64_or_i64_is_offered_while_x64_is_off(corpus):
    for _, item in _all_items(corpus):
        assert not any(o.startswith(("f64", "i64")) for o in item["misread"]), item


def test_every_item_names_its_skill_and_weight(corpus):
    for program, item in _all_items(corpus):
        assert item["skill"] in SKILLS
        assert item["weight"] >= 0
        eqn = program["eqns"][item["eqn"]]
        if eqn["primitive"] == "dot_general":
            assert item["skill"] == "contraction"
        if eqn["primitive"] == "convert_element_type":
            assert item["skill"] == "cast"


def test_items_that_need_no_inference_are_at_most_a_tenth_of_the_weight(pool_items):
    total = sum(i["weight"] for i in pool_items)
    none = sum(i["weight"] for i in pool_items if i["skill"] == "none")
    assert total > 0 and none <= 0.1 * total


def test_sharded_programs_offer_the_per_device_shape(corpus):
    spec = lambda text: eval(text, {"P": PartitionSpec})  # noqa: E731  (the dump prints specs as P(...))
    sharded = [p for p in corpus["programs"] if p["mesh"]]
    assert {p["slug"] for p in sharded} >= {"sharded", "psum"}
    asked = 0
    for program in sharded:
        items = _shape_items(program)
        mesh = jax.make_mesh(tuple(program["mesh"].values()), tuple(program["mesh"]))
        lines = program["jaxpr"].splitlines()
        for eqn in program["eqns"]:
            first, last = eqn["jaxpr_lines"]
            if eqn["primitive"] != "shard_map" or "{ lambda" not in "\n".join(lines[first - 1:last]):
                continue  # a body hoisted into a `let` block is not on the equation's lines: not asked
            item = items[eqn["id"]]
            asked += 1
            assert item["skill"] == "sharding"
            out = eqn["outputs"][0]
            per_device = NamedSharding(mesh, spec(eqn["params"]["out_specs"][0])).shard_shape(tuple(out["shape"]))
            if per_device != tuple(out["shape"]):
                expected = {jax_aval(per_device, out["dtype"])}
            else:  # replicated: the per-device block of the operands' layouts is the misreading
                expected = {jax_aval(NamedSharding(mesh, spec(s)).shard_shape(tuple(out["shape"])), out["dtype"])
                            for s in eqn["params"]["in_specs"]} - {jax_aval(out["shape"], out["dtype"])}
            offered = {o for o, m in item["misread"].items() if "per device" in m["reason"]}
            assert offered & expected, (program["slug"], item["misread"])
    assert asked >= 2


def test_shard_map_body_offers_the_global_shape_as_a_per_device_slip(by_slug):
    program = by_slug["sharded"]
    dot = next(e for e in program["eqns"] if e["primitive"] == "dot_general")
    item = _shape_items(program)[dot["id"]]
    assert item["value"] == "f32[8,16]"
    slip = wrong_by_rule(item)["global-shape-in-body"]
    assert slip == "f32[64,16]" and "per device" in item["misread"][slip]["reason"]


def test_corpus_distractors_come_from_registered_rules(corpus):
    names = {fn.__name__.replace("_", "-") for fns in distractor_rules.values() for fn in fns}
    for _, item in _all_items(corpus):
        assert {m["rule"] for m in item["misread"].values()} <= names


def test_moe_argmax_offers_the_values_dtype(by_slug):
    argmax = next(e for e in by_slug["moe"]["eqns"] if e["primitive"] == "argmax")
    item = _shape_items(by_slug["moe"])[argmax["id"]]
    assert item["value"] == "i32[64]"
    assert wrong_by_rule(item)["index-dtype"] == "f32[64]"


@pytest.mark.parametrize("primitive", ["reduce_sum", "dot_general", "transpose", "slice", "pad", "shard_map",
                                       "convert_element_type", "argmax"])
def test_rule_table_is_keyed_by_primitive(primitive):
    assert distractor_rules[primitive]
