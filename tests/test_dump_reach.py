"""How far a dump's text reaches what it came from, on programs as users write them (a 2-layer transformer's
train step with a hand-written Adam, a scan RNN's train step, a while loop with a cond inside, a remat'ed MLP,
a sharded step), dumped in the test as a user's run dumps them:

- with JAX's layers: at least 90% of the StableHLO op lines each equation emitted reach that equation in the
  dumped jaxpr, and none reaches another, judged against `dumpgym add` of the same function (a trace here,
  exact by tags);
- with XLA's alone (`--xla_dump_to`, no `JAX_DUMP_IR_TO`): at least 95% of the optimised instructions whose
  metadata names a source line linked to that line and to HLO before optimisations, on the CPU and compiled
  for a TPU through libtpu, each link judged by the instruction's own metadata as XLA's parser reads it."""
import pytest

from dump_reach import PROGRAMS, dump, judged, module_of, program
from dumpgym.corpus.pipeline import program_record
from dumpgym.dumps.folder import read_folder
from dumpgym.dumps.record import module_record
from dumpgym.dumps.source import source_xray
from dumpgym.record.targets import CPU

NAMES = ("transformer_2_layers", "scan_rnn_step", "while_cond", "remat_mlp", "sharded_step")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("reach")
    return read_folder(dump(root / "both", NAMES)), read_folder(dump(root / "xla", NAMES, jax_too=False))


@pytest.mark.parametrize("name", NAMES)
def test_ninety_percent_of_the_op_lines_an_equation_emitted_reach_it_and_none_another(folders, name):
    both, _xla = folders
    module = module_of(both, name)
    record = module_record(module, f"dump-{module.slug}", (str(both.paths[0]),))
    traced = program_record(program(name), targets=(CPU,))
    reached, total, wrong = judged(record, traced)
    assert total and not wrong, wrong[:5]
    assert reached >= 0.9 * total, f"{reached} of {total} op lines reach their equation"


def _judge_source(module) -> None:
    """At least 95% of the framed optimised instructions linked; each link to the line its own frame names, and
    that line's instructions before optimisations named by their own frames too."""
    from dumpgym.ir.hlo_graph import definition_lines
    from dumpgym.ir.parse import hlo_op_names, parse_hlo

    x = source_xray(module)
    assert x.framed and x.linked >= 0.95 * x.framed, (module.slug, x.linked, x.framed)
    rows = x.source.split("\n")
    place = {}
    for g in x.groups:
        file_line = rows[g["jaxpr_lines"][0] - 1].split("  ", 1)[0]
        place[g["eqn"]] = (file_line.rsplit(":", 1)[0], int(file_line.rsplit(":", 1)[1]))
    for layer, linked in (("hlo_after", {int(e): set(v) for e, v in x.lines_by_eqn.items()}),
                          ("hlo_before", {g["eqn"]: set(g["stablehlo_lines"]) for g in x.groups})):
        text = module.text(layer)
        lines = definition_lines(text)[0]
        for _c, name, _op_name, frame in hlo_op_names(parse_hlo(text, module.files[layer])):
            if name not in lines:
                continue
            groups = [e for e, hlo in linked.items() if lines[name] in hlo]
            if frame is None:
                assert not groups, (module.slug, layer, name)
                continue
            assert [(place[e][0].rsplit("/", 1)[-1], place[e][1]) for e in groups] == \
                [(frame[0].rsplit("/", 1)[-1], frame[1])], (module.slug, layer, name)


@pytest.mark.parametrize("name", NAMES)
def test_an_xla_only_dump_links_its_instructions_to_their_source_lines_and_before_optimisations(folders, name):
    _both, xla = folders
    module = module_of(xla, name)
    assert "stablehlo" not in module.files and "jaxpr" not in module.files
    _judge_source(module)


@pytest.mark.needs_tpu
def test_an_xla_only_tpu_dump_links_its_instructions_as_well(tmp_path):
    names = [n for n in NAMES if n != "sharded_step"]  # a TPU dump here compiles for one chip
    folder = read_folder(dump(tmp_path / "tpu", names, "tpu", jax_too=False))
    for name in names:
        module = module_of(folder, name)
        assert module.backend == "tpu"
        _judge_source(module)
