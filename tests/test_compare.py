"""Two compiles side by side (`cost/compare.py`, `dumpgym diff`): the built-in compiles with one change, and what
compare says appeared, vanished and changed between each and its base, checked against XLA itself: the
compiled texts read through jaxlib's HLO bindings, and a fresh compile's own `memory_analysis()`."""
import re
from collections import Counter

import pytest

from dumpgym import cli

from dumpgym.cost import compare
from dumpgym.programs import SLUGS, builtin_program
from dumpgym.record.schema import ProgramRecord
from hlo_recount import Canonical, Parsed, Surroundings, computes, dominates, near


@pytest.fixture(scope="module")
def records(whole_corpus):
    """Every committed record by slug, typed."""
    return {p["slug"]: ProgramRecord.from_json(p) for p in whole_corpus["programs"]}


@pytest.fixture(scope="module")
def pairs(records):
    """(base, changed) for every compile with one change."""
    return [(records[r.variant_of], r) for r in records.values() if r.change is not None]


def _entry(text: str):
    """XLA's parse of a compiled text, and its entry computation (the one the module's `ENTRY` names)."""
    from jaxlib import xla_client

    module = xla_client.hlo.hlo_module_from_text(text)
    entry = re.search(r"^ENTRY %([\w.\-]+)", module.to_string(), re.M)[1]
    (computation,) = [c for c in module.computations() if c.name == entry]
    return module, computation


def _opcodes(computation) -> Counter:
    """How many instructions of each opcode a computation holds, as XLA's enum names them (`allreduce`)."""
    from dumpgym.ir.hlo_graph import opcode_of

    return Counter(opcode_of(i) for i in computation.instructions())


def test_at_least_six_built_in_programs_have_a_compile_with_one_change(pairs):
    assert len({base.slug for base, _ in pairs}) >= 6
    for base, changed in pairs:
        assert base.slug in SLUGS and changed.slug.startswith(f"{base.slug}-") and changed.change.strip()
        assert set(changed.compiled) == set(base.compiled) == {"tpu", "gpu", "cpu"}, changed.slug


def test_each_change_is_declared_once_and_found_by_its_slug(pairs):
    for base, changed in pairs:
        program = builtin_program(changed.slug)
        assert (program.variant_of, program.change) == (base.slug, changed.change)
        assert changed.entry == base.entry  # the base's code, called otherwise: no program text repeated


@pytest.mark.compiled_hlo
def test_every_change_makes_its_compiles_differ_on_every_target(pairs):
    """On each of CPU, TPU and GPU, XLA's own parse of the two texts differs in the opcodes the module holds
    (fused bodies included), in the entry computation's result shapes, or in the input_output_alias: the
    change is one the compiler sees."""
    for base, changed in pairs:
        for target in base.compiled:
            a_module, a = _entry(base.compiled[target].text)
            b_module, b = _entry(changed.compiled[target].text)
            a_rows = sorted(i.to_string().split(" = ", 1)[-1].split("(")[0] for i in a.instructions())
            b_rows = sorted(i.to_string().split(" = ", 1)[-1].split("(")[0] for i in b.instructions())
            aliased = [("input_output_alias" in m.to_string().split("\n", 1)[0]) for m in (a_module, b_module)]
            every = [sum((_opcodes(c) for c in m.computations()), Counter()) for m in (a_module, b_module)]
            assert every[0] != every[1] or a_rows != b_rows or aliased[0] != aliased[1], (changed.slug, target)


@pytest.mark.compiled_hlo
def test_what_appeared_and_vanished_is_the_difference_of_the_two_texts(pairs):
    """Per opcode, rows appeared less rows vanished is what the changed text's entry computation holds less
    the base's (kept and changed rows pair one opcode with itself), and an opcode one side lacks has every
    row of the other side's in the diff, by XLA's names."""
    from dumpgym.ir.hlo_graph import opcode_of

    for base, changed in pairs:
        for target, diff in compare.compare(base, changed).items():
            _, a = _entry(base.compiled[target].text)
            _, b = _entry(changed.compiled[target].text)
            a_ops, b_ops = _opcodes(a), _opcodes(b)
            by_line = {t: {i.line: i.opcode for i in r.compiled[target].instructions} for t, r in (("a", base), ("b", changed))}
            appeared = Counter(by_line["b"][r.line] for r in diff.appeared)
            vanished = Counter(by_line["a"][r.line] for r in diff.vanished)
            for op in a_ops | b_ops:
                assert appeared[op] - vanished[op] == b_ops[op] - a_ops[op], (changed.slug, target, op)
                if not a_ops[op]:
                    assert {r.name for r in diff.appeared if by_line["b"][r.line] == op} == \
                        {i.name for i in b.instructions() if opcode_of(i) == op}, (changed.slug, target, op)
                if not b_ops[op]:
                    assert {r.name for r in diff.vanished if by_line["a"][r.line] == op} == \
                        {i.name for i in a.instructions() if opcode_of(i) == op}, (changed.slug, target, op)


@pytest.mark.compiled_hlo
def test_replicating_the_weights_makes_the_partitioners_collectives_vanish(records):
    """auto-sharded's all-reduce (a contraction over an axis cut across model) and fsdp-step's all-gathers
    (weights cut across the mesh) are gone once the weights arrive whole: on every target, the vanished
    collectives are every such row of the base's text."""
    from dumpgym.ir.hlo_graph import opcode_of

    for slug, gone in (("auto-sharded-replicated", "allreduce"), ("fsdp-step-replicated", "allgather")):
        changed = records[slug]
        for target, diff in compare.compare(records[changed.variant_of], changed).items():
            _, a = _entry(records[changed.variant_of].compiled[target].text)
            printed = {i.name for i in a.instructions() if opcode_of(i) in (gone, gone + "start", gone + "done")}
            assert printed, (slug, target)
            assert {r.name for r in diff.of("collective")["vanished"]} >= printed, (slug, target)


@pytest.mark.compiled_hlo
def test_constraining_a_result_replicated_makes_all_gathers_appear(records):
    """auto-sharded's output and fsdp-step's gradients, constrained replicated, end gathered: on every target
    XLA's parse of the changed text holds more all-gathers than the base's, and the diff's appeared
    collectives hold that many more."""
    from dumpgym.ir.hlo_graph import opcode_of

    for slug in ("auto-sharded-gathered", "fsdp-step-whole-grads"):
        changed = records[slug]
        base = records[changed.variant_of]
        for target, diff in compare.compare(base, changed).items():
            gathers = [sum(opcode_of(i) in ("allgather", "allgatherstart") for i in _entry(r.compiled[target].text)[1]
                           .instructions()) for r in (base, changed)]
            assert gathers[1] > gathers[0], (slug, target)
            rows = {i.line: i.opcode for i in changed.compiled[target].instructions}
            appeared = sum(rows[r.line] in ("allgather", "allgatherstart") for r in diff.of("collective")["appeared"])
            assert appeared >= gathers[1] - gathers[0], (slug, target)


def test_turning_donation_off_leaves_no_alias_as_xla_says(records):
    """train-step donates seven arguments and its undonated compile none: the recorded alias counts and
    `memory_analysis()` sizes in the diff are a fresh CPU compile's of each."""
    diff = compare.compare(records["train-step"], records["train-step-undonated"], ("cpu",))["cpu"]
    fresh = []
    for slug in ("train-step", "train-step-undonated"):
        program = builtin_program(slug)
        fresh.append(program.function.lower(*program.example_args()).compile().memory_analysis())
    assert diff.memory["alias_size_in_bytes"] == tuple(m.alias_size_in_bytes for m in fresh)
    assert fresh[0].alias_size_in_bytes > 0 == fresh[1].alias_size_in_bytes
    assert diff.aliases[0] == 7 and diff.aliases[1] == 0


def test_a_dtype_change_aligns_every_equation(records):
    """f32 instead of bf16 changes no primitive: every equation of mlp pairs with the one printed at its place."""
    pairs = compare.align(records["mlp"], records["mlp-f32"])
    assert pairs == {e.id: e.id for e in records["mlp"].eqns}


def test_the_remat_change_vanishes_the_saved_residuals_marks(records):
    """checkpoint_dots marks each saved matmul result with a reduce_precision equation (the jaxpr says so);
    nothing_saveable saves none, and the CPU compile's reduce-precision rows are among what vanished."""
    base, changed = records["ckpt-policy"], records["ckpt-policy-nothing"]
    assert any(e.primitive == "reduce_precision" for e in base.eqns)
    assert not any(e.primitive == "reduce_precision" for e in changed.eqns)
    diff = compare.compare(base, changed, ("cpu",))["cpu"]
    marks = {i.line for i in base.compiled["cpu"].instructions if i.opcode == "reduceprecision"}
    running = {i.line for i in compare.running(base.compiled["cpu"])}
    gone = {r.line for r in diff.vanished} | {pair.base.line for pair in diff.modified}
    assert marks & running <= gone


def test_diff_prints_both_compiles_and_refuses_a_program_without_a_change(capsys):
    assert cli.main(["diff", "mlp-f32", "--target", "cpu"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cpu: mlp -> mlp-f32 (f32 instead of bf16)") and "vanished" in out
    assert cli.main(["diff", "mlp"]) == 0  # the base names its one change
    out = capsys.readouterr().out
    assert [line.split(":")[0] for line in out.split("\n\n")] == ["tpu", "gpu", "cpu"]
    for args, said in ((["diff", "softmax"], "no compile with one change"), (["diff", "nope"], "no program"),
                       (["diff", "auto-sharded"], "several changes: auto-sharded-replicated auto-sharded-gathered"),
                       (["diff", "mlp-f32", "--target", "v9"], "not both compiled for 'v9'")):
        assert cli.main(args) == 2
        err = capsys.readouterr().err
        assert said in err and err.count("\n") == 1, err


def test_a_change_is_named_by_a_word_and_its_record_names_its_base(whole_corpus):
    from dumpgym.traced.program import ProgramError, change
    from dumpgym.record.schema import RecordError

    mlp = builtin_program("mlp")
    with pytest.raises(ProgramError, match="named by a word"):
        change(mlp, "2", "f32 instead of bf16")
    record = next(p for p in whole_corpus["programs"] if "change" in p)
    assert ProgramRecord.from_json(record).to_json() == record
    assert "change" not in ProgramRecord.from_json(whole_corpus["programs"][0]).to_json()
    without_base = {k: v for k, v in record.items() if k != "variant_of"}
    for bad in (without_base, {**record, "change": "  "}):
        with pytest.raises(RecordError, match="change"):
            ProgramRecord.from_json(bad)


# ---------------------------------------------------------------------------------------------
# Pairing by what a row computes, recounted from XLA's parse of each text (not from the record's facts).


@pytest.fixture(scope="module")
def parsed_pairs(pairs):
    """(base, changed, target, diff, base text parsed, changed text parsed) for every pair and target."""
    out = []
    for base, changed in pairs:
        for target, diff in compare.compare(base, changed).items():
            out.append((base, changed, target, diff, Parsed(base.compiled[target].text),
                        Parsed(changed.compiled[target].text)))
    return out


@pytest.mark.compiled_hlo
def test_no_kept_row_computes_otherwise_than_its_twin_per_xla(parsed_pairs):
    """The rows kept as they are, on each side, are alike one for one by XLA's parse: the same printed opcode,
    result, operands' types and fused body (the same opcodes over the same types, in the same dataflow)."""
    for base, changed, target, diff, a, b in parsed_pairs:
        ids: dict = {}
        not_kept = {"a": {r.name for r in diff.vanished} | {p.base.name for p in diff.modified},
                    "b": {r.name for r in diff.appeared} | {p.changed.name for p in diff.modified}}
        kept = {}
        for side, record, parsed in (("a", base, a), ("b", changed, b)):
            names = [i.name for i in compare.running(record.compiled[target]) if i.name not in not_kept[side]]
            kept[side] = Counter((parsed.op[n], parsed.value[n], tuple(parsed.value[o] for o in parsed.operands[n]),
                                  tuple(sorted(parsed.body(n, ids).items()))) for n in names)
        assert sum(kept["b"].values()) == diff.kept
        assert kept["a"] == kept["b"], (changed.slug, target)


@pytest.mark.compiled_hlo
def test_each_kept_pair_computes_the_same_by_xlas_own_parse(pairs):
    """Each kept row and its twin, re-read through XLA's parse of the two texts and compared by the tests' own
    canonical form (names ignored; opcode, result shape with its layout, every attribute but metadata,
    backend configuration and channel ids; fused and called computations compared as dataflow graphs, a
    constant by its value, a parameter by its number, a tuple element by its index), are the same: no kept
    fusion has another body, no kept constant another value, no kept collective other groups."""
    kept = {"fusion": 0, "other": 0}
    for base, changed in pairs:
        for target, diff in compare.compare(base, changed).items():
            ids: dict = {}
            a, b = Canonical(base.compiled[target].text, ids), Canonical(changed.compiled[target].text, ids)
            assert len(diff.twins) == diff.kept
            for pair in diff.twins:
                assert a.row(pair.base.name) == b.row(pair.changed.name), \
                    (changed.slug, target, pair.base.name, pair.changed.name)
                kept["fusion" if pair.base.opcode == "fusion" else "other"] += 1
    assert kept["fusion"] and kept["other"]


def test_the_canonical_form_tells_what_kept_would_miss():
    """The tests' canonical form is not blind to what a shape-only comparison misses: a slice's bounds, a
    constant's value, a comparison's direction and a tuple element's index each make two rows differ, while
    other names and metadata do not."""
    from hlo_recount import Canonical

    def module(slice_at, value, direction, index, name):
        return f"""HloModule m, entry_computation_layout={{(f32[8]{{0}})->f32[4]{{0}}}}

%body (p: f32[8]) -> f32[4] {{
  %p = f32[8]{{0}} parameter(0)
  %{name} = f32[4]{{0}} slice(%p), slice={{[{slice_at}:{slice_at + 4}]}}, metadata={{op_name="{name}"}}
  %c = f32[] constant({value})
  %b = f32[4]{{0}} broadcast(%c), dimensions={{}}
  %lt = pred[4]{{0}} compare(%{name}, %b), direction={direction}
  ROOT %s = f32[4]{{0}} select(%lt, %{name}, %b)
}}

ENTRY %main (x: f32[8]) -> f32[4] {{
  %x = f32[8]{{0}} parameter(0)
  %t = (f32[8]{{0}}, f32[8]{{0}}) tuple(%x, %x)
  %g = f32[8]{{0}} get-tuple-element(%t), index={index}
  ROOT %f = f32[4]{{0}} fusion(%g), kind=kLoop, calls=%body
}}
"""
    ids: dict = {}
    plain = (0, 1.5, "LT", 0, "sl")
    first = Canonical(module(*plain), ids)
    assert Canonical(module(*plain[:4], "other"), ids).row("f") == first.row("f")
    for k, other in ((0, 2), (1, 2.5), (2, "GT")):
        changed = list(plain)
        changed[k] = other
        assert Canonical(module(*changed), ids).row("f") != first.row("f"), changed
    assert Canonical(module(*plain[:3], 1, "sl"), ids).row("g") != first.row("g")


def _interface(text: str) -> dict:
    """The entry computation's parameters by name -> their number, and its root -> "root", as XLA prints the
    module it parses from `text`: the function's own arguments and result."""
    module, entry = _entry(text)
    printed = module.to_string()
    root = re.search(rf"^ENTRY %{re.escape(entry.name)} .*?^\s*ROOT %([\w.\-]+) = ", printed, re.M | re.S)[1]
    out = {}
    for i in entry.instructions():
        number = re.match(r"(?:ROOT )?%\S+ = .*? parameter\((\d+)\)", i.to_string())
        if number:
            out[i.name] = int(number[1])
    return {**out, root: "root"}


@pytest.mark.compiled_hlo
def test_each_changed_pair_may_be_one_row_changed_per_xla(parsed_pairs):
    """Each changed pair is one printed opcode whose bodies (where they have them) share an operation, an
    argument of the entry computation only with the argument of its number, sharing an equation, both the
    compiler's own or of one result shape; and no row left out of one side could so pair with a row left out
    of the other. Which partner is the better is the next test's."""
    for base, changed, target, diff, a, b in parsed_pairs:
        back = {v: k for k, v in compare.align(base, changed).items()}
        a_role, b_role = (_interface(r.compiled[target].text) for r in (base, changed))

        def akin(x, y):
            bodies = bool(a.called[x.name] or b.called[y.name])
            arguments = {a_role.get(x.name), b_role.get(y.name)} - {None, "root"}
            shared = set(x.eqns) & {back.get(e, ("new", e)) for e in y.eqns}
            return x.opcode == y.opcode and (not bodies or bool(computes(a, x.name) & computes(b, y.name))) and (
                bool(shared) or not (x.eqns or y.eqns) or x.shape == y.shape) and (
                not arguments or a_role.get(x.name) == b_role.get(y.name))

        for pair in diff.modified:
            assert akin(pair.base, pair.changed), (changed.slug, target, pair.base.name, pair.changed.name)
        for x in diff.vanished:  # a row left out while an akin row of the other side is left out too
            assert not any(akin(x, y) for y in diff.appeared), (changed.slug, target, x.name)


@pytest.mark.compiled_hlo
def test_no_changed_pair_has_a_better_partner_by_where_its_rows_sit_per_xla(pairs):
    """A better partner by a measure of the tests' own, with no order among its aspects (`Surroundings`, over
    XLA's parse of the two texts): the arguments a row is computed from and the results it feeds, its fused
    body's dataflow graph, its users' opcodes, its result dims, what its own line says, and its neighbourhood
    up and down its computation's dataflow. One partner is better than another when it is as close in every
    aspect and closer in some (`dominates`). For every changed pair: no row of another pair (kept or changed)
    of the same opcode, swapped in, leaves neither row farther and one closer; no row left out is a better
    partner to either of its rows; and where a swap or a row left out is exactly as close, the pair is
    flagged uncertain (so no drill asks about it)."""
    found = {"pairs": 0, "checked": 0}
    for base, changed in pairs:
        for target, diff in compare.compare(base, changed).items():
            labels: dict = {}
            a, b = (Surroundings(r.compiled[target].text, labels) for r in (base, changed))
            facts: dict = {}

            def close(x, y):
                for side, parsed, row in (("a", a, x), ("b", b, y)):
                    if (side, row.name) not in facts:
                        facts[side, row.name] = parsed.facts(row.name)
                return near(facts["a", x.name], facts["b", y.name])

            def at_least(p, q):
                return p == q or dominates(p, q)

            others = (*diff.modified, *diff.twins)
            for pair in diff.modified:
                x, y = pair.base, pair.changed
                mine = close(x, y)
                where = (changed.slug, target, x.name, y.name)
                found["pairs"] += 1
                for other in others:
                    if other is pair or b.parsed.op[other.changed.name] != b.parsed.op[y.name]:
                        continue
                    found["checked"] += 1
                    theirs, swapped = close(other.base, other.changed), (close(x, other.changed), close(other.base, y))
                    if at_least(swapped[0], mine) and at_least(swapped[1], theirs):
                        assert swapped == (mine, theirs), (*where, "swapped with", other.base.name, other.changed.name)
                        assert pair.uncertain or other.uncertain, (*where, "as close as", other.changed.name)
                for free, swapped in ([(f, close(x, f)) for f in diff.appeared if b.parsed.op[f.name] == b.parsed.op[y.name]]
                                      + [(f, close(f, y)) for f in diff.vanished if a.parsed.op[f.name] == a.parsed.op[x.name]]):
                    found["checked"] += 1
                    assert not dominates(swapped, mine), (*where, "not", free.name)
                    assert swapped != mine or pair.uncertain, (*where, "as close as", free.name)
    assert found["pairs"] >= 100 and found["checked"] > found["pairs"], found


@pytest.mark.compiled_hlo
def test_the_reviews_cases_pair_by_what_the_rows_compute(parsed_pairs):
    """mlp's fusions that convert (the GELU's 23 converts on the CPU) are changed in f32, not kept; the
    dynamic-slice fusions that replicated weights bring to the CPU and GPU compiles of fsdp-step appeared
    (no fusion of the base slices so); train-step's changed fusions keep their dims (w1's update with w1's)."""
    seen = set()
    for base, changed, target, diff, a, b in parsed_pairs:
        gone = {r.name for r in diff.vanished} | {p.base.name for p in diff.modified}
        if changed.slug == "mlp-f32":
            converting = [i.name for i in compare.running(base.compiled[target])
                          if any(a.op[k] == "convert" for k in a.inside(i.name))]
            assert converting and set(converting) <= gone, target
            seen.add(changed.slug)
        if changed.slug == "fsdp-step-replicated" and target in ("cpu", "gpu"):
            def slicing(parsed, record):
                return {i.name for i in compare.running(record.compiled[target]) if parsed.op.get(i.name) == "fusion"
                        and any(parsed.op[k] == "dynamic-slice" for k in parsed.inside(i.name))}
            new = {n for n in slicing(b, changed) if b.ops(n) not in [a.ops(m) for m in slicing(a, base)]}
            assert new and new <= {r.name for r in diff.appeared}, target
            seen.add(changed.slug)
        if changed.slug == "train-step-undonated":
            fused = [p for p in diff.modified if p.base.opcode == "fusion"]
            assert all(a.dims(p.base.name) == b.dims(p.changed.name) for p in fused), target
            seen.add(changed.slug)
    assert seen == {"mlp-f32", "fsdp-step-replicated", "train-step-undonated"}


def _from_export(record: ProgramRecord, axis_types=None):
    """The function and example arguments of a record, made from its export alone: `entry` imported and called
    as `call` says, `args` as avals, sharded over a mesh of `mesh`'s axes by `in_specs` where it has one. The
    export does not say the mesh's axis types (`axis_types`: JAX's default, Explicit, where not given)."""
    import math

    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    from dumpgym.traced.program import called, load_entry, parse_arg

    function = load_entry(record.entry)
    if record.call is not None:
        function = called(function, record.call)
    structs = [parse_arg(a).to_struct() for a in record.args]
    if record.mesh is not None:
        mesh = jax.make_mesh(tuple(record.mesh.values()), tuple(record.mesh), axis_types=axis_types,
                             devices=jax.devices()[: math.prod(record.mesh.values())])
        structs = [jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=NamedSharding(mesh, PartitionSpec(
            *(tuple(a) if isinstance(a, list) else a for a in spec)))) for s, spec in zip(structs, record.in_specs)]
    return function, structs


def _unsourced(text: str) -> str:
    """A compiled text as XLA prints it again without metadata: the source lines each instruction was traced
    from (which name the caller's frames) left out, everything it computes kept."""
    from jaxlib import xla_client

    options = xla_client.hlo.HloPrintOptions()
    options.print_metadata = False
    return xla_client.hlo.hlo_module_from_text(text).to_string(options)


def test_each_change_is_traced_again_from_its_export_alone(pairs):
    """Every compile with one change, traced again from what its record says (entry, call, args, mesh and
    in_specs; not its declaration), prints the committed jaxpr and StableHLO byte for byte. The one thing the
    export does not say, a mesh's axis types, is what docs/corpus.md says of them: Auto, over which jit's
    partitioner propagates."""
    from jax_reference import jaxpr_of, jit_of

    from jax.sharding import AxisType

    called_otherwise = set()
    for base, changed in pairs:
        axis_types = None
        if changed.mesh is not None:  # docs/corpus.md: programs sharded by jit use Auto axes
            axis_types = (AxisType.Auto,) * len(changed.mesh)
        function, args = _from_export(changed, axis_types)
        assert str(jaxpr_of(function, args)) == changed.jaxpr, changed.slug
        assert jit_of(function).lower(*args).as_text() == changed.stablehlo, changed.slug
        if changed.call is not None:
            called_otherwise.add(changed.slug)
    assert {"train-step-undonated", "ckpt-policy-nothing"} <= called_otherwise


@pytest.mark.compiled_hlo
def test_each_change_compiles_from_its_export_as_its_declaration_does(pairs):
    """Compiled on this host (the committed compiled texts name another), every change made from its export
    alone compiles to what its declaration compiles to, as XLA prints both without metadata: donation,
    policies and shardings included."""
    from jax.sharding import AxisType

    from jax_reference import jit_of

    for _, changed in pairs:
        axis_types = None if changed.mesh is None else (AxisType.Auto,) * len(changed.mesh)
        function, args = _from_export(changed, axis_types)
        program = builtin_program(changed.slug)
        declared = jit_of(program.function).lower(*program.example_args()).compile().as_text()
        assert _unsourced(jit_of(function).lower(*args).compile().as_text()) == _unsourced(declared), changed.slug


def test_a_changed_call_is_typed_and_checked_in_the_record(whole_corpus):
    """`call` reads back as it was written, and the record refuses a call without a change, one that changes
    nothing, and keyword values `program.called` could not read."""
    from dumpgym.traced.program import ProgramError, change
    from dumpgym.record.schema import Call, RecordError

    record = next(p for p in whole_corpus["programs"] if p["slug"] == "ckpt-policy-nothing")
    typed = ProgramRecord.from_json(record)
    assert isinstance(typed.call, Call) and typed.to_json() == record
    assert record["call"] == {"keywords": {"policy": {"function": "jax:checkpoint_policies.nothing_saveable"}}}
    plain = next(p for p in whole_corpus["programs"] if p["slug"] == "mlp")
    for bad, said in (({**plain, "call": {"jit": {}}}, "only a compile with one change"),
                      ({**record, "call": {}}, "changes nothing"),
                      ({**record, "call": {"keywords": {"policy": {"function": "no colon"}}}}, "module:qualname"),
                      ({**record, "call": {"keywords": {"out": {"partition_spec": [3]}}}}, "list of axes"),
                      ({**record, "call": {"keywords": {"out": {"lambda": "x"}}}}, "JSON scalar"),
                      ({**record, "call": {"keywords": {"not a name": 1}}}, "not a keyword")):
        with pytest.raises(RecordError, match=said):
            ProgramRecord.from_json(bad)
    with pytest.raises(ProgramError, match="cannot be written down"):
        change(builtin_program("ckpt-policy"), "lambda", "a policy made on the spot", keywords={"policy": lambda *a: 0})
