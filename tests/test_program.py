"""Programs: example arguments in aval notation, as the seed gives them and as the command line reads them."""
import jax
import pytest

from dumpgym.traced.program import ProgramError, parse_arg


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


@pytest.mark.parametrize("spec, shape, dtype, printed", [
    ("int32[4,32]", (4, 32), "int32", "i32[4,32]"), ("float32[]", (), "float32", "f32[]"),
    ("bfloat16[2]", (2,), "bfloat16", "bf16[2]"), ("uint8[3]", (3,), "uint8", "u8[3]"),
    ("bool[4]", (4,), "bool", "bool[4]"),
])
def test_parse_arg_reads_numpy_names(spec, shape, dtype, printed):
    parsed = parse_arg(spec)
    assert (parsed.shape, parsed.dtype, str(parsed)) == (shape, dtype, printed)
    assert parsed.to_struct() == jax.ShapeDtypeStruct(shape, jax.numpy.dtype(dtype))


@pytest.mark.parametrize("spec, shape", [("key<fry>[]", ()), ("key<fry>[4]", (4,)), ("key<threefry2x32>[2,3]", (2, 3))])
def test_parse_arg_reads_typed_keys(spec, shape):
    parsed = parse_arg(spec)
    key = jax.random.key(0)
    assert parsed.to_struct() == jax.ShapeDtypeStruct(shape, key.dtype)
    assert str(parsed) == jax.core.ShapedArray(shape, key.dtype).str_short(short_dtypes=True)


@pytest.mark.parametrize("spec, message", [
    ("q16[4]", "unknown dtype 'q16'"), ("f32", "not an array spec"), ("f32[4,x]", "not an array spec"),
    ("key<nope>[]", "unknown dtype 'key<nope>'"), ("str[4]", "unknown dtype 'str'"), ("int[4]", "unknown dtype 'int'"),
])
def test_parse_arg_rejects_bad_specs(spec, message):
    with pytest.raises(ProgramError, match=message):
        parse_arg(spec)
