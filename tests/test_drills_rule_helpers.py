"""The helpers the misreading rules share: `widened` (a narrow dtype's default-width one) and `rule_on`
(a rule that gets its primitive's params read and checked once, before it runs)."""
import jax.numpy as jnp
import pytest

from dumpgym.drills._avals import is_half, widened
from dumpgym.drills._distractor_rules import distractor_rules, rule_name, rule_on
from dumpgym.record.schema import Aval


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32", "float64", "int8", "int16", "uint8", "int32",
                                   "int64", "bool"])
def test_widened_gives_jax_default_for_narrow_dtypes_only(dtype):
    """What JAX makes of a Python float or int (x64 off) is the default a reader falls back on."""
    floating, integer = jnp.issubdtype(dtype, jnp.floating), jnp.issubdtype(dtype, jnp.integer)
    default = jnp.asarray(1.0).dtype if floating else jnp.asarray(1).dtype if integer else None
    narrow = default is not None and jnp.dtype(dtype).itemsize < default.itemsize
    assert widened(dtype) == (default.name if narrow else None)
    assert is_half(dtype) == (floating and jnp.dtype(dtype).itemsize == 2)


def test_rule_on_skips_equations_its_reader_rejects_and_keeps_the_rule_name():
    primitive = "test-only-primitive"
    seen = []

    def read(eqn):
        return None if eqn == "unreadable" else eqn.upper()

    @rule_on(read, primitive)
    def made_a_slip(eqn, answer, found):
        seen.append(found)
        return answer, f"read {found}"

    try:
        answer = Aval((2,), "float32")
        assert distractor_rules[primitive] == [made_a_slip]
        assert rule_name(made_a_slip) == "made-a-slip"
        assert made_a_slip("unreadable", answer, None) is None and seen == []
        assert made_a_slip("params", answer, None) == (answer, "read PARAMS") and seen == ["PARAMS"]
    finally:
        del distractor_rules[primitive]
