"""A dump written by any supported JAX (0.6 on), read by `dumpgym add --dump`.

Reading a dump goes through jaxlib's own bindings (XLA's HLO parser, the dialects JAX's StableHLO prints),
which only a recent jaxlib has. So where this interpreter's jaxlib is older (scripts/test-compat runs this
file under the oldest supported JAX), `add --dump` says so in one line, exit status 2, and writes nothing; and
the dump that old JAX wrote is read by the newer JAX's dumpgym (`DUMPGYM_READER_PYTHON`, which
scripts/test-compat sets to the main environment's interpreter) as a dump of today's JAX is.
"""
import json
import os
import subprocess
import sys

import pytest

JOB = """
import jax, jax.numpy as jnp

def loss(params, x):
    h = x
    for w in params:
        h = jnp.tanh(h @ w)
    return jnp.mean(h ** 2)

@jax.jit
def fit_step(params, x):
    value, grads = jax.value_and_grad(loss)(params, x)
    return [w - 0.1 * g for w, g in zip(params, grads)], value

params = [jnp.full((8, 16), 0.01), jnp.full((16, 4), 0.02)]
fit_step(params, jnp.ones((2, 8)))[1].block_until_ready()
"""


def _dump(folder, with_jax: bool) -> None:
    env = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={folder}"}
    env.pop("JAX_DUMP_IR_TO", None)
    if with_jax:
        env["JAX_DUMP_IR_TO"] = str(folder)
    subprocess.run([sys.executable, "-c", JOB], check=True, env=env, capture_output=True, timeout=300)


def _add(python, folder, corpus):
    return subprocess.run([python, "-m", "dumpgym", "add", "--dump", str(folder), "--corpus", str(corpus)],
                          capture_output=True, text=True, timeout=600)


def _bindings_here() -> bool:
    import jaxlib

    from dumpgym.jax_internals import HLO_BINDINGS_JAXLIB

    return tuple(int(p) for p in jaxlib.__version__.split(".")[:3] if p.isdigit()) >= HLO_BINDINGS_JAXLIB


def _added(done, corpus, with_jax: bool) -> None:
    assert done.returncode == 0, done.stderr
    assert "added dump-jit-fit-step" in done.stdout, done.stdout
    slugs = json.loads((corpus / "index.json").read_text())
    slugs = slugs["programs"] if isinstance(slugs, dict) else slugs
    assert "dump-jit-fit-step" in json.dumps(slugs)
    record = (corpus / "dump-jit-fit-step.json").read_text()
    # XLA's optimised HLO of the step is in the record, and (with JAX's files) the StableHLO it was compiled from.
    assert "fit_step" in record and "dot" in record
    assert ("stablehlo.dot_general" in record) == with_jax


@pytest.mark.parametrize("with_jax", [False, True], ids=["xla-only", "jax-and-xla"])
def test_a_dump_of_this_jax_is_read_or_refused_in_one_line(tmp_path, with_jax):
    folder, corpus = tmp_path / "dump", tmp_path / "corpus"
    _dump(folder, with_jax)
    done = _add(sys.executable, folder, corpus)
    if _bindings_here():
        _added(done, corpus, with_jax)
        return
    import jaxlib

    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "reading a dump needs jaxlib" in lines[0] and jaxlib.__version__ in lines[0], lines
    assert not corpus.exists()


@pytest.mark.parametrize("with_jax", [False, True], ids=["xla-only", "jax-and-xla"])
def test_a_dump_of_this_jax_reads_with_the_newer_jax(tmp_path, with_jax):
    reader = os.environ.get("DUMPGYM_READER_PYTHON")
    if not reader:
        pytest.skip("no other JAX's interpreter given (DUMPGYM_READER_PYTHON): the test above reads it here")
    folder, corpus = tmp_path / "dump", tmp_path / "corpus"
    _dump(folder, with_jax)
    _added(_add(reader, folder, corpus), corpus, with_jax)
