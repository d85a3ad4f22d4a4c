"""The compiled layer's attribution measured against an independent oracle, per program and target.

For each built-in program (variants too) and target, XLA compiles the name-stack-tagged lowering on its
own; the last tag of each instruction's op_name names the equation that made it (tests/compiled_oracle.py).
Each layer row's own equations (`eqns`) are counted exact (that equation alone), merged (it and others),
outer (an equation enclosing it), inner (equations inside it) or other; apart, the rows that absorbed
equations folded into them (`absorbed`, docs/corpus.md's rules 2 and 3) and how many, by rule; each fusion
missing an equation its body's instructions are tagged with is listed.

Run: PYTHONPATH=src .venv/bin/python benchmarks/attribution_oracle.py [--targets cpu,tpu,gpu] [--show] [SLUG...]
"""
import argparse
import os
import sys
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))


def main() -> None:
    from compiled_oracle import fresh_layer_and_oracle, judge

    from dumpgym.programs import builtin_program, corpus_programs
    from dumpgym.record.targets import CPU, GPU, TPU
    from dumpgym.traced.facts import build_facts
    from dumpgym.traced.trace import trace

    parser = argparse.ArgumentParser()
    parser.add_argument("slugs", nargs="*")
    parser.add_argument("--targets", default="cpu,tpu,gpu")
    parser.add_argument("--show", action="store_true", help="print every case that is not exact")
    options = parser.parse_args()
    targets = {"cpu": CPU, "tpu": TPU, "gpu": GPU}
    programs = [builtin_program(s) for s in options.slugs] if options.slugs else corpus_programs()
    total, fusions_missing, absorbing, folded = Counter(), 0, Counter(), Counter()
    for program in programs:
        traced = trace(program.function, program.example_args())
        facts = build_facts(traced)
        for name in options.targets.split(","):
            target = targets[name]
            if program.platform != "cpu" and program.platform != target.platform:
                continue
            layer, compiled, oracle = fresh_layer_and_oracle(traced, facts, target)
            found = judge(layer, compiled, oracle, facts)
            total += found["count"]
            fusions_missing += len(found["missing"])
            c = found["count"]
            # Of the rows judged, those that absorbed folded equations (an earlier record has no `absorbed`).
            rows = [r for r in layer.instructions if r.name in found["tagged"] and getattr(r, "absorbed", ())]
            absorbing[name] += len(rows)
            folded.update(f"rule {a.rule}" for r in rows for a in r.absorbed)
            print(f"{program.slug:26} {name}: exact {c['exact']:5} merged {c['merged']:4} outer {c['outer']:4} "
                  f"inner {c['inner']:3} other {c['other']:4} absorbing {len(rows):3} "
                  f"fusions missing an equation {len(found['missing'])}", flush=True)
            if options.show:
                for row, opcode, own, got, verdict in found["cases"]:
                    prims = [facts.eqns[e].primitive for e in got]
                    print(f"    {verdict:6} {row} ({opcode}): oracle {own} {facts.eqns[own].primitive}, layer {got} {prims}")
                for r in rows:
                    print(f"    absorbs {r.name} ({r.opcode}): own {list(r.eqns)}, folded "
                          f"{[(a.eqn, facts.eqns[a.eqn].primitive, a.rule) for a in r.absorbed]}")
                for fusion, lost, held in found["missing"]:
                    print(f"    fusion {fusion} misses {lost} {[facts.eqns[e].primitive for e in lost]} (holds {held})")
    judged = sum(total.values())
    print(f"total: {total['exact']} of {judged} exact ({100 * total['exact'] / max(judged, 1):.2f}%), "
          f"merged {total['merged']}, outer {total['outer']}, inner {total['inner']}, other {total['other']}; "
          f"fusions missing an equation: {fusions_missing}")
    print(f"rows absorbing folded equations: {sum(absorbing.values())} ({dict(absorbing)}); equations folded "
          f"into them: {sum(folded.values())} ({dict(sorted(folded.items()))})")


if __name__ == "__main__":
    main()
