"""The GPU layer, compiled by JAX's CUDA plugin for a described GPU without a GPU: targets are named
`gpu` or `gpu:NAME`, the text is what `jax.jit(f).lower(*args).compile()` prints on that GPU's
topology devices, every instruction whose op_name carries an equation's tag is attributed to it, and
`add --hlo gpu` records it as the GPU's layer (`compiled.gpu`), or says in one line how to get the plugin.
Every built-in program that lowers for more than a TPU carries it, and it is what a fresh compile gives."""
import importlib.util
import json
import os
import subprocess
import sys
from importlib.metadata import version

import pytest

from _heavy_compiles import layer_and_its_compile, tagged_instructions
from dumpgym.record.targets import DEFAULT_GPU, GPU, GPUS, Target, TargetError, parse_target
from dumpgym.traced.devices import topology_devices

ADDED = '''
import jax.numpy as jnp


def proj(x, w):
    return jnp.tanh(x @ w)
'''
SHAPES = ((128, 256), (256, 512))


def _proj():
    import jax.numpy as jnp

    def proj(x, w):
        return jnp.tanh(x @ w)

    return proj


def _args():
    import jax
    import jax.numpy as jnp

    return [jax.ShapeDtypeStruct(s, jnp.bfloat16) for s in SHAPES]


def _layer(function, target):
    from dumpgym.traced.facts import build_facts
    from dumpgym.compiled.layer import compile_layer
    from dumpgym.traced.trace import trace
    traced = trace(function, _args())
    facts = build_facts(traced)
    return traced, facts, compile_layer(traced, facts, target)


def _fresh_text(function, topology):
    """`jax.jit(f).lower(*args).compile().as_text()` with the arguments on the topology's first GPU."""
    import jax

    from dumpgym.jax_internals import no_traceback_locations

    jax.clear_caches()  # a lowering cached with source locations on would come back
    with jax.default_device(topology_devices(topology)[0]), no_traceback_locations():
        return jax.jit(function).lower(*_args()).compile().as_text()


def test_gpu_targets_are_named_gpu_or_a_gpu_model():
    assert parse_target("gpu") == GPU == Target("gpu", DEFAULT_GPU) == Target("gpu", "h100")
    assert parse_target("gpu:h100") == GPU and parse_target("gpu:a100") == Target("gpu", "a100")
    assert GPU.topology_for(1) == "h100:1x1x1" and Target("gpu", "a100").topology_for(8) == "a100:1x1x8"
    for bad in ("gpu:v100", "gpu:h100:1x1x2", "gpus", "cuda"):
        with pytest.raises(TargetError, match=f"unknown compile target '{bad}': .*gpu:h100, gpu:a100"):
            parse_target(bad)


@pytest.mark.needs_gpu
def test_each_gpu_spec_describes_the_gpu_it_is_named_for():
    for name, kind in GPUS.items():
        devices = topology_devices(f"{name}:1x1x1")
        assert len(devices) == 1 and devices[0].device_kind == kind and devices[0].platform == "gpu"
    assert len(topology_devices("h100:1x1x8")) == 8


@pytest.mark.needs_gpu
def test_the_gpu_layer_is_what_jax_compiles_for_the_gpu():
    proj = _proj()
    _traced, _facts, layer = _layer(proj, GPU)
    assert (layer.backend, layer.host, layer.device_kind, layer.topology) == ("gpu", "", GPUS["h100"], "h100:1x1x1")
    assert layer.cuda_plugin_version == version("jax-cuda12-plugin") and layer.libtpu_version == ""
    assert "__triton" in layer.text and "kind=kCustom" in layer.text  # a Triton GEMM fusion: GPU code
    assert layer.text == _fresh_text(proj, "h100:1x1x1")
    assert _layer(proj, GPU)[2].text == layer.text  # the same text each time: nothing is timed
    a100 = _layer(proj, Target("gpu", "a100"))[2]
    assert a100.device_kind == GPUS["a100"] and a100.text != layer.text and a100.host_id != layer.host_id


@pytest.mark.needs_gpu
def test_every_gpu_instruction_tagged_with_an_equation_is_attributed_to_it():
    from dumpgym.traced.facts import build_facts
    from dumpgym.traced.trace import trace
    traced = trace(_proj(), _args())
    facts = build_facts(traced)
    # the layer, and the compile `_compile_for_topology(traced, GPU)` gave it
    layer, compiled = layer_and_its_compile(traced, facts, GPU)
    by_name = {i.name: i for i in layer.instructions}
    checked = 0
    for _computation, instruction, tag in tagged_instructions(compiled):
        row = by_name[instruction.name]
        assert row.eqns, f"{row.name} carries tag {tag} but is not attributed"
        if row.via == "tag":
            assert facts.eqn_of_tag[tag] in row.eqns
        checked += 1
    assert checked > 0 and layer.stats.unattributed_with_op_name == 0
    primitives = {facts.eqns[e].primitive for f in layer.fusions for e in f.eqns}
    assert {"dot_general", "tanh"} <= primitives


@pytest.mark.needs_gpu
def test_a_mesh_program_compiles_onto_as_many_gpus(programs):
    from dumpgym.traced.facts import build_facts
    from dumpgym.compiled.layer import compile_layer
    from dumpgym.traced.trace import trace
    program = programs["psum"]
    traced = trace(program.function, program.example_args())
    layer = compile_layer(traced, build_facts(traced), GPU)
    assert layer.topology == "h100:1x1x8" and "all-reduce" in layer.text
    assert layer.stats.unattributed_with_op_name == 0


@pytest.mark.needs_gpu
def test_add_with_hlo_gpu_records_the_gpu_layer(tmp_path, capsys):
    from dumpgym import cli

    (tmp_path / "m.py").write_text(ADDED)
    corpus = tmp_path / "corpus"
    argv = ["add", f"{tmp_path / 'm.py'}:proj", "--arg", "bf16[128,256]", "--arg", "bf16[256,512]",
            "--hlo", "gpu:h100", "--corpus", str(corpus)]
    assert cli.main(argv) == 0, capsys.readouterr().err
    record = json.loads((corpus / "proj.json").read_text())
    layer = record["compiled"]["gpu"]
    assert list(record["compiled"]) == ["gpu"]
    assert (layer["backend"], layer["device_kind"], layer["topology"]) == ("gpu", GPUS["h100"], "h100:1x1x1")
    assert layer["cuda_plugin_version"] == version("jax-cuda12-plugin") and "libtpu_version" not in layer
    spec = importlib.util.spec_from_file_location("added_proj", tmp_path / "m.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert layer["text"] == _fresh_text(module.proj, "h100:1x1x1")


@pytest.mark.needs_gpu
def test_dumpgym_add_takes_a_gpu_target_as_the_command_does(tmp_path):
    import dumpgym

    record = dumpgym.add(_proj(), *_args(), corpus=tmp_path / "corpus", compiled="gpu:a100")
    assert record.compiled["gpu"].backend == "gpu" and record.compiled["gpu"].device_kind == GPUS["a100"]
    assert list(record.compiled) == ["gpu"]
    assert json.loads((tmp_path / "corpus" / "proj.json").read_text())["compiled"]["gpu"]["topology"] == "a100:1x1x1"


@pytest.mark.needs_gpu
def test_add_with_hlo_gpu_prints_nothing_of_the_cuda_plugin(tmp_path):
    (tmp_path / "m.py").write_text(ADDED)
    env = {k: v for k, v in os.environ.items() if k != "JAX_SKIP_CUDA_CONSTRAINTS_CHECK"}
    done = subprocess.run([sys.executable, "-m", "dumpgym", "add", f"{tmp_path / 'm.py'}:proj", "--arg", "bf16[8,8]",
                           "--arg", "bf16[8,8]", "--hlo", "gpu", "--corpus", str(tmp_path / "corpus")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


# As if the gpu extra were not installed: `import jax_cuda12_plugin` fails and importlib finds no spec for it.
NO_PLUGIN = "import sys\nsys.modules['jax_cuda12_plugin'] = None\n"


def test_add_with_hlo_gpu_but_no_gpu_compiler_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    from dumpgym import cli
    from dumpgym.record import targets as target

    monkeypatch.setattr(target, "cuda_plugin_installed", lambda: False)
    (tmp_path / "m.py").write_text(ADDED)
    argv = ["add", f"{tmp_path / 'm.py'}:proj", "--arg", "f32[8,8]", "--arg", "f32[8,8]", "--hlo", "gpu",
            "--corpus", str(tmp_path / "corpus")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "pip install 'dumpgym[gpu]'" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "corpus").exists()


def test_the_command_without_the_gpu_extra_exits_2_in_one_line_and_writes_nothing(tmp_path):
    (tmp_path / "block").mkdir()
    (tmp_path / "block" / "sitecustomize.py").write_text(NO_PLUGIN)
    (tmp_path / "m.py").write_text(ADDED)
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "block")}
    done = subprocess.run([sys.executable, "-m", "dumpgym", "add", f"{tmp_path / 'm.py'}:proj", "--arg", "f32[8,8]",
                           "--arg", "f32[8,8]", "--hlo", "gpu:a100", "--corpus", str(tmp_path / "corpus")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2 and "pip install 'dumpgym[gpu]'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "corpus").exists()


def test_every_built_in_program_but_the_tpu_kernel_carries_a_gpu_layer(by_slug, programs):
    for slug, record in by_slug.items():
        if programs[slug].platform == "tpu":
            assert "gpu" not in record["compiled"]
            continue
        layer = record["compiled"]["gpu"]
        assert (layer["backend"], layer["device_kind"], layer["host"]) == ("gpu", GPUS["h100"], ""), slug
        assert layer["topology"] == ("h100:1x1x1" if record["mesh"] is None else "h100:1x1x8"), slug
        assert layer["stats"]["unattributed_with_op_name"] == 0, slug


@pytest.mark.needs_gpu
@pytest.mark.parametrize("slug", ["mlp", "layernorm", "train-step", "rnn-bptt"])
def test_the_built_in_gpu_layer_is_what_jax_compiles_for_that_gpu(slug, by_slug, programs):
    """layernorm calls a jit inside (its mesh is empty: one GPU, not none); train-step is jitted already."""
    import jax

    from dumpgym.jax_internals import no_traceback_locations
    from jax_reference import jit_of

    program = programs[slug]
    jax.clear_caches()
    with jax.default_device(topology_devices("h100:1x1x1")[0]), no_traceback_locations():
        fresh = jit_of(program.function).lower(*program.example_args()).compile().as_text()
    assert by_slug[slug]["compiled"]["gpu"]["text"] == fresh


KERNEL_SHAPE = (16, 128)


def _pallas_add(x, y):
    """A Pallas kernel with no interpret mode: Triton lowers it for a GPU, and a CPU refuses it."""
    import jax
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as pltriton

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          compiler_params=pltriton.CompilerParams())(x, y)


def _kernel_args(device=None):
    import jax
    import jax.numpy as jnp
    from jax.sharding import SingleDeviceSharding

    sharding = SingleDeviceSharding(device) if device is not None else None
    return [jax.ShapeDtypeStruct(KERNEL_SHAPE, jnp.float32, sharding=sharding) for _ in range(2)]


def _refusal(function, args) -> str:
    """The first line of what JAX raises tracing and lowering `function` on `args` itself."""
    import jax

    with pytest.raises(Exception) as refused:
        jax.jit(function).trace(*args).lower()
    return str(refused.value).splitlines()[0]


@pytest.mark.needs_gpu
def test_a_pallas_gpu_kernel_added_with_hlo_gpu_is_lowered_and_compiled_for_the_gpu(tmp_path):
    import jax

    import dumpgym
    from dumpgym.jax_internals import no_traceback_locations

    cpu_refusal = _refusal(_pallas_add, _kernel_args())  # this host's CPU cannot lower it
    record = dumpgym.add(_pallas_add, *_kernel_args(), slug="kernel", corpus=tmp_path / "c", compiled="gpu")
    chip = topology_devices(GPU.topology_for(1))[0]
    jax.clear_caches()  # a lowering cached with source locations on would come back
    with no_traceback_locations():
        own = jax.jit(_pallas_add).trace(*_kernel_args(chip)).lower()
        text = own.as_text()
        compiled = own.compile().as_text()
    assert "Only interpret mode" in cpu_refusal
    assert record.platform == "gpu" and list(record.compiled) == ["gpu"]
    assert record.stablehlo == text and "__gpu$xla.gpu.triton" in text  # JAX's own GPU lowering: a Triton kernel
    assert record.compiled["gpu"].text == compiled


@pytest.mark.needs_gpu
@pytest.mark.needs_tpu
def test_a_kernel_the_gpu_refuses_too_is_refused_with_the_gpus_error_not_the_cpus(tmp_path):
    import jax.numpy as jnp
    import jax

    import dumpgym
    from dumpgym.errors import ProgramError
    from dumpgym.programs.pallas_matmul import kernel_layer
    from jax.sharding import SingleDeviceSharding

    shapes = (((256, 512), jnp.float32), ((512, 256), jnp.bfloat16), ((), jnp.float32), ((256,), jnp.float32))
    chip = SingleDeviceSharding(topology_devices(GPU.topology_for(1))[0])
    on_cpu = [jax.ShapeDtypeStruct(s, d) for s, d in shapes]
    gpu_refusal = _refusal(kernel_layer, [jax.ShapeDtypeStruct(s, d, sharding=chip) for s, d in shapes])
    cpu_refusal = _refusal(kernel_layer, on_cpu)
    assert gpu_refusal != cpu_refusal
    with pytest.raises(ProgramError) as refused:
        dumpgym.add(kernel_layer, *on_cpu, slug="tpu-kernel", corpus=tmp_path / "c", compiled="gpu")
    assert gpu_refusal in str(refused.value) and cpu_refusal not in str(refused.value)
    assert not (tmp_path / "c").exists()


def test_a_pallas_gpu_kernel_added_for_the_cpu_keeps_the_cpus_refusal(tmp_path):
    import dumpgym
    from dumpgym.errors import ProgramError

    cpu_refusal = _refusal(_pallas_add, _kernel_args())
    with pytest.raises(ProgramError) as refused:
        dumpgym.add(_pallas_add, *_kernel_args(), slug="kernel", corpus=tmp_path / "c", compiled="cpu")
    assert cpu_refusal in str(refused.value)
    assert not (tmp_path / "c").exists()
