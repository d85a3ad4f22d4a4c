"""A compile that runs long says so on stderr and stops with Ctrl-C, nothing written. XLA's compile is
stood in for by one that never ends (`jax.stages.Lowered.compile` waiting forever), in a subprocess that
gets SIGINT once it has said it is waiting: no timing is asserted, only what it says and what it leaves."""
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
