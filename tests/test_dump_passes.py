"""A dump with XLA's per-pass files (`--xla_dump_hlo_pass_re`, `ir/passes.py`, `dumps/passes.py`): the pass named
for each fusion is the first per-pass file XLA wrote that prints it, the texts before and after are XLA's own
lines, and `open` and `add --dump` read such a folder as they read any other."""
import json
import re

import pytest

from dump_programs import dump_script
from dumpgym import cli
from dumpgym.dumps.folder import read_folder
from dumpgym.dumps.record import module_record, shown_records
from dumpgym.ir.passes import pass_dump
from dumpgym.record.schema import PassDump, ProgramRecord

# A jitted function with fusions on the CPU: the dot XLA's dot library takes, the elementwise tail a loop
# fusion, the sum a reduction.
SCRIPT = r'''
import jax, jax.numpy as jnp

def layer(x, w):
    return (jnp.tanh(x @ w + 1.0) * 2.0).sum(axis=0)

jax.jit(layer)(jnp.ones((4, 8)), jnp.ones((8, 16)))
'''


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """The script dumped three ways: every pass that changed the module, the passes named like `fusion`, and
    (for the folder's reading) JAX's files beside every pass."""
    root = tmp_path_factory.mktemp("passes")
    dump_script(SCRIPT, None, root / "all", pass_re=".*")
    dump_script(SCRIPT, None, root / "fusion", pass_re="fusion")
    dump_script(SCRIPT, root / "both", root / "both", pass_re=".*")
    return root


def _layer(folder):
    module = read_folder(folder).module("jit_layer")
    return module, module_record(module, "dump-jit-layer", (str(folder),)).compiled["cpu"]


def _pass_files(module) -> list:
    """XLA's per-pass files of the module, in the order of the step number its names carry (read here apart
    from the reader under test: the four digits after the module's name)."""
    prefix = f"module_{module.xla_number:04d}.{module.name}."
    files = next(iter(module.files.values())).parent.glob(prefix + "[0-9][0-9][0-9][0-9].*.txt")
    return sorted(files, key=lambda p: int(p.name[len(prefix):len(prefix) + 4]))


def _line_of(text: str, name: str) -> str | None:
    """The line of `text` that defines `%name`, by plain search."""
    for line in text.splitlines():
        if line.strip().removeprefix("ROOT ").startswith(f"%{name} = "):
            return line
    return None


def _shown(line: str, full: str | None) -> bool:
    """Whether `line` is `full` as the record keeps it: whole, or cut with an ellipsis."""
    return full is not None and (line == full or (line.endswith(" …") and full.startswith(line[:-2])))


def _fusions(layer) -> list:
    return [i for i in layer.instructions if i.opcode == "fusion"]


@pytest.mark.parametrize("form", ["all", "fusion"])
def test_the_pass_named_for_a_fusion_is_the_first_dump_that_prints_it(dumps, form):
    module, layer = _layer(dumps / form)
    files = _pass_files(module)
    origins = {o.line: o for o in layer.passes.origins}
    assert len(layer.passes.dumps) == len(files) and _fusions(layer)
    for fusion in _fusions(layer):
        texts = [p.read_text() for p in files]
        first = next(k for k, t in enumerate(texts) if f"%{fusion.name} = " in t)
        o = origins[fusion.line]
        assert layer.passes.dumps[o.made].step == int(files[first].name.split(".")[2]), fusion.name
        assert o.made == first
        if first:
            assert f"%{fusion.name} " not in texts[first - 1], fusion.name
        # The line shown after is XLA's own line in that dump.
        assert o.made == 0 or _shown(o.after[0], _line_of(texts[first], fusion.name))


def test_the_loop_fusion_is_made_by_the_fusion_pass_for_certain_in_both_forms(dumps):
    for form in ("all", "fusion"):
        _module, layer = _layer(dumps / form)
        loops = [i for i in layer.instructions if i.opcode == "fusion" and "kind=kLoop" in
                 layer.text.splitlines()[i.line - 1]]
        assert loops, form
        for fusion in loops:
            o = next(o for o in layer.passes.origins if o.line == fusion.line)
            made = layer.passes.dumps[o.made]
            assert (made.after, o.exact) == ("fusion", True), (form, made)
            assert made.pipeline.startswith("HLO_passes"), made


def test_a_fusion_s_before_text_is_xla_s_dump_before_as_many_lines_as_its_body_computes(dumps):
    from dumpgym.ir.hlo_graph import opcode_of
    from dumpgym.ir.parse import parse_hlo

    module, layer = _layer(dumps / "all")
    files = _pass_files(module)
    hlo = parse_hlo(layer.text, module.files["hlo_after"])
    bodies = {c.name: [opcode_of(i) for i in c.instructions()] for c in hlo.computations()}
    told = 0
    for fusion in _fusions(layer):
        o = next(o for o in layer.passes.origins if o.line == fusion.line)
        if not o.before or o.made == 0:
            continue
        before, after = files[o.made - 1].read_text(), files[o.made].read_text()
        called = re.search(r"calls=%([\w.\-]+)", layer.text.splitlines()[fusion.line - 1]).group(1)
        body = [op for op in bodies[called] if op != "parameter"]
        names = [line.strip().removeprefix("ROOT ").split(" = ")[0][1:] for line in o.before]
        assert len(names) == len(body), (fusion.name, names, body)
        for name, line in zip(names, o.before):
            assert _shown(line, _line_of(before, name)), name
        # What it took the place of is gone; what it copied in (a constant another user keeps) may stay.
        assert any(_line_of(after, name) is None for name in names), fusion.name
        told += 1
    assert told >= 2  # the dot's fusion and the loop fusion at least


def test_the_passes_that_changed_an_instruction_are_those_whose_line_of_it_differs(dumps):
    module, layer = _layer(dumps / "all")
    texts = [p.read_text() for p in _pass_files(module)]
    names = {i.line: i.name for i in layer.instructions}
    for o in layer.passes.origins:
        lines = [_line_of(t, names[o.line]) for t in texts]
        expected = tuple(k for k in range(o.made + 1, len(texts))
                         if lines[k] is not None and lines[k] != lines[k - 1])
        assert o.changed == expected, names[o.line]


def test_the_record_keeps_its_passes_within_one_program_s_bytes_and_reads_back(dumps):
    module, layer = _layer(dumps / "all")
    record = module_record(module, "dump-jit-layer", ("here",))
    back = ProgramRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert back == record and back.compiled["cpu"].passes.pass_re == ".*"
    kept = sum(len(line) for o in layer.passes.origins for line in (*o.before, *o.after))
    assert 0 < kept <= len(layer.text)


def test_a_per_pass_folder_opens_and_adds_with_no_file_taken_for_a_module(dumps, tmp_path, capsys, monkeypatch):
    from dumpgym.serve import server as serve

    folder = dumps / "both"
    numbers = {p.name.split(".")[0] for p in folder.glob("module_*after_optimizations.txt")}
    read = read_folder(folder)
    assert len(read.modules) == len(numbers) and not read.problems()
    assert all(m.pass_files for m in read.modules if m.xla_number is not None)
    # Only what no layer reads is counted unread (LLVM IR, object files, the buffers' values), never a pass's text.
    assert read.ignored == sum(1 for p in folder.iterdir() if p.is_file() and p.name.startswith("module_")
                               and (p.suffix in (".ll", ".o") or p.name.endswith("-values.txt")))
    # The same modules, of the same slugs and layers, as the folder gives without its per-pass files.
    plain = tmp_path / "plain"
    plain.mkdir()
    for p in folder.iterdir():
        if p.is_file() and pass_dump(p.name.split(".", 2)[-1]) is None:
            (plain / p.name).write_bytes(p.read_bytes())
    assert len(list(plain.iterdir())) < len(list(folder.iterdir()))
    without = read_folder(plain)
    assert [(m.slug, m.layers()) for m in read.modules] == [(m.slug, m.layers()) for m in without.modules]
    records, notes = shown_records(read)
    assert [r.slug for r in records] == ["dump-jit-layer"] and not notes
    served = []
    monkeypatch.setattr(serve, "serve", lambda **kwargs: served.append(kwargs))
    assert cli.main(["open", str(folder)]) == 0 and served
    assert capsys.readouterr().err == ""
    corpus = tmp_path / "corpus"
    assert cli.main(["add", "--dump", str(folder), "--corpus", str(corpus)]) == 0, capsys.readouterr().err
    added = json.loads((corpus / "dump-jit-layer.json").read_text())
    assert added["compiled"]["cpu"]["passes"]["dumps"]


def test_per_pass_file_names_are_read_as_xla_writes_them():
    assert pass_dump("0014.HLO_passes_after_layout_assignment.after_fusion.before_fusion-wrapper.txt") == \
        PassDump(14, "HLO_passes_after_layout_assignment", "fusion", "fusion-wrapper")
    # A pipeline whose own name starts `after_`: the names are split from the right.
    assert pass_dump("0013.after_layout_assignment.after_pipeline-start.before_pipeline-end.txt") == \
        PassDump(13, "after_layout_assignment", "pipeline-start", "pipeline-end")
    # A dump written inside a pass (copy insertion's steps).
    assert pass_dump("0016.copy-insertion.after_adding_copies_to_resolve_interference.txt") == \
        PassDump(16, "", "copy-insertion", "", "after_adding_copies_to_resolve_interference")
    for other in ("cpu_after_optimizations.txt", "before_optimizations.txt", "cl_3.after_optimizations.txt",
                  "debug_options", "0014.x.after_a.before_b.hlo.pb", "ir-no-opt.ll", "12.a.after_b.before_c.txt"):
        assert pass_dump(other) is None, other


def test_a_pass_is_named_for_certain_only_where_nothing_else_ran_since_the_dump_before():
    from dumpgym.dumps.passes import _exact

    before_fusion = PassDump(0, "P", "reshape-decomposer", "fusion")
    after_fusion = PassDump(1, "P", "fusion", "fusion-wrapper")
    later = PassDump(2, "P", "algsimp", "dce")
    start = PassDump(3, "Q", "pipeline-start", "algsimp")
    copies = PassDump(4, "", "copy-insertion", "", "after_adding_copies")
    # Under `.*` XLA dumps after every pass that changed the module: the pass of the dump is the one.
    assert _exact((before_fusion, later), 1, every_pass=True)
    # Under a narrower pattern (of passes or of pipelines), only where the dump before was written just before
    # that pass, in its pipeline.
    assert _exact((before_fusion, after_fusion), 1, every_pass=False)
    assert not _exact((before_fusion, later), 1, every_pass=False)
    assert not _exact((PassDump(0, "R", "x", "fusion"), after_fusion), 1, every_pass=False)
    # A pipeline's start names no pass; the first dump has none before it.
    assert not _exact((later, start), 1, every_pass=True) and not _exact((after_fusion,), 0, every_pass=True)
    assert _exact((PassDump(3, "P", "dce", "copy-insertion"), copies), 1, every_pass=False)
    assert not _exact((later, copies), 1, every_pass=False)


# The same function compiled for a GPU without one (JAX's CUDA plugin, as tests/test_dumpfolder.py does).
GPU_SCRIPT = r'''
import jax, jax.numpy as jnp
from dumpgym.record.targets import Target
from dumpgym.traced.devices import topology_devices

def layer(x, w):
    return (jnp.tanh(x @ w + 1.0) * 2.0).sum(axis=0)

with jax.default_device(topology_devices(Target("gpu").topology_for(1))[0]):
    args = [jax.ShapeDtypeStruct((4, 8), jnp.float32), jax.ShapeDtypeStruct((8, 16), jnp.float32)]
    jax.jit(layer).trace(*args).lower(lowering_platforms=("cuda",)).compile()
'''


def test_a_gpu_fusion_renamed_by_a_later_pass_names_the_pass_that_made_it_first(tmp_path):
    folder = tmp_path / "gpu"
    dump_script(GPU_SCRIPT, None, folder, pass_re=".*")
    read = read_folder(folder)
    module = read.module("jit_layer")
    layer = module_record(module, "dump-jit-layer", (str(folder),)).compiled["gpu"]
    files = _pass_files(module)
    texts = [p.read_text() for p in files]
    renamed = 0
    for fusion in _fusions(layer):
        o = next(o for o in layer.passes.origins if o.line == fusion.line)
        first = next(k for k, t in enumerate(texts) if f"%{fusion.name} = " in t)
        assert o.made == first and f"%{fusion.name} " not in texts[first - 1], fusion.name
        if o.note.startswith("a new name for %"):
            # XLA's own texts: the old name is gone where the new one appears, and was first printed by the pass
            # the note names.
            old = o.note.removeprefix("a new name for %").split(",")[0]
            assert _line_of(texts[first - 1], old) and _line_of(texts[first], old) is None, old
            made = next(k for k, t in enumerate(texts) if _line_of(t, old))
            assert f"which pass {files[made].name.split('.after_')[1].split('.before_')[0]} " in o.note, o.note
            renamed += 1
    assert renamed  # XLA's GPU pipeline renames its fusions after it makes them (rename_fusions)


def test_a_pipeline_pattern_leaves_a_pass_named_for_certain_only_beside_the_dump_just_before_it(tmp_path):
    folder = tmp_path / "pipeline"
    # XLA matches the pipeline's own name (`HLO passes after layout assignment`), spaces and all.
    dump_script(SCRIPT, None, folder, pass_re=".* --xla_dump_hlo_pipeline_re=HLO.passes.after")
    module, layer = _layer(folder)
    files = _pass_files(module)
    # The pattern leaves out the other pipelines (not copy insertion's own steps, which name no pipeline).
    assert files and all(".HLO_passes_after" in p.name for p in files if ".before_" in p.name)
    texts = [p.read_text() for p in files]
    made_later = 0
    for fusion in _fusions(layer):
        o = next(o for o in layer.passes.origins if o.line == fusion.line)
        assert o.made == next(k for k, t in enumerate(texts) if f"%{fusion.name} = " in t), fusion.name
        made_later += o.made > 0
        # Passes of the pipelines left out changed the module unseen: certain only beside `before_PASS`.
        made, before = layer.passes.dumps[o.made], layer.passes.dumps[o.made - 1] if o.made else None
        assert o.exact == (before is not None and before.before == made.after and made.after != "pipeline-start")
    assert made_later  # the loop fusion: after `fusion`, with the dump before at the pipeline's start, not certain


def test_a_per_pass_file_that_cannot_be_read_is_one_line_and_nothing_is_added(dumps, tmp_path, capsys):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(dumps / "all", copy)
    module, _layer_of_it = _layer(copy)
    broken = _pass_files(module)[3]
    broken.write_bytes(b"")
    corpus = tmp_path / "corpus"
    assert cli.main(["add", "--dump", str(copy), "--corpus", str(corpus)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and broken.name in err[0] and "is empty" in err[0], err
    assert not corpus.exists()
    # `open` shows the module without its passes, and its page says why in one note.
    records, notes = shown_records(read_folder(copy))
    record = next(r for r in records if r.slug == "dump-jit-layer")
    assert record.compiled["cpu"].passes is None and not notes
    assert len([n for n in record.dump.notes if broken.name in n and "is empty" in n]) == 1, record.dump.notes
