"""A dumped module's record in a traced program's shape (`add --dump`): its equations read from the dumped
jaxpr, its x-ray linking them to StableHLO op lines by structure, its compiled instructions reaching them.
Judged against `dumpgym add` of the same function (a trace here, whose links are exact by construction):
equal equations, at least 90% of the op lines each equation emitted reaching it, no link to another."""
import json

import pytest

from dump_programs import load, make_dump, module_name
from dump_reach import own_lines as _own_lines, twins as _twins
from test_dumpfolder import element_makers
from dumpgym.corpus.pipeline import program_record
from dumpgym.dumps.folder import read_folder
from dumpgym.dumps.record import module_record
from dumpgym.ir.jaxpr_text import jaxpr_eqn_facts
from dumpgym.ir.parse import parse_hlo
from dumpgym.record.schema import JAXPR_PLACEHOLDER, Literal, ProgramRecord
from dumpgym.record.targets import CPU

# Loops, a cond, a custom VJP with a jit inside, jits JAX hoists (`jnp.var`'s), library calls making many
# ops on one line (`jax.nn.gelu`), a Python loop of one primitive: the shapes structure must get right.
# Beside them: slices and pads of an associative scan on one line, a shard_map, a partitioned backward
# pass, donation; and dropout, judged for wrong links only: threefry's ops inside `random_bits` carry names
# of no equation of the jaxpr, so they are left unlinked.
NAMES = ("basic", "repeated", "scan_rnn", "cond_branch", "custom_vjp_grad", "mlp", "layernorm", "assoc_scan",
         "sharded", "fsdp_step", "sgd", "dropout")
PRECISION_ONLY = ("dropout",)


@pytest.fixture(scope="module")
def dumped(tmp_path_factory):
    folder = read_folder(make_dump(tmp_path_factory.mktemp("dump") / "cpu", list(NAMES)))
    out = {}
    for name in NAMES:
        module = next(m for m in folder.modules if m.name == module_name(name))
        out[name] = (module, module_record(module, f"dump-{module.slug}", (str(folder.paths[0]),)),
                     program_record(load(name), targets=(CPU,)))
    return out


def _same_literal(a: Literal, b: Literal) -> bool:
    import math

    x, y = float(a.literal), float(b.literal)
    return a.dtype == b.dtype and (x == y or (math.isnan(x) and math.isnan(y)))


@pytest.mark.parametrize("name", NAMES)
def test_the_equations_read_from_the_text_are_the_traced_ones(dumped, name):
    module, record, traced = dumped[name]
    twins = _twins(record.eqns, traced.eqns)
    assert len(twins) >= len(traced.eqns) - 3  # all but the dead code the trace dropped
    same_text = record.jaxpr.rstrip() == traced.jaxpr.rstrip()
    for e in record.eqns:
        if e.id not in twins:
            continue
        t = traced.eqns[twins[e.id]]
        assert e.primitive == t.primitive
        assert len(e.outputs) == len(t.outputs) and all(a.same(b) for a, b in zip(e.outputs, t.outputs))
        assert len(e.inputs) == len(t.inputs)
        for a, b in zip(e.inputs, t.inputs):
            assert type(a) is type(b)
            assert a.same(b) if not isinstance(a, Literal) else _same_literal(a, b)
        for key, value in e.params.items():  # what the text holds, as the trace has it
            assert value == t.params[key], (e.primitive, key)
        if e.primitive == "dot_general":
            assert e.params["dimension_numbers"] == t.params["dimension_numbers"]
        assert (e.parent is None) == (t.parent is None)
        if e.parent is not None:
            assert twins.get(e.parent) == t.parent
        if same_text:
            assert e.jaxpr_lines == t.jaxpr_lines


@pytest.mark.parametrize("name", NAMES)
def test_the_record_is_valid_and_reads_back(dumped, name):
    _module, record, _traced = dumped[name]
    again = ProgramRecord.from_json(record.to_json())
    again.check("record")
    assert again == record
    assert record.eqns and record.xray


def _related(ours: set, theirs: set, traced) -> bool:
    """Whether an equation of `ours` is one of `theirs`, or holds or is held by one: a container computes
    what its body does (XLA names what it inlined from a `jit` after the call; the dump may know only the
    container, the trace the equation inside, or the other way round)."""
    for e in ours - {None}:
        if {e, *(a.id for a in traced.ancestors(traced.eqns[e]))} & theirs:
            return True
        if any(e in {a.id for a in traced.ancestors(traced.eqns[t])} for t in theirs):
            return True
    return False


def _judged(name, record, traced) -> tuple[int, int]:
    """(op lines reaching the equation that emitted them, op lines the trace gives an equation), asserting that
    no line is given another equation: a line in a container's group alone (the dump cannot say which of
    its body's equations made it) must be one of its body's."""
    twins = _twins(record.eqns, traced.eqns)
    assert record.stablehlo == traced.stablehlo  # so lines are compared as lines (their content is equal)
    truth = {line: e for e, lines in _own_lines(traced).items() for line in lines}
    reached = 0
    for e, lines in _own_lines(record).items():
        for line in lines:
            said = twins.get(e)
            if truth.get(line) == said:
                reached += 1
                continue
            inside = truth.get(line) is not None and said in {a.id for a in traced.ancestors(traced.eqns[truth[line]])}
            assert inside, (name, e, record.stablehlo.splitlines()[line - 1])
    return reached, len(truth)


def test_ninety_percent_of_each_equations_op_lines_reach_it_and_none_another(dumped):
    reached = total = 0
    for name in NAMES:
        _module, record, traced = dumped[name]
        got, out_of = _judged(name, record, traced)
        if name not in PRECISION_ONLY:
            reached, total = reached + got, total + out_of
    assert reached >= 0.9 * total, f"{reached} of {total} op lines reach their equation"


@pytest.mark.parametrize("name", NAMES)
def test_compiled_instructions_reach_equations_the_trace_agrees_with(dumped, name):
    module, record, traced = dumped[name]
    layer, truth = record.compiled[module.backend], traced.compiled["cpu"]
    twins = _twins(record.eqns, traced.eqns)
    theirs = {i.name: set(i.computed_eqns) for i in truth.instructions}  # folded equations too
    linked = [i for i in layer.instructions if i.eqns]
    assert linked and all(i.via == "inferred" for i in linked)
    assert {i.via for i in layer.instructions if not i.eqns} <= {"none"}
    agreed = 0
    for ins in linked:
        if theirs.get(ins.name):  # an instruction of the same name that the trace tied to equations
            assert _related({twins.get(e) for e in ins.eqns}, theirs[ins.name], traced), \
                (name, ins.name, ins.eqns, theirs[ins.name])
            agreed += 1
    assert agreed
    for ins in layer.instructions:  # every equation's lines hold its instructions, and a container its body's
        for e in ins.eqns:
            assert ins.line in layer.lines_by_eqn[str(e)]
            for ancestor in record.ancestors(record.eqns[e]):
                assert ins.line in layer.lines_by_eqn[str(ancestor.id)]
    fused = {f.name: set(f.eqns) for f in layer.fusions}
    for f in layer.fusions:
        members = [i for i in layer.instructions if i.computation in next(
            x.calls for x in layer.instructions if x.name == f.name)]
        assert set().union(*(set(i.eqns) for i in members if i.opcode != "fusion")) <= fused[f.name]


def test_what_the_text_does_not_hold_is_left_out():
    text = ("{ lambda ; a:f32[3]. let\n"
            "    b:f32[3] = custom_jvp_call[name=f jvp=<function g at 0x1> call_jaxpr={ lambda ; c:f32[3]. let\n"
            "        d:f32[3] = sin c in (d,) } symbolic_zeros=False] a\n"
            "    e:f32[3] = mul b z\n"
            "  in (e,) }")
    eqns = jaxpr_eqn_facts(text)
    assert [e.primitive for e in eqns] == ["custom_jvp_call", "sin", "mul"]
    # The printer's `name=` is none of custom_jvp_call's params; `jvp=<function ...>` is not plain.
    assert eqns[0].params == {"call_jaxpr": JAXPR_PLACEHOLDER, "symbolic_zeros": False}
    assert eqns[1].parent == 0 and eqns[1].jaxpr_lines == (3, 3) and eqns[0].jaxpr_lines == (2, 3)
    assert eqns[2].inputs == ()  # `z` is bound nowhere: no input is made up
    assert jaxpr_eqn_facts("a:b:c:d " * 50) is None
    assert jaxpr_eqn_facts("{ lambda ; a:f32[1]. let b:f32[1] = x[k=" + "(" * 5000 + "] a in (b,) }") is None


def test_open_shows_the_dumps_modules_as_programs_of_the_gym_in_front(dumped, tmp_path):
    import json

    from dumpgym.dumps.record import shown_records
    from dumpgym.serve.server import Site

    module = dumped["scan_rnn"][0]
    folder = read_folder(module.files["jaxpr"].parent)
    records, notes = shown_records(folder)
    assert not notes and {r.slug for r in records} == {f"dump-{m.slug}" for m in folder.modules if not m.helper}
    assert all(r.added for r in records)
    site = Site.build(tmp_path / "corpus", shown=tuple(records))
    index = site.get("/index.html")[2].decode()
    pick = index.split("data-xray-pick", 1)[1]
    first_builtin = pick.find('value="mlp"')
    assert all(0 <= pick.find(f'value="{r.slug}"') < first_builtin for r in records)
    slug = f"dump-{module.slug}"
    status, _, body = site.get(f"/data/programs/{slug}.json")
    program = json.loads(body)
    assert status == 200 and program["eqns"] and program["xray"]
    assert site.get(f"/data/listings/{slug}.json")[0] == 200
    assert site.get(f"/data/compiled/{module.backend}/{slug}.json")[0] == 200
    # The module's old page is its program in the x-ray now: a link kept from then leads there.
    status, headers, _ = site.get(f"/dump/{module.slug}.html")
    assert status == 302 and headers["Location"] == f"/?xray={slug}#xray"
    # What only the dump says comes with the program: the files it was read from, as they are.
    assert {f["path"] for f in program["dump"]["files"]} >= {str(p) for p in module.files.values()}


@pytest.mark.needs_tpu
def test_a_tpu_dumps_record_reaches_the_equations_as_the_trace_does(tmp_path):
    """libtpu's dump of programs compiled without a TPU: the same bar, the record valid, its TPU layer's
    instructions reaching equations the trace agrees with."""
    from dumpgym.record.targets import Target

    names = ("basic", "scan_rnn", "cond_branch", "mlp", "layernorm")
    folder = read_folder(make_dump(tmp_path / "tpu", list(names), "tpu"))
    reached = total = agreed = 0
    for name in names:
        module = next(m for m in folder.modules if m.name == module_name(name))
        record = module_record(module, f"dump-{module.slug}", (str(folder.paths[0]),))
        ProgramRecord.from_json(record.to_json()).check("record")
        traced = program_record(load(name), targets=(Target("tpu"),))
        twins = _twins(record.eqns, traced.eqns)
        got, out_of = _judged(name, record, traced)
        reached, total = reached + got, total + out_of
        theirs = {i.name: set(i.computed_eqns) for i in traced.compiled["tpu"].instructions}
        # A get-tuple-element of a multi-output fusion carries the fusion's tag, whichever element it takes: it
        # is what made its element.
        text = traced.compiled["tpu"].text
        for gte, maker in element_makers(text, parse_hlo(text, folder.paths[0])).items():
            theirs[gte] = theirs.get(maker, set())
        for ins in record.compiled["tpu"].instructions:
            if ins.eqns and theirs.get(ins.name):
                assert _related({twins.get(e) for e in ins.eqns}, theirs[ins.name], traced), (name, ins.name)
                agreed += 1
    assert reached >= 0.9 * total and agreed, (reached, total, agreed)


def test_open_leaves_out_a_module_too_long_to_link_at_start_and_says_so(dumped, monkeypatch):
    from dumpgym.dumps import record as dump_record

    folder = read_folder(dumped["basic"][0].files["jaxpr"].parent)
    monkeypatch.setattr(dump_record, "SHOWN_MAX_LINES", 1)
    records, notes = dump_record.shown_records(folder)
    users = [m for m in folder.modules if not m.helper]
    assert not records and len(notes) == len(users)
    assert all("longer than 1 lines" in note and "add --dump" in note for note in notes)


def test_open_makes_the_first_modules_before_it_serves_and_the_rest_while_it_serves(dumped, tmp_path, monkeypatch):
    """A folder of hundreds of modules, or one of a big train step, took `open` as long to start as making
    every module's program (500 small modules: 15 s here). It makes the first ones, in the index's order, up
    to a budget of optimised lines, and the rest in a thread after the URL, swapped in when made."""
    import time

    from dumpgym.dumps import record as dump_record
    from dumpgym.serve import server as serve

    folder = read_folder(dumped["scan_rnn"][0].files["jaxpr"].parent)
    whole, notes = dump_record.shown_records(folder)
    assert len(whole) >= 2 and not notes
    # The first (the biggest) is made before serving whatever the budget: `open` lands on it.
    first, notes, later = dump_record.shown_in_two(folder, first_lines=0)
    assert [r.slug for r in first] == [whole[0].slug] and not notes and later is not None
    rest, notes = later()
    assert [r.to_json() for r in first + rest] == [r.to_json() for r in whole] and not notes
    lines = [m.text("hlo_after").count("\n") for m in folder.shown() if not m.helper]
    first, _, later = dump_record.shown_in_two(folder, first_lines=lines[0])
    assert [r.slug for r in first] == [whole[0].slug] and [r.slug for r in later()[0]] == [r.slug for r in whole[1:]]
    assert dump_record.shown_in_two(folder, first_lines=sum(lines))[2] is None  # nothing left for later

    # Served: the first program at once, the others on a reload once made, and the gym says so.
    first, _, later = dump_record.shown_in_two(folder, first_lines=lines[0])
    corpus_dir = tmp_path / "corpus"
    # The drill items of the swapped-in gym are another test's matter: a thread making them would outlive
    # this test and run inside the next one in this process.
    finishing = []
    monkeypatch.setattr(serve, "_finish_later", lambda server, rest, *more: finishing.append(rest))
    site, _ = serve.Site.start(corpus_dir, shown=tuple(first))
    server = serve.make_server(site, "127.0.0.1", 0)
    try:
        assert server.site.get(f"/data/programs/{whole[1].slug}.json")[0] == 404
        showing = [tuple(first)]
        serve._show_later(server, corpus_dir, later, [0], showing)
        for _ in range(600):
            if server.site.get(f"/data/programs/{whole[1].slug}.json")[0] == 200:
                break
            time.sleep(0.1)
        for record in whole:
            status, _, body = server.site.get(f"/data/programs/{record.slug}.json")
            assert status == 200 and json.loads(body)["slug"] == record.slug
        assert [r.slug for r in showing[0]] == [r.slug for r in whole]
        said = "was made a program" if len(whole) == 2 else "were made programs"
        assert f"{said} of the gym while it ran" in server.site.get("/index.html")[2].decode()
    finally:
        server.server_close()
