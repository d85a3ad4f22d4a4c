"""What is this line for: each answer is what the line's source says it must be (small functions whose every
broadcast, cast and transpose we wrote to be of one known sort), JAX agrees (its name stacks, its own
equations), the StableHLO item names an op of its step and answers as the jaxpr one does, and over the
built-in pool every answer of a step is about equally often right."""
from collections import defaultdict

import jax
import jax.extend.core as jex
import jax.numpy as jnp
import pytest

from dumpgym.corpus.pipeline import program_record
from dumpgym.drills import decisions
from dumpgym.drills._decision_why import builtin_asked, builtin_spread, why_steps
from dumpgym.traced.program import Program
from dumpgym.record.schema import ProgramRecord
from deep_programs import deep_attention, deep_norm_mlp
from jax_reference import jaxpr_of
from pool_checks import readable


def _why(record: ProgramRecord) -> list[dict]:
    return [readable(i, record) for i in decisions.decisions_pool(record) if "why" in i.facts]


def _eqns(closed) -> list:
    """Every equation of a ClosedJaxpr, its sub-jaxprs' too, each once."""
    out, seen, stack = [], set(), [closed.jaxpr]
    while stack:
        for e in stack.pop().eqns:
            if id(e) not in seen:
                seen.add(id(e))
                out.append(e)
                stack += list(jex.jaxprs_in_params(e.params))
    return out


def _traced(function, *args):
    program = Program(slug=function.__name__.replace("_", "-"), title="t", lesson="l", function=function, args=args)
    return program, ProgramRecord.from_json(program_record(program).to_json())


def fill(x):
    return x + jnp.full((4, 8), 2.0)  # a literal filled out


def scalar(x, s):
    return jnp.where(x > 0, x, s)  # the scalar argument spread over x's shape


def keepdims(x):
    return x - x.max(axis=-1, keepdims=True)


def promotion(x, b):
    return x * b  # b[8] against x[4,8]


def placement(x):
    return jnp.broadcast_to(x[:, None, :], (4, 3, 8))  # a middle axis of size 1, then of size 3


def mean_bf16(x):
    return jnp.mean(x)  # jnp widens bf16 to f32 for the sum


def own_astype(x):
    return x.astype(jnp.float32) * 2.0


def narrow_back(x):
    return jnp.exp(x.astype(jnp.float32)).astype(jnp.bfloat16)


def bool_to_float(x):
    return (x > 0).astype(jnp.float32)


def matmul_by_t(x, w):
    return x @ w.T


def matmul_einsum(x, w):
    return jnp.einsum("bi,bj->jib", x, w)


def matmul_grad(x, w):
    return jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w)))(w)


def causal_mask(x):
    rows = jax.lax.broadcasted_iota(jnp.int32, (4, 4), 0)
    cols = jax.lax.broadcasted_iota(jnp.int32, (4, 4), 1)
    return jnp.where(rows >= cols, x, 0.0)


def checkpointed(x):
    return jax.checkpoint(lambda x: jnp.sin(jnp.sin(x)))(x)


# function, args, step, the answers its jaxpr items must give (as a set), by how the source is written
CASES = [
    (fill, ("f32[4,8]",), "hidden-broadcast", {"fill"}),
    (scalar, ("f32[4,8]", "f32[]"), "hidden-broadcast", {"scalar"}),
    (keepdims, ("f32[4,8]",), "hidden-broadcast", {"keepdims"}),
    (promotion, ("f32[4,8]", "f32[8]"), "hidden-broadcast", {"promotion"}),
    (placement, ("f32[4,8]",), "hidden-broadcast", {"placement"}),
    (mean_bf16, ("bf16[4,8]",), "upcast", {"accumulate", "narrow"}),  # the mean is bf16 again
    (own_astype, ("bf16[4,8]",), "upcast", {"astype"}),
    (narrow_back, ("bf16[4,8]",), "upcast", {"astype", "narrow"}),
    (bool_to_float, ("f32[4,8]",), "upcast", {"kind"}),
    (matmul_by_t, ("f32[8,16]", "f32[4,16]"), "transpose", {"user"}),
    (matmul_einsum, ("f32[8,16]", "f32[8,4]"), "transpose", {"einsum"}),
    (matmul_grad, ("f32[8,16]", "f32[16,4]"), "transpose", {"matmul-grad"}),
    (causal_mask, ("f32[4,4]",), "mark", {"iota-mask"}),
    (checkpointed, ("f32[4,8]",), "mark", {"remat"}),
]


@pytest.mark.parametrize("function, args, step, expected", CASES, ids=[c[0].__name__ for c in CASES])
def test_each_answer_is_the_one_its_source_makes(function, args, step, expected):
    program, record = _traced(function, *args)
    asked = [i for i in _why(record) if i["step"] == step and i["layer"] == "jaxpr"]
    assert {i["why"] for i in asked} == expected
    # One item per equation of the step's primitives that JAX's own jaxpr holds, at any depth (jnp.where's
    # broadcast is inside its `pjit`).
    primitives = why_steps[step].primitives
    assert len(asked) == sum(e.primitive.name in primitives for e in _eqns(jaxpr_of(function, program.example_args())))
    for item in asked:
        options = list(why_steps[step].answers.values())
        assert item["options"] == options and options[item["answer"]] == why_steps[step].answers[item["why"]]


@pytest.mark.parametrize("function, args", [(matmul_einsum, ("f32[8,16]", "f32[8,4]")),
                                            (matmul_grad, ("f32[8,16]", "f32[16,4]")),
                                            (matmul_by_t, ("f32[8,16]", "f32[4,16]"))])
def test_whose_transpose_agrees_with_jax_s_name_stacks(function, args):
    """Autodiff names its backward equations `transpose(jvp(...))`, einsum names its own by its spec."""
    program, record = _traced(function, *args)
    closed = jaxpr_of(function, program.example_args())
    stacks = [str(e.source_info.name_stack) for e in closed.jaxpr.eqns if e.primitive.name == "transpose"]
    asked = [i["why"] for i in _why(record) if i["step"] == "transpose" and i["layer"] == "jaxpr"]
    assert len(asked) == len(stacks)
    for why, stack in zip(asked, stacks):
        assert ("transpose(" in stack) == (why in ("matmul-grad", "undo-T")), (why, stack)
        assert ("->" in stack) == (why == "einsum"), (why, stack)


def test_the_upcast_a_reduction_reads_is_read_by_one_in_jax_s_jaxpr():
    program, record = _traced(narrow_back, "bf16[4,8]")
    closed = jaxpr_of(mean_bf16, Program(slug="m", title="t", lesson="l", function=mean_bf16,
                                         args=("bf16[4,8]",)).example_args())
    converts = [e for e in closed.jaxpr.eqns if e.primitive.name == "convert_element_type"]
    assert any(e.outvars[0] in r.invars for e in converts for r in closed.jaxpr.eqns
               if r.primitive.name.startswith("reduce_"))
    # and narrow_back's widening feeds an exp, no reduction: the user's own cast
    closed = jaxpr_of(narrow_back, program.example_args())
    assert not any(r.primitive.name.startswith("reduce_") for r in closed.jaxpr.eqns)


@pytest.mark.parametrize("function, args, step, expected", CASES, ids=[c[0].__name__ for c in CASES])
def test_a_stablehlo_item_names_an_op_of_its_step_and_answers_as_the_jaxpr_does(function, args, step, expected):
    _, record = _traced(function, *args)
    items = _why(record)
    by_eqn = {i["eqn"]: i for i in items if i["layer"] == "jaxpr"}
    ops = {op.line: op.name for op in record.stablehlo_ops}
    for item in (i for i in items if i["layer"] == "stablehlo"):
        assert ops[item["line"]] in why_steps[item["step"]].hlo_ops
        twin = by_eqn[item["eqn"]]
        assert (twin["why"], twin["card"]) == (item["why"], item["card"])


def test_every_item_names_its_line_in_a_numbered_listing_and_explains_each_wrong_answer(corpus):
    for program in corpus["programs"]:
        record = ProgramRecord.from_json(program)
        for item in _why(record):
            listing = record.jaxpr if item["layer"] == "jaxpr" else record.stablehlo
            rows = item["shown"][0].split("\n")
            assert len(item["shown"]) == 1 and len(rows) == len(listing.split("\n"))
            assert rows[item["line"] - 1].split(None, 1)[0] == str(item["line"])
            assert f"Line {item['line']} " in item["question"]
            for k, (reason, rule) in enumerate(zip(item["reasons"], item["rules"])):
                assert (reason == "" and rule == "") == (k == item["answer"])
            assert "\n" not in item["feedback"] and item["options"][item["answer"]] in item["feedback"]


def test_over_the_built_in_pool_every_answer_of_a_step_is_about_equally_often_right(whole_corpus):
    """The spread the weights divide by (`builtin_spread`, read by the filing rules) is the number of programs
    whose items give each answer, and the weights it makes balance every step's answers."""
    weight, programs = defaultdict(float), defaultdict(set)
    for program in whole_corpus["programs"]:
        for item in _why(ProgramRecord.from_json(program)):
            weight[item["step"], item["why"]] += item["weight"]
            programs[item["step"], item["why"]].add(program["slug"])
    for (step, why), n in programs.items():
        assert builtin_spread()[step, why] == len(n), (step, why, len(n))
    for step in why_steps:
        shares = [w for (s, _), w in weight.items() if s == step]
        assert max(shares) <= 1.1 * min(shares), (step, shares)


def test_a_question_several_programs_ask_alike_is_one_question_of_its_answer(whole_corpus):
    """Each answer's weight is shared evenly by the distinct questions (layer and line) that give it, whatever
    the number of programs that ask each: the attention family's own `k.T`, asked on jaxpr line 2 by attention,
    causal and grads, weighs as much as embed-xent's own transpose on line 15, asked by it alone."""
    weight, programs = defaultdict(float), defaultdict(set)
    for program in whole_corpus["programs"]:
        for item in _why(ProgramRecord.from_json(program)):
            key = item["step"], item["why"], item["layer"], item["line"]
            weight[key] += item["weight"]
            programs[key].add(program["slug"])
    for (step, why, layer, line), n in programs.items():
        assert builtin_asked()[step, why, layer, line] == len(n)
    for step, why in {k[:2] for k in weight}:
        shares = [w for k, w in weight.items() if k[:2] == (step, why)]
        assert max(shares) <= 1.1 * min(shares), (step, why, shares)
    line_2 = ("transpose", "user", "jaxpr", 2)
    assert {"attention", "causal", "grads"} <= programs[line_2]
    assert abs(weight[line_2] - weight["transpose", "user", "jaxpr", 15]) < 0.05


def _shares(items: list[dict]) -> dict[str, float]:
    weight = defaultdict(float)
    for item in items:
        weight[item["why"]] += item["weight"]
    return weight


def test_a_deep_programs_broadcasts_give_each_of_their_answers_the_same_share():
    # Twelve normalised layers under grad: most of the program's broadcasts place a row over a matrix. Weighed by
    # the built-in counts alone, `placement` held four fifths of the step's weight here, and the option in its
    # place was a blind reader's pick; the program's own questions now share their weight evenly by answer.
    program, record = _traced(deep_norm_mlp, "f32[8,32]", *["f32[32,32]"] * 12)
    asked = [i for i in _why(record) if i["step"] == "hidden-broadcast"]
    weight = _shares(asked)
    assert len(weight) >= 3 and max(weight.values()) <= 1.1 * min(weight.values()), weight
    # still one item per broadcast of JAX's own jaxpr, each answered by its step's rule
    closed = jaxpr_of(deep_norm_mlp, program.example_args())
    assert len([i for i in asked if i["layer"] == "jaxpr"]) == sum(
        e.primitive.name == "broadcast_in_dim" for e in _eqns(closed))
    answers = why_steps["hidden-broadcast"].answers
    assert all(i["options"] == list(answers.values()) and i["options"][i["answer"]] == answers[i["why"]] for i in asked)


def test_a_dumps_transposes_offer_only_autodiffs_answers_each_as_often_right():
    # Without the source (a dump's record) only autodiff's transposes are asked: `einsum` and `user` were options
    # no item could have, and the backward pass of six layers' `.T` held four fifths of the step's weight, so a
    # blind reader's pick of its place was right in 79% of it against a chance of 25%.
    program, traced = _traced(deep_attention, "f32[2,8,32]", *["f32[32,32]"] * 6)
    record = ProgramRecord.from_json({**program_record(program).to_json(), "source": ""})
    asked = [i for i in _why(record) if i["step"] == "transpose"]
    answers = why_steps["transpose"].answers
    assert all(i["options"] == [answers["matmul-grad"], answers["undo-T"]] for i in asked)
    weight = _shares(asked)
    assert set(weight) == {"matmul-grad", "undo-T"} and max(weight.values()) <= 1.1 * min(weight.values()), weight
    # one per transpose JAX's autodiff wrote (its name stack `transpose(jvp(...))`) of a product or a transpose
    closed = jaxpr_of(deep_attention, program.example_args())
    made_by = {v: e.primitive.name for e in closed.jaxpr.eqns for v in e.outvars}
    backward = [e for e in closed.jaxpr.eqns if e.primitive.name == "transpose"
                and "transpose(" in str(e.source_info.name_stack)
                and made_by.get(e.invars[0]) in ("dot_general", "transpose")]
    assert len([i for i in asked if i["layer"] == "jaxpr"]) == len(backward) > 12
    assert all(i["options"][i["answer"]] == answers[i["why"]] for i in asked)
