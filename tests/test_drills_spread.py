"""The spread of a step's answers over the built-in programs (drills/_spread.py): what it counts, and the
weights it makes."""
from collections import defaultdict

import pytest

from dumpgym.drills import kinds
from dumpgym.drills._spread import answer_steps, builtin_answers, count_answers, spread_weight
from dumpgym.drills.answer import AxisSet, axes_key
from dumpgym.record.schema import ProgramRecord


def _key(item) -> str:
    return axes_key(item.answer.axes) if isinstance(item.answer, AxisSet) else item.answer.value


@pytest.fixture(scope="module")
def made(whole_corpus):
    """(kind/step, answer) -> the summed weight and the programs of the built-in items that give it, each kind
    made and weighted as the pool makes it."""
    weight, programs = defaultdict(float), defaultdict(set)
    for k, program in enumerate(whole_corpus["programs"]):
        record = ProgramRecord.from_json(program, f"programs[{k}]")
        for name in {step.split("/")[0] for step in answer_steps}:
            kind = kinds()[name]
            items = kind.make(record)
            for item, w in zip(items, kind.capped(items)):
                if f"{name}/{item.step}" in answer_steps:
                    weight[f"{name}/{item.step}", _key(item)] += w
                    programs[f"{name}/{item.step}", _key(item)].add(record.slug)
    return weight, programs


def test_the_registered_steps_are_the_typed_and_tapped_ones_the_blind_reader_beat():
    kinds()
    assert set(answer_steps) == {"decoder/contracted-size", "layouts/padded-shape", "loops/trips",
                                 "partitioner/group-axis"}


def test_the_spread_is_the_number_of_built_in_programs_whose_items_give_each_answer(made):
    _, programs = made
    assert builtin_answers() == {key: len(slugs) for key, slugs in programs.items()}


def test_the_spread_counted_afresh_is_the_one_read(whole_corpus):
    kinds()
    records = [ProgramRecord.from_json(p, f"programs[{k}]") for k, p in enumerate(whole_corpus["programs"])]
    assert count_answers(records) == builtin_answers()


def test_an_answer_weighs_the_steps_typical_spread_over_its_own():
    spread = builtin_answers()
    for step in answer_steps:
        counts = [n for (s, _), n in spread.items() if s == step]
        usual = max((n, key) for (s, key), n in spread.items() if s == step)
        assert spread_weight(step, usual[1]) == pytest.approx(sum(counts) / len(counts) / usual[0])
        assert spread_weight(step, "an answer no program gives") == pytest.approx(sum(counts) / len(counts))


def test_no_answer_holds_much_of_its_steps_weight_over_the_built_in_pool(made):
    """Many small models share a size (`16` products, a `[16,128]` tile), and every two-axis mesh has collectives
    over its last axis: weighted by their spread, no answer is right in a third of the step's weight."""
    weight, _ = made
    for step in answer_steps:
        shares = {key: w for (s, key), w in weight.items() if s == step}
        assert max(shares.values()) < sum(shares.values()) / 3, (step, sorted(shares.items(), key=lambda kv: -kv[1])[:3])
