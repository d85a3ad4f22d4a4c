"""The backward pass drill: each pairing is checked against JAX's own vjp on the program's real values,
and each checkpoint policy's saved values against `jax.ad_checkpoint.print_saved_residuals`."""
import contextlib
import inspect
import io
import re
from collections import Counter
from functools import partial

import jax
import jax.ad_checkpoint
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from dumpgym.corpus.pipeline import program_record
from dumpgym.drills import kinds
from dumpgym.traced.facts import build_facts
from dumpgym.traced.program import Program
from dumpgym.record.schema import ProgramRecord
from jax_reference import jaxpr_of
from pool_checks import kind_items

_ONE_TO_ONE = {"remat2", "checkpoint", "pjit", "jit", "closed_call"}


@pytest.fixture(scope="module")
def records(corpus):
    return {p["slug"]: ProgramRecord.from_json(p, p["slug"]) for p in corpus["programs"]}


@pytest.fixture(scope="module")
def items(records):
    return {slug: kind_items(r, "backward") for slug, r in records.items()}


def _all(items):
    return [i for found in items.values() for i in found]


def _form(item) -> str:
    """The item's answer form (`readable` names it for forms other than choice and line)."""
    return item.get("form") or ("choice" if "options" in item else "line")


def _saved(item) -> bool:
    """A `residual` choice: what a checkpoint policy saves."""
    return item["step"] == "residual" and _form(item) == "choice"


def test_the_corpus_gives_at_least_sixty_items(items):
    assert len(_all(items)) >= 60
    steps = Counter((i["step"], _form(i)) for i in _all(items))
    assert steps[("wrt", "choice")] >= 15 and steps[("wrt", "line")] >= 15, steps
    # one typed cotangent per program (at the backward pass's first dot), a choice per forward dot of a program with two
    assert steps[("cotangent", "choice")] >= 10 and steps[("cotangent", "typed")] >= 6, steps
    assert steps[("residual", "line")] >= 15 and steps[("residual", "choice")] >= 1, steps


def test_no_two_items_of_a_program_ask_the_same_question(items):
    for found in items.values():
        dots = [i["options"][i["answer"]] for i in found if i["step"] == "cotangent" and _form(i) == "choice"]
        assert len(dots) == len(set(dots))
        cards = [i["card"] for i in found]
        assert len(cards) == len(set(cards))


def test_every_wrong_answer_names_its_misreading(items):
    for item in _all(items):
        assert item["feedback"] and "\n" not in item["feedback"]
        if _form(item) == "typed":  # a typed aval: each misread aval says what was taken for the cotangent
            assert item["misread"] and item["value"] not in item["misread"]
            assert all("line" in m["reason"] and m["rule"] for m in item["misread"].values())
            continue
        if _form(item) == "line":  # a tapped line: the rows a reader would wrongly tap say why not
            assert item["answer_line"] in item["accepted_lines"] and item["explain"]
            assert not set(map(int, item["explain"])) & set(item["accepted_lines"])
            assert all("line" in reason and len(reason) > 40 for reason in item["explain"].values())
            continue
        options = item["options"]
        assert len(options) == len(set(options)) == (2 if item["step"] == "wrt" else len(options)) >= 2
        for k, (rule, reason) in enumerate(zip(item["rules"], item["reasons"])):
            assert (k == item["answer"]) == (rule == "") == (reason == "")
            assert k == item["answer"] or ("line" in reason and len(reason) > 40), reason


def test_lhs_and_rhs_and_both_places_are_each_right_about_half_the_time(items):
    # A choices-only reader who always picks one side of the forward dot, or one place, does no better
    # than chance: by weight for the sides, by weight and by count for the places.
    sides, places, counted = Counter(), Counter(), Counter()
    for item in _all(items):
        if item["step"] == "wrt" and _form(item) == "choice":
            sides[item["options"][item["answer"]].split(" (")[0]] += item["weight"]
            places[item["answer"]] += item["weight"]
            counted[item["answer"]] += 1
    assert set(sides) == {"its lhs", "its rhs"} and max(sides.values()) <= 0.55 * sum(sides.values()), sides
    for tally in (places, counted):
        assert set(tally) == {0, 1} and max(tally.values()) <= 0.6 * sum(tally.values()), tally


def test_no_answer_is_printed_in_what_is_shown(items):
    for item in _all(items):
        if "options" in item:
            assert not any(item["options"][item["answer"]] in block for block in item["shown"])


def test_the_pool_is_the_same_every_time(records, items):
    assert {slug: kind_items(r, "backward") for slug, r in records.items()} == items


def test_a_program_shares_a_capped_weight(items):
    for found in items.values():
        assert sum(i["weight"] for i in found) <= kinds()["backward"].per_program + 0.01  # weights are rounded to three places


def test_shown_holds_the_backward_and_the_forward_dot(records, items):
    for slug, found in items.items():
        for item in found:
            if _saved(item):
                continue
            text = "\n".join(item["shown"])
            back = records[slug].eqns[item["eqn"]]
            assert f"{back.jaxpr_lines[0]:>3}  " in text
            for line in re.findall(r"line (\d+)", item["question"]):
                assert f"{int(line):>3}  " in text
            if _form(item) != "choice":  # the whole listing, numbered: rows are line numbers
                assert item["shown"][0].count("\n") + 1 == len(records[slug].jaxpr.splitlines())
            if _form(item) == "line":
                assert item["shown"][0].split("\n")[item["answer_line"] - 1].startswith(f"{item['answer_line']:>3}  ")


# -- JAX as the oracle: run the program's own jaxpr, keep every equation's values, ask jax.vjp ----------


def _arguments(program):
    """Random values for the program's arguments (on its mesh, when it has one). NumPy draws them: JAX's
    generator compiles a kernel per argument shape, and any random values serve the comparisons below."""
    out = []
    for k, struct in enumerate(program.example_args()):
        rng = np.random.default_rng(k)
        if jnp.issubdtype(struct.dtype, jnp.integer):
            value = np.asarray(rng.integers(0, 16, struct.shape), struct.dtype)
        else:
            value = np.asarray(rng.standard_normal(struct.shape), struct.dtype)
        sharding = getattr(struct, "sharding", None)
        out.append(jax.device_put(value, sharding) if sharding is not None else jnp.asarray(value))
    return out


def _run(jaxpr, consts, args, seen, step):
    """Evaluate a jaxpr equation by equation, recording (step, inputs, outputs) for each equation object."""
    env = dict(zip((*jaxpr.constvars, *jaxpr.invars), (*consts, *args)))

    def read(v):
        return v.val if isinstance(v, jax.extend.core.Literal) else env[v]

    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        outs = _apply(eqn, ins, seen, step)
        seen.setdefault(id(eqn), []).append((step, ins, outs))
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


def _apply(eqn, ins, seen, step):
    params = eqn.params
    if eqn.primitive.name in _ONE_TO_ONE:
        body = params["jaxpr"]
        return _run(getattr(body, "jaxpr", body), getattr(body, "consts", ()), ins, seen, step)
    if eqn.primitive.name == "custom_jvp_call":  # its primal computation (`jax.nn.relu`): what it evaluates to
        body = params["call_jaxpr"]
        return _run(body.jaxpr, body.consts, ins, seen, step)
    if eqn.primitive.name == "scan":
        body, nc, ncarry = params["jaxpr"], params["num_consts"], params["num_carry"]
        consts, carry, xs = ins[:nc], ins[nc:nc + ncarry], ins[nc + ncarry:]
        ys = {}
        for t in (reversed(range(params["length"])) if params["reverse"] else range(params["length"])):
            out = _run(body.jaxpr, body.consts, [*consts, *carry, *(x[t] for x in xs)], seen, t)
            carry, ys[t] = out[:ncarry], out[ncarry:]
        stacked = [jnp.stack([ys[t][k] for t in sorted(ys)]) for k in range(len(eqn.outvars) - ncarry)]
        return [*carry, *stacked]
    out = eqn.primitive.bind(*ins, **params)
    return list(out) if eqn.primitive.multiple_results else [out]


def _recorded(closed, args, keep):
    """`_run` over the whole program inside one `jax.jit`: every equation bound to the same operands as
    when run one at a time, but compiled once instead of dispatched (and compiled) primitive by primitive.
    The calls of the equations in `keep` (ids) are returned as concrete values, as `_run` records them."""
    box = {}

    def run(consts, args):
        seen: dict = {}
        _run(closed.jaxpr, consts, args, seen, None)
        leaves, box["tree"] = jax.tree.flatten({k: v for k, v in seen.items() if k in keep})
        box["leaves"] = leaves
        box["traced"] = [n for n, leaf in enumerate(leaves) if isinstance(leaf, jax.core.Tracer)]
        return [leaves[n] for n in box["traced"]]

    computed = jax.jit(run)(closed.consts, args)
    leaves = list(box["leaves"])
    for n, value in zip(box["traced"], computed):
        leaves[n] = value
    return jax.tree.unflatten(box["tree"], leaves)


@pytest.fixture(scope="module")
def values(programs, records, items):
    """Per program with items: the JAX equation objects by record id, what each dot_general (and each
    equation a `residual` item taps) computed, call by call, and the argument values."""
    out = {}
    for slug, found in items.items():
        if not found:
            continue
        program = programs[slug]
        closed = jaxpr_of(program.function, program.example_args())
        facts = build_facts(closed)
        keep = {id(e) for e in facts.jax_eqns.values() if e.primitive.name == "dot_general"}
        keep |= {id(facts.jax_eqns[e.id]) for e in _tapped(records[slug], found)}
        args = _arguments(program)
        out[slug] = (facts, _recorded(closed, args, keep), args)
    return out


def _tapped(record, found) -> list:
    """The equations whose rows a `residual` tap accepts."""
    rows = {n for i in found if i["step"] == "residual" and _form(i) == "line" for n in i["accepted_lines"]}
    return [e for e in record.eqns if e.jaxpr_lines[0] in rows]


def _calls(facts, seen, eqn_id):
    return seen[id(facts.jax_eqns[eqn_id])]


def _vjp(fwd_eqn, fwd_ins, ct):
    """JAX's gradients of one forward dot_general at its real operands, for a cotangent of its result."""
    return _jitted_vjp(fwd_eqn.params["dimension_numbers"], *fwd_ins, ct)


@partial(jax.jit, static_argnums=0)
def _jitted_vjp(dims, a, b, ct):
    """jax.vjp of the dot, jitted: one compile per dims and shapes, not one per primitive it runs."""
    _, pullback = jax.vjp(lambda a, b: lax.dot_general(a, b, dims), a, b)
    return pullback(ct)


def _same_up_to_transpose(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if sorted(a.shape) != sorted(b.shape):
        return False
    if a.shape == b.shape and np.allclose(a, b, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(b).max()))):
        return True
    return a.ndim == 2 and a.T.shape == b.shape and np.allclose(a.T, b, rtol=1e-3,
                                                                atol=1e-3 * max(1.0, float(np.abs(b).max())))


def _jax_gradient_sides(facts, seen, back_id, fwd_id, ct_side=None):
    """Which operands of the forward dot JAX's vjp says the backward dot's result is the gradient of, at
    every call, trying each input of the backward dot as the cotangent (or only `ct_side`)."""
    fwd_calls = {step: ins for step, ins, _ in _calls(facts, seen, fwd_id)}
    fwd = facts.jax_eqns[fwd_id]
    found = None
    for step, ins, outs in _calls(facts, seen, back_id):
        fwd_ins = fwd_calls[step] if step in fwd_calls else fwd_calls[None]
        sides = set()
        for c in (0, 1) if ct_side is None else (ct_side,):
            if ins[c].shape != fwd.outvars[0].aval.shape:
                continue
            grads = _vjp(fwd, fwd_ins, ins[c])
            sides |= {(c, s) for s in (0, 1) if _same_up_to_transpose(outs[0], grads[s])}
        found = sides if found is None else found & sides
    return found


def _dot_at(record, line):
    return next(e for e in record.eqns if e.primitive == "dot_general" and e.jaxpr_lines[0] == int(line))


def test_each_gradient_is_the_one_jax_gives_for_the_answer(records, items, values):
    asked = 0
    for slug, found in items.items():
        for item in (i for i in found if i["step"] == "wrt" and _form(i) == "choice"):
            facts, seen, _ = values[slug]
            fwd = _dot_at(records[slug], FORWARD.search(item["question"]).group(1))
            sides = {s for _, s in _jax_gradient_sides(facts, seen, item["eqn"], fwd.id)}
            assert sorted(item["options"]) == ["its lhs", "its rhs"]
            for k, option in enumerate(item["options"]):
                side = ("its lhs", "its rhs").index(option)
                assert (side in sides) == (k == item["answer"]), (slug, item["eqn"], option)
            asked += 1
    assert asked >= 15


FORWARD = re.compile(r"for the forward dot_general on line (\d+)\.")


def _pulls_back(facts, seen, back_id, fwd_id) -> bool:
    """Whether JAX's vjp of a forward dot, fed one input of the backward dot as its result's cotangent, gives
    the backward dot's result at every call."""
    return bool(_sides_or_none(facts, seen, back_id, fwd_id))


def _sides_or_none(facts, seen, back_id, fwd_id):
    """`_jax_gradient_sides`, or none for dots that run in different loops' steps: not each other's."""
    try:
        return _jax_gradient_sides(facts, seen, back_id, fwd_id)
    except KeyError:
        return set()


def _asked(records, items, values, step, form):
    """(slug, record, forward dots, item, facts, recorded calls, argument values) for each item of a step and form."""
    for slug, found in items.items():
        record = records[slug]
        forward = [e for e in record.eqns if e.primitive == "dot_general" and not record.in_backward(e)]
        for item in (i for i in found if i["step"] == step and _form(i) == form):
            yield (slug, record, forward, item, *values[slug])


def _cotangent_side(facts, seen, item, forward) -> int:
    """Which input of the item's backward dot JAX's vjp of some forward dot takes as the cotangent: just one."""
    sides = {c for f in forward for c, _ in _sides_or_none(facts, seen, item["eqn"], f.id)}
    assert len(sides) == 1, (item["card"], sides)
    return sides.pop()


def test_each_cotangent_is_the_one_jax_pulls_back(records, items, values):
    # Every forward dot of the program is an option (there are at most four), and JAX's vjp of the right
    # one alone, fed an input of the backward dot as its result's cotangent, gives the backward dot's result.
    asked = 0
    for slug, record, forward, item, facts, seen, _ in _asked(records, items, values, "cotangent", "choice"):
        named = [_dot_at(record, re.fullmatch(r"the dot_general on line (\d+)", o).group(1)) for o in item["options"]]
        assert len(forward) == len(named) <= 4
        for k, fwd in enumerate(named):
            assert _pulls_back(facts, seen, item["eqn"], fwd.id) == (k == item["answer"]), (slug, item["eqn"], fwd.id)
        asked += 1
    assert asked >= 10


GRADIENT = re.compile(r"with respect to the (lhs|rhs) of the forward dot_general on line (\d+)\.")


def test_each_tapped_gradient_is_the_one_jax_gives_for_that_operand(records, items, values):
    # Every backward dot of the program is tried: JAX's vjp of the forward dot, for the asked operand, gives
    # the tapped one's result, and no other's.
    asked = 0
    for slug, record, _, item, facts, seen, _ in _asked(records, items, values, "wrt", "line"):
        backward = [e for e in record.eqns if e.primitive == "dot_general" and record.in_backward(e)]
        side, at = GRADIENT.search(item["question"]).groups()
        fwd = _dot_at(record, at)
        for back in backward:
            gives = ("lhs", "rhs").index(side) in {s for _, s in _sides_or_none(facts, seen, back.id, fwd.id)}
            tapped = back.jaxpr_lines[0] <= item["answer_line"] <= back.jaxpr_lines[1]
            assert gives == tapped, (slug, item["card"], back.id)
        asked += 1
    assert asked >= 15


def _aval(x) -> str:
    return jax.core.ShapedArray(np.shape(x), np.asarray(x).dtype).str_short(short_dtypes=True)


def test_each_typed_cotangent_is_the_aval_of_what_jax_pulls_back(records, items, values):
    # The cotangent is the backward dot's input that JAX's vjp of the forward dot takes as its result's
    # cotangent; the answer is that input's aval, as JAX computed it.
    asked = 0
    for slug, _, forward, item, facts, seen, _ in _asked(records, items, values, "cotangent", "typed"):
        c = _cotangent_side(facts, seen, item, forward)
        avals = {_aval(ins[c]) for _, ins, _ in _calls(facts, seen, item["eqn"])}
        assert avals == {item["value"]}, (slug, item["card"])
        assert item["value"] not in item["misread"]
        asked += 1
    assert asked >= 6  # one per program: at the backward pass's first dot


def _alike(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and _same_up_to_transpose(a, b)


def test_each_tapped_residual_is_the_value_jax_reads(records, items, values):
    # The residual is the backward dot's input that is not the cotangent JAX's vjp takes: the tapped
    # equation computed that value (at the same step of a loop), or the tapped line declares an argument
    # whose value it is.
    asked = 0
    for slug, record, forward, item, facts, seen, args in _asked(records, items, values, "residual", "line"):
        c = _cotangent_side(facts, seen, item, forward)
        calls = {step: ins[1 - c] for step, ins, _ in _calls(facts, seen, item["eqn"])}
        made = [e for e in record.eqns if e.jaxpr_lines[0] == item["answer_line"] and not record.in_backward(e)]
        if not made:
            # a line that declares: an argument, or a binder of a body (hoisted above the program, a scan's),
            # which at step t of the loop reads row t of an argument the scan takes as xs
            assert item["answer_line"] < min(e.jaxpr_lines[0] for e in record.eqns if e.parent is None)
            assert any(all(_alike(r, a) or (step is not None and np.shape(a) and _alike(r, a[step]))
                           for step, r in calls.items()) for a in args), (slug, item["card"])
        else:
            assert any(_makes(facts, seen, e, calls) for e in made), (slug, item["card"])
        asked += 1
    assert asked >= 15


def _makes(facts, seen, eqn, reads) -> bool:
    """Whether an equation computed each value (by loop step) in `reads`: one of its outputs is it."""
    outs = {step: o for step, _, o in _calls(facts, seen, eqn.id)}
    return all(any(_alike(r, o) for o in outs.get(step, outs.get(None, ()))) for step, r in reads.items())


# -- what a checkpoint policy saves: JAX's own report -----------------------------------------------


def ckpt_policy_copy(x, w1, w2):
    """ckpt-policy's program, written out again so that its differentiated function can be asked."""
    return jax.grad(lambda w1, w2: jnp.sum(_block(x, w1, w2)), argnums=(0, 1))(w1, w2)


@partial(jax.checkpoint, policy=jax.checkpoint_policies.checkpoint_dots)
def _block(x, w1, w2):
    return jnp.tanh(jnp.sin(x @ w1) @ w2)


def _jax_residuals(x, w1, w2) -> Counter:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        jax.ad_checkpoint.print_saved_residuals(lambda w1, w2: jnp.sum(_block(x, w1, w2)), w1, w2)
    return Counter(re.sub(r" from /.*$| from \S+:\d+.*$", "", line) for line in printed.getvalue().splitlines())


def _our_residuals(record, option: str, names) -> Counter:
    """One option's values, written as JAX's report writes them (aval, then where the value comes from)."""
    out = Counter()
    for part in option.split("; "):
        arg = re.fullmatch(r"argument (\d+) \((.+)\)", part)
        if arg:
            name = names[int(arg.group(1))]
            out[f"{arg.group(2)} " + (f"from the argument {name}" if name in ("w1", "w2") else "from a constant")] += 1
            continue
        prim, line, aval = re.fullmatch(r"the (\S+) on line (\d+) \((.+)\)", part).groups()
        eqn = next(e for e in record.eqns if e.jaxpr_lines[0] == int(line) and e.primitive == prim)
        # checkpoint_dots marks each saved dot result with a reduce_precision: JAX names the dot.
        made_by = record.eqns[eqn.sources[0].eqn].primitive if prim == "reduce_precision" else prim
        out[f"{aval} output of {made_by}"] += 1
    return out


def test_the_saved_residuals_are_the_ones_jax_reports(programs, records, items):
    program, record = programs["ckpt-policy"], records["ckpt-policy"]
    args = [jnp.ones(s.shape, s.dtype) for s in program.example_args()]
    assert str(jax.make_jaxpr(ckpt_policy_copy)(*args)) == record.jaxpr  # the copy is the program
    (item,) = [i for i in items["ckpt-policy"] if _saved(i)]
    names = list(inspect.signature(program.function).parameters)
    jax_says = _jax_residuals(*args)
    assert len(jax_says) >= 3
    for k, option in enumerate(item["options"]):
        assert (_our_residuals(record, option, names) == jax_says) == (k == item["answer"]), option


# -- small programs ----------------------------------------------------------------------------------


def _record(function, *args):
    return program_record(Program(slug="t", title="t", lesson="l", function=function, args=args))


def test_a_residual_read_by_two_forward_dots_is_not_asked():
    def shared(x, w):  # x is an operand of both forward dots: its backward dots cannot be told apart
        return jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w) @ (x @ w).T))(w)

    def plain(x, w):
        return jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w)))(w)

    asked = {i["eqn"] for i in kind_items(_record(shared, "f32[8,4]", "f32[4,4]"), "backward") if i["step"] == "wrt"}
    record = _record(shared, "f32[8,4]", "f32[4,4]")
    readers_of_x = [e.id for e in record.eqns if e.primitive == "dot_general" and "transpose(" in e.name_stack
                    and any(s is not None and s.eqn is None and s.index == 0 for s in e.sources)]
    assert readers_of_x and not set(readers_of_x) & asked
    # one forward dot: no choice of which one the cotangent belongs to, only its typed aval
    assert [i["step"] for i in kind_items(_record(plain, "f32[8,4]", "f32[4,6]"), "backward")] == ["wrt", "wrt", "residual", "cotangent"]


def test_a_deep_programs_cotangent_choices_put_the_right_dot_in_every_place():
    # Twelve layers of one width: every forward dot's result is alike, and the earlier layers' dots come first in
    # the listing. Taking the first alike dots as the others put the right one last in nearly every item.
    def deep(x, *ws):
        def loss(ws):
            h = x
            for w in ws:
                h = jnp.tanh(h @ w)
            return jnp.sum(h)
        return jax.grad(loss)(ws)

    record = _record(deep, "f32[4,16]", *["f32[16,16]"] * 12)
    choices = [i for i in kind_items(record, "backward") if i["step"] == "cotangent" and _form(i) == "choice"]
    assert len(choices) >= 10 and all(len(i["options"]) == 4 for i in choices)
    places = Counter(i["answer"] for i in choices)
    assert set(places) == {0, 1, 2, 3} and max(places.values()) <= len(choices) / 2, places
    # and the right option is still the forward dot JAX's vjp pulls the cotangent back through: the dot whose
    # result has the cotangent's aval and whose operand the backward dot reads as its residual
    for item in choices:
        back = next(e for e in record.eqns if e.id == item["eqn"])
        right = _dot_at(record, re.fullmatch(r"the dot_general on line (\d+)", item["options"][item["answer"]]).group(1))
        assert right.outputs[0].same(back.inputs[0]) or right.outputs[0].same(back.inputs[1]), item["card"]
