"""The blind reader who remembers the usual answer to the same question (benchmarks/blind_strategies.py,
`usual-answer-to-question`) finds a planted bias that the step's usual answer does not: each of a few
questions has its own usual answer, and the options are the same for all."""
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import blind_readers as br  # noqa: E402

OPTIONS = ["contracted", "batch", "free"]


def _item(question, index, program):
    answer = {"form": "choice", "options": OPTIONS, "index": index, "reasons": ["r"] * 3, "rules": ["x"] * 3}
    answer["reasons"][index] = answer["rules"][index] = ""
    return br.Seen("made-up", "s", program, 1.0, question, answer)


def test_the_usual_answer_to_a_question_is_found_where_the_steps_usual_answer_is_chance():
    rng = random.Random(0)
    # Question k is answered option k % 3 in four of five items: over the step, every option is as often right.
    items = [_item(f"what does axis {k} do?", k % 3 if rng.random() < 0.8 else rng.randrange(3), f"p{n % 8}")
             for n in range(240) for k in [n % 6]]
    credit = br.play(items)
    score = br.score(items, credit, weighted=True)
    assert score.best == "choice:usual-answer-to-question" and score.accuracy > 0.7
    assert score.accuracies["choice:usual-answer"] < 0.5
