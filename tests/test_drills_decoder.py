"""The dot_general decoder: each answer is what JAX does with the dims a layer prints, never text on the page."""
import contextlib
import functools
import re
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from jax import lax

from dumpgym.drills import decoder
from dumpgym.drills._dot import (MASK, DotView, dot_dims, hlo_view, jaxpr_view, numpy_dtype, stablehlo_view,
                                type_text)
from dumpgym.drills._spread import spread_weight
from dumpgym.record.dtypes import short
from dumpgym.drills.shapes import shapes_items
from dumpgym.traced.facts import build_facts
from dumpgym.record.schema import EqnFact, ProgramRecord
from pool_checks import readable

PROPERTY = settings(max_examples=30, deadline=None)
# (operand dtype, preferred_element_type choices)
DTYPES = [(jnp.float32, [None]), (jnp.bfloat16, [None, jnp.float32]), (jnp.float16, [None, jnp.float32]),
          (jnp.int8, [None, jnp.int32]), (jnp.int32, [None])]
UNIQUE = 97  # hypothesis sizes are 2..6, so an axis resized to 97 is found again in the output


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


@contextlib.contextmanager
def _unfiltered_tracebacks():
    """JAX refuses many resized dims with a TypeError; filtering each one's traceback (a stat of every
    frame's file) is most of the cost, and no use to a test that only catches it."""
    before = jax.config.jax_traceback_filtering
    jax.config.update("jax_traceback_filtering", "off")
    try:
        yield
    finally:
        jax.config.update("jax_traceback_filtering", before)


@functools.cache
def dot_fn(dims, preferred=None):
    """One function per dims and preferred type, so that JAX's trace caches know it when asked again."""
    return lambda a, b: lax.dot_general(a, b, dims, preferred_element_type=preferred)


def specs(case):
    return [jax.ShapeDtypeStruct(case["lhs"], case["dtype"]), jax.ShapeDtypeStruct(case["rhs"], case["dtype"])]


def case_eqn(case):
    """The case's equation as the corpus records it, and the jaxpr text it was printed in."""
    closed = jax.make_jaxpr(dot_fn(case["dims"], case["preferred"]))(*specs(case))
    dot = next(r for r in build_facts(closed).to_json() if r["primitive"] == "dot_general")
    return EqnFact.from_json(dot), str(closed)


# -- JAX as the oracle: each question answered by running dot_general, not by reading dims ---------

def jax_dims(view: DotView):
    d = view.dims
    return ((d.lhs_contracting, d.rhs_contracting), (d.lhs_batch, d.rhs_batch))


def out_shape_when_resized(view: DotView, side: str, axis: int, partner: bool = True):
    """The output shape JAX gives when one axis (and its batch partner) is resized, or None if JAX refuses."""
    d = view.dims
    lhs, rhs = list(d.lhs.shape), list(d.rhs.shape)
    shapes = {"lhs": lhs, "rhs": rhs}
    shapes[side][axis] = UNIQUE
    batch = d.axes(side, "batch")
    if partner and axis in batch:
        other = "rhs" if side == "lhs" else "lhs"
        shapes[other][d.axes(other, "batch")[batch.index(axis)]] = UNIQUE
    try:
        with _unfiltered_tracebacks():
            out = jax.eval_shape(dot_fn(jax_dims(view)), jax.ShapeDtypeStruct(lhs, jnp.float32),
                                 jax.ShapeDtypeStruct(rhs, jnp.float32))
    except TypeError:
        return None
    return out.shape


def jax_free_axes(view: DotView, side: str):
    """The axes JAX lets one resize alone: neither contracted nor batch."""
    resizable = [out_shape_when_resized(view, side, a, partner=False) for a in range(view.dims.rank(side))]
    return tuple(a for a, shape in enumerate(resizable) if shape is not None)


def jax_products(view: DotView) -> int:
    """Each output element of ones @ ones is the number of products it sums."""
    d = view.dims
    # NumPy's ones: JAX's would each be one more compile for the shape; the dot is JAX's.
    out = dot_fn(jax_dims(view))(np.ones(d.lhs.shape, np.float32), np.ones(d.rhs.shape, np.float32))
    values = np.unique(np.asarray(out))
    assert len(values) == 1
    return int(values[0])


def jax_output_axis(view: DotView, side: str, axis: int):
    shape = out_shape_when_resized(view, side, axis)
    return shape.index(UNIQUE) if shape is not None and UNIQUE in shape else None


def asked_axis(question: str) -> tuple[str, int] | None:
    """The operand axis a one-axis question asks about (its role, or where it ends up), or None."""
    found = re.fullmatch(r"In this dot, what part does (lhs|rhs) axis (\d+) play\?|"
                         r"Where does (lhs|rhs) axis (\d+) end up in this dot's output\?", question)
    if found is None:
        return None
    side, axis = [g for g in found.groups() if g is not None]
    return side, int(axis)


def jax_role(view: DotView, side: str, axis: int) -> str:
    """Free if JAX lets one resize the axis alone; batch if, resized with its partner, it shows up in the
    output; contracted otherwise."""
    if out_shape_when_resized(view, side, axis, partner=False) is not None:
        return "free"
    return "batch" if jax_output_axis(view, side, axis) is not None else "contracted"


def jax_answer(view: DotView, item):
    """The answer to `item`'s question, found by asking JAX: a tuple of axes, an option's text, or the typed
    value's text."""
    asked = asked_axis(item.question)
    if item.step in ("lhs-free", "rhs-free"):
        return jax_role(view, *asked) if asked else jax_free_axes(view, item.step.split("-")[0])
    if item.step == "contracted-size":
        return str(jax_products(view))
    if item.step == "output-axis":
        j = jax_output_axis(view, *asked)
        return "summed away" if j is None else f"output axis {j}"
    assert item.step == "output"
    d = view.dims
    out = jax.eval_shape(dot_fn(jax_dims(view)), jax.ShapeDtypeStruct(d.lhs.shape, jnp.float32),
                         jax.ShapeDtypeStruct(d.rhs.shape, jnp.float32))
    return type_text("jaxpr", tuple(out.shape), short(numpy_dtype(view.out_dtype)))


def answer_of(form: dict):
    """What a form holds as its answer: the tapped axes as a tuple, or the typed value."""
    if form["form"] == "choice":
        return form["options"][form["index"]]
    return tuple(form["axes"]) if form["form"] == "axes" else form["value"]


def check_items(eqn, view: DotView):
    items = decoder.view_items(eqn, view, decoder.STEPS, "prop")
    for item in items:
        form = item.form.to_json()
        assert answer_of(form) == jax_answer(view, item), (view.layer, item.step)
        check_form(form, item.step)
        assert item.feedback and "\n" not in item.feedback
        if item.step == "output":
            assert view.out not in "\n".join(item.shown)
        assert item.layer == view.layer and item.shown == view.shown()
        if item.about:
            assert form["options"] == offered(view, item.step, item.about[:3])
    return items


def offered(view: DotView, step: str, side: str) -> list[str]:
    """The options a one-axis choice must offer, found by asking JAX: at the free steps every role some
    axis of the dot plays, at `output-axis` every output axis some axis of `side` lands at, and summed away;
    so that no option is one a reader who names the side or sees the dot's lists would strike."""
    d = view.dims
    if step == "output-axis":
        places = sorted({jax_output_axis(view, side, a) for a in range(d.rank(side))} - {None})
        return [f"output axis {j}" for j in places] + ["summed away"]
    played = {jax_role(view, s, a) for s in ("lhs", "rhs") for a in range(d.rank(s))}
    return [r for r in ("contracted", "batch", "free") if r in played or r != "batch"]


def check_form(form: dict, step: str):
    """A role (or a tapped set) at the free steps, a place at `output-axis`, a typed int or aval for the
    others; every misreading named and known."""
    expected = {"lhs-free": ("axes", "choice"), "rhs-free": ("axes", "choice"), "output-axis": ("choice",),
                "contracted-size": ("typed",), "output": ("typed",)}[step]
    assert form["form"] in expected
    expected = form["form"]
    if expected == "choice":
        assert all(rule in decoder.AXIS_MISREADINGS for k, rule in enumerate(form["rules"]) if k != form["index"])
        assert all(form["reasons"][k] for k in range(len(form["options"])) if k != form["index"])
        assert not form["rules"][form["index"]] and not form["reasons"][form["index"]]
    if expected == "typed":
        assert form["spelling"] == ("int" if step == "contracted-size" else "aval")
    for key, m in form.get("misread", {}).items():
        assert m["reason"] and m["rule"] in decoder.AXIS_MISREADINGS
        assert key != (",".join(map(str, form["axes"])) if expected == "axes" else form["value"])


def traced_case(case):
    """The case traced as the corpus traces a program, and its facts."""
    from dumpgym.traced.trace import trace

    traced = trace(dot_fn(case["dims"], case["preferred"]), specs(case))
    return traced, build_facts(traced)


def stablehlo_op(case):
    """The case's `stablehlo.dot_general` op as the x-ray records it, and its printed line."""
    from dumpgym.traced.xray import build_xray

    traced, facts = traced_case(case)
    op = next(op for op in build_xray(traced, facts).ops if op.name == "stablehlo.dot_general")
    return op, traced.stablehlo.splitlines()[op.line - 1]


@PROPERTY
@given(case=dot_cases())
def test_jaxpr_answers_are_what_jax_computes(case):
    eqn, text = case_eqn(case)
    view = jaxpr_view(eqn, text)
    assert view is not None and jax_dims(view) == case["dims"]
    assert view.dims.lhs.shape == case["lhs"] and view.dims.rhs.shape == case["rhs"]
    items = check_items(eqn, view)
    assert "output" not in {i.step for i in items}  # the jaxpr's output aval is the shape oracle's question
    assert {"lhs-free", "rhs-free"} <= {i.step for i in items} or min(len(case["lhs"]), len(case["rhs"])) < 2


@PROPERTY
@given(case=dot_cases())
def test_stablehlo_dims_are_the_ones_jax_was_given_and_answers_hold(case):
    eqn, _ = case_eqn(case)
    op, line = stablehlo_op(case)
    view = stablehlo_view(op, line)
    assert view is not None and jax_dims(view) == case["dims"]
    assert "stablehlo.dot_general" in line and view.shown()[0] == line.strip().removesuffix(view.out) + MASK
    assert view.dims.lhs.shape == case["lhs"] and view.dims.rhs.shape == case["rhs"]
    out = jax.eval_shape(dot_fn(case["dims"], case["preferred"]), *specs(case))
    assert view.out == type_text("stablehlo", out.shape, view.out_dtype)
    assert view.shown()[0].endswith(f"-> {MASK}") and view.out not in view.shown()[0].rsplit("->", 1)[1]
    check_items(eqn, view)


@settings(max_examples=15, deadline=None)
@given(case=dot_cases())
def test_compiled_dot_is_read_as_jax_reads_it(case):
    # Compiled text depends on the host: XLA may rewrite or drop the dot. Whatever dot it printed,
    # the dims and shapes the record holds for it must give, in JAX, the output type printed on its line.
    from dumpgym.compiled import layer as hlo
    from dumpgym.record.targets import CPU

    traced, facts = traced_case(case)
    layer = hlo.compile_layer(traced, facts, CPU)
    lines = layer.text.splitlines()
    numbers = [n for n, line in enumerate(lines, 1) if re.search(r" dot\(", line)]
    assume(numbers)
    eqn, _ = case_eqn(case)
    dots = {i.line: i for i in layer.instructions if i.opcode == "dot"}
    assert sorted(dots) == numbers
    for n in numbers:
        view = hlo_view(layer, dots[n])
        assert view is not None
        assert re.search(rf"%{re.escape(dots[n].name)} = {re.escape(view.out)} dot\(", lines[n - 1])
        out = jax.eval_shape(dot_fn(jax_dims(view)), jax.ShapeDtypeStruct(view.dims.lhs.shape, jnp.float32),
                             jax.ShapeDtypeStruct(view.dims.rhs.shape, jnp.float32))
        assert view.out.split("{")[0] == type_text("jaxpr", out.shape, view.out_dtype)
        assert view.out not in view.shown()[0] and "metadata" not in view.shown()[0]
        check_items(eqn, view)


# -- the real corpus -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pool(corpus):
    out = []
    for program in corpus["programs"]:
        record = ProgramRecord.from_json(program)
        out += [{**readable(item, record), "program": record} for item in decoder.decoder_pool(record)]
    return out


def eqn_of(item) -> EqnFact:
    return item["program"].eqns[item["eqn"]]


def dims_of(item):
    return tuple(tuple(a) for pair in eqn_of(item).params["dimension_numbers"] for a in pair)


@pytest.fixture(scope="module")
def forms(corpus):
    """Each decoder item's answer form as the pool writes it, by (program, eqn, layer, step)."""
    out = {}
    for program in corpus["programs"]:
        for item in decoder.decoder_pool(ProgramRecord.from_json(program)):
            out[(program["slug"], item.card, item.layer)] = item.answer.to_json()
    return out


def form_of(item, forms):
    return forms[(item["program"].slug, tuple(item["card"].split("/")[2:]), item["layer"])]


def item_answer(item):
    """What a readable pool item holds as its answer: the right option, the tapped axes, the typed value."""
    if "options" in item:
        return item["options"][item["answer"]]
    return tuple(item["axes"]) if "axes" in item else item["value"]


def form_name(item) -> str:
    return "choice" if "options" in item else "axes" if "axes" in item else "typed"


def test_every_item_carries_the_fields_the_page_reads(pool, forms):
    fields = {"drill", "card", "eqn", "question", "step", "layer", "context", "shown", "weight", "jaxpr_lines",
              "feedback"}
    form_fields = {"form", "spelling", "value", "accepted", "misread", "label", "dims", "axes", "options", "answer",
                   "reasons", "rules"}
    for item in pool:
        assert set(item) - {"program"} - form_fields == fields
        assert eqn_of(item).primitive == "dot_general"
        assert item["jaxpr_lines"] == list(eqn_of(item).jaxpr_lines)
        assert all(isinstance(block, str) and block for block in item["shown"])
        check_form(form_of(item, forms), item["step"])
        if "label" in item:  # the tapped operand as the context shows it
            side = item["label"].split()[0]
            assert item["dims"] == list(eqn_of(item).arrays[0 if side == "lhs" else 1].shape) or item["layer"] != "jaxpr"


def test_all_four_spellings_are_drilled(pool):
    layers = {layer: sum(1 for i in pool if i["layer"] == layer) for layer in ("jaxpr", "stablehlo", "cpu", "gpu")}
    assert all(n > 0 for n in layers.values()), layers
    assert any("batching_dims = [" in i["shown"][0] for i in pool if i["layer"] == "stablehlo")
    assert any("lhs_batch_dims={" in i["shown"][0] for i in pool if i["layer"] == "cpu")
    assert any("lhs_batch_dims={" in i["shown"][0] for i in pool if i["layer"] == "gpu")


def test_plain_matmul_is_at_most_a_quarter_of_the_items(pool):
    plain = [i for i in pool if dot_dims(eqn_of(i)).is_plain_matmul()]
    assert 0 < len(plain) <= 0.25 * len(pool)
    # weight 1, a contracted size's weighed by how many built-in programs ask it (drills/_spread.py)
    assert all(i["weight"] == (1 if i["step"] != "contracted-size" else round(
        spread_weight(decoder.SIZE_STEP, i["value"]), 3)) for i in plain)
    # Harder to read: batch axes, several contracted axes, or a matrix lhs contracting its first axis
    # (a vector's axis 0 is its last: decode-loop's `h @ w` is the x @ w habit). A step's one-axis items
    # share their dot's weight: each dot, layer and step together weighs more than one (a contracted size
    # is weighed by its spread besides).
    hard = [i for i in pool if (dims_of(i)[2] or len(dims_of(i)[0]) > 1
            or (dims_of(i)[:2] == ((0,), (0,)) and eqn_of(i).arrays[0].rank > 1)) and i["step"] != "contracted-size"]
    totals = {}
    for i in hard:
        key = (i["program"].slug, i["eqn"], i["layer"], i["step"])
        totals[key] = totals.get(key, 0) + i["weight"]
    assert hard and all(total > 1 for total in totals.values())


def test_no_answer_is_on_the_screen(pool):
    for item in pool:
        if item["step"] == "output":
            layer = {v: k for k, v in decoder._LAYER_IDS.items()}[item["layer"]]
            dtype = item["value"].split("[")[0]
            shape = tuple(int(n) for n in re.findall(r"\d+", item["value"].split("[", 1)[1]))
            answer = type_text(layer, shape, dtype)
            assert not any(answer in block for block in item["shown"]), (item["question"], answer)
        out = str(eqn_of(item).outputs[0])
        if item["layer"] == "jaxpr":
            assert out not in item["shown"][0] and f":{MASK} = dot_general[" in item["shown"][0]


def test_no_item_duplicates_a_shapes_item(corpus, pool):
    # The jaxpr's output aval is the shape oracle's question; the decoder asks it only where another layer
    # spells the dot (StableHLO's signature, the compiled line), which is a reading of its own.
    assert not [i for i in pool if i["layer"] == "jaxpr" and i["step"] == "output"]
    shapes = {(p["slug"], s.eqn) for p in corpus["programs"] for s in shapes_items(ProgramRecord.from_json(p))}
    assert shapes and not [i for i in pool if i["layer"] == "jaxpr" and (i["program"].slug, i["eqn"]) in shapes
                           and i["step"] == "output"]


def test_one_item_per_skeleton_layer_and_question(pool):
    seen = set()
    for item in pool:
        eqn = eqn_of(item)
        key = (item["program"].slug, item["layer"], item["step"], item["question"], form_name(item), dims_of(item),
               eqn.arrays[0].rank, eqn.arrays[1].rank)
        assert key not in seen
        seen.add(key)


def _stablehlo_dims(line):
    def pair(name):
        found = re.search(name + r" = \[([\d, ]*)\] x \[([\d, ]*)\]", line)
        return tuple(tuple(int(a) for a in re.findall(r"\d+", g)) for g in found.groups()) if found else ((), ())
    return pair("contracting_dims"), pair("batching_dims")


def _hlo_dims(line):
    def axes(name):
        found = re.search(name + r"=\{([\d,]*)\}", line)
        return tuple(int(a) for a in re.findall(r"\d+", found.group(1))) if found else ()
    return ((axes("lhs_contracting_dims"), axes("rhs_contracting_dims")),
            (axes("lhs_batch_dims"), axes("rhs_batch_dims")))


def test_each_layers_line_spells_the_equations_dimension_numbers(pool):
    for item in pool:
        line = item["shown"][0]
        read = {"jaxpr": lambda: re.search(r"dimension_numbers=(\S.*?\)\))", line).group(1),
                "stablehlo": lambda: _stablehlo_dims(line), "cpu": lambda: _hlo_dims(line),
                "gpu": lambda: _hlo_dims(line)}[item["layer"]]()
        (lc, rc), (lb, rb) = dims_of(item)[:2], dims_of(item)[2:]
        expected = {"jaxpr": f"(({list(lc)}, {list(rc)}), ({list(lb)}, {list(rb)}))",
                    "stablehlo": ((lc, rc), (lb, rb)), "cpu": ((lc, rc), (lb, rb)),
                    "gpu": ((lc, rc), (lb, rb))}[item["layer"]]
        assert read == expected, (item["program"].slug, item["eqn"], item["layer"])


def test_corpus_answers_are_what_jax_computes(pool):
    for item in pool:
        program, eqn = item["program"], eqn_of(item)
        view = next(v for v in decoder.views(program, eqn) if decoder._LAYER_IDS[v.layer] == item["layer"])
        assert view.shown() == item["shown"]
        fake = types.SimpleNamespace(step=item["step"], question=item["question"])
        assert item_answer(item) == jax_answer(view, fake)


def test_mlp_compiled_dot_is_shown_cut_and_masked(pool):
    hlo = [i for i in pool if i["program"].slug == "mlp" and i["layer"] == "cpu"]
    assert len(hlo) == 1  # both dots are plain matmuls: one skeleton, one question
    assert hlo[0]["shown"] == [
        "ROOT %dot_general.1 = ? dot(%param_0.1, %param_1.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, …",
        "%param_0.1 = f32[64,128]{1,0}", "%param_1.1 = f32[128,512]{1,0}"]


def test_moe_combine_decoded_at_stablehlo(pool):
    # l = dot_general(e:bf16[64,4], k:bf16[4,64,32]) with (([1], [0]), ([0], [1])): rhs batches on axis 1.
    items = {(i["step"], i["question"]): i for i in pool
             if i["program"].slug == "moe" and i["eqn"] == 9 and i["layer"] == "stablehlo"}
    answer = {(step, asked_axis(q) or "set"): item_answer(i) for (step, q), i in items.items()}
    assert {k: v for k, v in answer.items() if k[0] != "output-axis"} == {
        ("lhs-free", ("lhs", 0)): "batch", ("lhs-free", ("lhs", 1)): "contracted",
        ("rhs-free", ("rhs", 0)): "contracted", ("rhs-free", ("rhs", 1)): "batch", ("rhs-free", ("rhs", 2)): "free",
        ("contracted-size", "set"): "4", ("output", "set"): "bf16[64,32]"}
    # rhs's sizes (4, 64, 32) tell its free axis from the rest: its tapped set is not asked
    assert not [i for i in items.values() if "axes" in i]
    assert {k[1]: v for k, v in answer.items() if k[0] == "output-axis"} == {
        ("lhs", 0): "output axis 0", ("lhs", 1): "summed away", ("rhs", 0): "summed away",
        ("rhs", 1): "output axis 0", ("rhs", 2): "output axis 1"}
    output = next(i for (step, _), i in items.items() if step == "output")
    assert output["shown"] == [
        "%5 = stablehlo.dot_general %1, %4, batching_dims = [0] x [1], contracting_dims = [1] x [0], "
        "precision = [DEFAULT, DEFAULT] : (tensor<64x4xbf16>, tensor<4x64x32xbf16>) -> ?",
        "%1: tensor<64x4xbf16>", "%4: tensor<4x64x32xbf16>"]
    assert output["weight"] == 3
    # a step's one-axis items share the dot's weight, no right option weighing much more than another
    places = [i for (step, _), i in items.items() if step == "output-axis"]
    assert abs(sum(i["weight"] for i in places) - 3) < 0.01
    by_option = {}
    for i in places:
        by_option[item_answer(i)] = by_option.get(item_answer(i), 0) + i["weight"]
    assert max(by_option.values()) < 0.5 * 3


def test_mha_scores_free_axes_at_the_jaxpr(pool):
    items = [i for i in pool if i["program"].slug == "mha" and i["eqn"] == 2 and i["layer"] == "jaxpr"]
    roles = {asked_axis(i["question"]): item_answer(i) for i in items if i["step"] == "lhs-free"}
    assert roles == {("lhs", 0): "batch", ("lhs", 1): "batch", ("lhs", 2): "free", ("lhs", 3): "contracted"}
    size = next(i for i in items if i["step"] == "contracted-size")
    assert size["value"] == "32"
    assert size["misread"]["256"]["rule"] == "batch-as-contracted"  # 2 * 4 * 32
    assert size["feedback"] == "one product per position of lhs's contracted axes [3]: 32"


def test_the_h100_dot_is_read_inside_its_triton_gemm_fusion(by_slug):
    # On the H100 XLA makes each dot a Triton GEMM fusion; the fused computation holds a `dot` whose operands
    # are defined in that computation (`%parameter_2`, a name other fusions reuse for other types).
    program = ProgramRecord.from_json(by_slug["moe"])
    gpu = program.compiled["gpu"]
    eqn = program.eqns[8]
    view = next(v for v in decoder.views(program, eqn) if v.layer == "hlo-gpu")
    dot = decoder.hlo_dot(gpu, eqn)
    lines = gpu.text.splitlines()
    fusion = next(i for i in gpu.instructions if dot.computation in i.calls)
    assert fusion.opcode == "fusion" and '"kind":"__triton' in lines[fusion.line - 1]
    assert all(i.computation == dot.computation for i in gpu.instructions if i.line in dot.operands)
    assert view.operands == tuple(re.match(r"\s*(%\S+ = \S+) ", lines[n - 1]).group(1) for n in dot.operands)
    assert view.dims == decoder.jaxpr_view(eqn, program.jaxpr).dims


def test_a_dot_xla_rewrote_is_not_asked_at_the_compiled_layer(by_slug):
    # attention's q @ k.T: XLA folded the transpose into the dot, so its line contracts rhs axis 1, not 0.
    program = ProgramRecord.from_json(by_slug["attention"])
    eqn = next(e for e in program.eqns if e.primitive == "dot_general")
    line = program.compiled["cpu"].text.splitlines()[decoder.hlo_line(program.compiled["cpu"], eqn) - 1]
    assert _hlo_dims(line) == (((1,), (1,)), ((), ())) != (((1,), (0,)), ((), ()))
    assert [v.layer for v in decoder.views(program, eqn)] == ["jaxpr", "stablehlo"]
    assert hlo_view(program.compiled["cpu"], decoder.hlo_dot(program.compiled["cpu"], eqn)).dims.rhs_contracting == (1,)


# (lhs shape, rhs shape, dimension numbers): a batched dot, x.T @ g, x @ w.T; sizes large enough that XLA
# keeps a GEMM, not a multiply-and-reduce.
GPU_CASES = [((4, 8, 16), (4, 16, 32), (((2,), (1,)), ((0,), (0,)))),
             ((64, 32), (64, 128), (((0,), (0,)), ((), ()))),
             ((32, 64), (128, 64), (((1,), (1,)), ((), ())))]


@pytest.mark.needs_gpu
@pytest.mark.parametrize("lhs, rhs, dims", GPU_CASES)
def test_a_fresh_h100_compile_is_decoded_as_jax_reads_it(lhs, rhs, dims):
    # Compiled here for the described H100: the dot sits inside a Triton GEMM fusion, and what the decoder
    # reads off its line (dims, operand types from the fused computation) answers as JAX does.
    from dumpgym.compiled import layer as hlo
    from dumpgym.record.targets import GPU
    from dumpgym.traced.trace import trace
    specs = [jax.ShapeDtypeStruct(lhs, jnp.bfloat16), jax.ShapeDtypeStruct(rhs, jnp.bfloat16)]
    traced = trace(dot_fn(dims), specs)
    facts = build_facts(traced)
    layer = hlo.compile_layer(traced, facts, GPU)
    eqn = next(e for e in facts.eqns if e.primitive == "dot_general")
    dot = decoder.hlo_dot(layer, eqn)
    assert dot is not None
    fusion = next(i for i in layer.instructions if dot.computation in i.calls)
    assert '"kind":"__triton' in layer.text.splitlines()[fusion.line - 1]
    view = hlo_view(layer, dot, "hlo-gpu")
    assert view is not None
    # XLA may swap the operands (then the corpus asks nothing of that line: `_same_dot`); whatever dot it
    # printed, the dims and operand types read off it must give, in JAX, the output type printed on it.
    kept = jax_dims(view) == dims and (view.dims.lhs.shape, view.dims.rhs.shape) == (lhs, rhs)
    assert kept or dims[1] == ((), ())
    closed = jax.make_jaxpr(dot_fn(dims))(*specs)
    assert decoder._same_dot(view, jaxpr_view(eqn, str(closed))) == kept  # what the corpus asks of it
    out = jax.eval_shape(dot_fn(jax_dims(view)), jax.ShapeDtypeStruct(view.dims.lhs.shape, jnp.float32),
                         jax.ShapeDtypeStruct(view.dims.rhs.shape, jnp.float32))
    assert view.out.split("{")[0] == type_text("jaxpr", out.shape, view.out_dtype)
    assert view.out not in view.shown()[0]
    check_items(eqn, view)


def test_a_deep_programs_output_axis_places_are_no_habit_that_pays():
    # Six attention layers whose scores and mix are batched dots: their batch axis lands at output axis 0 and most
    # free axes at their own number, so within a dot the shares could not stop a reader who picks the output axis
    # the question's number names (else the first): over the program it was right in 55% of the step's weight
    # against a chance of 38%. The dots' items are weighed together now, each dot keeping its weight.
    from deep_programs import deep_batched_attention
    from dumpgym.corpus.pipeline import program_record
    from dumpgym.traced.program import Program

    program = Program(slug="deep-batched-attention", title="t", lesson="l", function=deep_batched_attention,
                      args=("f32[4,16,32]", *["f32[32,32]"] * 6))
    record = ProgramRecord.from_json(program_record(program).to_json())
    items = [i for i in decoder.decoder_pool(record) if i.step == "output-axis"]
    assert len(items) >= 30 and any(len(i.answer.options) == 3 for i in items)
    total = sum(i.weight for i in items)
    chance = sum(i.weight / len(i.answer.options) for i in items) / total

    def number(item):
        own = f"output axis {asked_axis(item.question)[1]}"
        return item.answer.options.index(own) if own in item.answer.options else 0

    readers = {"number": number, **{f"place {p}": (lambda i, p=p: min(p, len(i.answer.options) - 1)) for p in range(3)},
               **{t: (lambda i, t=t: i.answer.options.index(t) if t in i.answer.options else -1)
                  for t in ("output axis 0", "output axis 1", "output axis 2", "summed away")}}
    for name, pick in readers.items():
        right = sum(i.weight for i in items if pick(i) == i.answer.index) / total
        assert right <= chance + 0.1, (name, right, chance)
    # each dot keeps its weight, and every answer is where JAX puts the axis
    for i in items:
        eqn = next(e for e in record.eqns if e.id == i.eqn)
        view = next(v for v in decoder.views(record, eqn) if decoder._LAYER_IDS[v.layer] == i.layer)
        assert i.answer.options[i.answer.index] == jax_answer(view, i)
    by_dot = {}
    for i in items:
        by_dot.setdefault((i.eqn, i.layer), []).append(i.weight)
    for (eqn, layer), weights in by_dot.items():
        view = next(v for v in decoder.views(record, next(e for e in record.eqns if e.id == eqn))
                    if decoder._LAYER_IDS[v.layer] == layer)
        assert abs(sum(weights) - view.dims.weight()) < 0.01
