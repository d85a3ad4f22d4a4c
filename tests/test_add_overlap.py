"""What `add` does beside XLA's compile fails as it would in line: the compile is set going from the tagged
lowering on (the texts printed meanwhile) and XLA's analyses of it run on the compile's thread, yet a failure
to start it stays a later stage's error, not a trace's, and one of the analyses is the same one line and exit
status as before, with nothing written. Each failure is made here by standing in for one step."""
import gc
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import dumpgym
from dumpgym import cli
from dumpgym.compiled import layer
from dumpgym.errors import ProgramError

SRC = Path(__file__).resolve().parents[1] / "src"


def _program(tmp_path):
    program = tmp_path / "prog.py"
    program.write_text("import jax.numpy as jnp\n\ndef small(x):\n    return jnp.tanh(x) * 2\n")
    return f"{program}:small"


@pytest.mark.parametrize("stage, step, message", [
    (jax.stages.Compiled, "memory_analysis", "memory analysis refused"),  # on the compile's thread, after it
    (jax.stages.Lowered, "compile", "XLA refused it"),
], ids=["analyses", "compile"])
def test_an_error_on_the_compile_thread_is_one_line_exit_2_and_nothing_written(stage, step, message, tmp_path,
                                                                               monkeypatch, capsys):
    def refused(self, *args, **kwargs):
        raise ProgramError(message)

    monkeypatch.setattr(stage, step, refused)
    corpus = tmp_path / "corpus"
    rc = cli.main(["add", _program(tmp_path), "--arg", "f32[8]", "--hlo", "cpu", "--corpus", str(corpus)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.splitlines()[-1] == f"dumpgym: error: {message}", err
    assert "Traceback" not in err
    assert not corpus.exists()  # nothing written, not even the folder
    assert gc.isenabled()  # the collector is back on after the failed add


def test_a_failure_to_start_the_compile_is_raised_as_itself_not_as_a_failure_to_trace(tmp_path, monkeypatch):
    """The compile starts inside the trace stage (before its texts are printed); an error there is a dumpgym
    stage's, raised as it is, not reworded as the trace's ("dumpgym could not trace ..."), and nothing written."""
    def broken(*modules):
        raise RuntimeError("the tagged lowering differs from the plain one; cannot carry its tags")

    monkeypatch.setattr(layer, "carry_tags", broken)
    monkeypatch.setattr(layer, "tags_in_place", broken)  # the first compile takes a copy of the tagged lowering
    jax.jit(jnp.tanh).trace(jax.ShapeDtypeStruct((8,), jnp.float32)).lower().compile()  # JAX takes it
    with pytest.raises(RuntimeError, match="^the tagged lowering differs from the plain one"):
        dumpgym.add(jnp.tanh, jax.ShapeDtypeStruct((8,), jnp.float32), slug="tanh", corpus=tmp_path / "c",
                    compiled="cpu")
    assert not (tmp_path / "c").exists()


def test_a_failure_to_trace_after_the_compile_started_is_still_the_traces(tmp_path, monkeypatch):
    """The jaxpr is printed after the compile is set going: a failure there is still said as the trace's."""
    from dumpgym.traced import trace as trace_module

    def broken(closed_jaxpr):
        raise AttributeError("'tuple' object has no attribute 'solve'")

    monkeypatch.setattr(trace_module, "print_with_spans", broken)
    started = []
    real_start = layer.start_compiles
    monkeypatch.setattr(layer, "start_compiles", lambda *a, **k: started.append(1) or real_start(*a, **k))
    with pytest.raises(ProgramError, match="^dumpgym could not trace tanh, which JAX traces and lowers: AttributeError"):
        dumpgym.add(jnp.tanh, jax.ShapeDtypeStruct((8,), jnp.float32), slug="tanh", corpus=tmp_path / "c",
                    compiled="cpu")
    assert started  # the compile had begun before the jaxpr was printed
    assert not (tmp_path / "c").exists()


# The command line in a child whose XLA compile never ends (it waits forever), one stage of the add made to
# fail meanwhile, and an exit handler saying so when the interpreter shuts down: with a thread still in XLA's
# code, that shutdown aborts the process, so an error said while XLA runs must end it at once instead.
STAGE_FAILS_WHILE_XLA_RUNS = textwrap.dedent("""
    import atexit, sys, threading
    import jax._src.stages as stages
    from dumpgym import cli
    from dumpgym.errors import ProgramError

    stage = sys.argv.pop(1)

    def refused(*args, **kwargs):
        raise ProgramError(stage + " refused")

    stages.Lowered.compile = lambda self, *a, **k: threading.Event().wait()
    if stage == "facts":
        import dumpgym.traced.facts as module
        module.build_facts = refused
    else:
        import dumpgym.traced.trace as module
        module.print_with_spans = refused
    atexit.register(lambda: print("the interpreter shut down", file=sys.stderr))
    sys.exit(cli.main(sys.argv[1:]))
""")


@pytest.mark.parametrize("stage", ["facts", "jaxpr printing"])
def test_an_error_while_xla_compiles_is_one_line_exit_2_and_ends_the_process_at_once(stage, tmp_path):
    corpus = tmp_path / "corpus"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", STAGE_FAILS_WHILE_XLA_RUNS, stage, "add", _program(tmp_path),
                           "--arg", "f32[8]", "--hlo", "cpu", "--corpus", str(corpus)],
                          capture_output=True, text=True, env=env, timeout=300)  # a bound on a hang, not a timing
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"dumpgym: error: {stage} refused"], done.stderr
    assert not corpus.exists()


def test_an_error_reading_the_compile_waits_for_xlas_analyses_on_its_thread_before_it_is_raised(tmp_path, monkeypatch):
    """XLA's analyses still under way when reading the compile fails are waited for: the error may end the
    process next, and a thread in XLA's code when the interpreter shuts down aborts it."""
    import threading
    import time

    read_failed, analysed = threading.Event(), []

    def analyses(compiled):
        read_failed.wait()
        time.sleep(0.1)  # still analysing a while after the failure (never asserted on: only makes a miss show)
        analysed.append(True)
        return {"xla_cost": {}, "xla_memory": {}}

    def broken(*args, **kwargs):
        read_failed.set()
        raise ProgramError("reading the compile failed")

    monkeypatch.setattr(layer, "xla_analyses", analyses)
    monkeypatch.setattr(layer, "with_facts", broken)
    with pytest.raises(ProgramError, match="^reading the compile failed$"):
        dumpgym.add(jnp.tanh, jax.ShapeDtypeStruct((8,), jnp.float32), slug="tanh", corpus=tmp_path / "c",
                    compiled="cpu")
    assert analysed and not layer.xla_running()
    assert not (tmp_path / "c").exists()
