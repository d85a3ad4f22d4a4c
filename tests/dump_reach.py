"""Programs as users write them, dumped and judged by the tests and the benchmark of how far a dump's text
reaches what it came from (`tests/test_dump_reach.py`, `benchmarks/dump_jaxpr_reach.py`): the dumped
module's record (`add --dump`) against `dumpgym add` of the same function (a trace, exact by tags)."""
from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BENCHMARKS = ROOT / "benchmarks"

# name -> (module:function, how its arguments are made: aval strings, or "module:factory" of structs).
PROGRAMS = {
    "gpt_train_step": ("gpt_train_step:gpt_train_step", "gpt_train_step:make"),
    "transformer_2_layers": ("dump_programs:train_step", "dump_programs:train_step_args"),
    "scan_rnn_step": ("dump_drill_programs:rnn_train_step",
                      ("f32[8,16]", "f32[16,16]", "f32[16]", "f32[16,4]", "f32[10,2,8]", "f32[10,2,4]")),
    "while_cond": ("dump_drill_programs:fit_while", ("f32[32,8]", "f32[32]", "f32[8]")),
    "remat_mlp": ("dump_drill_programs:remat_mlp_step",
                  ("f32[32,64]", "f32[64]", "f32[64,64]", "f32[64]", "f32[64,8]", "f32[8]", "f32[4,32]", "f32[4,8]")),
    "sharded_step": ("builtin:fsdp-step", None),
}

_SCRIPT = r'''
import sys
sys.path[:0] = {paths!r}
import jax
from dump_reach import program
from dumpgym.record.targets import Target
from dumpgym.traced.devices import topology_devices

for name in {names!r}:
    p = program(name)
    structs = p.example_args()
    function = p.function if hasattr(p.function, "lower") else jax.jit(p.function)
    if {platform!r} == "cpu":
        function.lower(*structs).compile()
    else:
        device = topology_devices(Target({platform!r}).topology_for(1))[0]
        with jax.default_device(device):
            structs = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype), structs)
            function.trace(*structs).lower(lowering_platforms=({platform!r},)).compile()
'''


def program(name: str):
    """The `Program` of one of PROGRAMS."""
    import importlib

    from dumpgym.traced.program import Program

    where, args = PROGRAMS[name]
    module, _, attr = where.partition(":")
    if module == "builtin":
        return importlib.import_module(f"dumpgym.programs.{attr.replace('-', '_')}").PROGRAM
    function = getattr(importlib.import_module(module), attr)
    if isinstance(args, str):
        maker, _, made = args.partition(":")
        structs = getattr(importlib.import_module(maker), made)()
        return Program(slug=name.replace("_", "-"), title=name, lesson="", function=function, args=(),
                       structs=structs)
    return Program(slug=name.replace("_", "-"), title=name, lesson="", function=function, args=args)


def dump(folder: Path, names, platform: str = "cpu", jax_too: bool = True) -> Path:
    """Dump `names` into `folder` from a fresh process (`jax_too`: JAX's jaxpr and StableHLO beside XLA's)."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_DUMP_IR_TO", "XLA_FLAGS")}
    env["XLA_FLAGS"] = f"--xla_dump_to={folder} --xla_force_host_platform_device_count=8"
    if jax_too:
        env.update(JAX_DUMP_IR_TO=str(folder), JAX_DUMP_IR_MODES="jaxpr,stablehlo")
    script = _SCRIPT.format(paths=[str(ROOT / "src"), str(HERE), str(BENCHMARKS)], names=list(names),
                            platform=platform)
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=1800)
    if run.returncode:
        raise SystemExit(run.stderr[-3000:])
    return folder


def module_of(folder, name: str):
    """The dumped module of a program of PROGRAMS (the user's module XLA named after the function)."""
    function = program(name).function
    wanted = "jit_" + getattr(function, "__name__", getattr(getattr(function, "__wrapped__", None), "__name__", ""))
    found = [m for m in folder.modules if m.name == wanted] or [m for m in folder.modules if not m.helper]
    return max(found, key=lambda m: m.size_of_biggest())


def own_lines(record) -> dict[int, set[int]]:
    """The StableHLO op lines each equation emitted itself: its group's, less those of the equations inside it."""
    lines = {g.eqn: set(g.stablehlo_lines) for g in record.xray}
    inside = defaultdict(set)
    for e in record.eqns:
        for ancestor in record.ancestors(e):
            inside[ancestor.id].add(e.id)
    return {e: own - set().union(*(lines.get(d, set()) for d in inside[e])) for e, own in lines.items()}


def twins(dumped_eqns, traced_eqns) -> dict[int, int]:
    """Each dumped equation's twin in the trace, aligned by primitives (the dump keeps dead code a trace drops)."""
    import difflib

    matcher = difflib.SequenceMatcher(None, [e.primitive for e in dumped_eqns], [e.primitive for e in traced_eqns],
                                      autojunk=False)
    return {b.a + k: b.b + k for b in matcher.get_matching_blocks() for k in range(b.size)}


def judged(record, traced) -> tuple[int, int, list]:
    """(op lines the dump's record gives an equation the trace says emitted them, op lines the trace gives an
    equation, the lines it gives another: neither such an equation nor one holding it). A line may be several
    equations' (a private function's ops, lowered once for the calls of several): any of them is right."""
    if record.stablehlo != traced.stablehlo:
        raise AssertionError("the dumped StableHLO is not the re-trace's: lines cannot be compared")
    twin = twins(record.eqns, traced.eqns)
    truth: dict[int, set[int]] = defaultdict(set)
    for e, lines in own_lines(traced).items():
        for line in lines:
            truth[line].add(e)
    reached, wrong = 0, []
    for e, lines in own_lines(record).items():
        for line in lines:
            said = twin.get(e)
            if said in truth.get(line, ()):
                reached += 1
            elif not any(said in {a.id for a in traced.ancestors(traced.eqns[t])} for t in truth.get(line, ())):
                wrong.append((line, e, record.stablehlo.splitlines()[line - 1].strip()[:120]))
    return reached, len(truth), wrong
