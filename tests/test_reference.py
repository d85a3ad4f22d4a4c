"""The op reference has one well-formed card for every op that JAX puts in the corpus's dumps."""
import functools
import re
from collections import Counter

import jax
import jax.numpy as jnp
import pytest
from jax import lax
from jax.extend import core
from jax.interpreters import mlir
from jaxlib.mlir import ir
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from dumpgym.traced.program import cpu_mesh
from dumpgym.programs import builtin_programs
from dumpgym.reference import (
    ALIASES, FAMILIES, LAYERS, Card, card_for, cards, compiled_as, fallback_card, fold, same_op, search,
)

TEXT_FIELDS = ("what", "looks", "misread")


def ops_in(function, args):
    """Trace `function`; return ({primitive: param names}, {StableHLO op names}), nested ones included."""
    primitives = {}
    _walk_jaxpr(jax.make_jaxpr(function)(*args).jaxpr, primitives)
    module = ir.Module.parse(jax.jit(function).lower(*args).as_text(), context=mlir.make_ir_context())
    op_names = {module.operation.name}
    _walk_op(module.operation, op_names)
    return primitives, op_names


def _walk_jaxpr(jaxpr, found):
    for eqn in jaxpr.eqns:
        found.setdefault(eqn.primitive.name, set()).update(eqn.params)
        for sub in core.jaxprs_in_params(eqn.params):
            _walk_jaxpr(sub, found)


def _walk_op(op, found):
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                found.add(inner.operation.name)
                _walk_op(inner.operation, found)


@functools.cache
def corpus_ops():
    """Every primitive (with its params) and StableHLO op the seventeen built-in programs produce."""
    primitives, op_names = {}, set()
    for program in builtin_programs():
        p, h = ops_in(program.function, program.example_args())
        for name, params in p.items():
            primitives.setdefault(name, set()).update(params)
        op_names |= h
    return primitives, op_names


def _f32(*shape, spec=None):
    sharding = None if spec is None else NamedSharding(cpu_mesh(x=8), spec)
    return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=sharding)


def _smap(f, in_specs=P("x"), out_specs=P("x"), **kw):
    return jax.shard_map(f, mesh=cpu_mesh(x=8), in_specs=in_specs, out_specs=out_specs, **kw)


@jax.custom_vjp
def _custom_cos(x):
    return jnp.cos(x)


_custom_cos.defvjp(lambda x: (jnp.cos(x), x), lambda x, g: (-jnp.sin(x) * g,))


def common_programs():
    """Small programs for the ops a user's own code brings beyond the corpus."""
    x, i32 = _f32(8, 16), jax.ShapeDtypeStruct((), jnp.int32)
    b = jax.ShapeDtypeStruct((8, 16), jnp.bool_)
    rows = _f32(8, 4, spec=P("x"))
    ring = [(j, (j + 1) % 8) for j in range(8)]
    return {
        "scan": (lambda x: lax.scan(lambda c, r: (c + r, c * r), jnp.zeros(16), x), (x,)),
        "while_loop": (lambda x, n: lax.fori_loop(0, n, lambda _, c: c * 2, x), (x, i32)),
        "cond": (lambda x: lax.cond(x.sum() > 0, jnp.sin, jnp.cos, x), (x,)),
        "switch": (lambda x, n: lax.switch(n, [jnp.sin, jnp.cos, jnp.tanh], x), (x, i32)),
        "custom_jvp": (jax.nn.relu, (x,)),
        "custom_vjp": (lambda x: (_custom_cos(x), jax.grad(lambda y: _custom_cos(y).sum())(x)), (x,)),
        "checkpoint_grad": (jax.grad(lambda x: jax.checkpoint(jnp.sin)(x).sum()), (x,)),
        "gather": (lambda x, idx: x[idx], (x, jax.ShapeDtypeStruct((4,), jnp.int32))),
        "scatter": (lambda x: x.at[2].set(1.0).at[3].add(2.0), (x,)),
        "dynamic_slices": (
            lambda x, s: lax.dynamic_update_slice(x, lax.dynamic_slice(x, (s, 0), (2, 16)), (0, s)),
            (x, i32),
        ),
        "conv": (
            lambda a, w: lax.conv_general_dilated(a, w, (1, 1), "SAME"),
            (_f32(1, 3, 8, 8), _f32(4, 3, 3, 3)),
        ),
        "sorts": (lambda x: (jnp.sort(x), jnp.argsort(x), lax.top_k(x, 3), jnp.argmin(x, 1)), (x,)),
        "cumsum": (lambda x: jnp.cumsum(x, axis=1), (x,)),
        "shapes": (lambda x: (jnp.pad(x, 1), x[None].squeeze(0), jnp.expand_dims(x, 1), x[:, ::-1]), (x,)),
        "clamps": (lambda x: (lax.clamp(0.0, x, 1.0), jnp.clip(x, 0.0, 1.0), jnp.minimum(x, 1)), (x,)),
        "math": (
            lambda x: (lax.erf(x), jax.nn.gelu(x, approximate=False), jax.nn.sigmoid(x), x ** x,
                       jnp.sqrt(x), jnp.abs(x), jnp.sign(x), -x, jnp.sin(x), jnp.cos(x),
                       jnp.log1p(x), jnp.expm1(x), jnp.isfinite(x)),
            (x,),
        ),
        "rounding": (lambda x: (jnp.round(x), lax.round(x), jnp.floor(x), jnp.ceil(x), x % 3.0), (x,)),
        "compare": (lambda x, y: (x == y, x != y, x < y, x <= y, x > y, x >= y), (x, x)),
        "logic": (lambda p, q: (p & q, p | q, ~p, p ^ q, jnp.any(p, 0), jnp.all(p, 0)), (b, b)),
        "select_n": (lambda w, x: lax.select_n(w, x, x * 2, x * 3), (x.update(dtype=jnp.int32), x)),
        "reductions": (lambda x: (jnp.min(x, 0), jnp.prod(x, 0), lax.stop_gradient(x)), (x,)),
        "bits": (lambda x: (lax.bitcast_convert_type(x, jnp.int32), jnp.array(x, copy=True)), (x,)),
        "all_gather": (_smap(lambda a: (lax.all_gather(a, "x", tiled=True), lax.all_gather(a, "x"))),
                       (rows,)),
        "ppermute": (_smap(lambda a: lax.ppermute(a, "x", ring)), (rows,)),
        "all_to_all": (_smap(lambda a: lax.all_to_all(a, "x", 1, 1, tiled=True)), (_f32(8, 8, spec=P("x")),)),
        "psum_scatter": (_smap(lambda a: lax.psum_scatter(a, "x", tiled=True)), (_f32(64, 8, spec=P("x")),)),
        "axis_index": (_smap(lambda a: a + lax.axis_index("x")), (rows,)),
        "pmax_pmin_psum": (_smap(lambda a: (lax.pmax(a, "x"), lax.pmin(a, "x"), lax.psum(a, "x")),
                                 out_specs=(P(), P(), P()), check_vma=False), (rows,)),
        "pvary": (_smap(lambda w: lax.pcast(w, "x", to="varying"), in_specs=P()), (_f32(4, 4, spec=P()),)),
        "reshard": (lambda a: jax.sharding.reshard(a, NamedSharding(cpu_mesh(x=8), P())), (rows,)),
    }


@functools.cache
def common_ops(name):
    """The ops of one common program, traced once."""
    function, args = common_programs()[name]
    return ops_in(function, args)


COMMON = sorted(common_programs())


def _sentences(text):
    # Code spans such as `{ lambda ; a:f32[4]. let` would count as sentence ends; drop them first.
    return len(re.findall(r"[.!?](?=\s|$)", re.sub(r"`[^`]*`", "code", text)))


def _missing(names, layer):
    return sorted(n for n in names if card_for(n) is None or card_for(n).layer != layer)


@pytest.mark.needs_tpu  # corpus_ops traces pallas-matmul, which lowers only for a TPU
def test_every_corpus_primitive_has_a_jaxpr_card():
    primitives, _ = corpus_ops()
    assert len(primitives) > 30
    assert _missing(primitives, "jaxpr") == []


@pytest.mark.needs_tpu
def test_every_corpus_stablehlo_op_has_a_stablehlo_card():
    _, op_names = corpus_ops()
    assert {"builtin.module", "stablehlo.reduce", "sdy.manual_computation"} <= op_names
    assert _missing(op_names, "stablehlo") == []


@pytest.mark.parametrize("name", COMMON)
def test_ops_common_user_code_brings_have_cards(name):
    primitives, op_names = common_ops(name)
    assert _missing(primitives, "jaxpr") == []
    assert _missing(op_names, "stablehlo") == []


@pytest.mark.parametrize("source", [pytest.param("corpus", marks=pytest.mark.needs_tpu), *COMMON])
def test_looks_names_a_param_the_primitive_really_has(source):
    primitives, _ = corpus_ops() if source == "corpus" else common_ops(source)
    for name, params in primitives.items():
        if params:
            looks = card_for(name).looks
            assert any(re.search(rf"\b{re.escape(p)}\b", looks) for p in params), (name, sorted(params))


def test_card_names_are_unique_within_a_layer():
    names = [(c.layer, c.name) for c in cards()]
    assert [n for n, k in Counter(names).items() if k > 1] == []


def test_no_card_field_is_empty():
    for card in cards():
        for field in ("name", "layer", "family", *TEXT_FIELDS):
            assert getattr(card, field).strip(), (card.name, field)


def test_card_text_is_one_to_three_sentences():
    for card in cards():
        assert 1 <= _sentences(card.what) <= 2, (card.name, card.what)
        assert 1 <= _sentences(card.looks) <= 3, (card.name, card.looks)
        assert 1 <= _sentences(card.misread) <= 3, (card.name, card.misread)


def test_no_card_text_duplicates_another():
    texts = Counter(getattr(c, f) for c in cards() for f in TEXT_FIELDS)
    assert [t for t, k in texts.items() if k > 1] == []


def test_layers_families_and_names_agree():
    for card in cards():
        assert card.layer in LAYERS and card.family in FAMILIES and card.family != "unknown"
        dialect = card.name.split(".")[0] if "." in card.name else None
        if card.layer == "stablehlo":
            assert dialect in {"stablehlo", "chlo", "sdy", "func", "builtin"}, card.name
        elif card.layer == "hlo":  # compiled HLO has no dialects: opcodes and layout notation
            assert dialect is None and " " not in card.name, card.name
        else:
            assert dialect is None, card.name


def test_pairs_name_existing_cards_at_the_other_layer():
    for card in cards():
        for name in card.pairs:
            twin = card_for(name)
            assert twin is not None and twin.name == name, (card.name, name)
            assert twin.layer != card.layer, (card.name, name)


def test_pairs_are_mutual():
    for card in cards():
        for name in card.pairs:
            assert card.name in card_for(name).pairs, (card.name, name)


def test_a_card_without_pairs_says_nothing_corresponds():
    for card in cards():
        if not card.pairs:
            assert "counterpart" in " ".join(getattr(card, f) for f in TEXT_FIELDS), card.name


def test_card_for_accepts_printed_spellings_and_aliases():
    assert card_for("reduce_sum").name == "reduce_sum"
    assert card_for('"stablehlo.all_reduce"').name == "stablehlo.all_reduce"
    assert card_for("call").name == "func.call"
    assert card_for("pjit").name == "jit"
    assert card_for("remat").name == card_for("checkpoint").name == "remat2"
    assert card_for("expand_dims").name == "broadcast_in_dim"
    assert all(card_for(target) is not None for target in ALIASES.values())
    assert card_for("no_such_op") is None


def test_cards_is_a_fresh_list_of_frozen_cards():
    first = cards()
    first.clear()
    assert cards() and all(isinstance(c, Card) for c in cards())
    with pytest.raises(AttributeError):
        cards()[0].what = "changed"


@pytest.mark.parametrize("name, layer", [("random_bits", "jaxpr"), ("stablehlo.rng", "stablehlo")])
def test_fallback_card_admits_no_card_is_written(name, layer):
    card = fallback_card(name)
    assert (card.name, card.layer, card.family, card.pairs) == (name, layer, "unknown", ())
    assert "No reference card is written" in card.what
    assert all(getattr(card, f).strip() for f in TEXT_FIELDS)


def test_bad_layer_or_family_is_refused():
    with pytest.raises(ValueError, match="layer"):
        Card("x", "mlir", "elementwise", "w", "l", "m")
    with pytest.raises(ValueError, match="family"):
        Card("x", "jaxpr", "misc", "w", "l", "m")


def _compiled_opcodes(corpus):
    """Every opcode the committed corpus's compiled listings (CPU and TPU) print, as printed (`exponential`)."""
    from dumpgym.record.schema import Corpus

    printed = set()
    for p in Corpus.from_json(corpus).programs:
        for layer in p.compiled.values():
            if layer.backend in ("cpu", "tpu"):  # each printed opcode is checked against XLA's own print in test_hlo
                printed |= {layer.printed(i) for i in layer.instructions} - {None}
    return printed


def test_every_opcode_the_compiled_listings_print_has_a_card(corpus):
    printed = _compiled_opcodes(corpus)
    assert {"fusion", "copy-start", "copy-done", "get-tuple-element", "custom-call", "all-reduce"} <= printed
    missing = sorted(op for op in printed if card_for(op, layer="hlo") is None)
    assert missing == []


def test_hlo_cards_cover_the_tpu_notation_and_xla_own_opcodes():
    for name in ("T(8,128)(2,1)", "S(1)", "{1,0}", "fusion", "bitcast", "copy", "get-tuple-element", "tuple",
                 "while", "conditional", "parameter", "all-reduce", "all-gather", "reduce-scatter",
                 "collective-permute", "copy-start", "copy-done", "all-reduce-start", "all-reduce-done",
                 "custom-call", "online-softmax", "convolution"):
        assert card_for(name, layer="hlo").layer == "hlo", name


def test_a_bare_name_keeps_finding_the_jaxpr_card_and_layer_hlo_the_compiled_one():
    assert card_for("copy").layer == "jaxpr" and card_for("copy", layer="hlo").layer == "hlo"
    assert card_for("while").layer == "jaxpr" and card_for("while", layer="hlo").family == "control"
    assert card_for("fusion").layer == "hlo"  # no other layer prints it
    assert card_for("no-such-op", layer="hlo") is None
    assert card_for("exponential", layer="hlo").name == "stablehlo.exponential"  # same op, same name


# What people type, and cards each query must find (it may find more). Between them: aliases (matmul,
# remat), the three spellings of a collective, the words a layer's notation goes by, and the same op at
# every layer: a primitive, its StableHLO op and the opcodes XLA compiles that into.
QUERIES = {
    "matmul": {"dot_general", "stablehlo.dot_general", "hlo:dot", "hlo:convolution"},
    "einsum": {"dot_general", "stablehlo.dot_general", "hlo:dot"},
    "all-reduce": {"psum", "pmax", "stablehlo.all_reduce", "hlo:all-reduce", "hlo:all-reduce-start",
                   "hlo:all-reduce-done"},
    "all_reduce": {"psum", "stablehlo.all_reduce", "hlo:all-reduce", "hlo:all-reduce-done"},
    "allreduce": {"psum", "stablehlo.all_reduce", "hlo:all-reduce"},
    "psum": {"psum", "psum_invariant", "stablehlo.all_reduce", "hlo:all-reduce"},
    "fusion": {"hlo:fusion", "hlo:parameter"},
    "layout": {"hlo:{1,0}", "hlo:T(8,128)(2,1)", "hlo:bitcast", "hlo:copy"},
    "tile": {"hlo:T(8,128)(2,1)"},
    "donate": {"func.func", "hlo:input_output_alias"},
    "remat": {"remat2", "stablehlo.optimization_barrier"},
    "checkpoint": {"remat2", "stablehlo.optimization_barrier"},
    "all-gather": {"all_gather", "stablehlo.all_gather", "hlo:all-gather", "hlo:all-gather-start"},
    "allgather": {"all_gather", "stablehlo.all_gather", "hlo:all-gather-done"},
    "reduce_scatter": {"reduce_scatter", "stablehlo.reduce_scatter", "hlo:reduce-scatter"},
    "ppermute": {"ppermute", "stablehlo.collective_permute", "hlo:collective-permute"},
    "softmax": {"exp", "reduce_max", "hlo:online-softmax"},
    "sigmoid": {"logistic"},
    "cast": {"convert_element_type", "stablehlo.convert"},
    "where": {"select_n", "stablehlo.select"},
    "loop": {"scan", "while", "stablehlo.while", "hlo:while"},
    "if": {"cond", "stablehlo.case", "hlo:conditional"},
    "conv": {"conv_general_dilated", "stablehlo.convolution", "hlo:convolution"},
    "arange": {"iota", "stablehlo.iota"},
    "concat": {"concatenate", "stablehlo.concatenate"},
    "vmem": {"hlo:S(1)", "hlo:copy-start"},
    "prefetch": {"hlo:copy-start", "hlo:copy-done"},
    "reduce sum": {"reduce_sum", "stablehlo.reduce"},
    "broadcast": {"broadcast_in_dim", "stablehlo.broadcast_in_dim", "hlo:broadcast"},
    "kernel": {"pallas_call", "stablehlo.custom_call", "hlo:custom-call"},
    "shard_map": {"shard_map", "sdy.manual_computation"},
    "topk": {"top_k", "chlo.top_k"},
    # A GPU's matmuls print as `gemm_fusion_*` (Triton) or a cuBLAS custom-call; a TPU's as `convolution`.
    "gemm": {"dot_general", "stablehlo.dot_general", "hlo:fusion", "hlo:custom-call", "hlo:dot", "hlo:convolution"},
    "cublas": {"hlo:custom-call"},
    "triton": {"hlo:fusion"},
    "reduce-scatter-start": {"hlo:reduce-scatter-start", "hlo:reduce-scatter-done", "stablehlo.reduce_scatter"},
}


def _label(card):
    return f"hlo:{card.name}" if card.layer == "hlo" else card.name


@pytest.mark.parametrize("query", QUERIES)
def test_the_op_search_finds_each_op_by_what_people_call_it_at_every_layer(query):
    found = {_label(c) for c in search(query)}
    assert found, f"{query!r} finds nothing"
    assert QUERIES[query] <= found, sorted(QUERIES[query] - found)


def test_the_query_table_covers_the_words_learners_type():
    assert len(QUERIES) >= 25
    assert {"matmul", "einsum", "all-reduce", "all_reduce", "allreduce", "fusion", "layout", "tile", "donate",
            "remat", "checkpoint"} <= set(QUERIES)


def test_hyphens_and_underscores_match_each_other():
    assert fold("All-Reduce") == fold("all_reduce") == fold("allreduce") == "allreduce"
    assert search("all-reduce") == search("all_reduce") == search("allreduce")
    assert search("dynamic-slice") == search("dynamic_slice") and search("dynamic_slice")


def test_every_word_of_a_query_must_match_and_an_empty_query_shows_every_card():
    assert search("") == cards() == search("   ")
    assert {c.name for c in search("reduce sum")} < {c.name for c in search("reduce")}
    assert search("matmul no-such-word-anywhere") == []


def test_the_search_reads_descriptions():
    # "neighbouring" is in no name and no word list, only in what the `{1,0}` card says.
    assert "neighbouring" in card_for("{1,0}", layer="hlo").what
    assert not any("neighbouring" in " ".join((c.name, *c.words)) for c in cards())
    assert "{1,0}" in {c.name for c in search("neighbouring")}


def test_same_op_links_the_three_layers_of_one_op():
    psum, shlo, hlo = card_for("psum"), card_for("stablehlo.all_reduce"), card_for("all-reduce", layer="hlo")
    assert {c.name for c in same_op(psum)} == {"stablehlo.all_reduce", "all-reduce", "all-reduce-start",
                                               "all-reduce-done"}
    assert psum in same_op(hlo) and shlo in same_op(hlo) and hlo in same_op(shlo)
    assert compiled_as(shlo) == [c for c in cards() if c.layer == "hlo" and "stablehlo.all_reduce" in c.compiled_from]
    assert all(c.layer != psum.layer for c in same_op(psum))


def test_compiled_from_names_stablehlo_cards_and_only_compiled_cards_say_it():
    for card in cards():
        for name in card.compiled_from:
            assert card.layer == "hlo" and card_for(name).layer == "stablehlo", (card.name, name)
    with pytest.raises(ValueError, match="compiled opcode"):
        Card("x", "jaxpr", "elementwise", "w", "l", "m", compiled_from=("stablehlo.add",))


def test_a_cards_words_are_unique_and_not_its_own_name():
    for card in cards():
        assert len(set(card.words)) == len(card.words) and card.name not in card.words, card.name
        assert all(w.strip() == w and w for w in card.words), card.name
