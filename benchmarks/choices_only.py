"""A reader who sees only the question and the options: how well do simple strategies do, kind by kind?

    python benchmarks/choices_only.py [--pool FILE]   (default: `dumpgym drills` of the built-in corpus)

Each strategy picks an option of every `choice` item without reading the listing:
- `position-K`: always the option at place K (the best K is reported);
- `longest`, `shortest`: the option with the most (fewest) characters;
- `most-alike`: the option most like the others (mean similarity of its words to theirs): the one a
  distractor made by small edits of the answer sits in the middle of;
- `usual-answer`: the option whose text is most often right for the same kind and step, counted over
  the other items (leave one out).

It prints, per kind, chance (the mean of 1/options), each strategy's accuracy, the best one, and the
chance of ten in a row at that accuracy. The bar ("Drills that must be read") is every kind within
10 points of chance.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict


def _words(text: str) -> set[str]:
    return set(re.findall(r"[\w.%\[\]]+", text))


def _alike(a: str, b: str) -> float:
    wa, wb = _words(a), _words(b)
    return len(wa & wb) / len(wa | wb) if wa | wb else 1.0


def strategies(items: list[dict]) -> dict[str, list[int]]:
    """Each strategy's pick for every item, by index into its options."""
    right_counts: dict[tuple, Counter] = defaultdict(Counter)
    for item in items:
        a = item["answer"]
        right_counts[(item["drill"], item.get("step"))][a["options"][a["index"]]] += 1
    picks: dict[str, list[int]] = defaultdict(list)
    width = max(len(i["answer"]["options"]) for i in items)
    for item in items:
        options = item["answer"]["options"]
        n = len(options)
        for k in range(width):
            picks[f"position-{k}"].append(min(k, n - 1))
        picks["longest"].append(max(range(n), key=lambda k: (len(options[k]), -k)))
        picks["shortest"].append(min(range(n), key=lambda k: (len(options[k]), k)))
        picks["most-alike"].append(max(range(n), key=lambda k: sum(_alike(options[k], o) for j, o in enumerate(options)
                                                                    if j != k)))
        counts = right_counts[(item["drill"], item.get("step"))].copy()
        counts[options[item["answer"]["index"]]] -= 1  # leave this item out
        picks["usual-answer"].append(max(range(n), key=lambda k: (counts[options[k]], -k)))
    return picks


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pool", help="a pool printed by `dumpgym drills` (default: print one now)")
    args = parser.parse_args()
    text = open(args.pool).read() if args.pool else subprocess.run(
        [sys.executable, "-m", "dumpgym", "drills"], check=True, capture_output=True, text=True).stdout
    pool = json.loads(text)
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for item in pool["items"]:
        if item["answer"]["form"] == "choice":
            by_kind[item["drill"]].append(item)
    print(f"{'kind':<12} {'items':>5} {'chance':>7} {'best strategy':<14} {'best':>6} {'+points':>8} {'10 in a row':>12}")
    for kind, items in sorted(by_kind.items()):
        chance = sum(1 / len(i["answer"]["options"]) for i in items) / len(items)
        scores = {name: sum(p == i["answer"]["index"] for p, i in zip(picks, items)) / len(items)
                  for name, picks in strategies(items).items()}
        best = max(scores, key=scores.get)
        print(f"{kind:<12} {len(items):>5} {chance:>7.0%} {best:<14} {scores[best]:>6.0%} "
              f"{100 * (scores[best] - chance):>+8.0f} {scores[best] ** 10:>12.2%}")


if __name__ == "__main__":
    main()
