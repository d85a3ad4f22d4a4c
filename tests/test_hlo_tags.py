"""The one compile of the compiled layer, judged against XLA itself: the text shown is what XLA prints for
the plain lowering (`jax.jit(f).lower(*args).compile().as_text()` with source locations off, compiled here),
and the tags read from each instruction's source file (or, where XLA kept only the op_name, from the name)
are those of a compile tagged the other way, through the name stack, whose op_names carry the tags."""
from __future__ import annotations

import pytest

from dumpgym.programs import builtin_program

pytestmark = pytest.mark.compiled_hlo

SLUGS = ["mlp", "grads", "scan-layers", "moe", "dropout", "sdpa", "train-step", "fsdp-step", "decode-loop", "rnn-bptt"]


def _traced(function, args):
    from dumpgym.traced.facts import build_facts
    from dumpgym.traced.trace import trace
    traced = trace(function, args)
    return traced, build_facts(traced)


def _plain_text(traced) -> str:
    """XLA's compile of the program as JAX lowers it with source locations off, at JAX's defaults: the text
    the layer must show. Lowered from a copy of the jaxpr (`lower_copy`), as JAX's caches would hand back
    a lowering this process made earlier with the locations on; nothing of the copy is tagged."""
    from dumpgym.jax_internals import no_traceback_locations
    from dumpgym.traced.trace import lower_copy

    with no_traceback_locations():
        lowered = lower_copy(traced.jax_traced)
    assert "dgeqn" not in lowered.as_text(debug_info=True)
    return lowered.compile().as_text()


def _layer_and_compiles(traced, facts):
    from unittest import mock

    from dumpgym.compiled import layer as hlo

    made = []
    real = hlo._compile_for_cpu

    def recorded(*a):
        made.append(real(*a))
        return made[-1]

    with mock.patch.object(hlo, "_compile_for_cpu", recorded):
        layer = hlo.compile_layer(traced, facts)
    return layer, made[0]


@pytest.mark.parametrize("slug", SLUGS)
def test_the_text_shown_is_what_xla_prints_for_the_plain_lowering(slug):
    program = builtin_program(slug)
    traced, facts = _traced(program.function, program.example_args())
    layer, _compiles = _layer_and_compiles(traced, facts)
    assert layer.text == _plain_text(traced)


@pytest.mark.parametrize("slug", ["train-step", "moe", "decode-loop"])
def test_the_metadata_read_with_the_shown_text_is_what_xla_prints_for_each_instruction(slug):
    """The fields read off the compiled module's text in the pass that makes the shown text are, for every
    instruction, those of its own printed form as XLA's bindings give it (`HloInstruction.to_string()`), and
    every instruction printed with metadata in the module's text is read."""
    from dumpgym.compiled import layer as hlo
    from dumpgym.ir.tags import metadata_fields, shown_text, shown_text_and_metadata

    program = builtin_program(slug)
    traced, _facts = _traced(program.function, program.example_args())
    compiled = hlo.start_compiles(traced).compiled.result()
    printed = compiled.as_text()
    text, by_name = shown_text_and_metadata(printed)
    assert text == shown_text(printed)
    module = compiled.runtime_executable().hlo_modules()[0]
    own = {i.name: metadata_fields(i.to_string()) for c in module.computations() for i in c.instructions()}
    assert by_name and all(own[name] == fields for name, fields in by_name.items())
    assert len(by_name) == printed.count(", metadata={")
    assert {n for n, fields in own.items() if fields} <= set(by_name) | _folded(printed, own)


@pytest.mark.parametrize("slug", ["train-step", "moe", "decode-loop"])
def test_the_graph_s_users_are_what_xla_s_bindings_say_each_instruction_is_used_by(slug):
    """`CompiledGraph` finds each instruction's users from the operands of the others: the same instructions,
    once each, as the bindings' own `HloInstruction.users()`."""
    from dumpgym.compiled import layer as hlo
    from dumpgym.ir.hlo_graph import CompiledGraph, definition_lines
    from dumpgym.ir.tags import shown_text

    program = builtin_program(slug)
    traced, facts = _traced(program.function, program.example_args())
    started = hlo.start_compiles(traced)
    compiled = started.compiled.result()
    module = compiled.runtime_executable().hlo_modules()[0]
    listed = [(c.name, i) for c in module.computations() for i in c.instructions()]
    text = shown_text(compiled.as_text())
    graph = CompiledGraph(listed, definition_lines(text)[1], "", facts.eqn_of_tag, started.names)
    own = {i.name: [u.name for u in i.users()] for _, i in listed}
    assert any(own.values())
    for name, users in own.items():
        assert sorted(graph.users[name]) == sorted(users), name


def _folded(printed: str, own: dict) -> set[str]:
    """The instructions XLA does not print on a line of their own in the module's text."""
    return {name for name in own if f"%{name} = " not in printed}


def test_names_that_look_like_metadata_are_shown_as_xla_prints_them():
    """A name scope holding quotes, braces and the words of the fields left out is printed, escaped, in the op_name."""
    import jax
    import jax.numpy as jnp

    def f(x):
        with jax.named_scope('a" source_file="b} , metadata={op_name="c'):
            y = jnp.sin(x) * 2
        with jax.named_scope("x;y"):
            return jnp.where(y > 0, y, 0.0) + jnp.where(y > 0, 1.0, y)

    traced, facts = _traced(f, (jnp.ones((8, 16)),))
    layer, _compiles = _layer_and_compiles(traced, facts)
    assert layer.text == _plain_text(traced)
    assert 'source_file=\\"b}' in layer.text  # the scope's own words, kept
    assert any(i.via == "tag" for i in layer.instructions)


@pytest.mark.parametrize("slug", SLUGS)
def test_what_a_name_stack_tagged_compile_tags_is_attributed_to_that_equation_or_one_enclosing_it(slug):
    """The tagged lowering (tags in the name stack, so in every op_name XLA writes) compiled here is
    paired with the layer's compile instruction by instruction (computations and opcodes agree). Where
    its op_name carries a tag, the layer's compile reads the same tag or none (XLA keeps only the op_name
    on what an SPMD partitioner or a fusion makes), or, where XLA kept only an inlined call's op_name,
    an equation enclosing it; and the layer attributes every such instruction outside a fusion body's
    bookkeeping to that equation or one enclosing it, by tag or by the dataflow rules."""
    from _heavy_compiles import tagged_instructions

    from dumpgym.compiled.layer import _instructions
    from dumpgym.compiled.attribution import enclosing
    from dumpgym.ir.hlo_graph import opcode_of
    from dumpgym.ir.tags import metadata_fields
    from dumpgym.ir.tags import innermost_tag

    program = builtin_program(slug)
    traced, facts = _traced(program.function, program.example_args())
    layer, compiles = _layer_and_compiles(traced, facts)
    assert 'source_file="dgeqn' in compiles.compiled.result().as_text()  # the tags set on the module reached XLA
    ours = list(_instructions(compiles.compiled.result().runtime_executable().hlo_modules()[0]))
    theirs = list(_instructions(traced.lowered.compile().runtime_executable().hlo_modules()[0]))
    assert [(c, opcode_of(i)) for c, i in ours] == [(c, opcode_of(i)) for c, i in theirs]
    read = {i.name: tag for _c, i, tag in tagged_instructions(compiles)}
    rows = {i.name: i for i in layer.instructions}
    exact = 0
    for (_c, mine), (_c2, other) in zip(ours, theirs):
        expected = innermost_tag(metadata_fields(other.to_string()).get("op_name", ""))
        got = read.get(mine.name)
        if expected is None:
            continue
        own = facts.eqn_of_tag[expected]
        around = {own, *enclosing(facts, own)}
        exact += got == expected
        literal = opcode_of(mine) in _LITERAL  # rule 9: a literal XLA kept one copy of, named for the jit around it
        assert got in (expected, None) or facts.eqn_of_tag[got] in around or (
            literal and facts.eqn_of_tag[got] in _inside(facts, own)), (slug, mine.name, got, expected)
        row = rows.get(mine.name)
        if row is None or row.opcode == "fusion" or row.via in ("region", "inferred") or not row.eqns:
            continue  # a fusion holds its body's work; regions, rewritten reductions: docs/corpus.md's rules
        # or (rule 9) a literal XLA kept one copy of, whose op_name names the jit around the work it feeds
        inside = literal and set(row.eqns) <= set(_inside(facts, own))
        assert around & set(row.eqns) or inside, (slug, row.name, row.eqns, own)
    assert exact > 0


# What rule 9 may credit inside the jit its op_name names: a constant, or XLA's broadcast of one (as the oracle's
# test holds them, tests/test_attribution_oracle.py), never other work.
_LITERAL = ("constant", "broadcast")


def _inside(facts, container: int):
    """The equations inside `container`, at any depth (by the jaxpr's own nesting: `Facts.callers`)."""
    from compiled_oracle import enclosing_eqns

    return [e for e in facts.callers if container in enclosing_eqns(facts, e)]


def test_a_metadata_left_empty_goes_whole_and_others_keep_their_fields():
    from dumpgym.ir.tags import shown_text

    printed = ('  %a = f32[] add(%x, %y), metadata={source_file="dgeqn3" source_line=1}\n'
               '  %b = f32[] sine(%a), metadata={op_name="jit(f)/sin" source_file="dgeqn4" source_line=1 '
               'source_end_line=1 source_column=1 source_end_column=1}, backend_config={"k":1}\n'
               '  %c = f32[] custom-call(%b), frontend_attributes={kernel_metadata={}}, metadata={op_name="q\\"}"}\n')
    assert shown_text(printed) == ('  %a = f32[] add(%x, %y)\n'
                                   '  %b = f32[] sine(%a), metadata={op_name="jit(f)/sin"}, backend_config={"k":1}\n'
                                   '  %c = f32[] custom-call(%b), frontend_attributes={kernel_metadata={}}, '
                                   'metadata={op_name="q\\"}"}\n')


# Programs whose lowerings hold transforms around tags (jvp, transpose, vmap), calls, loops and checkpoints.
IN_PLACE_SLUGS = SLUGS + ["layernorm", "cond-switch", "embed-xent", "ckpt-policy", "grad-accum", "muon-step"]


@pytest.mark.parametrize("slug", IN_PLACE_SLUGS)
def test_the_tagged_lowering_made_plain_in_place_is_jaxs_plain_lowering_with_the_tags_beside(slug):
    """`tags_in_place` on a tagged lowering gives, location for location (ops and block arguments), the module
    JAX lowers with source locations off and no tags, each op's tag fused beside its own location as
    `carry_tags` puts it: for each of these programs, transforms around tags included."""
    from dumpgym.ir.tags import carry_tags, tags_in_place
    from dumpgym.jax_internals import no_traceback_locations
    from dumpgym.traced.trace import _lower_tagged, lower_copy

    program = builtin_program(slug)
    traced, _facts = _traced(program.function, program.example_args())
    with no_traceback_locations():
        plain = lower_copy(traced.jax_traced).compiler_ir("stablehlo")
    assert "dgeqn" not in plain.operation.get_asm(enable_debug_info=True)
    expected = carry_tags(traced.lowered.compiler_ir("stablehlo"), plain)
    tagged = _lower_tagged(traced.jax_traced)[0].compiler_ir("stablehlo")
    before = tagged.operation.get_asm(enable_debug_info=True)
    names = tags_in_place(tagged, [eqn.primitive.name for eqn in traced.tagged_eqns].__getitem__)
    if names is None:
        assert tagged.operation.get_asm(enable_debug_info=True) == before
        raise AssertionError(f"{slug}: tags_in_place could not make the tagged lowering plain")
    assert tagged.operation.get_asm(enable_debug_info=True) == plain.operation.get_asm(enable_debug_info=True)
    assert names == expected


@pytest.mark.parametrize("slug", ["train-step", "moe", "scan-layers"])
def test_a_compile_that_takes_the_tagged_lowering_over_shows_what_xla_prints_for_the_plain_one(slug):
    """The CPU layer compiled from the trace's own tagged lowering once the x-ray is made (`take_tagged`)
    shows XLA's text for the plain lowering, and the same layer as a compile of a plain lowering."""
    from dumpgym.compiled import layer as hlo
    from dumpgym.traced.xray import build_xray

    program = builtin_program(slug)
    traced, facts = _traced(program.function, program.example_args())
    build_xray(traced, facts)
    expected = _plain_text(traced)
    two_lowerings = hlo.compile_layer(traced, facts)
    taken = hlo.compile_layer(traced, facts, compiles=hlo.start_compiles(traced, take_tagged=True))
    # taken over: its ops now stand at the plain names, each tag fused beside (no plain lowering was made)
    assert "loc(fused[" in traced.lowered.compiler_ir("stablehlo").operation.get_asm(enable_debug_info=True)
    assert taken.text == expected
    assert taken == two_lowerings


@pytest.mark.parametrize("slug", ["train-step", "grads", "scan-layers", "cond-switch"])
def test_a_first_compile_takes_a_copy_of_the_tagged_lowering_and_leaves_it_for_the_xray(slug, monkeypatch):
    """The CPU compile set going before the x-ray (not `take_tagged`) compiles a copy of the tagged lowering, in
    a context of its own, made plain in place: it shows XLA's text for the plain lowering and the same layer
    as a compile of a plain lowering, while the tagged lowering the x-ray reads keeps its tags where they were."""
    from dumpgym import jax_internals
    from dumpgym.compiled import layer as hlo

    program = builtin_program(slug)
    traced, facts = _traced(program.function, program.example_args())
    module = traced.lowered.compiler_ir("stablehlo")
    before = module.operation.get_asm(enable_debug_info=True)
    copied = jax_internals.lowered_copy(traced.lowered)
    assert copied.compiler_ir("stablehlo").operation.get_asm(enable_debug_info=True) == before
    assert copied.compiler_ir("stablehlo").context is not module.context
    taken = hlo.compile_layer(traced, facts)
    assert module.operation.get_asm(enable_debug_info=True) == before  # untouched: "dgeqn" names, no fused tags
    monkeypatch.setattr(jax_internals, "lowered_copy", lambda lowered: None)  # a plain lowering, tags carried
    assert taken.text == _plain_text(traced)
    assert taken == hlo.compile_layer(traced, facts)


def test_a_layer_s_instructions_are_whole_records():
    """Each instruction of a compiled layer (made without its class's `__init__`: `typedjson.made`) has every field
    its class declares: it equals its copy made field by field, and reads back from its JSON as itself."""
    import dataclasses

    from dumpgym.compiled import layer as hlo
    from dumpgym.record.schema import Instruction

    program = builtin_program("train-step")
    traced, facts = _traced(program.function, program.example_args())
    layer = hlo.compile_layer(traced, facts)
    assert layer.instructions
    for ins in layer.instructions:
        assert set(vars(ins)) == {f.name for f in dataclasses.fields(Instruction)}
        assert dataclasses.replace(ins) == ins and Instruction.from_json(ins.to_json()) == ins
