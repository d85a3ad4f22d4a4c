"""The compiled layer's two compiles: the tagged one, read for its graph and never shown, is compiled at
XLA's optimization level 0 for machine code (`hlo._TAGGED_OPTIONS`); the plain one, the text shown, with
JAX's defaults. Judged against XLA itself: for every built-in program and target, the tagged lowering
compiled here with JAX's defaults prints exactly what the cheaper compile printed (the optimization level
changed no HLO pass), and where the two compiles do not pair, the layer is made again at JAX's defaults."""
from __future__ import annotations

from unittest import mock

import pytest

from dumpgym.programs import SLUGS, builtin_program
from dumpgym.target import CPU, GPU, TPU

TARGETS = {"cpu": CPU, "tpu": TPU, "gpu": GPU}
MARKS = {"tpu": [pytest.mark.needs_tpu], "gpu": [pytest.mark.needs_gpu], "cpu": []}

pytestmark = pytest.mark.compiled_hlo


def _cases():
    """(slug, target id) for each built-in program that compiles for the target, marked with its extra."""
    out = []
    for target in TARGETS:
        for slug in SLUGS:
            platform = builtin_program(slug).platform
            if platform == "cpu" or platform == target:  # a Mosaic kernel compiles for a TPU alone
                out.append(pytest.param(slug, target, marks=MARKS[target] + MARKS.get(platform, []),
                                        id=f"{slug}-{target}"))
    return out


def _traced(slug):
    from dumpgym.facts import build_facts
    from dumpgym.trace import trace

    program = builtin_program(slug)
    traced = trace(program.function, program.example_args())
    return traced, build_facts(traced)


def _layer_recording_compiles(traced, facts, target, first_options=None):
    """The layer `compile_layer` makes, and each (tagged lowering, options, tagged compile, plain compile)
    of `_compile_both` it called (which it sets going: they are waited for here); `first_options`, if
    given, replaces the tagged options of the first call."""
    from dumpgym import hlo

    calls = []
    real = hlo._compile_both

    def recorded(tagged, plain, options):
        if first_options is not None and not calls:
            options = first_options
        tagged_compiled, plain_compiled = real(tagged, plain, options)
        calls.append((tagged, options, tagged_compiled, plain_compiled))
        return tagged_compiled, plain_compiled

    with mock.patch.object(hlo, "_compile_both", recorded):
        layer = hlo.compile_layer(traced, facts, TARGETS[target])
    return layer, [(tagged, options, t.result(), p.result()) for tagged, options, t, p in calls]


@pytest.mark.parametrize("slug, target", _cases())
def test_the_tagged_compile_is_what_xla_makes_of_the_tagged_lowering_at_jaxs_defaults(slug, target):
    from dumpgym.hlo import _TAGGED_OPTIONS

    traced, facts = _traced(slug)
    _layer, calls = _layer_recording_compiles(traced, facts, target)
    ((tagged, options, tagged_compiled, _plain),) = calls  # one pair: the cheaper compile paired
    assert options == _TAGGED_OPTIONS
    assert tagged_compiled.as_text() == tagged.compile().as_text()


def test_a_tagged_compile_that_does_not_pair_is_made_again_at_jaxs_defaults():
    """A tagged compile whose HLO passes differ (here: XLA told to skip its fusion passes) does not pair
    with the plain compile; the layer is then the one both compiles at JAX's defaults give."""
    traced, facts = _traced("mlp")
    layer, calls = _layer_recording_compiles(traced, facts, "cpu", first_options={"xla_disable_hlo_passes": "fusion"})
    assert [options for _, options, _, _ in calls] == [{"xla_disable_hlo_passes": "fusion"}, {}]
    # the first tagged compile did differ from the plain one, instruction for instruction
    from dumpgym.hlo import _instructions, _pairing

    first_tagged, first_plain = calls[0][2], calls[0][3]
    assert _pairing(_instructions(first_tagged.runtime_executable().hlo_modules()[0])) != \
        _pairing(_instructions(first_plain.runtime_executable().hlo_modules()[0]))
    assert layer.text == calls[1][3].as_text()
    assert any(i.via == "tag" for i in layer.instructions)
