"""How exactly the compiled layer attributes instructions, by the independent oracle of
tests/compiled_oracle.py (XLA's compile of the program with each equation's tag in its name stack),
over every built-in program and compile target: tagged instructions, how many are exact, merges by
each rule of docs/xray.md, region and window rules, wrong ones, and fusions missing a dot's equation.
Needs the tpu and gpu extras for those targets (a target whose extra is missing is left out).

Run: .venv/bin/python benchmarks/compiled_attribution.py [SLUG ...] [--target cpu|tpu|gpu] [-v]
"""
import argparse
import os
import sys
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import dumpgym  # noqa: E402,F401  (sets what libtpu and the CUDA plugin need, as the build does)
from compiled_oracle import judge_layer  # noqa: E402


def main() -> None:
    from dumpgym.programs import corpus_programs
    from dumpgym.record import targets
    from dumpgym.traced.facts import build_facts
    from dumpgym.traced.trace import trace

    parser = argparse.ArgumentParser()
    parser.add_argument("slugs", nargs="*")
    parser.add_argument("--target", action="append")
    parser.add_argument("-v", action="store_true", help="list every wrong instruction and missed fusion")
    options = parser.parse_args()
    installed = {"cpu": True, "tpu": targets.libtpu_installed(), "gpu": targets.cuda_plugin_installed()}
    totals: dict[str, Counter] = {}
    for program in corpus_programs():
        slug = program.slug
        if options.slugs and slug not in options.slugs:
            continue
        traced = trace(program.function, program.example_args())
        facts = build_facts(traced)
        for entry in targets.builtin_targets(getattr(program, "platform", "cpu") or "cpu"):
            if not installed[entry.platform] or (options.target and entry.id not in options.target):
                continue
            judged = judge_layer(traced, facts, entry.target)
            total = totals.setdefault(entry.id, Counter())
            if judged.unpaired:
                total["unpaired"] += 1
                print(f"{slug:28s} {entry.id}: {judged.unpaired}")
                continue
            total["programs"] += 1
            total["tagged"] += judged.tagged
            total.update(judged.kinds)
            total["fusions"] += judged.fusions
            total["fusions missing a dot"] += len(judged.missed)
            total["fusions missing other work"] += len(judged.missed_other)
            for rule, n in judged.merges.items():
                total[f"merged: {rule}"] += n
            line = (f"{slug:28s} {entry.id}: {judged.kinds['exact']}/{judged.tagged} exact, "
                    f"{dict(judged.kinds)}, {len(judged.missed)} fusions missing a dot")
            print(line, flush=True)
            if options.v:
                for name, opcode, listed, expected in judged.wrong:
                    print(f"    wrong %{name} ({opcode}): lists {[(e, facts.eqns[e].primitive) for e in listed]}, "
                          f"tag {expected} {facts.eqns[expected].primitive}")
                for name, missed in judged.missed + judged.missed_other:
                    print(f"    fusion %{name} misses {[(e, facts.eqns[e].primitive) for e in missed]}")
    print()
    for target, total in totals.items():
        share = total["exact"] / total["tagged"] if total["tagged"] else 0
        print(f"{target}: {total['exact']} of {total['tagged']} tagged instructions exact ({share:.2%}) over "
              f"{total['programs']} programs; " + ", ".join(f"{k} {v}" for k, v in sorted(total.items())
                                                          if k not in ("exact", "tagged", "programs")))
    exact = sum(t["exact"] for t in totals.values())
    tagged = sum(t["tagged"] for t in totals.values())
    print(f"all: {exact} of {tagged} ({exact / max(tagged, 1):.2%})")


if __name__ == "__main__":
    main()
