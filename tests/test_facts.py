"""Facts for every printed equation agree with JAX's own objects."""
import re
from collections import Counter

import jax
import jax.numpy as jnp
import pytest
from jax.extend import core

from dumpgym.traced.facts import build_facts
from dumpgym.jax_internals import jaxprs_in_params

from xray_oracle import JIT
from dumpgym.programs import SLUGS

import random_programs
from random_programs import typed_key
from jax_reference import jaxpr_of
from needs_extras import builtin_slugs


def _printed_eqns(jaxpr, seen=None):
    """Every equation reachable from `jaxpr`, each shared sub-jaxpr counted once (as JAX prints it)."""
    seen = set() if seen is None else seen
    if id(jaxpr) in seen:
        return []
    seen.add(id(jaxpr))
    out = []
    for eqn in jaxpr.eqns:
        out.append(eqn)
        for sub in jaxprs_in_params(eqn.params):
            out.extend(_printed_eqns(sub, seen))
    return out


def _aval(aval):
    return {"shape": list(aval.shape), "dtype": jnp.dtype(aval.dtype).name}


@pytest.mark.parametrize("slug", builtin_slugs())
def test_every_equation_has_a_fact(slug, by_slug, programs):
    record = by_slug[slug]
    closed = jaxpr_of(programs[slug].function, programs[slug].example_args())
    eqns = _printed_eqns(closed.jaxpr)
    assert len(record["eqns"]) == len(eqns)
    assert Counter(e["primitive"] for e in record["eqns"]) == Counter(e.primitive.name for e in eqns)
    expected_outputs = Counter(str([_aval(v.aval) for v in e.outvars]) for e in eqns)
    got_outputs = Counter(str([{k: o[k] for k in ("shape", "dtype")} for o in e["outputs"]]) for e in record["eqns"])
    assert got_outputs == expected_outputs


def _jax_dataflow(jaxpr) -> Counter:
    """Each equation as (primitive, name stack, where each input comes from), counted, from JAX's objects:
    an input is (producing primitive, output index), ("binder", position among constvars then invars), or None."""
    eqns = _printed_eqns(jaxpr)
    made = {id(v): (e.primitive.name, k) for e in eqns for k, v in enumerate(e.outvars)}
    bound = {}
    for j in [jaxpr, *(sub for e in eqns for sub in jaxprs_in_params(e.params))]:
        j = getattr(j, "jaxpr", j)
        bound.update({id(v): ("binder", k) for k, v in enumerate((*j.constvars, *j.invars))})
    return Counter((e.primitive.name, str(e.source_info.name_stack),
                    tuple(None if isinstance(v, core.Literal) else made.get(id(v), bound.get(id(v))) for v in e.invars))
                   for e in eqns)


@pytest.mark.parametrize("slug", builtin_slugs())
def test_every_input_source_and_name_stack_is_jaxs(slug, by_slug, programs):
    record = by_slug[slug]
    eqns = record["eqns"]

    def source(src):
        if src is None:
            return None
        return ("binder", src["index"]) if src["eqn"] is None else (eqns[src["eqn"]]["primitive"], src["index"])

    got = Counter((e["primitive"], e.get("name_stack", ""), tuple(map(source, e.get("sources", [])))) for e in eqns)
    assert got == _jax_dataflow(jaxpr_of(programs[slug].function, programs[slug].example_args()).jaxpr)


def test_the_backward_pass_carries_jaxs_transpose_name_stack(by_slug):
    eqns = by_slug["ckpt-policy"]["eqns"]
    (remat,) = [e for e in eqns if e["primitive"] == "remat2"]
    assert remat["name_stack"].startswith("transpose(") and remat["sources"][0]["eqn"] is not None
    forward = [e for e in eqns if e["parent"] is None and e["primitive"] == "dot_general"]
    assert [e["name_stack"] for e in forward] == ["jvp()", "jvp()"]


@pytest.mark.parametrize("slug", SLUGS)
def test_line_spans_hold_their_equation(slug, by_slug):
    record = by_slug[slug]
    lines = record["jaxpr"].splitlines()
    previous_top = 0
    for eqn in record["eqns"]:
        first, last = eqn["jaxpr_lines"]
        assert 1 <= first <= last <= len(lines)
        # The first printed line binds the outputs and names the primitive; with many outputs the printer
        # wraps the binders over lines of their own first (`a:f32[] b:f32[]` and nothing else).
        span = lines[first - 1:last]
        # Reads and writes of a Pallas kernel's Refs print as `x <- ref[...]` rather than naming `get`/`swap`.
        ref_op = eqn["primitive"] in ("get", "swap", "addupdate")
        at = next(i for i, text in enumerate(span)
                  if " = " in text or text.strip().startswith(eqn["primitive"]) or (ref_op and " <- " in text))
        text = span[at]
        assert (f"= {eqn['primitive']}" in text or text.strip().startswith(eqn["primitive"])
                or (ref_op and " <- " in text)), (eqn, text)
        assert all(re.fullmatch(r"\s*(\S+:\S+\s*)+", binders) for binders in span[:at]), (eqn, span[:at + 1])
        if eqn["parent"] is not None:
            parent = record["eqns"][eqn["parent"]]
            inside = parent["jaxpr_lines"][0] <= first and last <= parent["jaxpr_lines"][1]
            hoisted = lines[parent["jaxpr_lines"][0] - 1].count("jaxpr=") and "jaxpr={" not in lines[parent["jaxpr_lines"][0] - 1]
            assert inside or hoisted or first < parent["jaxpr_lines"][0], (eqn, parent)
        else:
            assert first > previous_top
            previous_top = last
    assert [e["id"] for e in record["eqns"]] == list(range(len(record["eqns"])))


def test_mlp_facts(by_slug):
    eqns = by_slug["mlp"]["eqns"]
    assert len(eqns) == 14
    first = eqns[0]
    assert first["primitive"] == "dot_general"
    assert first["params"]["dimension_numbers"] == [[[1], [0]], [[], []]]
    assert first["inputs"] == [{"shape": [64, 128], "dtype": "bfloat16"}, {"shape": [128, 512], "dtype": "bfloat16"}]
    assert first["outputs"] == [{"shape": [64, 512], "dtype": "bfloat16"}]
    assert first["jaxpr_lines"] == [2, 5]
    assert [e["primitive"] for e in eqns].count("dot_general") == 2
    assert eqns[4]["inputs"][0] == {"literal": "0.044677734375", "dtype": "bfloat16"}


def test_layernorm_reductions_run_in_f32(by_slug):
    sums = [e for e in by_slug["layernorm"]["eqns"] if e["primitive"] == "reduce_sum"]
    assert len(sums) == 3
    assert all(e["inputs"][0]["dtype"] == "float32" and e["outputs"][0]["dtype"] == "float32" for e in sums)


def test_shared_sub_jaxpr_is_listed_once_with_a_parent(by_slug):
    eqns = by_slug["layernorm"]["eqns"]
    var_call = next(e for e in eqns if e["primitive"] == "jit" and e["params"]["name"] == "_var")
    inner = [e for e in eqns if e["parent"] == var_call["id"]]
    assert [e["primitive"] for e in inner].count("reduce_sum") == 2
    assert all(e["jaxpr_lines"][1] < var_call["jaxpr_lines"][0] for e in inner)  # printed in the let block above


def test_a_helper_called_twice_is_one_set_of_facts():
    @jax.jit
    def helper(x):
        return jnp.sin(x) * 2

    def twice(x):
        return helper(x) + helper(x + 1)

    closed = jax.make_jaxpr(twice)(jnp.ones(4))
    facts = build_facts(closed)
    sins = [e for e in facts.eqns if e.primitive == "sin"]
    assert len(sins) == 1
    calls = [e.id for e in facts.eqns if e.primitive in JIT]
    assert facts.callers[sins[0].id] == tuple(calls) and len(calls) == 2
    assert sins[0].parent == min(calls)


def test_dead_code_is_found_through_a_jit_boundary():
    """An equation whose result leaves a jit but is dropped outside is dead, not folded into neighbours."""
    from dumpgym.traced.trace import trace
    from dumpgym.traced.xray import build_xray

    @jax.jit
    def both(x):
        return x * 2.0, jnp.sin(x)

    def program(x):
        doubled, _unused = both(x)
        return doubled

    traced = trace(program, [jax.ShapeDtypeStruct((4,), jnp.float32)])
    facts = build_facts(traced)
    by_primitive = {e.primitive: e.id for e in facts.eqns}
    assert by_primitive["sin"] in facts.dead
    call = next(by_primitive[p] for p in JIT if p in by_primitive)
    assert by_primitive["mul"] not in facts.dead and call not in facts.dead
    why = {row["eqn"]: row["why"] for row in build_xray(traced, facts).to_json()["lowered_to_nothing"]}
    assert "dead code" in why[by_primitive["sin"]]
    # JAX agrees: the lowered module computes no sine
    assert "sine" not in jax.jit(program).lower(jax.ShapeDtypeStruct((4,), jnp.float32)).as_text()


@pytest.mark.parametrize("name, args", [
    ("dropout", [jax.ShapeDtypeStruct((8, 32), jnp.float32), jax.ShapeDtypeStruct((), typed_key())]),
    ("dropout_raw", [jax.ShapeDtypeStruct((8, 32), jnp.float32), jax.ShapeDtypeStruct((2,), jnp.uint32)]),
    ("split_key", [jax.ShapeDtypeStruct((), typed_key("rbg"))]),
])
def test_key_avals_print_as_jax_prints_them(name, args):
    function = getattr(random_programs, name)
    closed = jax.make_jaxpr(function)(*args)
    facts = build_facts(closed)
    text = str(closed)
    for fact in facts.eqns:
        eqn = facts.jax_eqns[fact.id]
        assert [str(a) for a in fact.outputs] == [v.aval.str_short(short_dtypes=True) for v in eqn.outvars]
        assert [str(a) for a in fact.arrays] == [v.aval.str_short(short_dtypes=True) for v in eqn.invars
                                                 if not isinstance(v, core.Literal)]
    keys = {str(a) for e in facts.eqns for a in (*e.arrays, *e.outputs) if str(a).startswith("key<")}
    assert keys and all(f":{k}" in text for k in keys)
    if name == "dropout_raw":
        wrap = next(e for e in facts.eqns if e.primitive == "random_wrap")
        assert wrap.params == {"impl": "fry"} and "random_wrap[impl=fry]" in text


@pytest.mark.parametrize("slug", builtin_slugs())
def test_printed_binders_and_operands_follow_jaxs_dataflow(slug, by_slug):
    """Each equation's binders print its outputs (at the columns they say), and each operand it prints is
    the name its source's binder printed (JAX's dataflow, `sources`) or the literal JAX holds."""
    from dumpgym.record.schema import EqnFact, Literal

    eqns = [EqnFact.from_json(e) for e in by_slug[slug]["eqns"]]
    lines = by_slug[slug]["jaxpr"].splitlines()
    for e in eqns:
        for binder, aval in zip(e.binders, e.outputs):
            line = lines[binder.line - 1]
            assert e.jaxpr_lines[0] <= binder.line <= e.jaxpr_lines[1]
            start, end = binder.type_span
            assert line[start:end] == binder.type and line[binder.column:start] == binder.name + ":"
            # An explicit sharding prints after the dimension it cuts: `@x`, or `@(x,y)` for two mesh axes.
            assert re.sub(r"\{[^}]*\}$", "", re.sub(r"@(\w+|\([\w,]*\))", "", binder.type)) == str(aval)
        assert not e.binders or len(e.binders) == len(e.outputs)
        assert not e.operand_names or len(e.operand_names) == len(e.inputs)
        for name, x, src in zip(e.operand_names, e.inputs, e.sources or [None] * len(e.inputs)):
            if isinstance(x, Literal):
                assert name == str(x)
            elif src is not None and src.eqn is not None and eqns[src.eqn].binders:
                assert name == eqns[src.eqn].binders[src.index].name, (e, name)
    # Read for nearly every equation: only one printed inside a one-line jaxpr, with its binders wrapped, or as a
    # Pallas kernel's Ref read or write (`x <- ref[...]`, no ` = `) is not.
    named = [e for e in eqns if e.primitive not in ("get", "swap", "addupdate")]
    assert sum(bool(e.binders) for e in named) >= 0.8 * len(named)
    assert sum(bool(e.operand_names) or not e.inputs for e in named) >= 0.8 * len(named)


@pytest.mark.parametrize("slug", builtin_slugs())
def test_printed_arguments_and_bodies_are_jaxs(slug, by_slug, programs):
    """The top-level binders the record read are JAX's invars (their avals, in order, on lines before the
    first top-level equation); each body it read is a whole `{ lambda ... }`, and an equation holding a
    sub-jaxpr printed on its lines has one for each."""
    from dumpgym.record.schema import ProgramRecord

    record = ProgramRecord.from_json(by_slug[slug], slug)
    lines = record.jaxpr.splitlines()
    closed = jaxpr_of(programs[slug].function, programs[slug].example_args())
    assert [b.type for b in record.arg_binders] == \
        [v.aval.str_short(short_dtypes=True) for v in closed.jaxpr.invars]
    first = min(e.jaxpr_lines[0] for e in record.eqns if e.parent is None)
    assert all(lines[b.line - 1][b.column:].startswith(f"{b.name}:{b.type}") and b.line < first
               for b in record.arg_binders)
    for e in record.eqns:
        text = "\n".join(lines[e.jaxpr_lines[0] - 1:e.jaxpr_lines[1]])
        for body in e.bodies:
            shown = "\n".join(lines[body.first - 1:body.last])
            shown = shown[body.column:len(shown) - len(lines[body.last - 1]) + body.end]
            assert shown.startswith("{ lambda") and shown.endswith("}")
            assert shown.count("{") == shown.count("}")
        assert len(e.bodies) >= (text.count("{ lambda") > 0)


@pytest.mark.parametrize("slug", ["sharded", "psum"])
def test_partition_specs_are_the_ones_jax_holds(slug, by_slug, programs):
    """A shard_map's recorded `in_specs` and `out_specs`, made back into PartitionSpecs, equal JAX's own."""
    from jax.sharding import PartitionSpec

    from dumpgym.record.schema import EqnFact

    recorded = [EqnFact.from_json(e) for e in by_slug[slug]["eqns"] if e["primitive"] == "shard_map"]
    closed = jaxpr_of(programs[slug].function, programs[slug].example_args())
    jaxs = [e for e in _printed_eqns(closed.jaxpr) if e.primitive.name == "shard_map"]
    assert recorded and len(recorded) == len(jaxs)
    for fact, eqn in zip(recorded, jaxs):
        for key in ("in_specs", "out_specs"):
            made = tuple(PartitionSpec(*(None if n is None else n[0] if len(n) == 1 else n for n in spec))
                         for spec in fact.partition_specs[key])
            assert made == tuple(eqn.params[key]), (slug, key)


def _printed_programs():
    """Small programs whose jaxprs print params, inline bodies and one-line jaxprs in every way the printer does."""
    x = jnp.ones((3,), jnp.float32)

    def cond(a):  # two branches, each printed as a one-line jaxpr inside the cond's params
        return jax.lax.cond(a[0] > 0, lambda v: v * 2.0, lambda v: v + 1.0, a)

    def scan(a):  # a multi-line body inside `jaxpr={ lambda ...}`, with consts and carries
        return jax.lax.scan(lambda c, v: (c + v * a[0], jnp.sin(c)), a[0], a)[1]

    def nested(a):  # a jit inside a jit, a while inside it
        return jax.jit(lambda v: jax.lax.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] * 2.0), (0, v))[1])(a)

    def many_carries(a):  # so many results that the printer wraps the scan's binders over two lines
        def body(c, _):
            return tuple(v * 1.5 for v in c), None
        return jax.lax.scan(body, tuple(a * k for k in range(16)), None, length=3)[0]

    def quoted(a):  # a param whose value quotes a mesh axis name holding a space and a bracket
        import numpy as np
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        mesh = Mesh(np.array(jax.devices()[:2]), ("a ]b",))
        return jax.lax.with_sharding_constraint(a * 2.0, NamedSharding(mesh, PartitionSpec("a ]b"))) + 1.0

    return {"one-line": (lambda a: jnp.max(a), x), "cond": (cond, x), "scan": (scan, x), "nested": (nested, x),
            "wrapped": (many_carries, x), "quoted": (quoted, jnp.ones((4,), jnp.float32))}


@pytest.mark.parametrize("name", sorted(_printed_programs()))
def test_printed_params_bodies_and_ends_are_jaxs(name):
    """Each param the record says an equation prints is a param JAX holds for it, cut as `name=value` inside its
    bracketed group; each inline body's invars are the sub-jaxpr's invars (JAX's avals, in order); an equation of
    a jaxpr printed on one line ends where that jaxpr's ` in (` begins, with one operand per JAX input."""
    fn, x = _printed_programs()[name]
    closed = jax.make_jaxpr(fn)(x)
    facts = build_facts(closed)
    lines = str(closed).splitlines()

    def cut(span):
        if span.first == span.last:
            return lines[span.first - 1][span.column:span.end]
        return "\n".join([lines[span.first - 1][span.column:], *lines[span.first:span.last - 1],
                          lines[span.last - 1][:span.end]])

    for e in facts.eqns:
        jax_eqn = facts.jax_eqns[e.id]
        if e.printed_params:
            group = cut(e.printed_params[0])
            assert group.startswith("[") and group.endswith("]"), group
            for entry in e.printed_params[1:]:
                key, eq, _ = cut(entry).partition("=")
                assert eq and key in jax_eqn.params, (key, sorted(jax_eqn.params))
                assert cut(entry) in group
            if e.primitive == "sharding_constraint":  # every param JAX holds, each cut whole, quotes honoured
                assert sorted(cut(entry).partition("=")[0] for entry in e.printed_params[1:]) == sorted(jax_eqn.params)
                assert " ".join(cut(entry) for entry in e.printed_params[1:]).split() == group[1:-1].split()
        subs = list(jaxprs_in_params(jax_eqn.params))
        if e.bodies and len(e.bodies) == len(subs):
            assert [b.type for b in e.body_binders] == \
                [v.aval.str_short(short_dtypes=True) for sub in subs for v in sub.invars]
        if e.printed_end:
            line = lines[e.jaxpr_lines[0] - 1]
            assert line[e.printed_end:].startswith(" in (") and e.binders
            assert len(e.operand_names) == len(jax_eqn.invars)
            assert line[e.binders[0].column:e.printed_end].split(" = ")[1].split()[-len(e.operand_names):] == \
                list(e.operand_names)
    assert any(e.printed_params for e in facts.eqns)
    if name in ("cond", "scan", "nested"):
        assert any(e.body_binders for e in facts.eqns)
    if name in ("one-line", "cond"):
        assert any(e.printed_end for e in facts.eqns)
    for e in facts.eqns:  # every binder read where the printer wrote it, one per JAX output
        jax_eqn = facts.jax_eqns[e.id]
        assert [b.type for b in e.binders] == [v.aval.str_short(short_dtypes=True) for v in jax_eqn.outvars]
        assert all(lines[b.line - 1][b.column:].startswith(f"{b.name}:{b.type}") for b in e.binders)
    if name == "wrapped":
        scan = next(e for e in facts.eqns if e.primitive == "scan")
        assert scan.binders[0].line < scan.binders[-1].line and len(scan.operand_names) == len(scan.inputs)


_SET_PARAMS = """
import json
from dumpgym.programs import builtin_program
from dumpgym.traced.facts import build_facts
from jax_reference import jaxpr_of

program = builtin_program("collective-matmul")
closed = jaxpr_of(program.function, program.example_args())
(eqn,) = [e for e in build_facts(closed).eqns if e.primitive == "shard_map"]
(jax_eqn,) = [e for e in closed.eqns if e.primitive.name == "shard_map"]
print(json.dumps([eqn.params["newly_manual_axes"], sorted(jax_eqn.params["newly_manual_axes"])]))
"""


def test_a_set_valued_param_is_written_the_same_under_any_hash_seed(programs):
    """A frozenset param (shard_map's `newly_manual_axes` over two mesh axes) prints in hash order, which
    PYTHONHASHSEED changes: the record writes it with its members sorted, the same in every process. (It
    traces the built-in collective-matmul, so under another JAX than the corpus's it skips, as `programs` does.)"""
    assert "collective-matmul" in programs
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).parent
    written = set()
    for seed in ("0", "1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed,
               "PYTHONPATH": os.pathsep.join([str(tests), os.environ.get("PYTHONPATH", "")])}
        run = subprocess.run([sys.executable, "-c", _SET_PARAMS], env=env, capture_output=True, text=True,
                             timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
        text, axes = json.loads(run.stdout.splitlines()[-1])
        assert len(axes) == 2
        assert text == "frozenset({" + ", ".join(map(repr, axes)) + "})"
        written.add(text)
    assert len(written) == 1
