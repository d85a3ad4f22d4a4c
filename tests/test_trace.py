"""The committed listings are byte-identical to what inspect and JAX produce for each entry."""
import inspect

import jax
import pytest

from dumpgym.program import ProgramError, load_entry, parse_arg
from dumpgym.programs import SLUGS

SEED_SLUGS = [
    "mlp", "layernorm", "rmsnorm", "softmax", "logsumexp", "attention", "causal", "mha", "gqa",
    "rope", "scan", "remat", "moe", "grads", "dequant", "sharded", "psum",
]


def test_corpus_has_the_seventeen_programs(corpus):
    assert [p["slug"] for p in corpus["programs"]] == SEED_SLUGS == list(SLUGS)
    assert corpus["schema"] == "dumpgym.corpus/1"
    assert corpus["jax_version"] == jax.__version__ == "0.10.2"


@pytest.mark.parametrize("slug", SEED_SLUGS)
def test_listings_are_what_jax_prints(slug, by_slug, programs):
    record = by_slug[slug]
    function = load_entry(record["entry"])
    args = programs[slug].example_args()
    assert [str(parse_arg(a)) for a in record["args"]] == record["args"]
    assert [f"{jax.numpy.dtype(a.dtype).name}{list(a.shape)}" for a in args] == [
        f"{parse_arg(a).dtype}{list(parse_arg(a).shape)}" for a in record["args"]
    ]
    assert record["source"] == inspect.getsource(function)
    assert record["jaxpr"] == str(jax.make_jaxpr(function)(*args))
    assert record["stablehlo"] == jax.jit(function).lower(*args).as_text()


def test_example_arguments_match_the_seed(by_slug):
    assert by_slug["mlp"]["args"] == ["bf16[64,128]", "bf16[128,512]", "bf16[512]", "bf16[512,128]", "bf16[128]"]
    assert by_slug["moe"]["args"] == ["bf16[64,32]", "f32[64,4]", "bf16[4,32,32]"]
    assert by_slug["dequant"]["args"] == ["bf16[64,128]", "i8[128,256]", "bf16[256]"]
    assert by_slug["sharded"]["mesh"] == {"x": 8} and by_slug["psum"]["mesh"] == {"x": 8}
    assert by_slug["mlp"]["mesh"] is None


def test_sharded_programs_run_on_eight_devices(by_slug):
    assert jax.device_count() == 8
    assert "mhlo.num_partitions = 8" in by_slug["sharded"]["stablehlo"]


@pytest.mark.parametrize("spec, shape, dtype", [
    ("bf16[64,128]", (64, 128), "bfloat16"), ("f32[]", (), "float32"),
    ("i8[128,256]", (128, 256), "int8"), ("bool[4]", (4,), "bool"), ("i32[32]", (32,), "int32"),
])
def test_parse_arg_reads_aval_notation(spec, shape, dtype):
    parsed = parse_arg(spec)
    assert (parsed.shape, parsed.dtype, str(parsed)) == (shape, dtype, spec)


@pytest.mark.parametrize("spec, message", [
    ("q16[4]", "unknown dtype 'q16'"), ("f32", "not an array spec"), ("f32[4,x]", "not an array spec"),
])
def test_parse_arg_rejects_bad_specs(spec, message):
    with pytest.raises(ProgramError, match=message):
        parse_arg(spec)
