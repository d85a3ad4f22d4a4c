"""Dumps of small user functions as a run writes them: a function whose name holds a dot (JAX keeps it in the
module's name, `jit_evil.txt`, and in every file name XLA writes for it) and one whose jaxpr JAX prints on one
line (`let b = exp a; c = sub b 1.0 in (c,)`). Checked against JAX itself: the module names its lowering gives,
and the equations `jax.make_jaxpr` traces."""
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from dump_programs import dump_script
from dumpgym import cli
from dumpgym.dumps.folder import read_folder
from dumpgym.ir.jaxpr_text import read_jaxpr
from dumpgym.ir.parse import jaxpr_equations

SCRIPT = r'''
import jax, jax.numpy as jnp
from test_dump_user_names import AGAIN, FUNCTIONS, example, small

for f in FUNCTIONS:
    jax.jit(f)(*example(f))
jax.jit(small)(*AGAIN)  # the same function at another shape: a second module of its name
'''


def loss(w, x):
    return jnp.sum(jnp.tanh(x @ w) ** 2)


def small(x):
    return jnp.exp(x) - 1


def dotted(x):
    return jnp.sin(x) * 2 + jnp.cos(x)


def overridden(x):
    return jnp.log1p(x * x)


dotted.__name__ = "model.apply"
overridden.__name__ = "evil\u202eexe.txt"
FUNCTIONS = (loss, small, dotted, overridden)
AGAIN = (jnp.ones((2, 3)),)


def example(f):
    return (jnp.ones((8, 4)), jnp.ones((2, 8))) if f is loss else (jnp.ones(5),)


@pytest.fixture(scope="module")
def dumped(tmp_path_factory):
    folder = tmp_path_factory.mktemp("names")
    dump_script(f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})\n" + SCRIPT, folder, folder)
    return folder


def _module_name(f) -> str:
    """The module name JAX's lowering gives `f` (`module @NAME` of its StableHLO)."""
    text = jax.jit(f).lower(*example(f)).as_text()
    return text.split("module @", 1)[1].split(" ", 1)[0]


def test_a_module_whose_name_holds_a_dot_reads_whole_and_adds(dumped, tmp_path, capsys):
    folder = read_folder(dumped)
    users = {m.slug: m for m in folder.modules if not m.helper}
    assert {_module_name(f) for f in FUNCTIONS} == {m.name for m in folder.modules if not m.helper}
    assert any("." in m.name for m in users.values())  # what the test is about: JAX kept the dots
    for name, module in users.items():
        assert module.problem is None, (name, module.problem)
        assert set(module.layers()) == {"jaxpr", "stablehlo", "hlo_before", "hlo_after"}, name
        assert module.backend == "cpu" and module.memory() is not None, name
    corpus = tmp_path / "corpus"
    assert cli.main(["add", "--dump", str(dumped), "--corpus", str(corpus)]) == 0, capsys.readouterr().err
    added = json.loads((corpus / "index.json").read_text())["programs"]
    assert sorted(added) == sorted(f"dump-{m.slug}" for m in users.values())
    for slug in added:
        record = json.loads((corpus / f"{slug}.json").read_text())
        assert record["compiled"]["cpu"]["text"] and record["stablehlo"], slug


def test_a_jaxpr_printed_on_one_line_reads_each_equation_as_jax_traced_it(dumped):
    folder = read_folder(dumped)
    for f in FUNCTIONS:
        module = next(m for m in folder.modules if m.name == _module_name(f) and m.xla_number == min(
            n.xla_number for n in folder.modules if n.name == m.name))  # its first compile, at `example`
        text = module.text("jaxpr")
        read = [e for e in read_jaxpr(text).eqns if e.parent is None]
        traced = jax.make_jaxpr(f)(*example(f)).eqns
        assert [e.primitive for e in read] == [e.primitive.name for e in traced], f.__name__
        # The line reader the x-ray counts a primitive's equations with (`dumps/xray.py`) finds the same ones.
        assert [p for _line, p in jaxpr_equations(text)] == [e.primitive.name for e in traced], f.__name__
        for ours, theirs in zip(read, traced):
            assert len(ours.operand_names) == len(theirs.invars), (f.__name__, ours.primitive)
            assert [o.shape for o in ours.outputs] == [v.aval.shape for v in theirs.outvars]
    # A jaxpr JAX printed on one line: each equation's own text ends where the next one starts.
    one_line = [m for m in folder.modules if not m.helper and "\n" not in m.text("jaxpr").strip()]
    assert one_line, "no jaxpr was printed on one line"
    for module in one_line:
        text = module.text("jaxpr")
        for eqn in read_jaxpr(text).eqns:
            own = text[eqn.binders[0].column:eqn.printed_end]
            assert own.count(" = ") == 1 and ";" not in own and own.split(" = ")[1].startswith(eqn.primitive), own
            assert own.split()[-len(eqn.operand_names):] == list(eqn.operand_names), own


def test_compiles_of_one_function_at_two_shapes_are_told_apart_by_their_arguments(dumped):
    from dumpgym.dumps.record import shown_records

    records, _ = shown_records(read_folder(dumped))
    twice = [r for r in records if r.dump.module == _module_name(small)]
    assert len(twice) == 2 and len({r.title for r in twice}) == 2
    # Each title names the arguments JAX lowered that compile for; a function compiled once keeps its name alone.
    for args in (example(small), AGAIN):
        said = ", ".join(f"f32[{','.join(map(str, a.shape))}]" for a in jax.jit(small).lower(*args).args_info[0])
        assert sum(f"({said})" in r.title for r in twice) == 1, (said, [r.title for r in twice])
    once = next(r for r in records if r.dump.module == _module_name(loss))
    assert "(f32" not in once.title


def test_a_dump_added_again_is_refused_in_one_line_or_replaced_with_replace(dumped, tmp_path, capsys):
    corpus = tmp_path / "corpus"
    add = ["add", "--dump", str(dumped), "--module", _module_name(loss), "--corpus", str(corpus)]
    assert cli.main(add) == 0
    assert capsys.readouterr().out.startswith("added dump-jit-loss:")
    index = (corpus / "index.json").read_text()
    # Again: its slug is taken, and a dump's module has no --slug to choose another: --replace is what to give.
    assert cli.main(add) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--replace" in err[0] and "--slug" not in err[0], err
    assert (corpus / "index.json").read_text() == index
    (corpus / "dump-jit-loss.json").write_text("{}")  # what the new dump's record swaps out
    assert cli.main([*add, "--replace"]) == 0
    assert capsys.readouterr().out.startswith("replaced dump-jit-loss:")
    assert (corpus / "index.json").read_text() == index
    record = json.loads((corpus / "dump-jit-loss.json").read_text())
    assert record["dump"]["module"] == _module_name(loss) and record["compiled"]["cpu"]["text"]
