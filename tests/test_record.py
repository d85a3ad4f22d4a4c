"""The typed record: read and written by one function each, validating every field as it reads."""
import copy
import json

import pytest

from dumpgym.corpus import BUILTIN_PATH, dumps
from dumpgym.record import Corpus, ProgramRecord, RecordError


def test_the_committed_corpus_round_trips_byte_for_byte():
    text = BUILTIN_PATH.read_text(encoding="utf-8")
    assert dumps(Corpus.from_json(json.loads(text)).to_json()) == text


def test_records_are_typed(by_slug):
    mlp = ProgramRecord.from_json(by_slug["mlp"])
    dot = mlp.eqns[0]
    assert (dot.primitive, dot.outputs[0].shape, dot.outputs[0].dtype) == ("dot_general", (64, 512), "bfloat16")
    assert mlp.xray[0].eqn == 0 and mlp.hlo.instructions[0].line >= 1


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
    "a compiled line for no equation": (lambda r: r["hlo"]["fusions"][0].update(eqns=[999]),
                                        "hlo.fusions[0].eqns: no equation 999"),
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
