"""A reader who never reads the listing, on every answer form: how well do blind strategies do, kind by kind?

    python benchmarks/blind_built_answers.py [--pool FILE] [--kinds shapes,decoder]
        (default: `dumpgym drills` of the built-in corpus, every kind)

`choices_only.py` plays the options of `choice` items; this plays what a reader sees of the built
answers too: only the question, and for a typed value nothing more, for tapped axes the chips (the
operand's rank and its label), for a tapped line how many rows the first block has. Strategies:
- `usual`: the answer most often right (by weight) for the same kind and step (and, for axes, the
  same rank), counted over the other cards (leave the item's card out, since one question asked at
  several layers is one card): a typed `32`, a tapped `{0}`, line 3;
- axes: `habit` (lhs keeps all but its last axis, rhs all but its first, as in `x @ w`), `first`,
  `last` (one axis), `kept-place` (the axis numbered as the output axis the question names);
- lines: `first-row`, `last-row`;
- choices: `position-K`, `longest`, `shortest`, `most-alike`, `odd-one-out` (word overlap with the
  other options), `usual-option` (the option most often right for the step, leave one out).

Chance is 0 for a typed value, 1/2^rank for an axis set, 1/rows for a line, 1/options for a choice.
It prints, per kind and step, chance and the best strategy's weighted accuracy; then per kind, the
best single strategy, a reader who plays each step's best one, and that reader's chance of ten in a
row. The bar ("Drills that must be read") is every kind
within 10 points of chance.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict

from dumpgym.corpus import load_builtin
from dumpgym.drills.item import resolve
from dumpgym.record import ProgramRecord


def _words(text: str) -> set[str]:
    return set(re.findall(r"[\w.%\[\]]+", text))


def _right(item: dict):
    """The answer as a comparable value, whatever its form."""
    a = item["answer"]
    return {"choice": lambda: a["options"][a["index"]], "typed": lambda: a["value"],
            "axes": lambda: tuple(a["axes"]), "line": lambda: a["line"], "lines": lambda: tuple(a["lines"])}[a["form"]]()


def _group(item: dict) -> tuple:
    a = item["answer"]
    return (item["drill"], item.get("step"), len(a["dims"]) if a["form"] == "axes" else None)


def _hits(item: dict, usual, rows: int) -> dict[str, bool]:
    """Whether each blind strategy that applies to this item's form picks its answer."""
    a, right = item["answer"], _right(item)
    out = {"usual": usual == right}
    if a["form"] == "choice":
        options, k = a["options"], len(a["options"])
        for p in range(4):
            out[f"position-{p}"] = a["index"] == min(p, k - 1)
        lengths = [len(o) for o in options]
        out["longest"], out["shortest"] = a["index"] == lengths.index(max(lengths)), a["index"] == lengths.index(min(lengths))
        words = [_words(o) for o in options]
        alike = [sum(len(words[x] & words[y]) / max(1, len(words[x] | words[y])) for y in range(k) if y != x)
                 for x in range(k)]
        out["most-alike"], out["odd-one-out"] = a["index"] == alike.index(max(alike)), a["index"] == alike.index(min(alike))
    elif a["form"] == "axes":
        r, side = len(a["dims"]), a["label"].split()[0]
        out["habit"] = right == tuple(range(r - 1) if side == "lhs" else range(1, r))
        out["first"], out["last"] = right == (0,), right == (r - 1,)
        named = re.search(r"output axis (\d+)", item["question"])
        if named:
            out["kept-place"] = right == (int(named[1]),)
    elif a["form"] in ("line", "lines"):
        if a["form"] == "line":
            out["first-row"], out["last-row"] = 1 in a["accepted"], rows in a["accepted"]
        else:
            out["first-row"], out["last-row"] = a["lines"] == [1], a["lines"] == [rows]
    return out


def _chance(item: dict, rows: int) -> float:
    a = item["answer"]
    return {"choice": lambda: 1 / len(a["options"]), "typed": lambda: 0.0, "axes": lambda: 1 / 2 ** len(a["dims"]),
            "line": lambda: len(a["accepted"]) / max(rows, 1), "lines": lambda: 1 / 2 ** max(rows, 1)}[a["form"]]()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pool", help="a pool JSON file (default: `dumpgym drills` of the built-in corpus)")
    parser.add_argument("--kinds", help="comma-separated kinds (default: all)")
    args = parser.parse_args()
    text = open(args.pool).read() if args.pool else subprocess.run(
        [sys.executable, "-m", "dumpgym", "drills"], capture_output=True, text=True, check=True).stdout
    pool = json.loads(text)
    wanted = set(args.kinds.split(",")) if args.kinds else None
    items = [i for i in pool["items"] if wanted is None or i["drill"] in wanted]
    records = {p["slug"]: p for p in load_builtin()["programs"]}
    parsed: dict[str, ProgramRecord] = {}

    def rows(item: dict) -> int:
        if item["answer"]["form"] not in ("line", "lines") or item["program"] not in records:
            return 0
        slug = item["program"]
        parsed.setdefault(slug, ProgramRecord.from_json(records[slug]))
        return len(resolve(item["context"][:1], parsed[slug])[0].split("\n"))

    counts: dict[tuple, Counter] = defaultdict(Counter)
    by_card: dict[tuple, Counter] = defaultdict(Counter)  # one card's items (one question, several layers)
    for item in items:
        counts[_group(item)][_right(item)] += item["weight"]
        by_card[(_group(item), item["card"])][_right(item)] += item["weight"]
    score: dict[tuple, Counter] = defaultdict(Counter)
    total, chance = Counter(), Counter()
    for item in items:
        w, step = item["weight"], (item["drill"], item.get("step"))
        # Leave this item's card out: the same question at another layer would hand over its answer.
        others = counts[_group(item)] - by_card[(_group(item), item["card"])]
        usual = max(others, key=lambda k: others[k]) if +others else None
        n = rows(item)
        for name, hit in _hits(item, usual, n).items():
            score[step][name] += w * hit
        total[step] += w
        chance[step] += w * _chance(item, n)
    kinds: dict[str, list] = defaultdict(lambda: [0.0, 0.0, Counter(), 0.0])
    for step in sorted(total, key=str):
        best = max(score[step].items(), key=lambda kv: kv[1])
        print(f"{step[0]:12} {str(step[1]):18} chance {chance[step] / total[step]:.2f}  best {best[0]} "
              f"{best[1] / total[step]:.2f}")
        k = kinds[step[0]]
        k[0] += total[step]
        k[1] += chance[step]
        k[2].update(score[step])
        k[3] += best[1]
    for kind, (t, c, s, per_step) in sorted(kinds.items()):
        name, hits = max(s.items(), key=lambda kv: kv[1])
        acc, mixed = hits / t, per_step / t
        print(f"KIND {kind:12} chance {c / t:.2f}  best {name} {acc:.2f}  each step's best {mixed:.2f}  "
              f"ten in a row {mixed ** 10:.4f}")


if __name__ == "__main__":
    main()
