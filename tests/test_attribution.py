"""The x-ray attributes every StableHLO op line, and none wrongly, checked against JAX's own locations."""
import re
import textwrap

import jax
import jax.numpy as jnp
import pytest

from dumpgym.traced.facts import build_facts
from dumpgym.traced.trace import trace
from dumpgym.traced.xray import build_xray

from xray_oracle import JIT, judge
from jax_reference import jaxpr_of, jit_of
from needs_extras import builtin_slugs


def _xray(function, *args):
    traced = trace(function, args)
    facts = build_facts(traced.closed_jaxpr)
    return traced, facts, build_xray(traced, facts)


def _render(traced, facts, xray):
    """Each group as `eqn primitive: the StableHLO op names on its lines`."""
    hlo = traced.stablehlo.splitlines()
    rows = []
    for g in xray.groups:
        ops = [hlo[line - 1].split("=", 1)[-1].split()[0] for line in g.stablehlo_lines]
        rows.append(f"{g.eqn} {facts.eqns[g.eqn].primitive}: {' '.join(ops)}")
    return "\n".join(rows) + "\n"


@pytest.mark.parametrize("slug", builtin_slugs())
def test_attribution_agrees_with_jax_locations(slug, by_slug, programs):
    program = programs[slug]
    args = program.example_args()
    facts = build_facts(jaxpr_of(program.function, args))
    assert [e.primitive for e in facts.eqns] == [e["primitive"] for e in by_slug[slug]["eqns"]]
    lowered = jit_of(program.function).lower(*args)
    problems = judge(by_slug[slug], lowered.compiler_ir("stablehlo"), facts.jax_eqns)
    assert [p for p in problems if not _pins_key_data(p, by_slug[slug])] == []


def _pins_key_data(problem: str, record: dict) -> bool:
    """Whether an oracle complaint is the one op no equation owns in a program taking a typed key: the
    sharding constraint JAX puts on the key argument's uint32 data (see the typed-key test below)."""
    if not problem.endswith(": sdy.sharding_constraint attributed to nothing"):
        return False
    line = record["stablehlo"].splitlines()[int(problem.split()[1].rstrip(":")) - 1]
    return any(a.startswith("key<") for a in record["args"]) and "%arg" in line and "ui32>" in line


def test_corpus_coverage_is_complete(corpus):
    total = sum(p["xray_stats"]["stablehlo_op_lines"] for p in corpus["programs"])
    mapped = sum(p["xray_stats"]["mapped_stablehlo_op_lines"] for p in corpus["programs"])
    assert total > 400 and mapped / total >= 0.99


def test_mlp_group_by_group(by_slug):
    record = by_slug["mlp"]
    stats = record["xray_stats"]
    assert (stats["mapped_equations"], stats["equations"]) == (14, 14)
    assert (stats["mapped_stablehlo_op_lines"], stats["stablehlo_op_lines"]) == (25, 25)
    hlo = record["stablehlo"].splitlines()
    rows = []
    for g in record["xray"]:
        ops = [hlo[line - 1].split("=", 1)[-1].split()[0] for line in g["stablehlo_lines"]]
        rows.append(f"{g['eqn']} {record['eqns'][g['eqn']]['primitive']}: {' '.join(ops)}")
    assert "\n".join(rows) + "\n" == textwrap.dedent("""\
        0 dot_general: stablehlo.dot_general
        1 broadcast_in_dim: stablehlo.broadcast_in_dim
        2 add: stablehlo.broadcast_in_dim stablehlo.add
        3 integer_pow: stablehlo.multiply stablehlo.multiply
        4 mul: stablehlo.constant stablehlo.broadcast_in_dim stablehlo.multiply
        5 add: stablehlo.add
        6 mul: stablehlo.constant stablehlo.broadcast_in_dim stablehlo.multiply
        7 tanh: stablehlo.tanh
        8 add: stablehlo.constant stablehlo.broadcast_in_dim stablehlo.add
        9 mul: stablehlo.constant stablehlo.broadcast_in_dim stablehlo.multiply
        10 mul: stablehlo.multiply
        11 dot_general: stablehlo.dot_general
        12 broadcast_in_dim: stablehlo.broadcast_in_dim
        13 add: stablehlo.broadcast_in_dim stablehlo.add
        """)


def test_repeated_identical_layers_map_to_their_own_layer():
    def stack(x, w):
        for _ in range(4):
            x = jnp.tanh(x @ w)
        return x

    traced, facts, xray = _xray(stack, jnp.ones((8, 8)), jnp.ones((8, 8)))
    assert _render(traced, facts, xray) == textwrap.dedent("""\
        0 dot_general: stablehlo.dot_general
        1 tanh: stablehlo.tanh
        2 dot_general: stablehlo.dot_general
        3 tanh: stablehlo.tanh
        4 dot_general: stablehlo.dot_general
        5 tanh: stablehlo.tanh
        6 dot_general: stablehlo.dot_general
        7 tanh: stablehlo.tanh
        """)
    lines = [g.stablehlo_lines[0] for g in xray.groups]
    assert lines == sorted(lines)  # layer k's ops come before layer k+1's


def test_nested_jit_owns_its_private_functions(by_slug):
    record = by_slug["layernorm"]
    hlo = record["stablehlo"].splitlines()
    groups = {g["eqn"]: g for g in record["xray"]}
    var_call = next(e for e in record["eqns"] if e["primitive"] == "jit" and e["params"]["name"] == "_var")
    where_call = next(e for e in record["eqns"] if e["primitive"] == "jit" and e["params"]["name"] == "_where")
    owned = [hlo[line - 1].strip() for line in groups[var_call["id"]]["stablehlo_lines"]]
    # The call in main, the whole @_var body and, through the nested call, the @_where body.
    assert owned[0].startswith("%c = stablehlo.constant dense<0>")
    assert any(s.startswith("%6 = call @_var") for s in owned)
    assert any("stablehlo.select" in s for s in owned)
    assert set(groups[where_call["id"]]["stablehlo_lines"]) < set(groups[var_call["id"]]["stablehlo_lines"])


def test_a_helper_called_twice_maps_to_both_calls():
    @jax.jit
    def helper(x):
        return jnp.sin(x) * 2

    def twice(x):
        return helper(x) + helper(x + 1)

    traced, facts, xray = _xray(twice, jnp.ones(4))
    hlo = traced.stablehlo.splitlines()
    sine_line = next(i for i, s in enumerate(hlo, 1) if "stablehlo.sine" in s)
    holders = {g.eqn for g in xray.groups if sine_line in g.stablehlo_lines}
    calls = {e.id for e in facts.eqns if e.primitive in JIT}
    sin = next(e.id for e in facts.eqns if e.primitive == "sin")
    assert holders == calls | {sin} and len(calls) == 2


def test_remat_container_owns_its_body(by_slug):
    record = by_slug["remat"]
    remat = next(e for e in record["eqns"] if e["primitive"] == "remat2")  # jax.checkpoint's primitive
    body = {e["id"] for e in record["eqns"] if e["parent"] == remat["id"]}
    groups = {g["eqn"]: set(g["stablehlo_lines"]) for g in record["xray"]}
    assert set().union(*(groups[e] for e in body if e in groups)) == groups[remat["id"]]
    assert len(groups[remat["id"]]) >= 10


def test_shard_map_and_pvary(by_slug):
    record = by_slug["sharded"]
    hlo = record["stablehlo"].splitlines()
    shard_map = next(e for e in record["eqns"] if e["primitive"] == "shard_map")
    group = next(g for g in record["xray"] if g["eqn"] == shard_map["id"])
    assert [hlo[line - 1].split("=", 1)[1].split()[0].split("(")[0] for line in group["stablehlo_lines"]] == [
        "sdy.manual_computation", "stablehlo.dot_general",
    ]
    pvary = next(e for e in record["eqns"] if e["primitive"] == "pvary")
    assert [n["eqn"] for n in record["lowered_to_nothing"]] == [pvary["id"]]
    assert "varying" in record["lowered_to_nothing"][0]["why"]


def test_dead_code_is_explained(by_slug):
    nothing = by_slug["grads"]["lowered_to_nothing"]
    assert nothing and all("never used" in n["why"] for n in nothing)
    softmax = by_slug["softmax"]
    assert [softmax["eqns"][n["eqn"]]["primitive"] for n in softmax["lowered_to_nothing"]] == ["stop_gradient"]


def test_group_jaxpr_lines_lie_within_the_equation(corpus):
    for record in corpus["programs"]:
        eqns = record["eqns"]
        lines = record["jaxpr"].splitlines()
        for g in record["xray"]:
            family = {g["eqn"]} | {e["id"] for e in eqns if _descends(eqns, e["id"], g["eqn"])}
            allowed = set()
            for e in family:
                first, last = eqns[e]["jaxpr_lines"]
                allowed.update(range(first, last + 1))
                allowed.update(_hoisted_lines(lines, lines[first - 1:last]))
            assert set(g["jaxpr_lines"]) <= allowed and set(range(*_inclusive(eqns[g["eqn"]]))) <= set(g["jaxpr_lines"])


def _hoisted_lines(lines: list[str], eqn_lines: list[str]) -> set[int]:
    """Lines of the printer's top `let NAME = { ... } in` blocks whose NAME the equation's lines pass
    as a parameter (`update_jaxpr=jaxpr`): a jaxpr used more than once is printed there, once."""
    out = set()
    for n, line in enumerate(lines, start=1):
        m = re.match(r"let (\w+) = ", line)
        if m and any(re.search(rf"=\s*{m[1]}\b", text) for text in eqn_lines):
            out.add(n)
    return out


def _inclusive(eqn):
    first, last = eqn["jaxpr_lines"]
    return first, last + 1


def _descends(eqns, child, ancestor):
    parent = eqns[child]["parent"]
    while parent is not None:
        if parent == ancestor:
            return True
        parent = eqns[parent]["parent"]
    return False


def test_a_typed_key_argument_links_nothing_wrongly():
    """Every op line but JAX's constraint on the key argument's data is linked, and the oracle agrees with each link."""
    from random_programs import dropout, typed_key

    args = (jax.ShapeDtypeStruct((8, 32), jnp.float32), jax.ShapeDtypeStruct((), typed_key()))
    traced, facts, xray = _xray(dropout, *args)
    record = {"eqns": [e.to_json() for e in facts.eqns], **xray.to_json()}
    lowered = jax.jit(dropout).lower(*args).compiler_ir("stablehlo")
    problems = judge(record, lowered, facts.jax_eqns)
    # JAX pins the key argument's uint32 data with a sharding constraint before any equation runs:
    # no equation owns it, so the x-ray leaves it unlinked (and the oracle says so), and links all else.
    # JAX 0.6 (scripts/test-compat) writes that constraint as GSPMD's Sharding custom_call.
    op, spelled = (("sdy.sharding_constraint", "sdy.sharding_constraint %arg1") if "sdy." in traced.stablehlo
                   else ("stablehlo.custom_call", "stablehlo.custom_call @Sharding(%arg1)"))
    assert len(problems) == 1 and problems[0].endswith(f": {op} attributed to nothing")
    line = traced.stablehlo.splitlines()[int(problems[0].split()[1].rstrip(":")) - 1]
    assert spelled in line and "tensor<2xui32>" in line
    assert xray.stats.mapped_equations == xray.stats.equations
    assert xray.stats.mapped_stablehlo_op_lines == xray.stats.stablehlo_op_lines - 1


def test_raw_key_data_wrapped_inside_links_every_line():
    from random_programs import dropout_raw

    args = (jax.ShapeDtypeStruct((8, 32), jnp.float32), jax.ShapeDtypeStruct((2,), jnp.uint32))
    traced, facts, xray = _xray(dropout_raw, *args)
    record = {"eqns": [e.to_json() for e in facts.eqns], **xray.to_json()}
    assert judge(record, jax.jit(dropout_raw).lower(*args).compiler_ir("stablehlo"), facts.jax_eqns) == []
    assert xray.stats.mapped_stablehlo_op_lines == xray.stats.stablehlo_op_lines
    wrap = next(e.id for e in facts.eqns if e.primitive == "random_wrap")
    assert {row.eqn: row.why for row in xray.lowered_to_nothing}[wrap].startswith("random_wrap only retypes")


def test_the_notebook_xray_takes_a_typed_key():
    import dumpgym
    from random_programs import dropout, typed_key

    by_spec = dumpgym.xray(dropout, "f32[8,32]", "key<fry>[]")
    by_struct = dumpgym.xray(dropout, jax.ShapeDtypeStruct((8, 32), jnp.float32), jax.ShapeDtypeStruct((), typed_key()))
    assert by_spec.jaxpr == by_struct.jaxpr == str(jax.make_jaxpr(dropout)(jnp.ones((8, 32)), jax.random.key(0)))
    assert "key<fry>[]" in by_spec._repr_html_().replace("&lt;", "<").replace("&gt;", ">")


@pytest.mark.parametrize("slug, op", [("cond-switch", "stablehlo.negate"), ("mlp", "stablehlo.tanh")])
def test_the_oracle_rejects_an_op_moved_to_another_equation(slug, op, by_slug, programs):
    """The oracle can fail: an op line taken from its group and given to an equation of another
    primitive, written on another source line, is reported."""
    import copy

    from jax._src import source_info_util

    program = programs[slug]
    args = program.example_args()
    facts = build_facts(jaxpr_of(program.function, args))
    frames = {n: source_info_util.user_frame(e.source_info.traceback) for n, e in facts.jax_eqns.items()}
    source_line = {n: f.start_line if f is not None else None for n, f in frames.items()}
    record = copy.deepcopy(by_slug[slug])
    line = next(o["line"] for o in record["stablehlo_ops"] if o["name"] == op)
    owner = next(g for g in record["xray"] if line in g["stablehlo_lines"])
    other = next(g for g in record["xray"]
                 if source_line[g["eqn"]] not in (None, source_line[owner["eqn"]])
                 and record["eqns"][g["eqn"]]["primitive"] != record["eqns"][owner["eqn"]]["primitive"]
                 and record["eqns"][g["eqn"]]["primitive"] not in ("cond", "jit"))
    owner["stablehlo_lines"].remove(line)
    other["stablehlo_lines"].append(line)
    problems = judge(record, jit_of(program.function).lower(*args).compiler_ir("stablehlo"), facts.jax_eqns)
    assert any(p.startswith(f"line {line}: {op}") for p in problems), problems


# --- what MLIR read of the lowered module once (the record's `lowered`), against JAX's own lowering ---

def _lowered_of(by_slug, slug):
    from dumpgym.record.schema import ProgramRecord

    return ProgramRecord.from_json(by_slug[slug], slug).lowered


def _extended(aval) -> bool:
    return jax.dtypes.issubdtype(aval.dtype, jax.dtypes.extended)  # a typed key lowers as its key data


@pytest.mark.parametrize("slug", builtin_slugs())
def test_main_signature_is_the_one_jax_lowered(slug, by_slug, programs):
    """Main's argument and result shapes are JAX's avals, and an argument lends its buffer
    (`tf.aliasing_output`) only where JAX donated it."""
    program = programs[slug]
    lowered = jit_of(program.function).lower(*program.example_args())
    main = _lowered_of(by_slug, slug).main
    infos = jax.tree.leaves(lowered.args_info)
    assert len(main.args) == len(infos)  # jit keeps every argument in main's signature
    for arg, info in zip(main.args, infos):
        if not _extended(info._aval):
            assert arg.shape == tuple(info.shape), (slug, arg)
        assert arg.aliasing_output is None or info.donated, (slug, arg)
    outs = jax.tree.leaves(lowered.out_info)
    assert len(main.results) == len(outs)
    assert [r.shape for r, o in zip(main.results, outs) if not _extended(o)] == \
        [tuple(o.shape) for o in outs if not _extended(o)]


def test_some_program_donates_and_its_aliases_name_results(by_slug):
    donated = {slug: [a.aliasing_output for a in _lowered_of(by_slug, slug).main.args if a.aliasing_output is not None]
               for slug in by_slug}
    assert any(donated.values())
    for slug, results in donated.items():
        assert len(set(results)) == len(results), slug  # one lender per result


@pytest.mark.parametrize("slug", ["sharded", "psum", "auto-sharded", "fsdp-step"])
def test_recorded_shardings_and_mesh_are_the_ones_jax_compiles_with(slug, by_slug, programs):
    """Each argument's `sdy.sharding`, as recorded, names the mesh axes of the PartitionSpec JAX compiles
    that argument with; the recorded mesh is the program's."""
    program = programs[slug]
    lowered = _lowered_of(by_slug, slug)
    assert [dict(m.axes) for m in lowered.meshes] == [program.mesh]
    compiled = jit_of(program.function).lower(*program.example_args()).compile()
    checked = 0
    for arg, sharding in zip(lowered.main.args, jax.tree.leaves(compiled.input_shardings[0])):
        if arg.sharding is None or not hasattr(sharding, "spec"):
            continue
        spec = tuple(sharding.spec) + (None,) * (len(arg.sharding) - len(sharding.spec))
        expected = tuple(() if p is None else (p,) if isinstance(p, str) else tuple(p) for p in spec)
        assert arg.sharding == expected, (slug, arg)
        checked += 1
    assert checked or not program.in_specs


def test_recorded_constraints_and_collectives_stand_on_their_ops(corpus):
    """Each sharding constraint and collective recorded stands on the line of an op of its kind, and each
    constraint of a program with a mesh has the global shape of a `sharding_constraint` equation or of an
    argument or result a jit equation gives a sharding (its `in_shardings`, `out_shardings`; JAX also
    constrains a PRNG key's data, dropout's, with none)."""
    from dumpgym.record.schema import ProgramRecord

    found = 0
    for p in corpus["programs"]:
        record = ProgramRecord.from_json(p, p["slug"])
        ops = {op.line: op.name for op in record.stablehlo_ops}
        shapes = {e.outputs[0].shape for e in record.eqns if e.primitive == "sharding_constraint"}
        for e in record.eqns:
            if e.primitive == "jit":
                shapes |= _given_shardings(e.input_avals, e.param("in_shardings"))
                shapes |= _given_shardings(e.outputs, e.param("out_shardings"))
        for c in record.lowered.sharding_constraints:
            assert ops[c.line] == "sdy.sharding_constraint", (p["slug"], c)
            assert c.shape in shapes or not record.mesh, (p["slug"], c)
            found += 1
        for c in record.lowered.collectives:
            assert ops[c.line] == c.name and c.replica_groups, (p["slug"], c)
            found += 1
    assert found >= 3


def _given_shardings(avals, shardings) -> set:
    """The shapes of those of `avals` whose sharding (as the jaxpr's params print it) is a NamedSharding."""
    return {a.shape for a, s in zip(avals, shardings or ()) if str(s).startswith("NamedSharding(")}


@pytest.mark.parametrize("slug", builtin_slugs())
def test_recorded_dots_and_calls_are_the_ones_jax_lowered(slug, by_slug):
    """Each `stablehlo.dot_general` MLIR read carries the dimension numbers and avals of the equation the x-ray
    links it to (JAX's params), and is the line that prints it; each `func.call`'s callee is a function of
    the module, named on its line."""
    import re

    from dumpgym.record.schema import ProgramRecord

    record = ProgramRecord.from_json(by_slug[slug], slug)
    lines = record.stablehlo.splitlines()
    owners = {}
    for g in record.xray:
        for n in g.stablehlo_lines:
            owners.setdefault(n, []).append(record.eqns[g.eqn])
    functions = {op.function for op in record.stablehlo_ops}
    for op in record.stablehlo_ops:
        line = lines[op.line - 1]
        if op.name == "func.call":
            assert op.callee in functions and f"call @{op.callee}(" in line, (slug, op)
        if op.dot is None:
            assert op.name != "stablehlo.dot_general" or "?" in line, (slug, op)
            continue
        d = op.dot
        assert re.search(rf"stablehlo\.dot_general {re.escape(d.lhs.name)}, {re.escape(d.rhs.name)},.* : "
                         rf"\({re.escape(d.lhs.type)}, {re.escape(d.rhs.type)}\) -> {re.escape(d.result.type)}$", line)
        dots = [e for e in owners.get(op.line, ()) if e.primitive == "dot_general"]
        for e in dots[:1]:
            (lc, rc), (lb, rb) = e.params["dimension_numbers"]
            assert (d.lhs_contracting, d.rhs_contracting, d.lhs_batch, d.rhs_batch) == tuple(map(tuple, (lc, rc, lb, rb)))
            assert (d.lhs.shape, d.rhs.shape, d.result.shape) == (e.arrays[0].shape, e.arrays[1].shape, e.outputs[0].shape)


@pytest.mark.parametrize("slug", ["train-step", "grads", "layernorm", "dropout"])
def test_a_literal_s_kept_print_is_the_one_jax_gives_it(slug):
    """The dataflow's key for a literal input (kept once per value, dtype, shape, weak type and aval, as
    thousands of literals repeat a few values) is JAX's own print of that literal's value and aval, each time."""
    from jax.extend import core as jex

    from dumpgym.compiled.attribution import _literal_key
    from dumpgym.programs import builtin_program

    program = builtin_program(slug)
    facts = build_facts(trace(program.function, program.example_args()))
    literals = [v for eqn in facts.jax_eqns.values() for v in eqn.invars if isinstance(v, jex.Literal)]
    assert literals
    memo: dict = {}
    for literal in literals * 2:
        assert _literal_key(literal, memo) == ("lit", repr(literal.val), str(literal.aval))
    assert memo
