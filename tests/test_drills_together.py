"""A program drilled alone: where its own items of a step have one answer (every transpose of an MLP's train
step is a matmul's gradient), a reader who sees only the options wins by picking it, whatever the weights and
places; so `dumpgym drills SLUG` asks that step with a few items of the corpus's other programs whose answers
are the others, and says why (drills/_together.py). The blind readers are benchmarks/choices_only.py's."""
import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from deep_programs import add_deep_mlp_step, deep_mlp_step
from dumpgym import cli, drills
from dumpgym.corpus.user import load_corpus
from dumpgym.drills._together import MOST, RATIO, blind, together
from dumpgym.record.schema import ProgramRecord

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import blind_readers as br  # noqa: E402

LAYERS = 6


@pytest.fixture(scope="module")
def added(tmp_path_factory):
    """A temp corpus holding the MLP step, added as `dumpgym.add` adds it, and its records by slug."""
    folder = tmp_path_factory.mktemp("corpus")
    add_deep_mlp_step(folder, LAYERS)
    corpus = load_corpus(folder)
    return folder, {p["slug"]: ProgramRecord.from_json(p) for p in corpus["programs"]}


def _printed(capsys, *argv) -> tuple[dict, str]:
    capsys.readouterr()
    assert cli.main(list(argv)) == 0
    out, err = capsys.readouterr()
    return drills.read_pool(json.loads(out)), err


def _steps_over_the_bar(pool: dict, records: dict) -> dict[tuple[str, str], float]:
    """(kind, step) -> points over chance of the best blind reader, weighted, for every step over the bar."""
    seen = br.seen_items(pool, records)
    out = {}
    for kind in {i.kind for i in seen}:
        items = [i for i in seen if i.kind == kind]
        for step, mine, theirs in br.steps(items, br.play(items)):
            if (s := br.score(mine, theirs, weighted=True)).over > br.BAR:
                out[kind, step] = s.over
    return out


def _usual_answer(pool: dict, slug: str) -> dict[str, float]:
    """Per step of the program's `decisions` choice items, the weighted share of its most usual right option:
    what a learner drilling the program alone learns to pick (learnt from the same pool, not left out)."""
    shares: dict[str, dict[str, float]] = {}
    for i in pool["items"]:
        if i["drill"] == "decisions" and i["answer"]["form"] == "choice":
            right = i["answer"]["options"][i["answer"]["index"]]
            mine = shares.setdefault(i["step"], {})
            mine[right] = mine.get(right, 0.0) + i["weight"]
    return {step: max(by.values()) / sum(by.values()) for step, by in shares.items()}


def test_every_transpose_of_the_mlp_step_transposes_a_matmul_as_jax_traces_it(added):
    """The premise, from JAX's own jaxpr: each transpose of the step reads a dot_general's output, and the
    program's transpose items all answer the matmul gradient."""
    _, records = added
    ws = [jnp.ones((64, 64)) for _ in range(LAYERS)]
    x = jnp.ones((32, 64))
    jaxpr = jax.make_jaxpr(deep_mlp_step)(ws, x, x).jaxpr
    made_by = {id(v): e.primitive.name for e in jaxpr.eqns for v in e.outvars}
    transposes = [e for e in jaxpr.eqns if e.primitive.name == "transpose"]
    assert len(transposes) >= LAYERS - 1
    assert all(made_by.get(id(e.invars[0])) == "dot_general" for e in transposes)
    items = [i for i in drills.items_for(records["deep-mlp"]) if i.drill == "decisions" and i.step == "transpose"
             and i.answer.to_json()["form"] == "choice"]
    assert items and {i.facts["why"] for i in items} == {"matmul-grad"}


def test_the_program_alone_is_won_by_its_usual_answer(added, capsys):
    """Today's pool of the program alone (`--alone`): its transposes have one answer, and the blind readers
    beat chance by far on that step."""
    folder, records = added
    alone, err = _printed(capsys, "drills", "--corpus", str(folder), "deep-mlp", "--alone")
    assert {i["program"] for i in alone["items"]} == {"deep-mlp"} and "together" not in alone
    assert _usual_answer(alone, "deep-mlp")["transpose"] == 1.0
    assert _steps_over_the_bar(alone, records).get(("decisions", "transpose"), 0) > 0.5


def test_drilled_alone_the_program_s_category_steps_are_asked_with_other_programs(added, capsys):
    folder, records = added
    pool, err = _printed(capsys, "drills", "--corpus", str(folder), "deep-mlp")
    # The usual answer and the blind readers of the decisions steps are near chance.
    assert all(share < 0.4 for share in _usual_answer(pool, "deep-mlp").values())
    over = _steps_over_the_bar(pool, records)
    assert not {k: v for k, v in over.items() if k[0] == "decisions"}, over
    alone, _ = _printed(capsys, "drills", "--corpus", str(folder), "deep-mlp", "--alone")
    # The program's own items, every one, with its own weight; the others' are few.
    own = [i for i in pool["items"] if i["program"] == "deep-mlp"]
    assert own == alone["items"]
    others = [i for i in pool["items"] if i["program"] != "deep-mlp"]
    assert others and len(others) <= sum(MOST * len(i["answer"]["options"]) for i in own
                                         if i["answer"]["form"] == "choice") and len(others) < len(own)
    # Each step asked with others says so in one line, in the pool and on stderr.
    said = {(t["drill"], t["step"]): t for t in pool["together"]}
    assert ("decisions", "transpose") in said and "every time" in said["decisions", "transpose"]["why"]
    assert [line for line in err.splitlines() if line.startswith("dumpgym: note: ")] == [
        f"dumpgym: note: {t['why']}" for t in pool["together"]]
    assert all(t["with"] == sum(1 for i in others if (i["drill"], i.get("step")) == (t["drill"], t["step"]))
               for t in pool["together"])


def _item(program, step, index, width=4, weight=1.0, question="q"):
    options = [f"answer {k}" for k in range(width)]
    return {"drill": "made-up", "step": step, "program": program, "weight": weight, "question": f"{question} {program}",
            "answer": {"form": "choice", "options": options, "index": index}}


def test_a_step_with_one_answer_is_evened_out_by_other_programs_items():
    mine = [_item("mine", "s", 0, question=f"line {k}") for k in range(5)]
    others = [_item(f"p{k}", "s", k % 4) for k in range(12)]
    (asked,) = together(mine, others)
    assert blind(mine).accuracy == 1.0
    combined = blind([*mine, *asked.partners])
    assert combined.accuracy <= RATIO * combined.chance
    assert {p["answer"]["index"] for p in asked.partners} == {1, 2, 3}
    assert len({p["program"] for p in asked.partners}) == len(asked.partners) <= 3 * MOST


def test_a_selection_even_alone_is_asked_alone():
    mine = [_item("mine", "s", k % 4, question=f"line {k}") for k in range(8)]
    assert together(mine, [_item("p", "s", 0)]) == []


def test_a_built_in_program_alone_is_asked_with_none_of_its_own_variants(whole_corpus, tmp_path, capsys):
    """`mlp-2`, `mlp-f32` are mlp's code at other shapes and dtypes: its habits, not another program's answers."""
    pool, _ = _printed(capsys, "drills", "--corpus", str(tmp_path), "mlp")
    family = {p["slug"] for p in whole_corpus["programs"] if p.get("variant_of") == "mlp"}
    programs = {i["program"] for i in pool["items"]}
    assert family and programs - {"mlp"} and not programs & family
