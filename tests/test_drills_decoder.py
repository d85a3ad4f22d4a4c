"""The dot_general decoder: axis answers are the dimension numbers JAX was given; the output is eval_shape's."""
import jax
import jax.numpy as jnp
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from jax import lax

from dumpgym.drills import decoder
from dumpgym.facts import build_facts
from dumpgym.record import EqnFact, ProgramRecord

PROPERTY = settings(max_examples=40, deadline=None)
# (operand dtype, preferred_element_type choices)
DTYPES = [(jnp.float32, [None]), (jnp.bfloat16, [None, jnp.float32]), (jnp.float16, [None, jnp.float32]),
          (jnp.int8, [None, jnp.int32]), (jnp.int32, [None])]


def jax_aval(shape, dtype) -> str:
    """JAX's own short aval text, e.g. `bf16[64,512]`."""
    return jax.core.ShapedArray(tuple(shape), jnp.dtype(dtype)).str_short(short_dtypes=True)


@st.composite
def dot_cases(draw):
    """A random dot_general: axis roles in random positions on each side, sizes, dtype, preferred type."""
    counts = {role: draw(st.integers(0, 2)) for role in ("batch", "contract", "lhs_free", "rhs_free")}
    assume(counts["batch"] + counts["contract"] + counts["lhs_free"] > 0)
    assume(counts["batch"] + counts["contract"] + counts["rhs_free"] > 0)
    size = {(role, i): draw(st.integers(2, 6)) for role, n in counts.items() for i in range(n)}
    shared = [(r, i) for r in ("batch", "contract") for i in range(counts[r])]
    lhs_axes = draw(st.permutations(shared + [("lhs_free", i) for i in range(counts["lhs_free"])]))
    rhs_axes = draw(st.permutations(shared + [("rhs_free", i) for i in range(counts["rhs_free"])]))
    lc = tuple(lhs_axes.index(("contract", i)) for i in range(counts["contract"]))
    rc = tuple(rhs_axes.index(("contract", i)) for i in range(counts["contract"]))
    lb = tuple(lhs_axes.index(("batch", i)) for i in range(counts["batch"]))
    rb = tuple(rhs_axes.index(("batch", i)) for i in range(counts["batch"]))
    dtype, preferred = draw(st.sampled_from(DTYPES))
    return {
        "lhs": tuple(size[a] for a in lhs_axes), "rhs": tuple(size[a] for a in rhs_axes),
        "dims": ((lc, rc), (lb, rb)), "dtype": dtype, "preferred": draw(st.sampled_from(preferred)),
    }


def items_by_step(case):
    fn = lambda a, b: lax.dot_general(a, b, case["dims"], preferred_element_type=case["preferred"])  # noqa: E731
    specs = [jax.ShapeDtypeStruct(case["lhs"], case["dtype"]), jax.ShapeDtypeStruct(case["rhs"], case["dtype"])]
    records = build_facts(jax.make_jaxpr(fn)(*specs)).to_json()
    dot = next(r for r in records if r["primitive"] == "dot_general")
    out = jax.eval_shape(fn, *specs)
    return {i.step: i for i in decoder.decoder_items(EqnFact.from_json(dot), "prop")}, jax_aval(out.shape, out.dtype)


def check_choice(item, expected, rank=None):
    assert item.options[item.answer] == expected
    # A rank-1 operand has only two axis lists, [] and [0]; otherwise at least three options.
    assert len(set(item.options)) == len(item.options) >= (3 if rank is None else min(3, 2 ** rank))
    for i, reason in enumerate(item.reasons):
        assert (reason == "") == (i == item.answer)


@PROPERTY
@given(case=dot_cases())
def test_decoder_answers_match_what_jax_was_given(case):
    items, expected_out = items_by_step(case)
    (lc, rc), (lb, rb) = case["dims"]
    lhs, rhs = len(case["lhs"]), len(case["rhs"])
    check_choice(items["lhs-contracting"], str(list(lc)), lhs)
    check_choice(items["rhs-contracting"], str(list(rc)), rhs)
    check_choice(items["lhs-batch"], str(list(lb)), lhs)
    assert ("rhs-batch" in items) == (lb != rb)
    if lb != rb:
        check_choice(items["rhs-batch"], str(list(rb)), rhs)
    check_choice(items["output"], expected_out)


@PROPERTY
@given(case=dot_cases())
def test_decoder_shows_the_operands_and_dimension_numbers(case):
    items, _ = items_by_step(case)
    show = items["output"].show
    assert show["lhs"] == jax_aval(case["lhs"], case["dtype"])
    assert show["rhs"] == jax_aval(case["rhs"], case["dtype"])
    (lc, rc), (lb, rb) = case["dims"]
    assert show["dimension_numbers"] == f"(({list(lc)}, {list(rc)}), ({list(lb)}, {list(rb)}))"


@PROPERTY
@given(case=dot_cases())
def test_axis_options_are_axes_of_the_asked_operand(case):
    items, _ = items_by_step(case)
    for step, item in items.items():
        if step == "output":
            continue
        rank = len(case[step.split("-")[0]])
        for option in item.options:
            axes = [int(a) for a in option.strip("[]").split(",") if a.strip()]
            assert all(0 <= a < rank for a in axes), (step, option)


# -- the real corpus -------------------------------------------------------------------------------

def _dots(program):
    return [e for e in program["eqns"] if e["primitive"] == "dot_general"]


def _items(program):
    out = {}
    for item in decoder.decoder_pool(ProgramRecord.from_json(program)):
        out.setdefault(item["eqn"], {})[item["step"]] = item
    return out


def test_every_corpus_dot_general_has_decoder_items(corpus):
    count = 0
    for program in corpus["programs"]:
        items = _items(program)
        for eqn in _dots(program):
            (lc, rc), (lb, rb) = eqn["params"]["dimension_numbers"]
            steps = items[eqn["id"]]
            assert {"lhs-contracting", "rhs-contracting", "lhs-batch", "output"} <= steps.keys()
            assert steps["lhs-contracting"]["options"][steps["lhs-contracting"]["answer"]] == str(lc)
            assert steps["rhs-contracting"]["options"][steps["rhs-contracting"]["answer"]] == str(rc)
            assert steps["lhs-batch"]["options"][steps["lhs-batch"]["answer"]] == str(lb)
            if lb != rb:
                assert steps["rhs-batch"]["options"][steps["rhs-batch"]["answer"]] == str(rb)
            out = eqn["outputs"][0]
            assert steps["output"]["options"][steps["output"]["answer"]] == jax_aval(out["shape"], out["dtype"])
            count += 1
    assert count == sum(len(_dots(p)) for p in corpus["programs"]) > 0


def test_corpus_dimension_numbers_are_shown_as_the_dump_prints_them(corpus):
    for program in corpus["programs"]:
        lines = program["jaxpr"].splitlines()
        for eqn_id, steps in _items(program).items():
            first, last = steps["output"]["jaxpr_lines"]
            span = "\n".join(lines[first - 1:last])
            assert f"dimension_numbers={steps['output']['show']['dimension_numbers']}" in span


def test_corpus_decoder_options_are_distinct_with_reasons(corpus):
    for program in corpus["programs"]:
        for item in decoder.decoder_pool(ProgramRecord.from_json(program)):
            assert len(set(item["options"])) == len(item["options"]) >= 3
            assert all((r == "") == (i == item["answer"]) for i, r in enumerate(item["reasons"]))


def test_mlp_first_dot_general_contracts_lhs_axis_1(by_slug):
    steps = _items(by_slug["mlp"])[_dots(by_slug["mlp"])[0]["id"]]
    assert steps["lhs-contracting"]["options"][steps["lhs-contracting"]["answer"]] == "[1]"
    assert steps["rhs-contracting"]["options"][steps["rhs-contracting"]["answer"]] == "[0]"
    assert steps["output"]["options"][steps["output"]["answer"]] == "bf16[64,512]"
    assert steps["output"]["show"] == {"lhs": "bf16[64,128]", "rhs": "bf16[128,512]",
                                       "dimension_numbers": "(([1], [0]), ([], []))",
                                       "preferred_element_type": "bfloat16"}


def test_mha_scores_batch_over_batch_and_heads(by_slug):
    steps = _items(by_slug["mha"])[_dots(by_slug["mha"])[0]["id"]]
    assert steps["lhs-batch"]["options"][steps["lhs-batch"]["answer"]] == "[0, 1]"
    assert "rhs-batch" not in steps  # same list on both sides: asked once


def test_moe_combine_asks_for_rhs_batch_separately(by_slug):
    last = _dots(by_slug["moe"])[-1]  # (([1], [0]), ([0], [1]))
    steps = _items(by_slug["moe"])[last["id"]]
    assert steps["lhs-batch"]["options"][steps["lhs-batch"]["answer"]] == "[0]"
    assert steps["rhs-batch"]["options"][steps["rhs-batch"]["answer"]] == "[1]"
