"""The typed record: read and written by one function each, validating every field as it reads."""
import copy
import dataclasses
import json
import re

import pytest

from dumpgym.corpus.builtin import BUILTIN_PATH, dumps
from dumpgym.record.schema import Aval, Corpus, EqnFact, Literal, ProgramRecord, RecordError
from dumpgym.record.typedjson import TextAhead, TypedRecord, made, record_text


def test_the_committed_corpus_round_trips_byte_for_byte():
    text = BUILTIN_PATH.read_text(encoding="utf-8")
    assert dumps(Corpus.from_json(json.loads(text)).to_json()) == text


@pytest.mark.parametrize("slug", ["train-step", "decode-loop"])
def test_a_record_written_from_fields_made_ahead_is_its_whole_text(slug, by_slug):
    """What `dumpgym add` writes from the text of the equations and the x-ray made while XLA compiles is the
    record's own JSON, byte for byte; a field whose value was replaced after is written as it is now."""
    record = ProgramRecord.from_json(by_slug[slug])
    whole = json.dumps(record.to_json(), ensure_ascii=False, separators=(",", ":"))
    ahead = TextAhead()
    ahead.make(record.eqns, record.xray, record.stablehlo_ops, record.lowered_to_nothing)
    assert ahead.text(record) == whole
    assert TextAhead().text(record) == whole
    changed = dataclasses.replace(record, xray=record.xray[:1], jax_version="0.0.1", added=False)
    assert ahead.text(changed) == json.dumps(changed.to_json(), ensure_ascii=False, separators=(",", ":"))


def test_records_are_typed(by_slug):
    mlp = ProgramRecord.from_json(by_slug["mlp"])
    dot = mlp.eqns[0]
    assert (dot.primitive, dot.outputs[0].shape, dot.outputs[0].dtype) == ("dot_general", (64, 512), "bfloat16")
    assert mlp.xray[0].eqn == 0 and mlp.compiled["cpu"].instructions[0].line >= 1


def _absorbing(record: dict) -> dict:
    """The first instruction of the CPU layer that absorbed an equation XLA folded into it."""
    return next(i for i in record["compiled"]["cpu"]["instructions"] if i.get("absorbed"))


def _damage(record: dict, edit) -> dict:
    record = copy.deepcopy(record)
    edit(record)
    return record


DAMAGE = {
    "empty object": (lambda r: r.clear(), "the record: missing field 'slug'"),
    "xray is a string": (lambda r: r.update(xray="oops"), "xray: expected a list, got a string"),
    "a slug with a space": (lambda r: r.update(slug="Bad Slug"), "slug: 'Bad Slug' is not a slug"),
    "a slug that climbs": (lambda r: r.update(slug="../../x"), "slug: '../../x' is not a slug"),
    "an unknown field": (lambda r: r.update(extra=1), "the record: unknown field 'extra'"),
    "a shape of strings": (lambda r: r["eqns"][0]["outputs"][0].update(shape=["64"]),
                           "eqns[0].outputs[0].shape[0]: expected a whole number, got a string"),
    "a group for no equation": (lambda r: r["xray"][0].update(eqn=999), "xray[0].eqn: no equation 999"),
    "a line past the text": (lambda r: r["xray"][0].update(stablehlo_lines=[10_000]),
                             "xray[0].stablehlo_lines: line 10000 is outside the StableHLO"),
    "ids out of order": (lambda r: r["eqns"][1].update(id=7), "eqns[1].id: 7, expected 1"),
    "a bool for a count": (lambda r: r["xray_stats"].update(equations=True),
                           "xray_stats.equations: expected a whole number, got true or false"),
    "a compiled line for no equation": (lambda r: r["compiled"]["cpu"]["fusions"][0].update(eqns=[999]),
                                        "compiled.cpu.fusions[0].eqns: no equation 999"),
    "an operand on no instruction": (lambda r: r["compiled"]["cpu"]["instructions"][3].update(operands=[1]),
                                     "compiled.cpu.instructions[3].operands: no instruction on line 1"),
    "a shape past the table": (lambda r: r["compiled"]["cpu"]["instructions"][0].update(shape=10_000),
                               "compiled.cpu.instructions[0].shape: no shape 10000"),
    "a call of no computation": (lambda r: r["compiled"]["tpu"]["instructions"][0].update(calls=["nowhere"]),
                                 "compiled.tpu.instructions[0].calls: no computation 'nowhere'"),
    "a fold into XLA's own": (lambda r: r["compiled"]["cpu"]["instructions"][0].update(absorbed=[{"eqn": 0, "rule": 2}]),
                             "compiled.cpu.instructions[0].absorbed[0]: equation 0 by rule 2 beside eqns []"),
    "a fold by no rule": (lambda r: _absorbing(r).update(absorbed=[{"eqn": 0, "rule": 5}]),
                          "compiled.cpu.instructions["),
    "a donation to no result": (lambda r: r["lowered"]["main"]["args"][0].update(aliasing_output=99),
                                "lowered.main.args[0].aliasing_output: no result 99"),
    "a mesh past the text": (lambda r: r["lowered"].update(meshes=[{"line": 10_000, "axes": [["x", 8]]}]),
                             "lowered.meshes[0].line: line 10000 is outside the StableHLO"),
}


@pytest.mark.parametrize("label", list(DAMAGE))
def test_a_damaged_record_names_the_field(label, by_slug):
    edit, message = DAMAGE[label]
    with pytest.raises(RecordError) as caught:
        ProgramRecord.from_json(_damage(by_slug["mlp"], edit))
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_a_corpus_with_a_slug_twice_is_refused(corpus):
    twice = {**corpus, "programs": [*corpus["programs"], corpus["programs"][0]]}
    with pytest.raises(RecordError, match="'mlp' is used twice"):
        Corpus.from_json(twice)


# -- what the drills read off the typed record ---------------------------------------------------

def test_avals_print_in_the_jaxprs_notation(by_slug):
    mlp = ProgramRecord.from_json(by_slug["mlp"])
    dot = mlp.eqns[0]
    assert [str(x) for x in dot.inputs] == ["bf16[64,128]", "bf16[128,512]"]
    assert str(dot.outputs[0]) == "bf16[64,512]" and dot.outputs[0].rank == 2
    assert str(Aval((), "float32")) == "f32[]" and Aval((), "float32").rank == 0
    assert str(Literal("0.5", "bfloat16")) == "0.5:bf16[]"


def test_weak_typing_is_not_part_of_the_printed_aval():
    weak, strong = Aval((4,), "float32", weak_type=True), Aval((4,), "float32")
    assert weak != strong and weak.same(strong) and str(weak) == str(strong)
    assert not strong.same(Aval((4,), "int32"))
    assert strong.with_shape([4, 1]) == Aval((4, 1), "float32")
    assert strong.with_dtype("bfloat16") == Aval((4,), "bfloat16")


def test_an_equation_splits_its_inputs_into_arrays_and_literals(by_slug):
    mul = next(e for e in ProgramRecord.from_json(by_slug["mlp"]).eqns if e.primitive == "mul" and e.literals)
    assert mul.literals == (Literal("0.044677734375", "bfloat16"),)
    assert mul.arrays == (Aval((64, 512), "bfloat16"),)
    assert mul.input_avals == (Aval((), "bfloat16"), Aval((64, 512), "bfloat16"))


def _names_a_hoisted_block(jaxpr: str, eqn: EqnFact) -> bool:
    """Whether the equation's printed params name a sub-jaxpr the printer hoisted into `let NAME = { ... } in`."""
    hoisted = set(re.findall(r"^let (\w+) = \{", jaxpr, re.M))
    first, last = eqn.jaxpr_lines
    values = re.findall(r"\b(?!name=)\w+=\(?([\w, ]+)\)?", "\n".join(jaxpr.splitlines()[first - 1:last]))
    return any(set(re.findall(r"\w+", v)) & hoisted for v in values)


def test_has_subjaxpr_reads_the_placeholder_in_any_param(corpus):
    # A hoisted block shared by several equations is printed once and its equations name one of them
    # as parent (embed-xent's two scatter-adds share `jaxpr`, their reducer); the others hold it too.
    for program in corpus["programs"]:
        record = ProgramRecord.from_json(program)
        parents = {e.parent for e in record.eqns}
        for e in record.eqns:
            holds = e.id in parents or _names_a_hoisted_block(program["jaxpr"], e)
            assert e.has_subjaxpr == holds, (program["slug"], e.primitive)
    branches = EqnFact(0, None, "cond", {"branches": ["<jaxpr>", "<jaxpr>"]}, (), (), (1, 1))
    assert branches.has_subjaxpr


def test_integer_list_params_and_absent_params():
    eqn = EqnFact(0, None, "reduce_sum", {"axes": [1], "out_sharding": None, "flag": [True]}, (), (), (1, 1))
    assert eqn.ints("axes") == (1,)
    assert eqn.ints("flag") is None and eqn.ints("out_sharding") is None and eqn.ints("missing") is None
    assert eqn.param("axes") == [1] and eqn.param("missing") is None


def test_every_committed_record_is_written_by_the_encoder_as_its_json_text(corpus):
    """`record_text` (JSON's encoder asking each record for its fields) writes every record of the committed
    corpus, and each of its fields, as `json.dumps` writes the record's `to_json()`, byte for byte; an object
    that is no record is refused as `json.dumps` refuses it."""
    for record in Corpus.from_json(corpus).programs:
        assert record_text(record) == json.dumps(record.to_json(), ensure_ascii=False, separators=(",", ":"))
        for field in ("eqns", "xray", "compiled", "lowered"):
            value = getattr(record, field)
            expected = json.dumps(record.to_json()[field], ensure_ascii=False, separators=(",", ":"))
            assert record_text(value) == expected
    with pytest.raises(TypeError):
        record_text((object(),))


# -- typedjson's readers, on a record of every form they read -------------------------------------

@dataclasses.dataclass(frozen=True)
class _Inner(TypedRecord):
    n: int


@dataclasses.dataclass(frozen=True)
class _EveryForm(TypedRecord):
    pair: tuple[int, str]
    either: int | str
    maybe: _Inner | None
    named: dict[str, tuple[_Inner, ...]]
    free: dict
    flag: bool = False


GOOD = {"pair": [1, "a"], "either": "x", "maybe": None, "named": {"k": [{"n": 1}, {"n": 2}]}, "free": {"any": [1]}}


def test_every_form_reads_and_writes_back():
    record = _EveryForm.from_json(GOOD)
    assert record == _EveryForm((1, "a"), "x", None, {"k": (_Inner(1), _Inner(2))}, {"any": [1]})
    assert record.to_json() == {**GOOD, "flag": False}


def test_a_record_made_without_its_init_is_the_one_its_init_makes():
    """`made` gives the record `__init__` gives, its defaults filled in where not given (a factory's made afresh
    for each), and refuses a record without a field that has no default, as `__init__` does."""
    from dumpgym.record.schema import Instruction

    assert made(_EveryForm, pair=(1, "a"), either=2, maybe=None, named={}, free={}) == _EveryForm((1, "a"), 2, None, {}, {})
    given = dict(line=3, name="add.1", opcode="add", computation="main", eqns=(4,), via="tag")
    one, two = made(Instruction, **given), made(Instruction, **given)
    assert one == Instruction(**given) and vars(one) == vars(Instruction(**given))
    assert one.tail == {} and one.tail is not two.tail
    with pytest.raises(TypeError):
        made(Instruction, line=3, name="add.1")


@pytest.mark.parametrize("edit, message", [
    (dict(pair=[1, "a", 2]), "pair: expected 2 items, got 3"),
    (dict(pair=[1, 2]), "pair[1]: expected a string, got a whole number"),
    (dict(either=[1]), "either: a list is none of the allowed forms"),
    (dict(either=True), "either: true or false is none of the allowed forms"),
    (dict(maybe={"n": "1"}), "maybe.n: expected a whole number, got a string"),
    (dict(maybe=3), "maybe: expected an object, got a whole number"),
    (dict(named={"k": [{"n": 1}, {"m": 2}]}), "named.k[1]: unknown field 'm'"),
    (dict(named={"k": [{"n": 1}, {}]}), "named.k[1]: missing field 'n'"),
    (dict(named={"k": {"n": 1}}), "named.k: expected a list, got an object"),
    (dict(free=[]), "free: expected an object, got a list"),
    (dict(flag=1), "flag: expected true or false, got a whole number"),
])
def test_a_wrong_value_is_named_by_its_path(edit, message):
    with pytest.raises(RecordError) as caught:
        _EveryForm.from_json({**GOOD, **edit}, "programs[3]")
    assert str(caught.value) == f"programs[3].{message}"


def test_a_wrong_top_level_value_names_the_record():
    with pytest.raises(RecordError, match="^the record: expected an object, got a list$"):
        _EveryForm.from_json([])


# --- records written before the compiled facts existed ---

_LAYER_FACTS = ("computations", "shapes", "buffers", "printed_opcodes", "entry_parameters", "aliases", "replica_groups",
                "while_counters")
_INSTRUCTION_FACTS = ("shape", "operands", "calls", "to_apply", "printed_opcode")
_NEEDS_FACTS = {"fusions", "layouts", "units", "buffers", "partitioner", "kernels", "cost"}


def _without_facts(record: dict) -> dict:
    """A program's record as the release before the compiled facts wrote it."""
    record = copy.deepcopy(record)
    record.pop("lowered")
    for layer in record.get("compiled", {}).values():
        for field in _LAYER_FACTS:
            layer.pop(field, None)
        for ins in layer["instructions"]:
            for field in _INSTRUCTION_FACTS:
                ins.pop(field, None)
    return record


def test_a_record_written_before_the_compiled_facts_reads_back_as_it_was(corpus):
    old = [_without_facts(p) for p in corpus["programs"]]
    records = [ProgramRecord.from_json(p, p["slug"]) for p in old]
    assert [r.to_json() for r in records] == old
    from dumpgym.site.files import compiled_ops

    for r in records:
        assert r.lowered is None
        for layer in r.compiled.values():
            assert not layer.has_facts and compiled_ops(layer) == {}  # no opcode link, no error


def test_a_record_of_an_earlier_release_lists_folded_equations_as_its_own_and_reads(corpus):
    """Before `absorbed`, an instruction listed the equations folded into it in `eqns`: such a record still
    reads, and what each instruction computes is the same either way."""
    folded = 0
    for p in corpus["programs"]:
        old = copy.deepcopy(p)
        for layer in old.get("compiled", {}).values():
            for ins in layer["instructions"]:
                absorbed = ins.pop("absorbed", [])
                folded += len(absorbed)
                ins["eqns"] = sorted({*ins["eqns"], *(a["eqn"] for a in absorbed)})
        now, before = ProgramRecord.from_json(p, p["slug"]), ProgramRecord.from_json(old, p["slug"])
        for target, layer in before.compiled.items():
            assert [i.computed_eqns for i in layer.instructions] == \
                [i.computed_eqns for i in now.compiled[target].instructions]
            assert all(not i.absorbed for i in layer.instructions)
    assert folded  # the committed corpus has equations folded into others' instructions


def test_a_record_without_the_compiled_facts_gets_fewer_drills_not_an_error(corpus, pool):
    """No JAX at read time: the kinds that read the compiled or lowered facts ask nothing of an old record;
    the others ask what they always did."""
    from collections import Counter

    from dumpgym.drills import build_pool

    old = build_pool({**corpus, "programs": [_without_facts(p) for p in corpus["programs"]]})
    before, now = Counter(i["drill"] for i in old["items"]), Counter(i["drill"] for i in pool["items"])
    assert {k for k in _NEEDS_FACTS if before[k]} == set()
    assert all(now[k] for k in _NEEDS_FACTS)
    partly = ("loops", "decoder")  # kinds of which only some questions read the compiled facts
    assert {k: n for k, n in before.items() if k not in partly} == {k: n for k, n in now.items() if k not in _NEEDS_FACTS
                                                                    and k not in partly}
    assert before["loops"] == now["loops"] - sum(1 for i in pool["items"] if i.get("step") == "trips")
    # The decoder reads a compiled dot's operand types from the record's instruction facts.
    assert before["decoder"] == now["decoder"] - sum(1 for i in pool["items"] if i["drill"] == "decoder"
                                                     and i["layer"] in ("cpu", "gpu"))



def _without_printed_facts(record: dict) -> dict:
    """A program's record as the release before the printed facts (binders, operands, bodies, dots, callees,
    kernels) wrote it."""
    record = copy.deepcopy(record)
    record.pop("arg_binders", None)
    for e in record["eqns"]:
        e.pop("binders", None)
        e.pop("operand_names", None)
        e.pop("bodies", None)
        e.pop("partition_specs", None)
    for op in record["stablehlo_ops"]:
        op.pop("dot", None)
        op.pop("callee", None)
    for layer in record.get("compiled", {}).values():
        for ins in layer["instructions"]:
            ins.pop("custom_call_target", None)
            ins.pop("backend_kind", None)
            if "dot" in ins:
                ins["dot"].pop("printed_end", None)
    return record


def test_a_record_written_before_the_printed_facts_reads_back_and_its_dots_are_not_decoded(corpus, pool):
    from collections import Counter

    from dumpgym.drills import build_pool

    old = [_without_printed_facts(p) for p in corpus["programs"]]
    assert old != corpus["programs"]
    assert [ProgramRecord.from_json(p, p["slug"]).to_json() for p in old] == old
    before = Counter(i["drill"] for i in build_pool({**corpus, "programs": old})["items"])
    assert before["decoder"] == 0 < Counter(i["drill"] for i in pool["items"])["decoder"]
