"""How much of a dump's text reaches what it came from, on real programs, per program:

- jaxpr reach: of the StableHLO op lines each equation emitted (`dumpgym add` of the same function says which,
  exactly, by tags), the share that the dumped module's record (`add --dump`, linking the dumped jaxpr to the
  StableHLO by structure) gives that same equation, and how many it gives another equation (wrong); and of
  the optimised instructions the trace ties to equations, how many reach one in the record (not judged here:
  `tests/test_dump_record.py` judges which);
- XLA alone: of the optimised instructions whose metadata names a source line, the share linked to that line
  and to HLO before optimisations (`dumps/source.py`), for a dump with `--xla_dump_to` only, on the CPU and
  (`--tpu`) compiled for a TPU v5e through libtpu with no chip attached.

    python benchmarks/dump_jaxpr_reach.py [--only NAME ...] [--tpu] [--gpt-dump DIR] [--keep DIR]

The programs: the 12-layer GPT train step (`gpt_train_step.py`), a 2-layer transformer train step with a
hand-written Adam, a scan RNN's train step, a while loop with a cond inside, a remat'ed MLP, a sharded step.
Each is dumped from a fresh process as a user's run dumps it (`JAX_DUMP_IR_TO` and `XLA_FLAGS` set before JAX
starts). The issue's bars: reach at least 90% with no wrong equation; XLA alone at least 95%.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests"), str(HERE)]
from dump_reach import PROGRAMS, dump, judged, module_of, program  # noqa: E402

def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", nargs="*", default=list(PROGRAMS))
    parser.add_argument("--tpu", action="store_true", help="also an XLA-only dump compiled for a TPU v5e")
    parser.add_argument("--gpt-dump", help="an existing dump folder of the GPT step (JAX and XLA layers)")
    parser.add_argument("--keep", help="make the dumps here (and reuse what is there) instead of a temporary folder")
    args = parser.parse_args()
    from dumpgym.corpus.pipeline import program_record
    from dumpgym.dumps.folder import read_folder
    from dumpgym.dumps.record import module_record
    from dumpgym.dumps.source import source_xray
    from dumpgym.record.targets import CPU

    root = Path(args.keep or tempfile.mkdtemp(prefix="dump-reach-"))
    for name in args.only:
        both = Path(args.gpt_dump) if name == "gpt_train_step" and args.gpt_dump else root / name / "both"
        if not both.is_dir():
            dump(both, [name])
        module = module_of(read_folder(both), name)
        record = module_record(module, f"dump-{module.slug}", (str(both),))
        traced = program_record(program(name), targets=(CPU,))
        reached, total, wrong = judged(record, traced)
        print(f"{name}: jaxpr reach {reached}/{total} = {reached / max(total, 1):.3f}, wrong {len(wrong)}", flush=True)
        for w in wrong[:5]:
            print("   wrong:", w)
        theirs = {i.name for i in traced.compiled["cpu"].instructions if i.eqns}
        ours = {i.name for i in record.compiled[module.backend].instructions if i.eqns}
        print(f"{name}: optimised instructions the trace ties to equations that reach one in the dump's record "
              f"{len(theirs & ours)}/{len(theirs)}", flush=True)
        for platform in ("cpu", "tpu") if args.tpu else ("cpu",):
            if platform == "tpu" and name == "sharded_step":
                continue  # a TPU dump compiles for one chip
            xla = root / name / f"xla-{platform}"
            if not xla.is_dir():
                dump(xla, [name], platform, jax_too=False)
            x = source_xray(module_of(read_folder(xla), name))
            print(f"{name}: XLA alone ({platform}) {x.linked}/{x.framed} = {x.linked / max(x.framed, 1):.3f}",
                  flush=True)


if __name__ == "__main__":
    main()
