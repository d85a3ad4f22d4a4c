"""The answer forms' checks: forgiving spellings, sets, misreadings, and unreadable responses."""
import pytest

from answer_cases import CASES
from dumpgym.drills import answer
from dumpgym.drills.answer import AxisSet, LineSet, Misreading, Typed, check, from_json


@pytest.mark.parametrize("form,response,right,readable", CASES)
def test_each_case_is_graded_as_the_table_says(form, response, right, readable):
    verdict = check(form, response)
    assert (verdict.right, verdict.readable) == (right, readable)


def test_every_form_reads_back_from_its_json():
    for form, *_ in CASES:
        assert from_json(form).to_json() == {**form, **({"lines": sorted(form["lines"])} if "lines" in form else {})}


def test_a_typed_answer_matching_a_misreading_gets_its_reason():
    verdict = check(CASES[0][0], "bfloat16[512, 64]")
    assert not verdict.right and verdict.rule == "swapped-axes" and "other way" in verdict.reason


def test_a_set_says_what_is_missing_and_extra():
    form = LineSet((9, 3, 5), {"4": "a bitcast"})
    verdict = form.check([3, 4, 9])
    assert verdict.missing == (5,) and verdict.extra == (4,) and verdict.reason == "a bitcast"
    axes = AxisSet("lhs", (8, 64, 128), (0, 2)).check([2, 1])
    assert axes.missing == (0,) and axes.extra == (1,)


def test_an_answer_is_kept_canonical_and_a_right_answer_is_never_a_misreading():
    form = Typed("aval", "bfloat16[64, 512]", misread={"bf16 (64,512)": Misreading("x", "y")})
    assert form.value == "bf16[64,512]" and not form.misread
    with pytest.raises(ValueError):
        Typed("aval", "not a type")
    with pytest.raises(ValueError):
        Typed("colour", "red")


def test_every_dtype_jax_prints_is_read_as_jax_prints_it():
    import jax
    import jax.numpy as jnp
    import ml_dtypes  # noqa: F401  (registers int4, float8_* with numpy)

    from dumpgym.record.dtypes import short
    names = ["bool", "int4", "int8", "int16", "int32", "uint4", "uint8", "uint32", "float16",
             "bfloat16", "float32", "complex64", "float8_e4m3fn", "float8_e5m2"]
    for name in names:
        text = str(jax.make_jaxpr(lambda x: x)(jax.ShapeDtypeStruct((2, 3), jnp.dtype(name))))
        printed = text.split("a:", 1)[1].split(".", 1)[0]  # the binder's type, as the jaxpr prints it
        assert answer.read_aval(f"{name}[2, 3]") == printed, name
        assert answer.read_aval(printed) == printed
        assert answer.read_dtype(short(name)) == printed.split("[")[0]
