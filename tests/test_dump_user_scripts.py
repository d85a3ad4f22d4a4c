"""Dumps of ordinary user scripts not tried before, as a run writes them: an FFT's gradient, whose StableHLO holds
complex constants, and user functions whose module names start with `_` (a private `_loss`, a jitted callable
object, `jit__unnamed_function`, and its `__call__`), dumped by JAX alone (no XLA source tables to name the
function their ops were traced in) and with XLA's files. Checked against JAX itself: the equations `jax.make_jaxpr` traces and
the module names its lowering gives."""
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from dump_programs import dump_script
from dumpgym import cli
from dumpgym.dumps.folder import read_folder

SCRIPT = r'''
import sys
sys.path.insert(0, {here!r})
import jax, jax.numpy as jnp
from test_dump_user_scripts import EXAMPLE, Model, _gamma, _loss, power, quoted

x = jax.random.normal(jax.random.key(0), EXAMPLE.shape)  # eager helpers of JAX's own: `jit__normal`, ...
jax.jit(jax.value_and_grad(power))(x)  # value and gradient: no dead code for the dump to drop
jax.jit(_loss)(x, x)
jax.jit(_gamma)(x)  # a user's function named as one JAX jits in its own files
jax.jit(Model())(x); jax.jit(Model().__call__)(x)
jax.jit(quoted)(x)
'''

EXAMPLE = jax.ShapeDtypeStruct((4, 8), jnp.float32)


def power(x):
    return jnp.sum(jnp.abs(jnp.fft.rfft(x)) ** 2)


def _loss(w, x):
    return jnp.mean((jnp.tanh(x * w) - 1) ** 2)


def quoted(x):
    return jnp.sin(x) * 2


quoted.__name__ = 'say"hi'  # JAX keeps the quote in its name stacks, XLA escapes it in each op_name: `say\"hi`


def _gamma(x):
    return jnp.exp(-x * x)


class Model:
    def __call__(self, x):
        return jnp.tanh(x) * 2


def _module_name(f, *args) -> str:
    """The module name JAX's lowering gives `f` (`module @NAME` of its StableHLO)."""
    return jax.jit(f).lower(*args).as_text().split("module @", 1)[1].split(" ", 1)[0]


@pytest.fixture(scope="module")
def dumped(tmp_path_factory):
    root = tmp_path_factory.mktemp("scripts")
    script = SCRIPT.format(here=str(Path(__file__).parent))
    dump_script(script, root / "one", root / "one")
    dump_script(script, root / "jax", None)
    return root


def test_a_gradient_through_an_fft_with_complex_constants_adds_with_every_equation(dumped, tmp_path, capsys):
    grad = jax.value_and_grad(power)
    name = _module_name(grad, EXAMPLE)
    module = next(m for m in read_folder(dumped / "one").modules if m.name == name)
    # What the test is about: the dumped StableHLO holds a complex constant (MLIR's bindings cast none).
    assert "stablehlo.constant dense<(" in module.text("stablehlo") and "complex<f32>" in module.text("stablehlo")
    corpus = tmp_path / "corpus"
    assert cli.main(["add", "--dump", str(dumped / "one"), "--module", name, "--corpus", str(corpus)]) == 0, \
        capsys.readouterr().err
    slug = f"dump-{module.slug}"
    record = json.loads((corpus / f"{slug}.json").read_text())
    traced = jax.make_jaxpr(grad)(EXAMPLE).eqns
    assert [e["primitive"] for e in record["eqns"] if e["parent"] is None] == [e.primitive.name for e in traced]
    assert record["compiled"]["cpu"]["text"] and record["xray"]


def test_a_users_function_named_with_an_underscore_is_the_users_in_a_dump_of_jax_alone(dumped):
    """JAX's own private functions (`jax.random.normal`'s `_normal`) are helpers; the user's `_loss`, callable
    object and `_gamma` are not, though no XLA source table names the function their ops were traced in, a
    callable object's module is named for no function the tables name, and JAX jits a `_gamma` of its own."""
    from dumpgym.dumps.folder import _jax_jitted_private_names
    assert "_gamma" in _jax_jitted_private_names()  # what the test is about: the name is also JAX's
    for form in ("jax", "one"):
        folder = read_folder(dumped / form)
        users = [m.name for m in folder.modules if not m.helper]
        assert sorted(users) == sorted([_module_name(jax.value_and_grad(power), EXAMPLE),
                                        _module_name(_loss, EXAMPLE, EXAMPLE), _module_name(_gamma, EXAMPLE),
                                        _module_name(Model(), EXAMPLE),
                                        _module_name(Model().__call__, EXAMPLE), _module_name(quoted, EXAMPLE)]), form
        assert any(m.name == "jit__normal" and m.helper for m in folder.modules), form


def test_a_function_whose_name_holds_a_quote_pairs_jaxs_files_with_xlas(dumped, tmp_path, capsys):
    name = _module_name(quoted, EXAMPLE)
    modules = [m for m in read_folder(dumped / "one").modules if m.name == name]
    assert len(modules) == 1 and set(modules[0].layers()) == {"jaxpr", "stablehlo", "hlo_before", "hlo_after"}
    assert 'say\\"hi' in modules[0].text("hlo_before")  # what the test is about: XLA escaped the quote
    corpus = tmp_path / "corpus"
    assert cli.main(["add", "--dump", str(dumped / "one"), "--module", name, "--corpus", str(corpus)]) == 0, \
        capsys.readouterr().err
    record = json.loads((corpus / f"dump-{modules[0].slug}.json").read_text())
    assert [e["primitive"] for e in record["eqns"]] == [e.primitive.name for e in jax.make_jaxpr(quoted)(EXAMPLE).eqns]
    assert record["xray"] and record["compiled"]["cpu"]["text"]
