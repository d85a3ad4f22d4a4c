"""Every program's lesson says only what its dump shows: each claim is checked against the committed corpus.

Lessons come from the program modules (what `dumpgym corpus build` will copy into the corpus); the
facts they are checked against come from the committed corpus, so a lesson edited without a
rebuild is still held to the traced dump.
"""
from __future__ import annotations

import re

import pytest

from dumpgym.programs import SLUGS, builtin_programs

# Primitive names a lesson might use besides those the corpus prints. Words that are mostly
# English (`and`, `or`, `not`, `while`, `copy`) are left out: a lesson says them as prose.
COMMON = {
    "abs", "add", "add_any", "all_gather", "all_to_all", "argmax", "argmin", "broadcast_in_dim", "clamp",
    "concatenate", "cond", "convert_element_type", "cumsum", "custom_jvp_call", "custom_vjp_call", "div",
    "dot_general", "dynamic_slice", "dynamic_update_slice", "eq", "erf", "exp", "gather", "ge", "gt",
    "integer_pow", "iota", "jit", "le", "log", "logistic", "lt", "max", "min", "mul", "ne", "neg", "pad",
    "pjit", "ppermute", "psum", "reduce_max", "reduce_min", "reduce_prod", "reduce_scatter", "reduce_sum",
    "remat", "reshape", "rev", "rsqrt", "scan", "scatter", "scatter_add", "select_n", "shard_map", "slice",
    "sort", "split", "sqrt", "square", "squeeze", "stop_gradient", "sub", "tanh", "transpose",
}
# The English a lesson may use for an op, and the primitives it may mean (a matrix multiply is a multiply).
ENGLISH = {
    "multiply": ("mul", "dot_general"), "multiplies": ("mul", "dot_general"), "subtract": ("sub",),
    "divide": ("div",), "convert": ("convert_element_type",), "broadcast": ("broadcast_in_dim",),
    "broadcasts": ("broadcast_in_dim",), "matmul": ("dot_general",), "matmuls": ("dot_general",),
}
# A word that names a primitive but is used as prose, with why; each must still occur in its lesson.
PROSE = {
    ("psum", "slice"): "'its slice of the contraction' is each device's share of the data; the body has no slice",
}
# English words that some corpus program prints as a primitive (`and`, `or`, `while`, `not`, `copy`): a
# lesson says them as prose, so they are never read as primitives; a lesson's claim about one has its own test.
ENGLISH_WORDS = {"and", "or", "not", "while", "copy"}
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}
NEGATIONS = re.compile(r"\b(no|never|not|without|nor|instead of)\b", re.IGNORECASE)
# A word, with its hyphenated tail (`scatter-add` is one primitive; `all-reduce` one unknown word).
WORD = re.compile(r"(?<![\w.])[A-Za-z_][A-Za-z0-9_]*(?:-[a-z]+)*(?!\w|\.\w|\()")
PER = re.compile(r"\b(each|every|per)\b", re.IGNORECASE)


@pytest.fixture(scope="module")
def lessons():
    """Each built-in program's lesson, from its module."""
    return {p.slug: p.lesson for p in builtin_programs()}


@pytest.fixture(scope="module")
def vocabulary(corpus):
    """Every primitive name printed anywhere in the corpus, and the common ones."""
    return (COMMON | {e["primitive"] for p in corpus["programs"] for e in p["eqns"]}) - ENGLISH_WORDS


def clauses(lesson: str) -> list[str]:
    """The lesson cut where a negation's reach ends: sentences, semicolons, colons and commas."""
    return [c for c in re.split(r"[.;:,](?:\s|$)|[()]", lesson) if c.strip()]


def mentions(lesson: str, vocabulary: set[str]) -> list[tuple[str, tuple[str, ...], bool, int | None, str]]:
    """(word, primitives it may mean, negated, count, clause) for every op the lesson names.

    A word names a primitive when it is one, its plural, or its English name; a name written with its
    module (`jnp.max`, `lax.associative_scan`) or called (`one_hot(`) is Python, not a primitive.
    It is negated when a negation comes before it in its clause, and counted when a number word
    stands right before it (unless the clause counts per `each`, `every` or `per` item).
    """
    found = []
    for clause in clauses(lesson):
        words = [(m.group(), m.start()) for m in WORD.finditer(clause)]
        for i, (word, at) in enumerate(words):
            key = word.lower()
            if key in ENGLISH:
                primitives = ENGLISH[key]
            else:
                # the name itself, or its plural (`adds`, `slices`, `dot_generals`)
                stem = next((c for c in (key, key[:-1], key[:-2]) if c in vocabulary), None)
                if stem is None or (stem != key and not key.endswith("s")):
                    continue
                primitives = (stem,)
            negated = NEGATIONS.search(clause[:at]) is not None
            # "each einsum is one dot_general" counts per einsum, not in the whole dump
            count = NUMBERS.get(words[i - 1][0].lower()) if i and not PER.search(clause) else None
            found.append((word, primitives, negated, count, clause))
    return found


def printed(program: dict, primitives: tuple[str, ...], *, stablehlo: bool = False) -> int:
    """How many equations print one of `primitives` or a variant of it (`add_any`, `remat2`,
    `psum_invariant`); with `stablehlo`, how many StableHLO ops of those names the lowering has instead."""
    if stablehlo:
        return sum(op["name"] in {f"stablehlo.{p}" for p in primitives} for op in program["stablehlo_ops"])
    variants = [re.compile(rf"{re.escape(p)}(_\w+|\d+)?") for p in primitives]
    return sum(any(v.fullmatch(e["primitive"]) for v in variants) for e in program["eqns"])


def test_every_program_has_a_lesson(lessons, by_slug):
    assert list(lessons) == list(SLUGS)
    assert set(lessons) <= set(by_slug)
    assert all(lesson.strip() for lesson in lessons.values())


@pytest.mark.parametrize("slug", SLUGS)
def test_every_primitive_a_lesson_names_is_in_the_dump_or_said_to_be_absent(slug, lessons, vocabulary, by_slug):
    program = by_slug[slug]
    wrong = []
    for word, primitives, negated, count, clause in mentions(lessons[slug], vocabulary):
        if any((slug, p) in PROSE for p in primitives):
            continue
        primitive = "/".join(primitives)
        # A clause about StableHLO may name the op as either layer prints it.
        layers = [False, True] if "StableHLO" in clause else [False]
        n = max(printed(program, primitives, stablehlo=s) for s in layers)
        if negated and n:
            wrong.append(f"says no {primitive} ({word!r}) but the dump has {n}")
        elif not negated and not n:
            wrong.append(f"names {primitive} ({word!r}) but the dump has none")
        elif count is not None and not negated and count not in (printed(program, primitives, stablehlo=s) for s in layers):
            wrong.append(f"counts {count} {primitive} but the dump has {n}")
    assert wrong == [], f"{slug}: {lessons[slug]!r}"


def test_every_prose_exception_is_still_in_its_lesson(lessons, vocabulary):
    for slug, primitive in PROSE:
        assert (primitive,) in {p for _, p, *_ in mentions(lessons[slug], vocabulary)}, (slug, primitive)


def test_the_checker_catches_the_lessons_it_replaced(vocabulary, by_slug):
    """The old gqa lesson claimed a broadcast; the old scan lesson a scan that unrolls."""
    gqa = mentions("the einsum batches over it and broadcasts over heads", vocabulary)
    assert [(p, neg) for _, p, neg, *_ in gqa] == [(("broadcast_in_dim",), False)]
    assert printed(by_slug["gqa"], ("broadcast_in_dim",)) == 0
    assert [(p, neg) for _, p, neg, *_ in mentions("no scan primitive survives", vocabulary)] == [(("scan",), True)]
    assert [(p, c) for _, p, _, c, _ in mentions("Two dot_generals around a softmax", vocabulary)] == [(("dot_general",), 2)]
    assert [c for *_, c, _ in mentions("Each einsum is one dot_general", vocabulary)] == [None]
    assert mentions("jnp.max and one_hot( and lax.associative_scan", vocabulary) == []


# --- what the three rewritten lessons claim, one test per claim ---------------------------------

def equations(program: dict) -> list[dict]:
    """Top-level equations with their binders and operands, read off the printed jaxpr."""
    lines = program["jaxpr"].split("\n")
    out = []
    for e in program["eqns"]:
        if e["parent"] is not None:
            continue
        first, last = e["jaxpr_lines"]
        text = " ".join(line.strip() for line in lines[first - 1:last])
        binders, rest = text.split(" = ", 1)
        rest = rest[len(e["primitive"]):]
        if rest.startswith("["):  # params: skip to the matching bracket
            depth = 0
            for i, ch in enumerate(rest):
                depth += {"[": 1, "]": -1}.get(ch, 0)
                if depth == 0:
                    rest = rest[i + 1:]
                    break
        out.append({**e, "outvars": [b.split(":")[0] for b in binders.split()],
                    "invars": [t for t in rest.split() if ":" not in t]})
    return out


def producer(eqns: list[dict]) -> dict[str, dict]:
    return {v: e for e in eqns for v in e["outvars"]}


def users(eqns: list[dict], var: str) -> list[dict]:
    return [e for e in eqns if var in e["invars"]]


def test_grads_differentiates_through_the_max_with_no_stop_gradient(by_slug):
    eqns = equations(by_slug["grads"])
    made = producer(eqns)
    assert all(e["primitive"] != "stop_gradient" for e in by_slug["grads"]["eqns"])
    # the forward: scores == their row max (reshaped to [32,1]), the mask as f32, its row sum the tie count
    (eq,) = [e for e in eqns if e["primitive"] == "eq"]
    scores, row_max = (made[v] for v in eq["invars"])
    assert scores["primitive"] == "dot_general" and scores is eqns[1]
    assert row_max["primitive"] == "reshape" and made[row_max["invars"][0]]["primitive"] == "reduce_max"
    (mask,) = users(eqns, eq["outvars"][0])
    assert mask["primitive"] == "convert_element_type" and mask["outputs"][0]["dtype"] == "float32"
    ties = next(e for e in users(eqns, mask["outvars"][0]) if e["primitive"] == "reduce_sum")
    # the backward: the max's gradient divided by the tie count, times the mask, added in with add_any
    (share,) = users(eqns, ties["outvars"][0])
    assert share["primitive"] == "div" and share["invars"][1] == ties["outvars"][0]
    (masked,) = [e for e in users(eqns, mask["outvars"][0]) if e["primitive"] == "mul"]
    assert made[next(v for v in masked["invars"] if v != mask["outvars"][0])]["primitive"] == "broadcast_in_dim"
    assert [e["primitive"] for e in users(eqns, masked["outvars"][0])] == ["add_any"]


def test_grads_rowsum_is_of_dp_exp_and_l_to_the_minus_two_not_do_times_o(by_slug):
    eqns = equations(by_slug["grads"])
    made = producer(eqns)

    def factors(var):
        e = made.get(var)
        return factors(e["invars"][0]) + factors(e["invars"][1]) if e and e["primitive"] == "mul" else [e]

    rowsums = [e for e in eqns if e["primitive"] == "reduce_sum" and made[e["invars"][0]]["primitive"] == "mul"]
    assert len(rowsums) == 1
    kinds = sorted((f["primitive"], f["params"].get("y")) for f in factors(rowsums[0]["invars"][0]))
    assert kinds == [("dot_general", None), ("exp", None), ("integer_pow", -2)]
    (dp,) = [f for f in factors(rowsums[0]["invars"][0]) if f["primitive"] == "dot_general"]
    assert dp["params"]["dimension_numbers"] == [[[1], [1]], [[], []]]  # dO · vᵀ: dP
    # O, the forward's output (probs @ v), feeds nothing but the loss's dead sum: no dO·O anywhere
    forward_out = next(e for e in eqns if e["primitive"] == "dot_general" and e["invars"][1] == "c")
    assert [(e["primitive"], e["outvars"]) for e in users(eqns, forward_out["outvars"][0])] == [("reduce_sum", ["_"])]


def test_scan_makes_no_scan_only_slices_adds_pads_and_concatenates(by_slug):
    assert {e["primitive"] for e in by_slug["scan"]["eqns"]} == {"slice", "add", "pad", "concatenate"}


def test_scan_goes_up_in_seven_levels_of_stride_two_slices_and_adds(by_slug):
    eqns = equations(by_slug["scan"])
    made = producer(eqns)

    def stride_two(var):
        e = made.get(var)
        return e is not None and e["primitive"] == "slice" and e["params"]["strides"] == [1, 2]

    up = [e for e in eqns if e["primitive"] == "add" and all(stride_two(v) for v in e["invars"])]
    assert [e["outputs"][0]["shape"][1] for e in up] == [64, 32, 16, 8, 4, 2, 1]  # log2 128 = 7 levels
    for e in up:
        starts = sorted(made[v]["params"]["start_indices"][1] for v in e["invars"])
        assert starts == [0, 1]  # the even and the odd elements


def test_scan_comes_down_by_interleaving_with_interior_pads_and_concatenates(by_slug):
    eqns = equations(by_slug["scan"])
    made = producer(eqns)
    pads = [e for e in eqns if e["primitive"] == "pad"]
    assert pads and all(e["params"]["padding_config"][1][2] == 1 for e in pads)
    assert any(e["primitive"] == "concatenate" for e in eqns)
    # each pair of pads (one shifted by one) is added: odd and even partial sums interleaved
    joins = [e for e in eqns if e["primitive"] == "add" and all(made[v]["primitive"] == "pad" for v in e["invars"])]
    assert len(joins) * 2 == len(pads)
    for e in joins:
        lows = sorted(made[v]["params"]["padding_config"][1][0] for v in e["invars"])
        assert lows == [0, 1]
    assert eqns[-1] in joins  # the last add finishes the scan


def test_gqa_is_one_dot_general_with_heads_as_a_free_lhs_axis_and_no_broadcast(by_slug):
    program = by_slug["gqa"]
    assert [e["primitive"] for e in program["eqns"]] == ["reshape", "dot_general"]
    reshape, dot = program["eqns"]
    assert reshape["params"]["new_sizes"] == [2, 4, 64, 32]  # eight heads as two groups of four
    (contract, batch) = dot["params"]["dimension_numbers"]
    assert batch == [[0], [0]]  # the group axis
    assert contract == [[3], [2]]  # d
    lhs, rhs = dot["inputs"]
    assert lhs["shape"] == [2, 4, 64, 32] and rhs["shape"] == [2, 64, 32]  # k as given: never made 8 heads
    free_lhs = [a for a in range(len(lhs["shape"])) if a not in contract[0] + batch[0]]
    assert free_lhs == [1, 2] and lhs["shape"][1] == 4  # h (the head in its group) and q
    assert dot["outputs"][0]["shape"] == [2, 4, 64, 64]


def test_grads_max_term_is_zero_up_to_rounding_as_the_lesson_says(programs):
    """Checked against JAX: with stop_gradient on the max, the gradients are the same up to rounding."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def attention_stopped(q, k, v):
        scores = q @ k.T
        shifted = jnp.exp(scores - jax.lax.stop_gradient(jnp.max(scores, axis=-1, keepdims=True)))
        return (shifted / jnp.sum(shifted, axis=-1, keepdims=True)) @ v

    args = [jax.random.normal(key, (32, 16), jnp.float32) for key in jax.random.split(jax.random.key(0), 3)]
    ours = programs["grads"].function(*args)
    stopped = jax.grad(lambda *a: jnp.sum(attention_stopped(*a)), argnums=(0, 1, 2))(*args)
    for a, b in zip(ours, stopped):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
