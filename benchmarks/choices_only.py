"""A reader who sees only the question and the options: how well do blind strategies do, kind by kind?

    python benchmarks/choices_only.py [--pool FILE] [--corpus FILE] [--no-steps]

Plays every blind reader (benchmarks/blind_strategies.py, the table `STRATEGIES` of blind_items.py:
for `choice` items place, length, likeness to the other options, overlap with the question, numbers,
the usual answer of the step or of the same question and a learned classifier; for `typed` the usual value and values copied from the question; for `line`
and `lines` first, middle and last rows and the operations usually right; for `axes` the usual set and
the first, last, largest axes) on a `dumpgym.drills/2` pool, by default the one `dumpgym drills` prints
now. Line items show rows of a listing, read from `--corpus` (a `dumpgym export`; by default one
printed now).

Prints per kind, then per step: items, programs, chance, the best strategy, its accuracy, points over
chance and the chance of ten in a row at that accuracy; weighted by item `weight` (as the page draws
items) and unweighted. Habits (the usual answer) are learnt leave one program out. The bar ("Drills
that must be read") is every kind within 10 points of chance, weighted; tests/test_drills_readable.py
holds it.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import defaultdict

from blind_readers import BAR, play, score, seen_items, steps


def _printed(*argv: str) -> dict:
    return json.loads(subprocess.run([sys.executable, "-m", "dumpgym", *argv], check=True,
                                     capture_output=True, text=True).stdout)


def _records(corpus: dict) -> dict:
    from dumpgym.record.schema import ProgramRecord

    return {p["slug"]: ProgramRecord.from_json(p, f"programs[{k}]") for k, p in enumerate(corpus["programs"])}


def _row(label: str, weighted, unweighted) -> str:
    flag = "!" if weighted.over > BAR else ""
    also = f"; unweighted: {unweighted.best}" if unweighted.best != weighted.best else ""
    return (f"{label:<22} {weighted.items:>5} {weighted.programs:>5} │ {weighted.chance:>6.0%} "
            f"{weighted.accuracy:>5.0%} {100 * weighted.over:>+5.0f} {weighted.ten_in_a_row:>9.2%} {flag:<1} │ "
            f"{unweighted.chance:>6.0%} {unweighted.accuracy:>5.0%} {100 * unweighted.over:>+5.0f} │ "
            f"{weighted.best}{also}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", help="a pool printed by `dumpgym drills` (default: print one now)")
    parser.add_argument("--corpus", help="the corpus it was made from, as `dumpgym export` prints it "
                                         "(default: print one now); read for the rows of line items")
    parser.add_argument("--no-steps", action="store_true", help="one row per kind, no step rows")
    args = parser.parse_args()
    from dumpgym.drills import read_pool

    pool = read_pool(json.load(open(args.pool, encoding="utf-8")) if args.pool else _printed("drills"))
    corpus = json.load(open(args.corpus, encoding="utf-8")) if args.corpus else _printed("export")
    by_kind = defaultdict(list)
    for item in seen_items(pool, _records(corpus)):
        by_kind[item.kind].append(item)
    print(f"{'':<34} │ {'weighted':^29} │ {'unweighted':^18} │")
    print(f"{'kind / step':<22} {'items':>5} {'progs':>5} │ {'chance':>6} {'best':>5} {'+pts':>5} {'10 in row':>9}   │ "
          f"{'chance':>6} {'best':>5} {'+pts':>5} │ best strategy (weighted; unweighted where another)")
    for kind, items in sorted(by_kind.items()):
        credit = play(items)
        print(_row(kind, score(items, credit, True), score(items, credit, False)))
        if args.no_steps:
            continue
        if len({i.step for i in items}) > 1:
            for step, mine, theirs in steps(items, credit):
                print(_row(f"  {step}", score(mine, theirs, True), score(mine, theirs, False)))
    print(f"\n! : more than {100 * BAR:.0f} points over chance, weighted (the bar). Chance: 1/options; "
          "1/candidate rows (rows holding ` = `); 1/(2^rows - 1) for a set of rows; 1/2^rank for axes; 0 typed.")


if __name__ == "__main__":
    main()
