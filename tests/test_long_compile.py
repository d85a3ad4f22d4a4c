"""A compile that runs long says so on stderr and stops with Ctrl-C or SIGTERM, nothing written; so does a
trace that runs long. XLA's compile is stood in for by one that never ends (`jax.stages.Lowered.compile`
waiting forever), a long trace by a function that sleeps until stopped, in a subprocess that gets the signal
once it has said it is waiting: no timing is asserted, only what it says and what it leaves."""
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

RUN = textwrap.dedent("""
    import sys, threading
    import jax._src.stages as stages
    from dumpgym import cli
    from dumpgym.compiled import layer

    layer.SAY_COMPILING_AFTER = layer.SAY_COMPILING_EVERY = 0.2  # said soon, so the test need not wait 5 s
    stages.Lowered.compile = lambda self, *a, **k: threading.Event().wait()  # a compile that never finishes
    sys.exit(cli.main(sys.argv[1:]))
""")


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child is POSIX")
def test_a_long_compile_says_what_it_waits_for_and_ctrl_c_stops_it_with_nothing_written(tmp_path):
    program = tmp_path / "prog.py"
    program.write_text("import jax.numpy as jnp\n\ndef slow(x):\n    return jnp.tanh(x) * 2\n")
    corpus = tmp_path / "corpus"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    child = subprocess.Popen(
        [sys.executable, "-c", RUN, "add", f"{program}:slow", "--arg", "f32[8]", "--hlo", "cpu", "--corpus",
         str(corpus)], stderr=subprocess.PIPE, text=True, env=env)
    said = []
    for line in child.stderr:  # until it has said twice that it waits (it says it again and again)
        said.append(line)
        if sum("waiting for XLA" in s for s in said) == 2:
            break
    child.send_signal(signal.SIGINT)
    rest, rc = child.stderr.read(), child.wait(timeout=300)  # a bound on a hang, not a timing assert
    waiting = [s for s in said if "waiting for XLA" in s]
    assert len(waiting) == 2, said + [rest]
    for line in waiting:
        assert line.startswith("dumpgym: waiting for XLA to compile slow for cpu: ") and "s so far" in line, line
    assert rc == 130, rest
    assert "dumpgym: stopped while XLA compiled slow for cpu; nothing was written" in rest, rest
    assert "Traceback" not in rest and "Traceback" not in "".join(said)
    assert not corpus.exists()  # nothing written, not even the folder


def _corpus_with_one_program(tmp_path) -> tuple[Path, dict]:
    """A corpus folder holding one added program, and every file's bytes in it."""
    import jax
    import jax.numpy as jnp

    import dumpgym

    corpus = tmp_path / "corpus"
    dumpgym.add(jnp.tanh, jax.ShapeDtypeStruct((8,), jnp.float32), slug="kept", corpus=corpus)
    return corpus, _files(corpus)


def _files(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _stopped(argv: list[str], ready: str, signum: int, script: str = RUN) -> tuple[list[str], str, int]:
    """Run the command line in a child, send `signum` once a stderr line holds `ready`; what it said before,
    after, and its exit status."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    child = subprocess.Popen([sys.executable, "-c", script, *argv], stderr=subprocess.PIPE, text=True, env=env)
    said = []
    for line in child.stderr:
        said.append(line)
        if ready in line:
            break
    child.send_signal(signum)
    return said, child.stderr.read(), child.wait(timeout=300)  # a bound on a hang, not a timing assert


@pytest.mark.skipif(sys.platform == "win32", reason="signals to a child are POSIX")
def test_sigterm_during_a_long_compile_stops_it_in_one_line_leaving_the_corpus_as_it_was(tmp_path):
    corpus, before = _corpus_with_one_program(tmp_path)
    program = tmp_path / "prog.py"
    program.write_text("import jax.numpy as jnp\n\ndef slow(x):\n    return jnp.tanh(x) * 2\n")
    said, rest, rc = _stopped(["add", f"{program}:slow", "--arg", "f32[8]", "--hlo", "cpu", "--corpus", str(corpus)],
                              "waiting for XLA", signal.SIGTERM)
    assert rc == 130, said + [rest]
    assert rest.splitlines() == ["dumpgym: stopped while XLA compiled slow for cpu; nothing was written"], rest
    assert _files(corpus) == before


TRACE_FOREVER = textwrap.dedent("""
    import sys, time
    import jax.numpy as jnp

    def endless(x):
        print("tracing endless", file=sys.stderr, flush=True)
        while True:  # a Python loop that tracing never leaves, as an unrolled model that takes hours
            time.sleep(0.05)
        return jnp.tanh(x)
""")


@pytest.mark.skipif(sys.platform == "win32", reason="signals to a child are POSIX")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_during_a_long_trace_stops_it_in_one_line_leaving_the_corpus_as_it_was(signum, tmp_path):
    corpus, before = _corpus_with_one_program(tmp_path)
    program = tmp_path / "prog.py"
    program.write_text(TRACE_FOREVER)
    said, rest, rc = _stopped(["add", f"{program}:endless", "--arg", "f32[8]", "--corpus", str(corpus)],
                              "tracing endless", signum, script="import sys\nfrom dumpgym import cli\n"
                                                                  "sys.exit(cli.main(sys.argv[1:]))")
    assert rc == 130, said + [rest]
    assert rest.splitlines() == ["dumpgym: stopped while adding endless; nothing was written"], rest
    assert _files(corpus) == before
