"""Compiles the heavy tests would otherwise make twice, the tags a compile carries, and the (program, target)
cases the tests that compile every built-in program for every target run."""
from unittest import mock

import pytest

from dumpgym.programs import SLUGS, builtin_program
from dumpgym.record.targets import CPU, GPU, TPU

TARGETS = {"cpu": CPU, "tpu": TPU, "gpu": GPU}
MARKS = {"tpu": [pytest.mark.needs_tpu], "gpu": [pytest.mark.needs_gpu], "cpu": []}


def program_target_cases(targets=tuple(TARGETS)):
    """(slug, target id) for each built-in program that compiles for each of `targets`, marked with its extra."""
    out = []
    for target in targets:
        for slug in SLUGS:
            platform = builtin_program(slug).platform
            if platform == "cpu" or platform == target:  # a Mosaic kernel compiles for a TPU alone
                marks = MARKS[target] + MARKS.get(platform, [])
                out.append(pytest.param(slug, target, marks=marks, id=f"{slug}-{target}"))
    return out


def layer_and_its_compile(traced, facts, target):
    """`compile_layer(traced, facts, target)` for a TPU or GPU target, and the `Compiles`
    `_compile_for_topology(traced, target)` made for it (its compile done): the very call a test would make again to judge the
    layer from a fresh compile (one more XLA compile of the same program). Should `compile_layer` not
    make that call, for that trace and that target, the test's own call is made instead."""
    from dumpgym.compiled import layer as hlo

    compile_for_topology = hlo._compile_for_topology
    made = []

    def recorded(trace, to):
        compiles = compile_for_topology(trace, to)
        made.append((trace, to, compiles))
        return compiles

    with mock.patch.object(hlo, "_compile_for_topology", recorded):
        layer = hlo.compile_layer(traced, facts, target)
    for trace, to, compiles in made:
        if trace is traced and to == target:
            return layer, compiles
    return layer, compile_for_topology(traced, target)


def tagged_instructions(compiles):
    """(computation, instruction, tag number) for each instruction of a compile (`hlo.Compiles`) that
    carries a tag. The reading is `hlo_tags`'s own, with an op_name ending at a nameless call read as
    the compiled graph reads it (docs/corpus.md, rule 9); `tests/test_hlo_tags.py` holds it to the
    op_names of a compile tagged through the name stack."""
    from dumpgym.compiled.layer import _entry_name, _instructions
    from dumpgym.ir.hlo_graph import CompiledGraph, definition_lines
    from dumpgym.ir.tags import shown_text

    compiled = compiles.compiled.result()
    listed = list(_instructions(compiled.runtime_executable().hlo_modules()[0]))
    text = shown_text(compiled.as_text())
    _lines, roots = definition_lines(text)
    graph = CompiledGraph(listed, roots, _entry_name(text), _Numbers(), compiles.names)
    for computation, instruction in listed:
        tag = graph.tag[instruction.name]
        if tag is not None:
            yield computation, instruction, tag


class _Numbers:
    """A tag number stands for itself (the graph's tags read as tag numbers, not equations)."""

    def __getitem__(self, tag: int) -> int:
        return tag
