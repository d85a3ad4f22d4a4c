"""Every form of dump folder a run writes, on folders dumped in the tests from one user script (eager
helpers, a function compiled at two shapes beside `f_2`, names one once cut): one folder, JAX's and
XLA's files in two (given as two, or as their parent), XLA alone, XLA's HLO as protos. Pairings are
checked against what the files themselves say (main's signature recounted here from the texts), the
user's modules against the script; slugs, `--module` and the corpus against collisions."""
import json
import re
import shutil
from collections import Counter

import pytest

from dump_programs import USER_MODULES, USER_SCRIPT, dump_script
from dumpgym import cli
from dumpgym.dumps.folder import SLUG_MAX, read_folder


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    root = tmp_path_factory.mktemp("forms")
    dump_script(USER_SCRIPT, root / "one", root / "one")
    dump_script(USER_SCRIPT, root / "split" / "jax", root / "split" / "xla")
    dump_script(USER_SCRIPT, None, root / "xla")
    dump_script(USER_SCRIPT, None, root / "proto", proto=True)
    return root


# What the texts say of main's signature, recounted here: StableHLO `tensor<4x16xf32>`, HLO `f32[4,16]`,
# jaxpr `a:f32[4,16]`, each as (kind of number, dims) with one spelling of the number.
_NUMBER = {"i1": "pred", "pred": "pred", "bool": "pred", "f32": "f32", "bf16": "bf16", "s32": "i32", "i32": "i32",
           "u32": "u32", "ui32": "u32", "f16": "f16", "f64": "f64"}


def _mlir_signature(text: str) -> list[tuple]:
    head = next(line for line in text.splitlines() if "func.func public @main(" in line)
    out = []
    for t in re.findall(r"tensor<([^>]*)>", head):
        *dims, number = t.split("x")
        out.append((_NUMBER.get(number, number), tuple(int(d) for d in dims)))
    return out


def _hlo_signature(text: str) -> list[tuple]:
    rest, depth = text.split("entry_computation_layout={", 1)[1], 1
    for end, char in enumerate(rest):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth == 0:
            break
    layout = re.sub(r"\{[\d,]*\}", "", rest[:end])
    return [(_NUMBER.get(n, n), tuple(int(d) for d in dims.split(",") if d))
            for n, dims in re.findall(r"(\w+)\[([\d,]*)\]", layout)]


def _jaxpr_inputs(text: str) -> list[tuple]:
    # The outermost jaxpr's head is the last line that starts a jaxpr (shared ones print before it).
    head = text[text.rfind("{ lambda ") if text.startswith("{ lambda ") and "\n{ lambda " not in text
                else text.rfind("\n{ lambda ") + 1:]
    head = head.split(". let", 1)[0].split("; ", 1)[1]
    out = []
    for n, dims in re.findall(r"\w+:([\w<>]+)\[([\d,]*)\]", head):
        shape = tuple(int(d) for d in dims.split(",") if d)
        out.append(("u32", shape + (2,)) if n == "key<fry>" else (_NUMBER.get(n, n), shape))
    return out


def _check_pairing(folder) -> None:
    for m in folder.modules:
        assert m.problem is None, (m.slug, m.problem)
        if "stablehlo" in m.files:
            shlo = _mlir_signature(m.text("stablehlo"))
            assert shlo == _hlo_signature(m.text("hlo_before")), m.slug
            if "jaxpr" in m.files:
                assert _jaxpr_inputs(m.text("jaxpr")) == shlo[:len(_jaxpr_inputs(m.text("jaxpr")))], m.slug


def _shown(*folders, only=()):
    """`open`'s programs of the folders (of the modules named `only`), all of them, and its notes."""
    from dumpgym.dumps.record import shown_records

    return shown_records(read_folder(*folders, only=only))


def test_helper_modules_never_block_and_the_users_come_first_biggest_first(dumps, tmp_path, capsys):
    folder = read_folder(dumps / "one")
    _check_pairing(folder)
    assert all(len(m.layers()) == 4 for m in folder.modules)
    # The user's modules are the functions the script jits; everything else is JAX's own.
    assert Counter(m.name for m in folder.modules if not m.helper) == Counter(USER_MODULES)
    assert len([m for m in folder.modules if m.helper]) >= 5
    # `open` shows the user's modules, biggest optimised HLO first (as the files are); the helpers only when
    # nothing else is there (a folder read for one helper's name).
    records, notes = _shown(dumps / "one")
    rows = [r.slug.removeprefix("dump-") for r in records]
    sizes = {m.slug: (dumps / "one" / m.files["hlo_after"].name).stat().st_size for m in folder.modules}
    assert not notes and sorted(rows) == sorted(m.slug for m in folder.modules if not m.helper)
    assert [sizes[r] for r in rows] == sorted((sizes[r] for r in rows), reverse=True)
    helper = next(m for m in folder.modules if m.helper)
    alone, _ = _shown(dumps / "one", only=[helper.slug])
    assert alone and {r.dump.module for r in alone} == {helper.name}
    # add --dump takes the user's modules and leaves the helpers out; the corpus stays readable.
    corpus = tmp_path / "corpus"
    assert cli.main(["add", "--dump", str(dumps / "one"), "--corpus", str(corpus)]) == 0
    out = capsys.readouterr().out.splitlines()
    added = [line.split(":", 1)[0].removeprefix("added ") for line in out if line.startswith("added ")]
    assert sorted(added) == sorted(f"dump-{m.slug}" for m in folder.modules if not m.helper)
    assert out[-1].startswith(f"left out {sum(m.helper for m in folder.modules)} helper modules")
    assert json.loads((corpus / "index.json").read_text())["programs"] == added
    assert cli.main(["list", "--corpus", str(corpus)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(USER_MODULES)


def test_slugs_are_unique_and_the_same_whether_read_whole_or_by_module(dumps):
    folder = read_folder(dumps / "one")
    slugs = [m.slug for m in folder.modules]
    assert len(set(slugs)) == len(slugs) and all(len(s) <= SLUG_MAX for s in slugs)
    # `f` at two shapes beside `f_2`: three slugs; two 70-character names cut to one stay two.
    assert len({m.slug for m in folder.modules if m.name in ("jit_f", "jit_f_2")}) == 3
    assert len({m.slug for m in folder.modules if m.name.startswith("jit_aaaa")}) == 2
    for m in folder.modules:
        for asked in (m.slug, m.name):
            if asked == m.name and sum(n.name == m.name for n in folder.modules) > 1:
                continue
            alone = read_folder(dumps / "one", only=[asked])
            same = alone.module(asked)
            assert (same.slug, same.files) == (m.slug, m.files), asked


def test_module_takes_the_name_the_files_spell_and_an_ambiguous_one_is_one_line(dumps, tmp_path, capsys):
    corpus = tmp_path / "corpus"
    assert cli.main(["add", "--dump", str(dumps / "one"), "--module", "jit_step", "--corpus", str(corpus)]) == 0
    assert capsys.readouterr().out.startswith("added dump-jit-step:")
    before = (corpus / "index.json").read_text()
    assert cli.main(["add", "--dump", str(dumps / "one"), "--module", "jit_f", "--corpus", str(corpus)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "2 modules are named 'jit_f'" in err[0] and "jit-f-3" in err[0], err
    assert (corpus / "index.json").read_text() == before


def test_two_folders_given_as_two_or_as_their_parent_read_as_one(dumps, tmp_path, capsys, monkeypatch):
    from dumpgym.serve import server as serve

    one = read_folder(dumps / "one")
    expected = sorted((m.slug, tuple(sorted(m.files))) for m in one.modules)
    for given in ([dumps / "split" / "jax", dumps / "split" / "xla"], [dumps / "split"]):
        folder = read_folder(*given)
        _check_pairing(folder)
        assert sorted((m.slug, tuple(sorted(m.files))) for m in folder.modules) == expected
    served = []
    monkeypatch.setattr(serve, "serve", lambda **kwargs: served.append(kwargs))
    for command in (["open", str(dumps / "split")], ["open", str(dumps / "split" / "jax"), str(dumps / "split" / "xla")]):
        assert cli.main(command) == 0
        made = list(served[-1]["shown"]) + (served[-1]["later"]()[0] if served[-1]["later"] else [])
        assert sorted(r.slug for r in made) == sorted(f"dump-{m.slug}" for m in one.modules if not m.helper)
        assert all(r.jaxpr and r.stablehlo and r.xray and r.compiled for r in made)
    for n, dump in enumerate((["--dump", str(dumps / "split")],
                              ["--dump", str(dumps / "split" / "jax"), "--dump", str(dumps / "split" / "xla")],
                              ["--dump", str(dumps / "split" / "jax"), str(dumps / "split" / "xla")])):
        assert cli.main(["add", *dump, "--module", "jit_step", "--corpus", str(tmp_path / f"c{n}")]) == 0, \
            capsys.readouterr().err
        record = json.loads((tmp_path / f"c{n}" / "dump-jit-step.json").read_text())
        assert record["stablehlo"] and record["jaxpr"]


def test_open_of_one_folder_twice_shows_distinct_programs(dumps, tmp_path):
    first, second = tmp_path / "d1", tmp_path / "d2"
    shutil.copytree(dumps / "one", first)
    shutil.copytree(dumps / "one", second)
    folder = read_folder(first, second)
    records, _ = _shown(first, second)
    users = [m for m in read_folder(first).modules if not m.helper]
    assert len(records) == len({r.slug for r in records}) == 2 * len(users)
    assert len({r.entry for r in records}) == len(records)  # each from its own files
    assert len({m.files["hlo_after"] for m in folder.modules}) == len(folder.modules)


@pytest.mark.parametrize("form", ["xla", "proto"])
def test_an_xla_only_folder_opens_and_adds_with_every_page_answering(form, dumps, tmp_path, capsys):
    from dumpgym.serve.server import Site

    folder = read_folder(dumps / form)
    assert folder.modules and all(m.problem is None and set(m.layers()) == {"hlo_before", "hlo_after"}
                                  for m in folder.modules)
    assert Counter(m.name for m in folder.modules if not m.helper) == Counter(USER_MODULES)
    one = {m.slug: m for m in read_folder(dumps / "one").modules}
    records, notes = _shown(dumps / form)
    assert records and not notes
    site = Site.build(tmp_path / "gym", shown=tuple(records))
    for record in records:
        slug = record.slug.removeprefix("dump-")
        assert one[slug].name == folder.module(slug).name == record.dump.module
        # The optimised HLO shown is the one XLA wrote (as text, or printed from its proto by XLA), beside
        # the HLO before optimisations and the source lines both name (dumps/source.py), each fetched.
        program = json.loads(site.get(f"/data/programs/{record.slug}.json")[2])
        assert "ENTRY" in program["compiled"]["cpu"]["text"] and "metadata={op_name=" in program["dump"]["hlo_before"]
        assert program["dump"]["source_lines"] and not program["stablehlo"]
        listings = json.loads(site.get(f"/data/listings/{record.slug}.json")[2])
        assert len(listings["dump_source"]) == len(program["dump"]["source_lines"])
        assert site.get(f"/data/compiled/cpu/{record.slug}.json")[0] == 200
    corpus = tmp_path / "corpus"
    assert cli.main(["add", "--dump", str(dumps / form), "--corpus", str(corpus)]) == 0, capsys.readouterr().err
    step = json.loads((corpus / "dump-jit-step.json").read_text())
    assert step["stablehlo"] == "" and step["args"] == ["f32[16,8]", "f32[4,16]"]
    assert "ENTRY" in step["compiled"]["cpu"]["text"]


def test_a_truncated_stablehlo_leaves_xla_layers_shown(dumps, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(dumps / "one", copy)
    mlir = next(copy.glob("jax_ir*_jit_step_compile.mlir"))
    mlir.write_text(mlir.read_text()[: len(mlir.read_text()) // 2])
    folder = read_folder(copy)
    step = next(m for m in folder.modules if m.name == "jit_step" and "hlo_after" in m.files)
    assert step.problem is None and "stablehlo" not in step.files
    records, notes = _shown(copy)
    record = next(r for r in records if r.dump.module == "jit_step" and r.compiled)
    # XLA's two layers, linked by their source lines (dumps/source.py); none of the StableHLO's text, which the
    # page says was left out, as is the jaxpr linked through it (neither stands as a module of its own)
    assert record.dump.hlo_before == step.text("hlo_before") and record.dump.source_lines
    assert any(mlir.name in n and "does not parse" in n for n in record.dump.notes), record.dump.notes
    assert not [m for m in folder.modules if m.problem] and set(step.unread) == {"stablehlo", "jaxpr"}
    page = json.dumps(record.to_json())
    assert "func.func" not in page and "stablehlo.tanh" not in page


def _copy(dumps, tmp_path, name="copy"):
    copy = tmp_path / name
    shutil.copytree(dumps / "one", copy)
    return copy


@pytest.mark.parametrize("kind", ["unreadable", "empty", "binary"])
def test_one_bad_file_is_a_note_for_its_module_and_add_writes_nothing(kind, dumps, tmp_path, capsys, monkeypatch):
    from dumpgym.serve import server as serve

    copy = _copy(dumps, tmp_path)
    path = next(copy.glob("module_*.jit_step.cpu_after_optimizations.txt"))
    path.unlink()
    if kind == "unreadable":  # as root nothing is unreadable by mode: a file whose reading fails (EIO)
        path.symlink_to("/proc/self/mem")
    else:
        path.write_bytes(b"" if kind == "empty" else b"HloModule \x00\x01")
    words = {"unreadable": "cannot read", "empty": "is empty", "binary": "is not text"}[kind]
    folder = read_folder(copy)
    bad = [m for m in folder.modules if m.problem or m.unread]
    assert [m.name for m in bad] == ["jit_step"] and words in bad[0].unread["hlo_after"]
    assert not [m for m in folder.modules if m.problem]  # its StableHLO and jaxpr stay its own, not a module apart
    served = []
    monkeypatch.setattr(serve, "serve", lambda **kwargs: served.append(kwargs))
    assert cli.main(["open", str(copy)]) == 0 and served
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dumpgym: warning: ") and words in err[0], err
    # Its page: JAX's layers linked, no compiled layer, and a note that names the file and why.
    step = next(r for r in served[0]["shown"] if r.dump.module == "jit_step")
    assert step.xray and not step.compiled and any(path.name in n and words in n for n in step.dump.notes)
    corpus = tmp_path / "corpus"
    assert cli.main(["add", "--dump", str(copy), "--corpus", str(corpus)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0] and "nothing was added" in err[0], err
    assert not corpus.exists()


def test_names_that_are_not_utf8_are_shown_and_refused_in_one_line(dumps, tmp_path, capsys):
    import os

    from dumpgym.serve.server import Site

    copy = _copy(dumps, tmp_path, os.fsdecode(b"run\xff"))
    step = next(copy.glob("module_*.jit_step.before_optimizations.txt"))
    (copy / os.fsdecode(b"module_0999.jit_g\xfe.before_optimizations.txt")).write_bytes(step.read_bytes())
    folder = read_folder(copy)
    records, _ = _shown(copy)
    assert "jit_step" in {r.dump.module for r in records}
    site = Site.build(tmp_path / "gym", shown=tuple(records))
    assert site.get("/")[0] == 200
    for record in records:  # the undecodable bytes shown as U+FFFD
        status, _headers, page = site.get(f"/data/programs/{record.slug}.json")
        assert status == 200 and "run\ufffd" in json.loads(page)["dump"]["folders"][0]
    assert len(folder.modules) >= len(records)
    corpus = tmp_path / "corpus"
    assert cli.main(["add", "--dump", str(copy), "--module", "jit_step", "--corpus", str(corpus)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dumpgym: error: ") and "not UTF-8" in err[0], err
    assert not corpus.exists()


def test_a_bidi_override_in_a_name_is_isolated_on_the_page_and_in_the_lesson(dumps, tmp_path, capsys):
    copy = _copy(dumps, tmp_path, "run\u202elive")
    jaxpr = next(copy.glob("jax_*_f_2.jaxpr.txt"))
    (copy / "jax_000999_evil\u202egnp.jaxpr.txt").write_text(jaxpr.read_text())
    folder = read_folder(copy)
    assert any("\u202e" in m.name for m in folder.modules)
    records, notes = _shown(copy)
    for said in [*(line for r in records for line in (r.title, r.lesson)), *notes]:
        assert "\u202e" not in re.sub("\u2068[^\u2069]*\u2069", "", said), said
    corpus = tmp_path / "corpus"
    assert cli.main(["add", "--dump", str(copy), "--module", "jit_step", "--corpus", str(corpus)]) == 0
    capsys.readouterr()
    lesson = json.loads((corpus / "dump-jit-step.json").read_text())["lesson"]
    assert f"\u2068{copy}\u2069" in lesson and "\u202e" not in re.sub("\u2068[^\u2069]*\u2069", "", lesson)


def test_module_reads_only_the_files_of_the_modules_named(dumps, monkeypatch):
    from dumpgym.dumps import folder as dumpfolder

    read = []
    for name in ("parse_stablehlo", "parse_hlo"):
        real = getattr(dumpfolder, name)
        monkeypatch.setattr(dumpfolder, name, lambda text, path, *rest, real=real: read.append(path) or real(text, path, *rest))
    folder = read_folder(dumps / "one", only=["jit_step"])
    assert [m.name for m in folder.modules] == ["jit_step"]
    assert read and all(".jit_step." in p.name or "_jit_step_" in p.name for p in read), read


def test_the_corpus_refuses_two_records_of_one_slug_and_stays_readable(dumps, tmp_path):
    from dumpgym.dumps import record as dump_corpus
    from dumpgym.corpus import user as usercorpus
    from dumpgym.errors import GymError

    folder = read_folder(dumps / "one", only=["jit_f_2", "jit-f"])
    one, two = (dump_corpus.module_record(m, "dump-same", ("here",)) for m in folder.modules[:2])
    with pytest.raises(GymError, match="two of the programs to add have the slug dump-same"):
        usercorpus.store_records([one, two], tmp_path / "corpus")
    assert usercorpus.read_index(tmp_path / "corpus") == []


@pytest.mark.parametrize("name, stacks, functions, helper", [
    # JAX before 0.9: no source tables, and its inner `jit(main)` in every stack (as JAX 0.6 dumps them).
    ("jit_squeeze", {"jit(squeeze)/jit(main)/squeeze"}, None, True),
    ("jit_multiply", {"jit(multiply)/jit(main)/mul", "jit(multiply)/jit(main)/convert_element_type"}, None, True),
    ("jit_softmax", {"jit(softmax)/jit(main)/exp", "jit(softmax)/jit(main)/reduce_max",
                     "jit(softmax)/jit(main)/div"}, None, False),  # several primitives, no tables: the user's
    ("jit_step", {"jit(step)/jit(main)/jvp(jit(layer))/dot_general"}, None, False),
    # With tables (JAX 0.9 and later): they name the functions the ops were traced in.
    ("jit_multiply", {"jit(multiply)/mul", "jit(multiply)/convert_element_type"}, {"<module>", "init"}, True),
    ("jit_" + "a" * 66 + "_one", {"jit(" + "a" * 66 + "_one)/add"}, {"<module>", "long_a"}, False),
    ("jit_apply", {"jit(apply)/tanh", "jit(apply)/mul"}, {"<module>", "M.apply"}, False),
    ("jit__lambda", {"jit(_lambda)/sub"}, {"<module>", "<lambda>"}, False),
    ("jit_norm", {"jit(norm)/sqrt"}, {"<module>", "norm"}, False),  # a function of the user's named as JAX's
])
def test_a_helper_is_told_by_its_name_stacks_and_tables(name, stacks, functions, helper):
    """The rule `_finish` applies, on name stacks and tables in the forms JAX 0.6 and 0.10 print them (the
    helpers' as a dump of USER_SCRIPT under each gave them)."""
    from dumpgym.dumps.folder import DumpModule, _is_helper

    module = DumpModule(name, stacks=frozenset(stacks), functions=None if functions is None else frozenset(functions))
    assert _is_helper(module) is helper


def test_the_heads_of_a_dumps_files_say_what_parsing_them_whole_says(dumps):
    """`hlo_head` and `mlir_head` read a big file's name, entry shapes, kinds of number and source tables from
    its first lines; on every file of a real dump they agree with XLA's and MLIR's parsers on the whole."""
    from dumpgym.ir.parse import (function_names, hlo_head, ir_context, mlir_head, parse_hlo, parse_stablehlo,
                                  read_text, shapes_of_hlo, shapes_of_mlir, types_of_hlo, types_of_mlir)

    hlos = [p for p in (dumps / "one").glob("module_*optimizations.txt") if "-" not in p.name.split("optimizations")[1]]
    mlirs = list((dumps / "one").glob("*.mlir"))
    assert len(hlos) > 10 and len(mlirs) > 5
    for path in hlos:
        text = read_text(path)
        hlo = parse_hlo(text, path)
        assert hlo_head(path) == (hlo.name, shapes_of_hlo(hlo), types_of_hlo(hlo), function_names(text)), path.name
    context = ir_context()
    for path in mlirs:
        module = parse_stablehlo(read_text(path), path, context)
        assert mlir_head(path, context) == (module.operation.attributes["sym_name"].value, shapes_of_mlir(module),
                                            types_of_mlir(module)), path.name


def test_a_module_too_big_to_parse_is_listed_and_paired_by_its_head_and_said(dumps, monkeypatch):
    """A 300 MB optimised HLO took `open` minutes and gigabytes before it served anything, and its page held
    the server: a file of `BIG_FILE` or more is read by its head alone (name, shapes, tables), paired as
    the whole reading pairs it, and `open` says it is not shown (add --dump makes its program)."""
    from dumpgym.dumps import record as dump_record
    from dumpgym.ir import parse

    whole = read_folder(dumps / "one")
    step = next(m for m in whole.modules if m.name == "jit_step")
    monkeypatch.setattr(parse, "BIG_FILE", min(p.stat().st_size for p in step.files.values()))
    headed = read_folder(dumps / "one")
    big = [m for m in headed.modules if m.big]
    assert "jit_step" in {m.name for m in big}
    assert [(m.slug, m.files) for m in headed.modules] == [(m.slug, m.files) for m in whole.modules]
    assert all(m.helper == (w.helper and not m.big) for m, w in zip(headed.modules, whole.modules))
    first, notes, later = dump_record.shown_in_two(headed, first_lines=None)
    assert all(f"dump-{m.slug}" not in {r.slug for r in first} for m in big)
    assert any(n.startswith(f"{m.slug}: a file of it is") and "add --dump" in n for m in big for n in notes)


def test_a_dump_of_xla_alone_links_its_instructions_to_their_source_lines_and_before_optimisations(dumps):
    """Without JAX's layers, the module's x-ray is source lines · HLO before optimisations · optimised HLO.
    Judged by the script itself: an instruction that XLA says came from `tanh` or the dot is linked to the
    line that wrote `jnp.tanh(x @ w)`, one from the product or the sum to `(h * h).sum()` (the forward pass's)."""
    from dumpgym.dumps.record import module_record
    from dumpgym.dumps.source import source_xray
    from dumpgym.ir.hlo_graph import definition_lines
    from dumpgym.ir.parse import hlo_op_names, parse_hlo

    folder = read_folder(dumps / "xla")
    script = USER_SCRIPT.split("\n")  # `python -c` numbers the script's lines from its first, as here

    def line_of(code: str) -> int:
        return next(n for n, t in enumerate(script, 1) if code in t)
    wrote = {"jit_step": {"tanh": line_of("jnp.tanh(x @ w)"), "dot_general": line_of("jnp.tanh(x @ w)"),
                          "mul": line_of("(h * h).sum()"), "reduce_sum": line_of("(h * h).sum()")},
             "jit_f": {"sin": line_of("jnp.sin(x) * 2"), "mul": line_of("jnp.sin(x) * 2")},
             "jit_f_2": {"cos": line_of("jnp.cos(x) + 1"), "add": line_of("jnp.cos(x) + 1")}}
    judged = 0
    for module in (m for m in folder.modules if m.name in wrote):
        x = source_xray(module)
        assert x.framed and x.linked >= 0.95 * x.framed, module.slug
        place = {g["eqn"]: int(x.source.split("\n")[g["jaxpr_lines"][0] - 1].split("  ", 1)[0].rsplit(":", 1)[1])
                 for g in x.groups}
        text = module.text("hlo_after")
        lines = definition_lines(text)[0]
        for _c, name, op_name, frame in hlo_op_names(parse_hlo(text, module.files["hlo_after"])):
            primitive = op_name.rsplit("/", 1)[-1]
            if frame is None or primitive not in wrote[module.name] or name not in lines or "transpose(" in op_name:
                continue  # the backward pass's ops sit at the line of the forward op they differentiate
            groups = [e for e, hlo in x.lines_by_eqn.items() if lines[name] in hlo]
            assert [place[int(e)] for e in groups] == [wrote[module.name][primitive]], (module.slug, name, op_name)
            judged += 1
    assert judged >= 6
    step = next(m for m in folder.modules if m.name == "jit_step")
    x = source_xray(step)
    before = x.groups[0]["stablehlo_lines"]
    assert before and all(n in x.before_lines for n in before)
    # The record holds that x-ray as read: each source row's instructions before and after optimisations.
    dump = module_record(step, "dump-jit-step", (str(dumps / "xla"),)).dump
    assert dump.source == x.source and dump.hlo_before == step.text("hlo_before")
    assert [(s.row, list(s.before), list(s.hlo)) for s in dump.source_lines] == \
        [(g["jaxpr_lines"][0], g["stablehlo_lines"], x.lines_by_eqn[str(g["eqn"])]) for g in x.groups]


@pytest.mark.parametrize("kind", ["empty-before", "binary-buffers", "empty-live-range", "truncated-jaxpr"])
def test_a_truncated_or_empty_file_is_a_note_on_the_modules_page_and_the_rest_is_served(kind, dumps, tmp_path):
    from dumpgym.serve.server import Site

    copy = _copy(dumps, tmp_path)
    pattern, data = {"empty-before": ("module_*.jit_step.before_optimizations.txt", b""),
                     "binary-buffers": ("module_*.jit_step.cpu_after_optimizations-buffer-assignment.txt", b"\0\1"),
                     "empty-live-range": ("module_*.jit_step.cpu_after_optimizations-live-range.txt", b""),
                     "truncated-jaxpr": ("jax_*_step.jaxpr.txt", None)}[kind]
    path = next(copy.glob(pattern))
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2] if data is None else data)
    records, _notes = _shown(copy)
    step = [r for r in records if r.dump.module == "jit_step"]
    assert len(step) == 1
    record = step[0]
    site = Site.build(tmp_path / "gym", shown=tuple(records))
    for data_file in (f"programs/{record.slug}", f"listings/{record.slug}"):
        assert site.get(f"/data/{data_file}.json")[0] == 200
    assert site.get("/")[0] == 200
    if kind == "truncated-jaxpr":  # the jaxpr left out, its StableHLO and XLA's layers linked
        assert not record.jaxpr and record.stablehlo and record.compiled["cpu"].instructions
        assert any("no jaxpr" in n for n in record.dump.notes)
    elif kind == "empty-before":  # the layers the record needs are shown, linked; the one left out is said
        assert record.xray and record.compiled["cpu"].instructions and not record.dump.hlo_before
        assert any(path.name in n and "is empty" in n for n in record.dump.notes), record.dump.notes
    else:  # the buffer reports left out and said, naming the file; every layer shown
        assert record.dump.buffers is None and record.compiled and record.xray
        assert any(path.name in n for n in record.dump.notes), record.dump.notes


@pytest.mark.parametrize("form", ["one", "xla"])
def test_a_dump_modules_record_round_trips_and_a_traced_programs_has_no_dump_field(form, dumps, corpus):
    from dumpgym.record.schema import ProgramRecord, RecordError

    records, _ = _shown(dumps / form)
    for record in records:
        assert ProgramRecord.from_json(json.loads(json.dumps(record.to_json()))) == record, record.slug
    assert all("dump" not in p for p in corpus["programs"])  # the built-in corpus, as committed
    # A source line's row must be one of the rows held.
    xla = next(r for r in records if r.dump.source_lines) if form == "xla" else None
    if xla is not None:
        broken = xla.to_json()
        broken["dump"]["source_lines"][0]["row"] = xla.dump.source.count("\n") + 2
        with pytest.raises(RecordError, match=r"dump\.source_lines\[0\]\.row"):
            ProgramRecord.from_json(broken)


def test_a_module_without_optimised_hlo_is_shown_with_a_note_and_add_refuses_it_in_one_line(dumps, tmp_path, capsys):
    copy = _copy(dumps, tmp_path)
    for path in copy.glob("module_*.jit_step.cpu_after_optimizations*"):
        path.unlink()
    records, _ = _shown(copy)
    step = next(r for r in records if r.dump.module == "jit_step")
    assert not step.compiled and step.xray and any("no optimised HLO" in n for n in step.dump.notes)
    corpus = tmp_path / "corpus"
    assert cli.main(["add", "--dump", str(copy), "--corpus", str(corpus)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dumpgym: error: ") and "no optimised HLO" in err[0], err
    assert not corpus.exists()


# Eager calls of JAX's public functions that jit a private function of JAX's inside them (`jnp.remainder` and
# `jnp.floor_divide` call `jit(_where)`, `jnp.cumsum` a reduce-window), beside the one function the user jits.
EAGER_SCRIPT = r'''
import jax, jax.numpy as jnp

def mine(x):
    return jnp.sin(x).sum()

i = jnp.arange(8)
i % 5; jnp.floor_divide(i, 3); jnp.cumsum(i)
jax.jit(mine)(jnp.ones(4))
'''


def test_an_eager_public_function_calling_jaxs_own_jit_is_a_helper_whether_or_not_jaxs_files_are_there(tmp_path):
    """Its module's private call holds ops whose stacks are relative to the call: they stood outside the
    module's top, so with JAX's files it was taken for the user's, and without them (XLA alone) for JAX's."""
    dump_script(EAGER_SCRIPT, tmp_path / "one", tmp_path / "one")
    dump_script(EAGER_SCRIPT, None, tmp_path / "xla")
    for form in ("one", "xla"):
        folder = read_folder(tmp_path / form)
        assert {"jit_remainder", "jit_floor_divide", "jit_cumsum"} <= {m.name for m in folder.modules}
        assert [m.name for m in folder.modules if not m.helper] == ["jit_mine"], form


# One function jitted twice at the same shapes, the second time donating its first argument: JAX prints the same
# jaxpr for both compiles, beside two StableHLO modules (the second aliases its result to the argument).
DONATED_AGAIN_SCRIPT = r'''
import jax, jax.numpy as jnp

def update(p, g):
    return p - 0.1 * jnp.tanh(g)

p, g = jnp.ones(8), jnp.ones(8)
jax.jit(update)(p, g)
jax.jit(update, donate_argnums=0)(p, g)
'''


def test_a_function_compiled_again_with_other_options_pairs_each_compile_with_its_jaxpr(tmp_path, capsys):
    """The two compiles print one jaxpr text: kept once as a repeated compile, it paired with the first compile
    only, and the second (donated) one was shown and added without its jaxpr, so without its equations."""
    import jax
    import jax.numpy as jnp

    dump_script(DONATED_AGAIN_SCRIPT, tmp_path / "one", tmp_path / "one")
    folder = read_folder(tmp_path / "one")
    _check_pairing(folder)
    users = [m for m in folder.modules if not m.helper]
    assert [m.name for m in users] == ["jit_update", "jit_update"]
    assert len({m.files["stablehlo"] for m in users}) == 2
    assert all("jaxpr" in m.files for m in users) and len({m.files["jaxpr"] for m in users}) == 2
    ones = jnp.ones(8)
    assert sum("tf.aliasing_output" in m.text("stablehlo") for m in users) == 1  # one of them donates
    # Each added program holds the equations JAX traces of the function.
    traced = jax.make_jaxpr(lambda p, g: p - 0.1 * jnp.tanh(g))(ones, ones).eqns
    corpus = tmp_path / "corpus"
    assert cli.main(["add", "--dump", str(tmp_path / "one"), "--corpus", str(corpus)]) == 0
    capsys.readouterr()
    from dumpgym.corpus.user import load_user_programs

    records = [r for r in load_user_programs(corpus) if r["slug"].startswith("dump-jit-update")]
    assert len(records) == 2
    assert all([e["primitive"] for e in r["eqns"]] == [e.primitive.name for e in traced] for r in records)


def test_a_dump_copied_with_cr_lf_line_endings_reads_as_the_dump_it_copies(dumps, tmp_path):
    """A dump folder copied through a Windows checkout ends its lines with CR LF: its jaxpr was read as no
    equations at all (and so no x-ray from them), without a word; every module now reads as the original."""
    copy = tmp_path / "crlf"
    copy.mkdir()
    for path in (dumps / "one").iterdir():
        if path.is_file():
            (copy / path.name).write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    records, notes = _shown(copy)
    originals = {r.slug: r for r in _shown(dumps / "one")[0]}
    assert not notes and sorted(r.slug for r in records) == sorted(originals)
    for record in records:
        original = originals[record.slug]
        assert record.eqns, record.slug
        mine, theirs = record.to_json(), original.to_json()
        assert [k for k in mine if mine[k] != theirs[k]] == ["lesson", "entry", "dump"], record.slug
        assert {k for k in mine["dump"] if mine["dump"][k] != theirs["dump"][k]} == {"folders", "files"}
