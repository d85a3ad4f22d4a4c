"""The TPU layer (`compiled.tpu`), compiled by libtpu for a named topology without a TPU: its text is what
`jax.jit(f).lower(*args).compile()` prints on that topology, every instruction whose op_name carries
an equation's tag is attributed to it, and each fusion lists what XLA put in it."""
import functools
import importlib.util
import os
import re

import pytest

from dumpgym.programs import SLUGS
from dumpgym.record.targets import CPU, DEFAULT_TOPOLOGY, GENERATIONS, TPU, Target, TargetError, parse_target
from _heavy_compiles import layer_and_its_compile, tagged_instructions
from fusion_work import fusion_work
from jax_reference import jit_of

OP_NAME = re.compile(r'op_name="([^"]*)"')


pytestmark = pytest.mark.needs_tpu


def _devices(topology):
    from dumpgym.traced.devices import topology_devices

    return topology_devices(topology)


def _fresh_text(program, topology):
    """`jax.jit(f).lower(*args).compile().as_text()` for the topology, as a TPU user would write it:
    arguments on the first chip, or a shard_map over a mesh of the topology's chips."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    from dumpgym.jax_internals import no_traceback_locations
    from dumpgym.traced.program import on_mesh

    devices = _devices(topology)
    function, args = program.function, program.example_args()
    if program.slug in ("auto-sharded", "fsdp-step", "sp-mlp"):
        function, args = _auto_sharded_on(devices, program)
    elif program.mesh is not None:
        mesh = jax.make_mesh(tuple(program.mesh.values()), tuple(program.mesh), devices=list(devices[:8]),
                             axis_types=(jax.sharding.AxisType.Explicit,) * len(program.mesh))
        # The built-in shard_map programs take their mesh as a keyword (their variants pass another one).
        function = on_mesh(function, mesh)
        args = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=NamedSharding(mesh, PartitionSpec(*p)))
                for a, p in zip(args, program.in_specs)]
    # JAX caches a function's lowering without keying it on the locations setting: a test that lowered
    # this function earlier with source locations on would hand that lowering back.
    jax.clear_caches()
    with jax.default_device(devices[0]), no_traceback_locations():
        return jit_of(function).lower(*args).compile().as_text()


def _auto_sharded_on(devices, program):
    """A program sharded by jit (auto-sharded, fsdp-step, sp-mlp) as a TPU user writes it: its mesh (Auto axes)
    over the topology's chips."""
    import jax
    from jax.sharding import AxisType, NamedSharding, PartitionSpec

    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2, devices=list(devices[:8]))
    args = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=NamedSharding(mesh, PartitionSpec(*p)))
            for a, p in zip(program.example_args(), program.in_specs)]
    if program.slug == "fsdp-step":
        from jax_reference import with_mesh

        return with_mesh(program.function, mesh), args
    if program.slug == "sp-mlp":  # its inner jit's in_shardings and out_shardings name the mesh it is given
        return functools.partial(program.function, mesh=mesh), args

    def tensor_parallel_mlp(x, w_up, w_down):
        h = jax.nn.relu(x @ w_up)
        return jax.lax.with_sharding_constraint(h @ w_down, NamedSharding(mesh, PartitionSpec("data", None)))

    return tensor_parallel_mlp, args


@pytest.mark.compiled_hlo
@pytest.mark.parametrize("slug", SLUGS)
def test_the_tpu_layer_is_what_jax_compiles_for_the_topology(slug, by_slug, programs):
    layer = by_slug[slug]["compiled"]["tpu"]
    assert layer["backend"] == "tpu" and layer["host"] == ""
    assert layer["topology"] == (DEFAULT_TOPOLOGY if by_slug[slug]["mesh"] is None else "v5e:2x4")
    assert layer["device_kind"] == _devices(layer["topology"])[0].device_kind == "TPU v5 lite"
    assert layer["text"] == _fresh_text(programs[slug], layer["topology"])


@pytest.mark.compiled_hlo
@pytest.mark.parametrize("slug", SLUGS)
def test_every_tpu_instruction_tagged_with_an_equation_is_attributed_to_it(slug, programs):
    """Judged from a fresh compile: each instruction whose source file carries a tag computes that
    equation (or, inside a fusion or region, belongs to what holds it)."""
    from dumpgym.traced.facts import build_facts
    from dumpgym.traced.trace import trace
    traced = trace(programs[slug].function, programs[slug].example_args())
    facts = build_facts(traced)
    # the layer, and the compile `_compile_for_topology(traced, TPU)` gave it
    layer, compiled = layer_and_its_compile(traced, facts, TPU)
    by_name = {i.name: i for i in layer.instructions}
    checked = 0
    for _computation, instruction, tag in tagged_instructions(compiled):
        row = by_name[instruction.name]
        if row.opcode == "fusion" and not row.eqns:
            # a fusion holds the work its body does: one that only moves a dot's operand (the partitioner's
            # all-gather) holds nothing (docs/corpus.md, rule 7)
            assert facts.eqns[facts.eqn_of_tag[tag]].primitive in ("dot_general", "conv_general_dilated"), row.name
            continue
        assert row.eqns, f"{slug}: {row.name} carries tag {tag} but is not attributed"
        if row.via == "tag":
            assert facts.eqn_of_tag[tag] in row.eqns
        checked += 1
    assert checked > 0 and layer.stats.unattributed_with_op_name == 0


@pytest.mark.compiled_hlo
@pytest.mark.parametrize("slug", SLUGS)
def test_each_tpu_fusion_lists_the_equations_of_what_xla_put_in_it(slug, by_slug):
    layer = by_slug[slug]["compiled"]["tpu"]
    lines = layer["text"].splitlines()
    for fusion in layer["fusions"]:
        # the work its body does: a dot_general its bitcasts, copies or partitioner's slicing only serve is
        # not in it (docs/corpus.md, rule 7)
        held, listed = fusion_work(layer, by_slug[slug]["eqns"], fusion)
        if not listed and fusion["eqns"]:
            # A fusion XLA built around instructions of its own (TPU's all-reduce-scatter) is the
            # equation its own op_name names: one equation, of that primitive.
            (eqn,) = fusion["eqns"]
            op_name = re.search(r'op_name="([^"]*)"', lines[fusion["line"] - 1]).group(1)
            assert by_slug[slug]["eqns"][eqn]["primitive"] == op_name.split("/")[-1], (slug, fusion["name"])
            continue
        assert set(fusion["eqns"]) == held, (slug, fusion["name"])


def test_the_softmax_kernel_xla_puts_between_two_matmuls_computes_the_softmax(by_slug):
    """libtpu replaces attention's softmax and second matmul with a kernel of its own (`online-softmax`,
    a custom-call with no metadata): it computes every equation from the first matmul's result on."""
    record = by_slug["attention"]
    kernel = next(i for i in record["compiled"]["tpu"]["instructions"] if i["name"] == "online-softmax")
    primitives = {record["eqns"][e]["primitive"] for e in kernel["eqns"]}
    assert kernel["via"] == "inferred"
    assert {"reduce_max", "exp", "reduce_sum", "div", "dot_general"} <= primitives


def test_each_generation_offered_compiles_to_a_text_of_its_own():
    import jax
    import jax.numpy as jnp

    def f(x, w):
        return jnp.tanh(x @ w).sum(0)

    texts = {}
    for generation in GENERATIONS:
        topology = f"{generation}:2x2" if generation in ("v5e", "v6e") else f"{generation}:2x2x1"
        with jax.default_device(_devices(topology)[0]):
            texts[generation] = jax.jit(f).lower(jax.ShapeDtypeStruct((256, 512), jnp.bfloat16),
                                                 jax.ShapeDtypeStruct((512, 128), jnp.bfloat16)).compile().as_text()
        assert _devices(topology)[0].device_kind == GENERATIONS[generation]
    assert len(set(texts.values())) == len(GENERATIONS)


def test_targets_are_named_cpu_tpu_or_a_topology():
    assert parse_target("cpu") == CPU and parse_target("tpu") == TPU
    assert parse_target("tpu:v6e:2x4") == Target("tpu", "v6e:2x4")
    assert TPU.topology_for(1) == "v5e:2x2" and TPU.topology_for(8) == "v5e:2x4"
    for bad in ("npu", "tpu:v7x:2x2", "tpu:v5e", "cpu:v5e:2x2"):
        with pytest.raises(TargetError, match="unknown compile target"):
            parse_target(bad)


ADDED = '''
import jax.numpy as jnp


def proj(x, w):
    return jnp.tanh(x @ w)
'''


def test_add_with_hlo_tpu_records_the_layer_a_fresh_tpu_compile_prints(tmp_path, capsys):
    import jax
    import jax.numpy as jnp

    from dumpgym import cli
    from dumpgym.jax_internals import no_traceback_locations

    (tmp_path / "m.py").write_text(ADDED)
    corpus = tmp_path / "corpus"
    argv = ["add", f"{tmp_path / 'm.py'}:proj", "--arg", "bf16[128,256]", "--arg", "bf16[256,512]",
            "--hlo", "tpu", "--corpus", str(corpus)]
    assert cli.main(argv) == 0, capsys.readouterr().err
    record = __import__("json").loads((corpus / "proj.json").read_text())
    layer = record["compiled"]["tpu"]
    assert list(record["compiled"]) == ["tpu"]  # the TPU layer only, as asked
    assert (layer["device_kind"], layer["topology"]) == ("TPU v5 lite", DEFAULT_TOPOLOGY)
    args = [jax.ShapeDtypeStruct(s, jnp.bfloat16) for s in ((128, 256), (256, 512))]
    spec = importlib.util.spec_from_file_location("added_proj", tmp_path / "m.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with jax.default_device(_devices(DEFAULT_TOPOLOGY)[0]), no_traceback_locations():
        fresh = jax.jit(module.proj).lower(*args).compile().as_text()
    assert layer["text"] == fresh
    assert "T(8,128)(2,1)" in layer["text"]


@pytest.mark.parametrize("hlo, message", [
    ("npu", "unknown compile target 'npu'"),
    ("tpu:v9z:2x2", "unknown compile target 'tpu:v9z:2x2'"),
])
def test_add_with_an_unknown_target_is_one_line_and_writes_nothing(tmp_path, capsys, hlo, message):
    from dumpgym import cli

    (tmp_path / "m.py").write_text(ADDED)
    argv = ["add", f"{tmp_path / 'm.py'}:proj", "--arg", "f32[8,8]", "--arg", "f32[8,8]", "--hlo", hlo,
            "--corpus", str(tmp_path / "corpus")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "corpus").exists()


def test_add_with_hlo_tpu_but_no_tpu_compiler_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    from dumpgym import cli
    from dumpgym.record import targets as target

    monkeypatch.setattr(target, "libtpu_installed", lambda: False)
    (tmp_path / "m.py").write_text(ADDED)
    argv = ["add", f"{tmp_path / 'm.py'}:proj", "--arg", "f32[8,8]", "--arg", "f32[8,8]", "--hlo", "tpu",
            "--corpus", str(tmp_path / "corpus")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "pip install 'dumpgym[tpu]'" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "corpus").exists()


def test_importing_dumpgym_quiets_libtpu_so_commands_print_nothing_of_it(tmp_path):
    import subprocess
    import sys

    (tmp_path / "m.py").write_text(ADDED)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TPU_", "ALLOW_MULTIPLE_LIBTPU"))}
    done = subprocess.run([sys.executable, "-m", "dumpgym", "add", f"{tmp_path / 'm.py'}:proj", "--arg", "f32[8,8]",
                           "--arg", "f32[8,8]", "--hlo", "tpu", "--corpus", str(tmp_path / "corpus")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
