"""Drills from a dump made the way most users make one: `XLA_FLAGS=--xla_dump_to=DIR` alone (XLA's HLO before and
after optimisation, no StableHLO, no jaxpr), or `JAX_DUMP_IR_TO=DIR` in JAX's default mode beside it (StableHLO,
no jaxpr). Each folder is made in a fresh process of programs as users write them (`tests/dump_drill_programs.py`:
an RNN's train step over a `lax.scan`, a transformer block's train step whose attention is a batched einsum).
Such a record has no equations, so the kinds whose answers the texts hold are asked of the layers it has: the
decoder of every dot the StableHLO, the HLO before optimisations and the compiled HLO print, the gradient a
backward dot before optimisations makes, the output of each transpose, reduce and concatenate whose line decides it,
a compiled while's runs. The answers are checked against JAX: a dot's dimension numbers, operands and output, and a
backward dot's residual, against the dot_general equations JAX traces of the same function here, an op's output
against `jax.eval_shape` of the lax op, a while's runs against the length of the scan or the bound of the
while JAX traces."""
import re
from collections import Counter
from math import prod

import pytest

from dump_drill_programs import added_pool, jax_equations, load
from dump_programs import make_dump
from dumpgym.record.schema import ProgramRecord
from pool_checks import assert_pool_item, readable

NAMES = ("rnn_train_step", "fit_while", "remat_mlp_step", "transformer_train_step")
BAR_ITEMS = 20  # issue 43: the scan, while and remat programs give at least this many items on the CPU
# How a user dumps: XLA's flag alone, or JAX's StableHLO (its default mode) beside it.
HOW = {"xla": None, "jax-default": ""}


@pytest.fixture(scope="module", params=sorted(HOW))
def dumped(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"default-{request.param}")
    folder = make_dump(root / "dump", NAMES, "cpu", module="dump_drill_programs", jax_modes=HOW[request.param])
    return (request.param, *added_pool(folder, root / "corpus", NAMES))


def _items(pool: dict, record: ProgramRecord, **where) -> list[dict]:
    return [i for i in pool["items"] if i["program"] == record.slug and all(i.get(k) == v for k, v in where.items())]


def _jax_eqns(name: str, primitive: str) -> list:
    """Every `primitive` equation of the jaxpr JAX traces of the program here, sub-jaxprs' too."""
    return [e for e in jax_equations(name) if e.primitive.name == primitive]


def _jax_dots(name: str) -> list:
    return _jax_eqns(name, "dot_general")


def _short(aval) -> str:
    return aval.str_short(short_dtypes=True)


def test_a_dump_without_a_jaxpr_gives_decoder_and_loop_items_that_pass_the_pool_checks(dumped):
    how, pool, records = dumped
    for name, record in records.items():
        assert not record.eqns and not record.jaxpr  # nothing is made up where the dump has no jaxpr
        assert bool(record.stablehlo) == (how != "xla")
        items = _items(pool, record)
        for item in items:
            assert_pool_item(item, set())
            shown = readable(item, record)
            assert shown["shown"] and all(isinstance(b, str) and b for b in shown["shown"]), item["card"]
        layers = Counter((i["drill"], i["layer"]) for i in items)
        # every dot the texts print is decoded: at the compiled layer and before optimisations always, at StableHLO
        # where the dump has it
        assert layers["decoder", "cpu"] >= 5 and layers["decoder", "hlo-before"] >= 5, (name, layers)
        assert (layers["decoder", "stablehlo"] >= 5) == (how != "xla"), (name, layers)
        # the fusions whose every body instruction links exactly to the layer the dump has are asked of it
        if name != "rnn_train_step":
            assert layers["fusions", "cpu"] >= 1, (name, layers)
    kinds = Counter(i["drill"] for i in _items(pool, records["rnn_train_step"]))
    assert kinds["loops"] >= 1 and len(_items(pool, records["rnn_train_step"])) >= 20, kinds


def test_the_scan_while_and_remat_programs_give_twenty_items_without_a_jaxpr(dumped):
    """Each of the scan, while and remat programs gives twenty items or more with no jaxpr, with XLA's dump alone as
    with JAX's StableHLO beside it (the while's small fit holds two dots, one reduce, one loop and one conditional:
    its dots are asked before optimisations and compiled)."""
    how, pool, records = dumped
    counts = {name: Counter(i["drill"] for i in _items(pool, records[name]))
              for name in ("rnn_train_step", "fit_while", "remat_mlp_step")}
    assert all(sum(kinds.values()) >= BAR_ITEMS for kinds in counts.values()), (how, counts)
    assert {"decoder", "loops", "shapes"} <= set(counts["rnn_train_step"]), counts
    assert {"decoder", "loops"} <= set(counts["fit_while"]) and "shapes" in counts["remat_mlp_step"], counts


def _jax_dot_of(dots: list, item: dict):
    """The dot_general JAX traces whose dimension numbers and operands are the item's dot's."""
    facts = item["facts"]
    for eqn in dots:
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        text = f"(({list(lc)}, {list(rc)}), ({list(lb)}, {list(rb)}))".replace(" ", "")
        if (text, _short(eqn.invars[0].aval), _short(eqn.invars[1].aval)) == (
                facts["dimension_numbers"].replace(" ", ""), facts["lhs"], facts["rhs"]):
            return eqn
    return None


def test_a_stablehlo_dot_is_decoded_as_jax_traced_it(dumped):
    """Each StableHLO decoder item's dot is a dot_general JAX traces of the same function, and its answer is what
    that equation's params and output say: the contracted size, an axis's role, where it lands, the output type."""
    how, pool, records = dumped
    if how == "xla":
        pytest.skip("an XLA-only dump has no StableHLO")
    _check_stablehlo_dots(pool, records)


def test_a_dot_before_optimisations_is_decoded_as_jax_traced_it(dumped):
    """XLA's HLO before optimisations keeps each dot_general JAX traced as a `dot` with its dimension numbers: each
    decoder item of that layer is a dot_general JAX traces of the same function, its answer what that equation's
    params and output say, with XLA's dump alone as with JAX's StableHLO beside it."""
    _how, pool, records = dumped
    _check_stablehlo_dots(pool, records, "hlo-before")
    # the while's fit: both its dots (the loss's and its gradient's) are asked before optimisations
    asked = {i["facts"]["line"] for i in _items(pool, records["fit_while"], drill="decoder", layer="hlo-before")}
    assert len(asked) == len(_jax_dots("fit_while")), asked


def _check_stablehlo_dots(pool: dict, records: dict[str, ProgramRecord], layer: str = "stablehlo") -> None:
    checked = Counter()
    for name, record in records.items():
        dots = _jax_dots(name)
        for item in _items(pool, record, drill="decoder", layer=layer):
            eqn = _jax_dot_of(dots, item)
            assert eqn is not None, (name, item["facts"])
            (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
            lists = {"lhs": (lc, lb), "rhs": (rc, rb)}
            avals = {"lhs": eqn.invars[0].aval, "rhs": eqn.invars[1].aval}
            shown, step = readable(item, record), item["step"]
            asked = re.search(r"\b(lhs|rhs) axis (\d+)\b", item["question"])  # of a one-axis question
            if step == "contracted-size":
                assert shown["value"] == str(prod(avals["lhs"].shape[a] for a in lc))
            elif step == "output":
                assert shown["value"] == _short(eqn.outvars[0].aval)
            elif step in ("lhs-free", "rhs-free") and item["answer"]["form"] == "axes":
                side = step[:3]
                contracted, batch = lists[side]
                assert shown["axes"] == [a for a in range(avals[side].ndim) if a not in (*contracted, *batch)]
            elif step in ("lhs-free", "rhs-free"):
                side, axis = asked[1], int(asked[2])
                contracted, batch = lists[side]
                role = "contracted" if axis in contracted else "batch" if axis in batch else "free"
                assert shown["options"][shown["answer"]] == role, item["card"]
            elif step == "output-axis":
                side, axis = asked[1], int(asked[2])
                picked = shown["options"][shown["answer"]]
                if axis in lists[side][0]:
                    assert not picked.startswith("output axis"), item["card"]
                else:
                    j = int(picked.rsplit(" ", 1)[1])
                    assert eqn.outvars[0].aval.shape[j] == avals[side].shape[axis], item["card"]
            checked[step] += 1
    assert checked["contracted-size"] >= 2 and sum(checked.values()) >= 10, checked


def _same_dot(eqn, dot) -> bool:
    """Whether a dot_general JAX traces has the dims and operand types of a dot the record read before optimisations."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    dims = (tuple(lc), tuple(rc), tuple(lb), tuple(rb))
    return dims == (dot.dims.lhs_contracting, dot.dims.rhs_contracting, dot.dims.lhs_batch, dot.dims.rhs_batch) and [
        _short(v.aval) for v in eqn.invars] == [f"{a.dtype}[{','.join(map(str, a.dims))}]" for a in (dot.lhs, dot.rhs)]


def test_a_backward_dot_before_optimisations_makes_the_gradient_jax_makes(dumped):
    """Each `wrt` item of a dump without a jaxpr pairs a backward dot with a forward dot of the HLO before optimisations;
    JAX's trace of the same function has a forward dot_general and a backward one (in `transpose(...)` of its name
    stack) of those dims and operand types, the backward reading the forward's other operand as the very variable and
    not the asked one. Each program's items weigh lhs and rhs alike, and each side's right place takes turns."""
    _how, pool, records = dumped
    checked = Counter()
    for name, record in records.items():
        dots = _jax_dots(name)
        backward = [e for e in dots if "transpose(" in str(e.source_info.name_stack)]
        forward = [e for e in dots if not any(e is b for b in backward)]
        at = {d.line: d for d in record.dump.dots}
        weights, places = Counter(), {}
        for item in _items(pool, record, drill="backward"):
            facts, shown = item["facts"], readable(item, record)
            side = facts["wrt"]
            k = ("lhs", "rhs").index(side)
            b, f = at[facts["backward"]], at[facts["forward"]]
            assert item["layer"] == "hlo-before" and shown["options"][shown["answer"]] == f"its {side}"
            found = [(fe, be) for fe in forward if _same_dot(fe, f) for be in backward if _same_dot(be, b)
                     if any(v is fe.invars[1 - k] for v in be.invars) and not any(v is fe.invars[k] for v in be.invars)]
            assert found, (name, item["card"], facts)
            weights[side] += item["weight"]
            places.setdefault(side, []).append(shown["answer"])
            checked[name] += 1
        if weights:
            assert abs(weights["lhs"] - weights["rhs"]) < 0.01, (name, weights)
            assert all(len(set(p)) == 2 for p in places.values() if len(p) > 1), (name, places)
    assert checked["transformer_train_step"] >= 6 and checked["remat_mlp_step"] >= 2, checked


# The jaxpr primitives a StableHLO op of the shape oracle lowers from.
_LOWERED_FROM = {"stablehlo.transpose": ("transpose",), "stablehlo.concatenate": ("concatenate",),
                 "stablehlo.slice": ("slice", "split"),
                 "stablehlo.reduce": ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and",
                                      "reduce_or")}


def test_a_stablehlo_ops_shape_is_the_aval_jax_gives_its_equation(dumped):
    """A shapes item of a dump without a jaxpr asks of a StableHLO op; its answer is the output aval of an equation
    JAX traces of the same function, of the primitive the op lowers from, on the same operand avals."""
    how, pool, records = dumped
    if how == "xla":
        pytest.skip("an XLA-only dump has no StableHLO")
    _check_stablehlo_shapes(pool, records)


def _check_stablehlo_shapes(pool: dict, records: dict[str, ProgramRecord]) -> None:
    checked = 0
    for name, record in records.items():
        outputs: dict[tuple, set[str]] = {}
        for eqn in jax_equations(name):
            key = (eqn.primitive.name, tuple(_short(v.aval) for v in eqn.invars))
            outputs.setdefault(key, set()).update(_short(v.aval) for v in eqn.outvars)  # a split's every part
        for item in _items(pool, record, drill="shapes", layer="stablehlo"):
            assert item["eqn"] is None
            facts, value = item["facts"], item["answer"]["value"]
            operands = tuple(facts["operands"][:1]) if facts["op"] == "stablehlo.reduce" else tuple(facts["operands"])
            found = set().union(*(outputs.get((p, operands), set()) for p in _LOWERED_FROM[facts["op"]]))
            assert value in found, (name, item["card"], value, found)
            assert value not in item["answer"]["misread"]
            checked += 1
    assert checked >= 4, checked


_DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64", "i8": "int8", "i16": "int16",
           "i32": "int32", "i64": "int64"}


def _struct(aval: str):
    import jax
    import jax.numpy as jnp

    m = re.fullmatch(r"([a-z]+\d+)\[([\d,]*)\]", aval)
    return jax.ShapeDtypeStruct(tuple(int(d) for d in m[2].split(",") if d), jnp.dtype(_DTYPES[m[1]]))


def _check_shapes_by_jax(pool: dict, records: dict[str, ProgramRecord]) -> Counter:
    """Every shapes item of a dump without a jaxpr, at StableHLO or a compiled layer: its answer is the aval
    `jax.eval_shape` gives the lax op of that kind on the operands the dump's text gives it (the item's facts),
    with the attribute its line prints, and no misreading is the answer."""
    import jax
    from jax import lax

    ops = {"transpose": lambda xs, a: lax.transpose(xs[0], a),
           "reduce": lambda xs, a: lax.reduce(xs[0], xs[1], lax.add, a),
           "concatenate": lambda xs, a: lax.concatenate(xs, a[0]),
           "slice": lambda xs, a: lax.slice(xs[0], a[0::3], a[1::3], a[2::3])}
    checked = Counter()
    for record in records.values():
        for item in _items(pool, record, drill="shapes"):
            facts = item["facts"]
            op = ops[facts["op"].removeprefix("stablehlo.")]
            out = jax.eval_shape(lambda *xs: op(xs, tuple(facts["attribute"])), *map(_struct, facts["operands"]))
            assert _short(jax.core.ShapedArray(out.shape, out.dtype)) == item["answer"]["value"], item["card"]
            assert item["answer"]["misread"] and item["answer"]["value"] not in item["answer"]["misread"]
            # the line is shown with its result masked, and the answer's text is nowhere in what is shown
            assert not any(item["answer"]["value"] in b for b in readable(item, record)["shown"]), item["card"]
            checked[item["layer"], facts["op"].removeprefix("stablehlo.")] += 1
    return checked


def test_an_ops_shape_is_the_aval_jax_gives_that_op(dumped):
    """The shape items of a dump without a jaxpr, each checked against `jax.eval_shape`: at the CPU compile a
    reduce and a transpose at least, and at StableHLO where the dump has it."""
    how, pool, records = dumped
    checked = _check_shapes_by_jax(pool, records)
    assert checked["cpu", "reduce"] >= 2 and checked["cpu", "transpose"] >= 2 and checked["cpu", "slice"] >= 1, checked
    assert (sum(n for (layer, _op), n in checked.items() if layer == "stablehlo") >= 4) == (how != "xla"), checked


def test_a_compiled_dot_contracts_what_jax_contracts(dumped):
    """A compiled dot may be laid out otherwise than JAX traced it (XLA transposes an operand, and the CPU computes a
    bf16 dot in f32), but it sums as many products, and makes as many elements, as a dot_general JAX traces of the
    same function."""
    _how, pool, records = dumped
    checked = Counter()
    for name, record in records.items():
        dots = _jax_dots(name)
        sums = {str(prod(e.invars[0].aval.shape[a] for a in e.params["dimension_numbers"][0][0])) for e in dots}
        outs = {e.outvars[0].aval.size for e in dots}
        for item in _items(pool, record, drill="decoder", layer="cpu"):
            shown = readable(item, record)
            if item["step"] == "contracted-size":
                assert shown["value"] in sums, (name, item["facts"], sums)
                checked["size"] += 1
            elif item["step"] == "output":
                dims = shown["value"].split("[")[1].rstrip("]").split(",")
                assert prod(int(d) for d in dims if d) in outs, (name, shown["value"])
                checked["output"] += 1
    assert checked["size"] >= 2, checked


def test_a_compiled_scan_runs_as_often_as_jax_scans(dumped):
    """The CPU compile's whiles run once per step of the scans JAX traces of the same function (forward and
    backward alike), read from the dump with no jaxpr to link them to."""
    _how, pool, records = dumped
    _check_trips(pool, records["rnn_train_step"], "cpu")


def _check_trips(pool: dict, record: ProgramRecord, layer: str) -> None:
    trips = _items(pool, record, drill="loops", step="trips")
    lengths = {str(e.params["length"]) for e in _jax_eqns("rnn_train_step", "scan")}
    assert trips and {i["answer"]["value"] for i in trips} == lengths, (trips, lengths)
    # where the while's line states XLA's own count (the CPU's do), the record keeps it, and it is the scan's length
    known = {str(w.known) for w in record.compiled[layer].while_counters if w.known is not None}
    assert known <= lengths and (known or layer != "cpu"), (known, lengths)
    for item in trips:
        shown = readable(item, record)
        assert item["eqn"] is None and item["layer"] == layer
        assert shown["value"] not in shown["misread"] and len(shown["misread"]) >= 1
        # the while's line is shown without XLA's backend_config, which states the count
        assert not any("known_trip_count" in block for block in shown["shown"])


@pytest.fixture(scope="module")
def small_scan(tmp_path_factory):
    """A short scan as a user's RNN cell, dumped with XLA's flag alone."""
    root = tmp_path_factory.mktemp("default-small-scan")
    folder = make_dump(root / "dump", ("small_scan",), "cpu", module="dump_drill_programs", jax_modes=None)
    return added_pool(folder, root / "corpus", ("small_scan",))


def _jax_loop(name: str):
    """The one while or scan equation JAX traces of the program here."""
    (eqn,) = [e for e in jax_equations(name) if e.primitive.name in ("while", "scan")]
    return eqn


def test_a_while_that_also_stops_on_another_test_runs_at_most_its_counters_bound(dumped):
    """fit_while's loop runs while `i < 100` and the loss is large (the CPU fuses both tests into one fusion):
    its trips item asks at most how many runs, and the answer is the bound JAX's condition compares the counter
    with, less the counter's first value, both read from the jaxpr JAX traces of the same function."""
    _how, pool, records = dumped
    eqn = _jax_loop("fit_while")
    compares = [e for e in eqn.params["cond_jaxpr"].jaxpr.eqns if e.primitive.name == "lt"]
    (bound,) = [int(v.val) for e in compares for v in e.invars if hasattr(v, "val")]
    first = eqn.invars[eqn.params["cond_nconsts"] + eqn.params["body_nconsts"]]
    start = int(first.val) if hasattr(first, "val") else 0  # the literal 0 the loop state starts from
    (item,) = _items(pool, records["fit_while"], drill="loops", step="trips")
    assert item["layer"] == "cpu" and item["answer"]["value"] == str(bound - start), item
    assert str(bound - start + 1) in item["answer"]["misread"]  # the count of the condition's tests


def _opcodes_run(hlo, name: str) -> set[str]:
    """The opcodes of a compiled computation and of every computation it calls, transitively."""
    seen, stack, out = set(), [name], set()
    while stack:
        comp = stack.pop()
        if comp in seen:
            continue
        seen.add(comp)
        for ins in hlo.instructions:
            if ins.computation == comp:
                out.add(ins.opcode)
                stack += [*ins.calls, *ins.to_apply]
    return out


def test_a_compiled_conditional_runs_the_branch_jax_picks_for_its_index(dumped):
    """fit_while's lax.cond halves the step in one branch only: for each index asked, the computation to tap
    multiplies exactly where the branch JAX traces at that index (its `branches[k]`) holds a `mul`."""
    _how, pool, records = dumped
    record = records["fit_while"]
    (cond,) = [e for e in jax_equations("fit_while") if e.primitive.name == "cond"]
    items = _items(pool, record, drill="loops", step="branch")
    assert sorted(i["facts"]["value"] for i in items) == [str(k) for k in range(len(cond.params["branches"]))]
    hlo = record.compiled["cpu"]
    for item in items:
        branch = cond.params["branches"][int(item["facts"]["value"])].jaxpr
        halves = any(e.primitive.name == "mul" for e in branch.eqns)
        assert ("multiply" in _opcodes_run(hlo, item["facts"]["runs"])) == halves, item["card"]
        answer = item["answer"]
        assert answer["line"] in answer["accepted"] and not set(answer["explain"]) & set(map(str, answer["accepted"]))


def test_a_short_scan_run_inside_a_call_counts_as_many_runs_as_jax_scans(small_scan):
    """XLA's CPU compiler runs a short scan's while inside a `call` of its own: the counter's first value is read
    through that call, and the runs are the length of the scan JAX traces; the lines shown hold the call."""
    pool, records = small_scan
    record = records["small_scan"]
    hlo = record.compiled["cpu"]
    whiles = {i.computation for i in hlo.instructions if i.opcode == "while"}
    calls = [i for i in hlo.instructions if i.opcode == "call" and set(i.to_apply) & whiles]
    assert calls, "the while is not inside a call: the test no longer covers that form"
    (item,) = _items(pool, record, drill="loops", step="trips")
    assert item["answer"]["value"] == str(_jax_loop("small_scan").params["length"])
    assert any(f"%{calls[0].name} = " in block for block in readable(item, record)["shown"])
    assert not any("known_trip_count" in block for block in readable(item, record)["shown"])


@pytest.mark.needs_tpu
def test_a_tpu_dump_without_a_jaxpr_gives_nine_kinds(tmp_path):
    """One TPU v5e compile, dumped with JAX's default mode beside XLA's flag, and with XLA's flag alone: the
    transformer's train step gives nine kinds or more with no jaxpr (fusions and kernels among them, from the exact
    links: tests/test_dump_fusions_kernels.py checks their answers), each item passing the pool's checks, its StableHLO
    and before-optimisations dots answering as JAX's, its shapes `jax.eval_shape`'s, and the RNN's compiled whiles run
    as often as JAX's scans."""
    folder = make_dump(tmp_path / "dump", NAMES, "tpu", module="dump_drill_programs", jax_modes="")
    pool, records = added_pool(folder, tmp_path / "corpus", NAMES)
    kinds = Counter(i["drill"] for i in _items(pool, records["transformer_train_step"]))
    assert len(kinds) >= 9 and {"decoder", "shapes", "layouts", "units", "cost", "buffers", "fusions",
                                "kernels"} <= set(kinds), kinds
    # with XLA's dump alone, the dots before optimisations give the decoder and the backward pass their items
    xla = make_dump(tmp_path / "xla", ("transformer_train_step",), "tpu", module="dump_drill_programs", jax_modes=None)
    xla_pool, xla_records = added_pool(xla, tmp_path / "xla-corpus", ("transformer_train_step",))
    xla_kinds = Counter(i["drill"] for i in _items(xla_pool, xla_records["transformer_train_step"]))
    assert len(xla_kinds) >= 9 and {"decoder", "backward", "fusions", "kernels"} <= set(xla_kinds), xla_kinds
    _check_stablehlo_dots(xla_pool, xla_records, "hlo-before")
    for record in records.values():
        assert not record.eqns
        for item in _items(pool, record):
            assert_pool_item(item, set())
            assert all(isinstance(b, str) and b for b in readable(item, record)["shown"]), item["card"]
    _check_stablehlo_dots(pool, records)
    _check_stablehlo_dots(pool, records, "hlo-before")
    _check_stablehlo_shapes(pool, records)
    assert sum(n for (layer, _op), n in _check_shapes_by_jax(pool, records).items() if layer == "tpu") >= 1
    _check_trips(pool, records["rnn_train_step"], "tpu")


def test_a_record_written_before_the_dots_still_loads_and_a_dot_past_the_text_is_refused(dumped):
    """The dots before optimisations are left out of a record's JSON where there are none: a record written before
    them loads with none (and asks no decoder item of that layer); a dot whose line is past the HLO it was read
    from is refused, naming the field."""
    from dumpgym.drills.decoder import decoder_pool
    from dumpgym.record.schema import RecordError

    _how, _pool, records = dumped
    record = records["fit_while"]
    written = record.to_json()
    assert written["dump"]["dots"] and record.dump.dots
    older = {**written, "dump": {k: v for k, v in written["dump"].items() if k != "dots"}}
    loaded = ProgramRecord.from_json(older)
    assert loaded.dump.dots == () and not [i for i in decoder_pool(loaded) if i.layer == "hlo-before"]
    broken = {**written, "dump": {**written["dump"], "dots": [
        {**written["dump"]["dots"][0], "line": record.dump.hlo_before.count("\n") + 2}]}}
    with pytest.raises(RecordError, match=r"dots"):
        ProgramRecord.from_json(broken)
