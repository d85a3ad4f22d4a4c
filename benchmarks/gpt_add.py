"""`dumpgym add --hlo cpu` of the 12-layer GPT train step (whole process) against JAX alone tracing, lowering
and compiling it in one process: the issue's bar is a ratio of at most 1.3. With `--before REF`, the add at
that commit too (checked out in a temporary `git worktree`), side by side.

add compiles the program once, as JAX does (the tags ride in each op's location: `ir/tags.py`); what
it adds to JAX's own work is the tagged lowering the x-ray reads, the facts, the x-ray and the dataflow
(made while XLA compiles), and what reads the compile (its graph, the attribution, its text and shapes)
and the write after it.

Run: .venv/bin/python benchmarks/gpt_add.py [--runs N] [--before REF] [--stack]

With `--stack`, the 24-layer transformer stack (`transformer_stack.py`, about 1,930 equations) is added too,
in the same run, alternating with the GPT's commands, each add against JAX's own work on that program: the
issue's bar (at most 1.3) side by side for both.

JAX's own work, the floor, is a fresh process that imports JAX (not dumpgym), traces the function with
`jax.jit(f).trace`, prints its jaxpr, lowers it and prints the StableHLO, compiles it for this CPU and prints the
compiled HLO: every text `add` shows, made as JAX makes it. Its environment is the one `dumpgym` sets for itself on
import (eight simulated CPU devices, a TPU or GPU plugin told there is no chip), set by this script, so both sides
start the same backends and nothing of dumpgym's runs in the floor (as in `add_scale.py`): importing dumpgym is
part of what `add` costs, not of what JAX does.

Each run of each command is a fresh process, the commands alternating. Wall-clock and CPU seconds (the
process's user + system time, which another job on a shared machine inflates far less) are reported as
medians, and each ratio to JAX's own. Last, whether every add (this checkout's and the ref's) wrote the
same record, byte for byte.
"""
import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumpgym  # noqa: E402,F401  (sets, in os.environ, what every child process below inherits)
from _timing import PYTHON, time_process_cpu, worktrees  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src")

JAX_ONLY = f"""
import sys; sys.path.insert(0, {HERE!r})
import jax
from gpt_train_step import gpt_train_step, make
traced = jax.jit(gpt_train_step).trace(*make())
str(traced.jaxpr)
lowered = traced.lower()
lowered.as_text()
lowered.compile().as_text()
"""

STACK_JAX_ONLY = f"""
import sys; sys.path.insert(0, {HERE!r})
import jax, jax.numpy as jnp
from transformer_stack import transformer_stack, ARGS
args = [jax.ShapeDtypeStruct(tuple(int(d) for d in s[s.index("[") + 1:-1].split(",")), jnp.float32) for s in ARGS]
traced = jax.jit(transformer_stack).trace(*args)
str(traced.jaxpr)
lowered = traced.lower()
lowered.as_text()
lowered.compile().as_text()
"""


def timed(argv, src: str | None) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of `argv`, with `src` first on PYTHONPATH (None: left out)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return time_process_cpu(argv, env if src is None else {**env, "PYTHONPATH": src})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", help="a commit whose add to time beside this checkout's")
    parser.add_argument("--stack", action="store_true", help="the 24-layer stack too, side by side")
    args = parser.parse_args()
    folder = tempfile.mkdtemp()
    fresh = iter(range(1000))
    written: dict[str, list[str]] = {}  # label -> the record each of its adds wrote

    def add(label, stack=False):
        def argv():  # each add goes to a fresh corpus folder, so the slug never clashes
            corpus = os.path.join(folder, str(next(fresh)))
            if stack:
                from transformer_stack import ARGS
                written.setdefault(label, []).append(os.path.join(corpus, "transformer-stack.json"))
                return [PYTHON, "-m", "dumpgym", "add", f"{HERE}/transformer_stack.py:transformer_stack",
                        *[f"--arg={a}" for a in ARGS], "--hlo", "cpu", "--corpus", corpus]
            written.setdefault(label, []).append(os.path.join(corpus, "gpt-train-step.json"))
            return [PYTHON, "-m", "dumpgym", "add", f"{HERE}/gpt_train_step.py:gpt_train_step",
                    "--args-from", f"{HERE}/gpt_train_step.py:make", "--hlo", "cpu", "--corpus", corpus]
        return argv

    with worktrees([args.before] if args.before else []) as trees:
        commands = {"JAX trace + lower + compile": (lambda: [PYTHON, "-c", JAX_ONLY], None),
                    "dumpgym add --hlo cpu (this checkout)": (add("this checkout"), SRC)}
        for ref, tree in trees.items():
            commands[f"dumpgym add --hlo cpu ({ref})"] = (add(ref), str(tree / "src"))
        if args.stack:
            commands["stack: JAX trace + lower + compile"] = (lambda: [PYTHON, "-c", STACK_JAX_ONLY], None)
            commands["stack: dumpgym add --hlo cpu (this checkout)"] = (add("stack: this checkout", True), SRC)
            for ref, tree in trees.items():
                commands[f"stack: dumpgym add --hlo cpu ({ref})"] = (add(f"stack: {ref}", True), str(tree / "src"))
        times: dict[str, list[tuple[float, float]]] = {label: [] for label in commands}
        for _ in range(args.runs):
            for label, (argv, src) in commands.items():
                times[label].append(timed(argv(), src))
    med = {label: (statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts))
           for label, ts in times.items()}
    for label, (wall, cpu) in med.items():
        jax_wall, jax_cpu = med["stack: JAX trace + lower + compile" if label.startswith("stack:")
                                else "JAX trace + lower + compile"]
        print(f"{label}: wall {wall:.2f} s, CPU {cpu:.2f} s (medians of {args.runs}); "
              f"ratio to JAX: wall {wall / jax_wall:.2f}, CPU {cpu / jax_cpu:.2f}")
    # A faster add must write the same record: every add's, this checkout's and each ref's, byte for byte.
    records = {label: {Path(p).read_bytes() for p in paths} for label, paths in written.items()}
    for label, kinds in records.items():
        mine = records["stack: this checkout" if label.startswith("stack:") else "this checkout"]
        same = len(kinds) == 1 and kinds == mine
        print(f"records of {label}: {'all byte-identical to' if same else 'NOT all the same as'} this checkout's")


if __name__ == "__main__":
    main()
