"""The loops drill: each answer checked against JAX's own loop equations and XLA's own compiles.

Roles and body avals are compared with the scan or while equation JAX traces again
(`jaxpr_of`): its params and its body's `in_avals`. Trip counts are compared with the scan's
`length` and with the program run on crafted inputs (the decoding while); the compile stage's
reading of a while's counter is checked on loops of known count in tests/test_hlo.py.
"""
from __future__ import annotations

import re
from collections import Counter

import jax
import jax.numpy as jnp
import pytest

from pool_checks import assert_choice_item, kind_items
from jax import lax

from dumpgym.drills import kinds, loops
from dumpgym.drills._loops import trip_count
from jax_reference import jaxpr_of

STEPS = ("role", "body-aval", "branch", "trips")


@pytest.fixture(scope="session")
def items(read_pool):
    return [i for i in read_pool if i["drill"] == "loops"]


@pytest.fixture(scope="session")
def retraced(programs, items):
    """slug -> JAX's equation objects by record id, for each single-device program with loop items."""
    from dumpgym.traced.facts import build_facts
    from dumpgym.traced.program import parse_arg

    out = {}
    for slug in sorted({i["program"] for i in items}):
        program = programs[slug]
        if not program.mesh:
            closed = jaxpr_of(program.function, [parse_arg(a).to_struct() for a in program.args])
            out[slug] = build_facts(closed).jax_eqns
    return out


# --- counts and fields ---

def test_loops_has_at_least_thirty_items_over_the_built_in_corpus(items):
    assert len(items) >= 30
    steps = Counter(i["step"] for i in items)
    assert steps["role"] >= 12 and steps["body-aval"] >= 4 and steps["trips"] >= 2


def test_loop_items_have_the_fields_the_drills_need(items, by_slug):
    for item in items:
        program = by_slug[item["program"]]
        assert item["step"] in STEPS and item["question"].endswith(("?", "Type it.", "Type the number.", "runs."))
        assert program["eqns"][item["eqn"]]["primitive"] in ("scan", "while", "cond")
        assert item["layer"] in (("tpu", "gpu") if item["step"] == "trips" else ("jaxpr",))
        assert item["feedback"] and "\n" not in item["feedback"]
        if item["step"] == "role":  # a small closed category: a choice of all three roles
            assert_choice_item(item)
            assert len(item["options"]) == 3
        elif item["step"] == "branch":  # a line of the cond's own text: the branch that runs
            assert item["accepted_lines"][0] == item["answer_line"]
            assert item["shown"][0].split("\n")[item["answer_line"] - 1].lstrip().startswith("{ lambda")
        else:
            assert item["spelling"] == ("int" if item["step"] == "trips" else "aval")
            assert item["value"] not in item["misread"] and all(m["rule"] for m in item["misread"].values())


def test_no_operand_item_shows_a_body(items):
    for item in items:
        if item["step"] in ("role", "body-aval"):
            assert not any("lambda" in block for block in item["shown"]), item["shown"]


def test_answers_vary(items):
    assert len({i["options"][i["answer"]] for i in items if i["step"] == "role"}) >= 3
    assert len({i["value"] for i in items if i["step"] == "body-aval"}) >= 3
    positions = Counter(i["answer"] for i in items if i["step"] == "role")
    assert len(positions) == 3


def test_each_role_and_each_position_is_about_as_often_right(items):
    # A choices-only reader who always picks one role, or one position, does no better than a third
    # of the weight, give or take a tenth.
    roles, positions = Counter(), Counter()
    for item in items:
        if item["step"] == "role":
            roles[item["options"][item["answer"]].split(":")[0]] += item["weight"]
            positions[item["answer"]] += item["weight"]
    total = sum(positions.values())
    assert max(positions.values()) <= (1 / 3 + 0.1) * total, positions
    assert max(roles.values()) <= (1 / 3 + 0.1) * total, roles


def test_a_program_with_many_items_shares_its_weight(items):
    total = Counter()
    for item in items:
        total[item["program"], item["step"]] += item["weight"]
    assert max(total.values()) <= kinds()["loops"].per_program + 0.01


# --- roles and body avals against JAX ---

def _role_in_jax(eqn, i: int) -> str:
    """Operand `i`'s role as JAX's own equation says: its params, checked against its bodies' binders."""
    avals = [v.aval for v in eqn.invars]
    if eqn.primitive.name == "scan":
        c, k = eqn.params["num_consts"], eqn.params["num_carry"]
        body = eqn.params["jaxpr"]
        assert body.in_avals[:c + k] == avals[:c + k]  # consts and carries go in whole
        assert body.out_avals[:k] == body.in_avals[c:c + k]  # a carry comes back with its own aval
        return "const" if i < c else "carry" if i < c + k else "xs"
    cc, bc = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
    carries = avals[cc + bc:]
    assert list(eqn.params["cond_jaxpr"].in_avals) == avals[:cc] + carries
    assert list(eqn.params["body_jaxpr"].in_avals) == avals[cc:cc + bc] + carries
    return "cond-const" if i < cc else "body-const" if i < cc + bc else "carry"


def check_role(item, eqn) -> None:
    """The answer is operand i's role in JAX's equation."""
    i = int(re.search(r"\(operand (\d+)\)", item["question"]).group(1))
    labels = loops.SCAN_ROLES if eqn.primitive.name == "scan" else loops.WHILE_ROLES
    assert item["options"][item["answer"]] == labels[_role_in_jax(eqn, i)], item["question"]


def check_body_aval(item, eqn) -> None:
    """The answer is the aval of the binder JAX gives the body for that xs operand."""
    name = re.search(r"`(\w+)`", item["question"]).group(1)
    i = item["shown"][0].rsplit("] ", 1)[1].split().index(name)
    assert i >= eqn.params["num_consts"] + eqn.params["num_carry"]
    assert item["value"] == eqn.params["jaxpr"].in_avals[i].str_short(short_dtypes=True)
    assert eqn.invars[i].aval.shape[0] == eqn.params["length"]


def _branch_rows(text: str, n: int) -> list[tuple[int, int]]:
    """Each branch's rows in the shown cond, counted from the text itself: from a row that starts `{ lambda`
    (at the branches' indent) to the row before the next, the last to the row before the closing `)`."""
    rows = text.split("\n")
    starts = [k for k, row in enumerate(rows, 1) if row.lstrip().startswith("{ lambda")]
    indent = min(len(rows[k - 1]) - len(rows[k - 1].lstrip()) for k in starts)
    starts = [k for k in starts if len(rows[k - 1]) - len(rows[k - 1].lstrip()) == indent]
    close = next(k for k in range(starts[-1], len(rows) + 1) if rows[k - 1].strip() == ")")
    assert len(starts) == n
    return [(a, b - 1) for a, b in zip(starts, [*starts[1:], close])]


def check_branch(item, eqn, producer) -> None:
    """JAX's cond, bound with the index the producer makes of the value asked, returns the answer's branch."""
    import jax
    import numpy as np

    if producer.primitive.name == "clamp":  # the operand in the middle is the value asked about
        args = [producer.invars[0].val, np.int32(item["index_value"]), producer.invars[2].val]
    else:
        args = [np.asarray(item["index_value"], producer.invars[0].aval.dtype)]
    index = producer.primitive.bind(*args, **producer.params)
    rng = np.random.default_rng(0)
    operands = [rng.normal(size=v.aval.shape).astype(v.aval.dtype) for v in eqn.invars[1:]]
    ran = eqn.primitive.bind(index, *operands, **eqn.params)
    outputs = [jax.core.eval_jaxpr(b.jaxpr, b.consts, *operands) for b in eqn.params["branches"]]
    matches = [k for k, out in enumerate(outputs) if all(np.allclose(a, b) for a, b in zip(out, ran))]
    rows = _branch_rows(item["shown"][0], len(eqn.params["branches"]))
    tapped = [k for k, (first, last) in enumerate(rows) if first <= item["answer_line"] <= last]
    assert matches == tapped
    assert set(item["accepted_lines"]) == set(range(rows[tapped[0]][0], rows[tapped[0]][1] + 1))


def check_against_jax(item, jax_eqns) -> None:
    """One jaxpr-layer item against JAX's own equation objects (by record id)."""
    eqn = jax_eqns[item["eqn"]]
    if item["step"] == "role":
        check_role(item, eqn)
    elif item["step"] == "body-aval":
        check_body_aval(item, eqn)
    elif item["step"] == "branch":
        check_branch(item, eqn, jax_eqns[item["index_eqn"]])


def test_jaxpr_answers_are_what_jaxs_own_equations_say(items, retraced):
    checked = Counter()
    for item in items:
        if item["layer"] == "jaxpr" and item["program"] in retraced:
            check_against_jax(item, retraced[item["program"]])
            checked[item["step"]] += 1
    assert checked["role"] >= 12 and checked["body-aval"] >= 4 and checked["branch"] >= 1


def test_every_xs_operand_and_every_loop_operand_is_asked(items, retraced):
    for slug, jax_eqns in retraced.items():
        for eqn_id, eqn in jax_eqns.items():
            if eqn.primitive.name not in ("scan", "while"):
                continue
            asked = Counter(i["step"] for i in items if i["program"] == slug and i["eqn"] == eqn_id)
            assert asked["role"] == len(eqn.invars), (slug, eqn_id)
            if eqn.primitive.name == "scan":
                xs = len(eqn.invars) - eqn.params["num_consts"] - eqn.params["num_carry"]
                assert asked["body-aval"] == xs, (slug, eqn_id)


def nested_loops(x, ws, limit):
    """A scan (unroll=2) in a jit in a remat, a while whose condition and body close over arrays, a cond."""
    @jax.checkpoint
    def block(h):
        @jax.jit
        def inner(h):
            return lax.scan(lambda c, w: (jnp.tanh(c @ w), None), h, ws, unroll=2)[0]
        return inner(h)

    h, big = block(x), jnp.max(ws, axis=0)
    h = lax.while_loop(lambda s: jnp.sum(s[1]) < jnp.sum(big) + limit,
                       lambda s: (s[0] + 1, s[1] * 2.0 + big[0]), (0, h))[1]
    return lax.cond(limit > 0, lambda v: v * 2, lambda v: v - 1, h)


def test_nested_loops_are_asked_and_answered_as_jax_says():
    from dumpgym.corpus.pipeline import program_record
    from dumpgym.traced.facts import build_facts
    from dumpgym.traced.program import Program, parse_arg

    args = ("f32[4,8]", "f32[6,8,8]", "f32[]")
    record = program_record(Program("nested-loops", "nested loops", "loops inside containers", nested_loops, args))
    jax_eqns = build_facts(jaxpr_of(nested_loops, [parse_arg(a).to_struct() for a in args])).jax_eqns
    asked = kind_items(record, "loops")
    for item in asked:
        check_against_jax(item, jax_eqns)
    scan = next(e for e in record.eqns if e.primitive == "scan")
    assert record.eqns[record.eqns[scan.parent].parent].primitive.startswith(("remat", "checkpoint"))
    loop = next(e for e in record.eqns if e.primitive == "while")
    assert loop.params["cond_nconsts"] > 0 and loop.params["body_nconsts"] > 0
    steps = Counter((record.eqns[i["eqn"]].primitive, i["step"]) for i in asked)
    assert steps == {("scan", "role"): len(scan.inputs), ("scan", "body-aval"): 1,
                     ("while", "role"): len(loop.inputs), ("cond", "branch"): 2}
    assert {"cond-const", "body-const", "carry"} == {
        k for i in asked if i["eqn"] == loop.id for k, v in loops.WHILE_ROLES.items() if i["options"][i["answer"]] == v}
    unrolled = next(i for i in asked if i["step"] == "body-aval")
    assert "unroll-as-chunk" in [m["rule"] for m in unrolled["misread"].values()]


# --- trip counts ---

def test_trip_counts_of_compiled_scans_are_their_length(items, retraced):
    checked = 0
    for item in items:
        if item["step"] != "trips" or item["program"] not in retraced:
            continue
        eqn = retraced[item["program"]][item["eqn"]]
        if eqn.primitive.name == "scan":
            assert item["value"] == str(eqn.params["length"])
            checked += 1
    assert checked >= 1


def test_gpu_trip_counts_are_what_xla_itself_knows(items, by_slug):
    """On the GPU, XLA writes the trip count it proved into the while's backend_config (`known_trip_count`),
    which the item's shown lines leave out: every GPU `trips` answer is that count, and each of the scans'
    GPU whiles is asked."""
    gpu = [i for i in items if i["step"] == "trips" and i["layer"] == "gpu"]
    for item in gpu:
        line = by_slug[item["program"]]["compiled"]["gpu"]["text"].splitlines()[item["hlo_line"] - 1]
        assert line.lstrip().startswith(f"%{item['instruction']} = ")
        assert item["value"] == re.search(r'"known_trip_count":\{"n":"(\d+)"\}', line).group(1)
        assert "known_trip_count" not in "\n".join(item["shown"])
    assert {i["program"] for i in gpu} >= {"scan-layers", "rnn-bptt", "grad-accum"}


def test_the_decoding_while_runs_at_most_its_answer_and_reaches_it(items, programs):
    import jax.numpy as jnp
    import numpy as np

    item = next((i for i in items if i["step"] == "trips" and i["program"] == "decode-loop"), None)
    if item is None:
        pytest.skip("no decode-loop in this corpus")
    bound = int(item["value"])
    assert "or fewer" in item["feedback"]  # the condition's other test can end it early
    decode = programs["decode-loop"].function
    w_vocab = np.zeros((32, 64), np.float32)
    w_vocab[:, 5] = 1.0  # every step picks token 5, never END: the loop runs to its counter's bound
    tokens = decode(jnp.int32(3), jnp.ones((64, 32)), jnp.zeros((32, 32)), jnp.asarray(w_vocab))
    assert int(jnp.sum(tokens[1:] == 5)) == bound
    rng = np.random.default_rng(0)
    for _ in range(5):
        tokens = decode(jnp.int32(3), *(jnp.asarray(rng.normal(size=s), jnp.float32)
                                        for s in ((64, 32), (32, 32), (32, 64))))
        assert int(jnp.sum(tokens[1:] != 0)) <= bound


def test_trip_misreadings_are_named_and_differ_from_the_answer(items):
    rules = Counter(m["rule"] for i in items if i["step"] == "trips" for m in i["misread"].values())
    assert {"inclusive-bound", "last-counter-value"} <= set(rules)
    for item in items:
        if item["step"] == "trips":
            assert item["question"].startswith("At most how many times")  # the same words for every loop


@pytest.mark.parametrize("init,step,direction,limit,expected", [
    (0, 1, "LT", 4, 4), (1, 1, "LT", 8, 7), (0, 1, "LE", 9, 10), (2, 3, "LT", 20, 6),
    (11, -2, "GT", 0, 6), (11, -2, "GE", 1, 6), (0, 2, "NE", 10, 5), (5, 1, "LT", 5, 0), (0, -1, "LT", 3, None),
])
def test_trip_count_is_the_length_of_the_python_range(init, step, direction, limit, expected):
    assert trip_count(init, step, direction, limit) == expected
    if expected is not None and direction in ("LT", "GT"):
        assert len(range(init, limit, step)) == expected
