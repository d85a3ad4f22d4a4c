"""The jaxpr, StableHLO and compiled-HLO lexers cover every character JAX and XLA print and classify the parts a reader looks for."""
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import pygments.lexers
import pytest
from jax import lax
from pygments.token import (
    Comment, Error, Keyword, Name, Number, Operator, Punctuation, String, Whitespace,
)

from dumpgym.site.lexers import HloLexer, JaxprLexer, StableHloLexer
from dumpgym.programs import SLUGS
from needs_extras import builtin_slugs

K, T, F, V, A, L, O, P = (
    Keyword, Keyword.Type, Name.Function, Name.Variable, Name.Attribute, Name.Label, Operator, Punctuation,
)
f32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)  # noqa: E731
i32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.int32)  # noqa: E731
bf16 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.bfloat16)  # noqa: E731


# --- programs beyond the corpus, one per construct the printers treat specially ---

@jax.jit
def _inner(x):
    return jnp.tanh(x) * 2


@jax.custom_vjp
def _softplus(x):
    return jnp.log1p(jnp.exp(x))


_softplus.defvjp(lambda x: (_softplus(x), x), lambda x, g: (g * jax.nn.sigmoid(x),))


def _scan(x):
    return lax.scan(lambda c, xi: (c + jnp.sin(xi), c * 2), jnp.zeros(x.shape[1:]), x)


def _while(x):
    return lax.while_loop(lambda s: s[0] < 10, lambda s: (s[0] + 1, s[1] * 1.5), (0, x))


def _cond(p, x):
    return lax.cond(p > 0, jnp.exp, lambda x: -x, x)


def _custom_vjp(x):
    return jax.grad(lambda x: _softplus(x).sum())(x), _softplus(x)


def _vmap(x, y):
    return jax.vmap(jnp.dot)(x, y)


def _conv(x, w):
    return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _gather(x, i):
    return x[i], x.at[i].add(1.0)


def _sort(x):
    return jnp.sort(x), jnp.argsort(x), lax.top_k(x, 3)


def _hoisted(x):
    return _inner(x) + _inner(x * 3)


def _literals(x):
    return (x + jnp.array([1.0, 2.0, 3.0, 4.0]), jnp.where(jnp.isnan(x), jnp.inf, -jnp.inf), x * 9.98e-7,
            x.astype(jnp.bfloat16) * jnp.bfloat16(-jnp.inf), jnp.array(True) & (x > 0),
            x.astype(jnp.complex64) * 1j, jnp.float16(3.5) * x.astype(jnp.float16), jnp.nan_to_num(x))


def _random(k):
    return jax.random.normal(jax.random.key(0), (4,)), jax.random.uniform(k, (3,))


def _refs(x):
    r = jax.new_ref(x)
    r[...] += 1
    r[0] = 5.0
    return r[...]


def _callback(x):
    return jax.pure_callback(lambda x: x, jax.ShapeDtypeStruct(x.shape, x.dtype), x)


def _collectives(x):
    from jax.sharding import PartitionSpec as Spec
    mesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    ring = [(i, (i + 1) % 4) for i in range(4)]
    body = lambda a: (lax.psum(a, "x"), lax.all_gather(a, "y"), lax.ppermute(a, "x", ring))  # noqa: E731
    return jax.shard_map(body, mesh=mesh, in_specs=Spec("x", "y"), check_vma=False,
                         out_specs=(Spec(None, "y"), Spec("x"), Spec("x", "y")))(x)


EXTRAS = {
    "scan": (_scan, [f32(5, 3)]), "while": (_while, [f32(3)]), "cond": (_cond, [f32(), f32(4)]),
    "custom_vjp": (_custom_vjp, [f32(4)]), "vmap": (_vmap, [f32(3, 4), f32(3, 4)]),
    "conv": (_conv, [bf16(1, 8, 8, 3), bf16(3, 3, 3, 4)]),
    "gather": (_gather, [f32(10, 4), i32(3)]), "sort": (_sort, [f32(10)]), "hoisted": (_hoisted, [f32(4)]),
    "literals": (_literals, [f32(4)]), "random": (_random, [jax.ShapeDtypeStruct((), jax.random.key(1).dtype)]),
    "refs": (_refs, [f32(4)]), "callback": (_callback, [f32(3)]), "collectives": (_collectives, [f32(8, 8)]),
}


def _builtin(slug):
    """The function and example arguments of a built-in program."""
    from dumpgym.programs import builtin_programs

    program = next(p for p in builtin_programs() if p.slug == slug)
    return program.function, program.example_args()


def _dumps(name):
    """The jaxpr, StableHLO, and StableHLO-with-locations texts JAX prints for a named program."""
    function, args = _builtin(name) if name in SLUGS else EXTRAS[name]
    lowered = jax.jit(function).lower(*args)
    return str(jax.make_jaxpr(function)(*args)), lowered.as_text(), lowered.as_text(debug_info=True)


def _tokens(lexer, text):
    """Every (token type, text) pair the lexer yields, whitespace included."""
    return [(token, value) for _, token, value in lexer.get_tokens_unprocessed(text)]


def _stream(lexer, text):
    """The lexer's tokens without whitespace, for comparing whole."""
    return [(token, value) for token, value in _tokens(lexer, text) if token is not Whitespace]


def _has_run(stream, run):
    """Whether `run` occurs as consecutive tokens of `stream`."""
    return any(stream[i:i + len(run)] == run for i in range(len(stream)))


def _assert_covers(lexer, text):
    tokens = _tokens(lexer, text)
    assert "".join(value for _, value in tokens) == text
    errors = [value for token, value in tokens if token in Error]
    assert not errors, f"Error tokens: {errors[:5]}"


@pytest.mark.parametrize("name", [*builtin_slugs(), *EXTRAS])
def test_lexers_cover_every_character_of_traced_dumps(name):
    jaxpr, stablehlo, located = _dumps(name)
    _assert_covers(JaxprLexer(), jaxpr)
    _assert_covers(StableHloLexer(), stablehlo)
    _assert_covers(StableHloLexer(), located)


def _doubled_column_sum(x):
    return jnp.sum(x * 2.0, axis=0)


def _column_sum(x):
    return jnp.sum(x, axis=0)


def test_jaxpr_token_stream_for_a_small_program():
    text = textwrap.dedent("""\
        { lambda ; a:f32[4,8]. let
            b:f32[4,8] = mul a 2.0:f32[]
            c:f32[8] = reduce_sum[axes=(0,) out_sharding=None] b
          in (c,) }""")
    assert str(jax.make_jaxpr(_doubled_column_sum)(f32(4, 8))) == text
    assert _stream(JaxprLexer(), text) == [
        (P, "{"), (K, "lambda"), (P, ";"), (V, "a"), (P, ":"), (T, "f32[4,8]"), (P, "."), (K, "let"),
        (V, "b"), (P, ":"), (T, "f32[4,8]"), (O, "="), (F, "mul"), (V, "a"),
        (Number.Float, "2.0"), (P, ":"), (T, "f32[]"),
        (V, "c"), (P, ":"), (T, "f32[8]"), (O, "="), (F, "reduce_sum"), (P, "["),
        (A, "axes"), (O, "="), (P, "("), (Number.Integer, "0"), (P, ","), (P, ")"),
        (A, "out_sharding"), (O, "="), (Keyword.Constant, "None"), (P, "]"), (V, "b"),
        (K, "in"), (P, "("), (V, "c"), (P, ","), (P, ")"), (P, "}"),
    ]


def test_stablehlo_token_stream_for_a_small_program():
    text = textwrap.dedent("""\
        module @jit__column_sum attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
          func.func public @main(%arg0: tensor<4x8xf32>) -> (tensor<8xf32> {jax.result_info = "result"}) {
            %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
            %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<4x8xf32>, tensor<f32>) -> tensor<8xf32>
            return %0 : tensor<8xf32>
          }
        }
        """)
    assert jax.jit(_column_sum).lower(f32(4, 8)).as_text() == text
    assert _stream(StableHloLexer(), text) == [
        (K, "module"), (L, "@jit__column_sum"), (K, "attributes"), (P, "{"),
        (A, "mhlo.num_partitions"), (O, "="), (Number.Integer, "1"), (P, ":"), (T, "i32"), (P, ","),
        (A, "mhlo.num_replicas"), (O, "="), (Number.Integer, "1"), (P, ":"), (T, "i32"), (P, "}"), (P, "{"),
        (K, "func.func"), (K, "public"), (L, "@main"), (P, "("), (V, "%arg0"), (P, ":"), (T, "tensor<4x8xf32>"),
        (P, ")"), (O, "->"), (P, "("), (T, "tensor<8xf32>"), (P, "{"),
        (A, "jax.result_info"), (O, "="), (String.Double, '"result"'), (P, "}"), (P, ")"), (P, "{"),
        (V, "%cst"), (O, "="), (F, "stablehlo.constant"), (K, "dense"), (P, "<"),
        (Number.Float, "0.000000e+00"), (P, ">"), (P, ":"), (T, "tensor<f32>"),
        (V, "%0"), (O, "="), (F, "stablehlo.reduce"), (P, "("), (V, "%arg0"), (K, "init"), (P, ":"),
        (V, "%cst"), (P, ")"), (K, "applies"), (F, "stablehlo.add"), (K, "across"),
        (A, "dimensions"), (O, "="), (P, "["), (Number.Integer, "0"), (P, "]"), (P, ":"),
        (P, "("), (T, "tensor<4x8xf32>"), (P, ","), (T, "tensor<f32>"), (P, ")"), (O, "->"), (T, "tensor<8xf32>"),
        (K, "return"), (V, "%0"), (P, ":"), (T, "tensor<8xf32>"),
        (P, "}"), (P, "}"),
    ]


def test_jaxpr_classifies_primitives_binders_params_and_literals():
    jaxpr, _, _ = _dumps("mlp")
    tokens = set(_tokens(JaxprLexer(), jaxpr))
    assert {(F, "dot_general"), (F, "broadcast_in_dim"), (F, "integer_pow"), (F, "tanh")} <= tokens
    assert {(V, "a"), (T, "bf16[64,128]"), (T, "bf16[]"), (Number.Float, "0.044677734375")} <= tokens
    assert {(A, "dimension_numbers"), (A, "preferred_element_type"), (T, "bfloat16")} <= tokens


def test_jaxpr_nested_jaxprs_and_shardings():
    jaxpr, _, _ = _dumps("sharded")
    tokens = set(_tokens(JaxprLexer(), jaxpr))
    assert {(F, "shard_map"), (F, "pvary"), (A, "jaxpr"), (A, "in_specs"), (String.Single, "'x'")} <= tokens
    assert {(T, "f32[64@x,32]"), (T, "f32[8,32]{V:x}")} <= tokens
    assert _tokens(JaxprLexer(), jaxpr).count((K, "lambda")) == 2


def test_jaxpr_hoisted_jaxprs_are_labels():
    jaxpr, _, _ = _dumps("hoisted")
    assert jaxpr.startswith("let _inner = { lambda")
    stream = _stream(JaxprLexer(), jaxpr)
    assert stream[:4] == [(K, "let"), (L, "_inner"), (O, "="), (P, "{")]
    assert _has_run(stream, [(P, ")"), (P, "}"), (K, "in"), (P, "{"), (K, "lambda")])
    assert (L, "_inner") in stream[4:] and (A, "jaxpr") in stream


def test_jaxpr_literals_and_drop_var():
    jaxpr, _, _ = _dumps("literals")
    tokens = set(_tokens(JaxprLexer(), jaxpr))
    assert {(Number.Float, "inf"), (Number.Float, "-inf"), (Number.Float, "9.98000018626044e-07")} <= tokens
    assert {(Keyword.Constant, "True"), (Number, "1j"), (T, "c64[]"), (T, "f16[]")} <= tokens
    assert (Name, "nan_to_num") in tokens
    assert (V, "_") in set(_tokens(JaxprLexer(), _dumps("grads")[0]))
    assert (Number.Float, "nan") in set(_tokens(JaxprLexer(), "k:f32[4] = broadcast_in_dim nan:f32[]"))
    assert (Number.Integer, "0") in set(_tokens(JaxprLexer(), "b:bool[] = lt a 0:i32[]"))


def test_jaxpr_refs():
    jaxpr, _, _ = _dumps("refs")
    stream = _stream(JaxprLexer(), jaxpr)
    assert (T, "Ref{f32[4]}") in stream
    assert _has_run(stream, [(V, "b"), (P, "["), (P, "..."), (P, "]"), (O, "<-"), (V, "d")])
    assert _has_run(stream, [(V, "c"), (P, ":"), (T, "f32[4]"), (O, "<-"), (V, "b"), (P, "[")])


def test_jaxpr_keywords_are_told_from_variables_named_in_and_let():
    # Variables run a..z, ba..zz, ...: a jaxpr's 222nd variable is `in`, its 7560th `let`.
    text = "{ lambda ; in:f32[]. let\n    let:f32[] = add in in\n  in (let,) }"
    assert _stream(JaxprLexer(), text) == [
        (P, "{"), (K, "lambda"), (P, ";"), (V, "in"), (P, ":"), (T, "f32[]"), (P, "."), (K, "let"),
        (V, "let"), (P, ":"), (T, "f32[]"), (O, "="), (F, "add"), (V, "in"), (V, "in"),
        (K, "in"), (P, "("), (V, "let"), (P, ","), (P, ")"), (P, "}"),
    ]


def test_stablehlo_classifies_values_types_and_ops():
    _, stablehlo, _ = _dumps("mlp")
    tokens = set(_tokens(StableHloLexer(), stablehlo))
    assert {(V, "%arg0"), (V, "%cst"), (T, "tensor<64x128xbf16>"), (T, "tensor<bf16>")} <= tokens
    assert {(F, "stablehlo.dot_general"), (F, "stablehlo.broadcast_in_dim")} <= tokens
    assert {(L, "@main"), (L, "@jit_mlp_block")} <= tokens
    assert {(A, "contracting_dims"), (Name.Constant, "DEFAULT"), (K, "func.func"), (K, "return")} <= tokens


def test_stablehlo_sharding_regions_calls_and_generic_ops():
    _, psum, _ = _dumps("psum")
    tokens = set(_tokens(StableHloLexer(), psum))
    assert {(F, "sdy.mesh"), (F, "sdy.manual_computation"), (F, "sdy.return")} <= tokens
    assert {(F, '"stablehlo.all_reduce"'), (L, "^bb0"), (A, "use_global_device_ids")} <= tokens
    assert {(Name.Constant, "#sdy.sharding"), (L, "@mesh"), (A, "sdy.sharding")} <= tokens
    _, moe, _ = _dumps("moe")
    assert _has_run(_stream(StableHloLexer(), moe), [(F, "call"), (L, "@_one_hot"), (P, "(")])
    assert (V, "%1#1") in set(_tokens(StableHloLexer(), moe))
    _, _, located = _dumps("softmax")
    assert (Comment.Special, "loc(") in set(_tokens(StableHloLexer(), located))
    _, literals, _ = _dumps("literals")
    assert {(Number.Hex, "0xFF80"), (T, "tensor<4xcomplex<f32>>")} <= set(_tokens(StableHloLexer(), literals))


def test_chlo_ops_are_functions():
    assert (F, "chlo.square") in _stream(StableHloLexer(), "%1 = chlo.square %0 : tensor<4xf32>")


def test_pygmentize_finds_the_jaxpr_lexer_by_entry_point():
    jaxpr, _, _ = _dumps("mlp")
    pygmentize = Path(sys.executable).with_name("pygmentize")
    out = subprocess.run([str(pygmentize), "-l", "jaxpr", "-f", "raw"], input=jaxpr,
                         capture_output=True, text=True, check=True).stdout
    assert "Token.Name.Function\t'dot_general'" in out
    assert "Token.Error" not in out


def test_lexers_are_registered_by_name_and_filename():
    assert isinstance(pygments.lexers.get_lexer_by_name("hlo"), HloLexer)
    assert isinstance(pygments.lexers.get_lexer_for_filename("f.hlo"), HloLexer)
    assert isinstance(pygments.lexers.get_lexer_by_name("stablehlo"), StableHloLexer)
    assert isinstance(pygments.lexers.get_lexer_by_name("mlir-stablehlo"), StableHloLexer)
    assert isinstance(pygments.lexers.get_lexer_by_name("jaxpr"), JaxprLexer)
    assert isinstance(pygments.lexers.get_lexer_for_filename("f.jaxpr"), JaxprLexer)
    assert isinstance(pygments.lexers.get_lexer_for_filename("f.mlir"), StableHloLexer)


# --- compiled HLO ---

def test_hlo_lexer_covers_every_corpus_program(corpus):
    """The compiled text the page shows: source locations off, as the corpus records it."""
    for program in corpus["programs"]:
        for layer in program["compiled"].values():
            if layer["backend"] == "cpu":  # what this test covered before targets were a registry; TPU and GPU texts are not yet
                _assert_covers(HloLexer(), layer["text"])


@pytest.mark.parametrize("name", list(EXTRAS))
def test_hlo_lexer_covers_compiled_programs_with_their_stack_frame_tables(name):
    function, args = EXTRAS[name]
    _assert_covers(HloLexer(), jax.jit(function).lower(*args).compile().as_text())


def test_hlo_token_stream_for_a_small_fusion():
    text = textwrap.dedent("""\
        HloModule jit__sum, is_scheduled=true, entry_computation_layout={(f32[4,8]{1,0})->f32[8]{0}}

        %fused_computation (param_0.2: f32[4,8]) -> f32[8] {
          %param_0.2 = f32[4,8]{1,0} parameter(0)
          %constant.0 = f32[] constant(-inf)
          ROOT %reduce.0 = f32[8]{0} reduce(%param_0.2, %constant.0), dimensions={0}, to_apply=%region_0.1, metadata={op_name="jit(f)/reduce_max"}
        }

        ENTRY %main.2 (x.1: f32[4,8]) -> f32[8] {
          %x.1 = f32[4,8]{1,0} parameter(0), metadata={op_name="x"}
          ROOT %reduce_fusion = f32[8]{0} fusion(%x.1), kind=kLoop, calls=%fused_computation
        }
        """)
    C, N, I = Comment.Special, Name.Constant, Number.Integer
    assert _stream(HloLexer(), text) == [
        (K, "HloModule"), (L, "jit__sum"), (P, ","), (A, "is_scheduled"), (O, "="), (Keyword.Constant, "true"),
        (P, ","), (A, "entry_computation_layout"), (O, "="), (P, "{"), (P, "("), (T, "f32[4,8]{1,0}"), (P, ")"),
        (O, "->"), (T, "f32[8]{0}"), (P, "}"),
        (L, "%fused_computation"), (P, "("), (Name, "param_0.2"), (P, ":"), (T, "f32[4,8]"), (P, ")"),
        (O, "->"), (T, "f32[8]"), (P, "{"),
        (V, "%param_0.2"), (O, "="), (T, "f32[4,8]{1,0}"), (F, "parameter"), (P, "("), (I, "0"), (P, ")"),
        (V, "%constant.0"), (O, "="), (T, "f32[]"), (F, "constant"), (P, "("), (Number.Float, "-inf"), (P, ")"),
        (K, "ROOT"), (V, "%reduce.0"), (O, "="), (T, "f32[8]{0}"), (F, "reduce"), (P, "("), (V, "%param_0.2"),
        (P, ","), (V, "%constant.0"), (P, ")"), (P, ","), (A, "dimensions"), (O, "="), (P, "{"), (I, "0"),
        (P, "}"), (P, ","), (A, "to_apply"), (O, "="), (L, "%region_0.1"), (P, ","),
        (C, "metadata={"), (C, "op_name="), (C, '"jit(f)/reduce_max"'), (C, "}"),
        (P, "}"),
        (K, "ENTRY"), (L, "%main.2"), (P, "("), (Name, "x.1"), (P, ":"), (T, "f32[4,8]"), (P, ")"),
        (O, "->"), (T, "f32[8]"), (P, "{"),
        (V, "%x.1"), (O, "="), (T, "f32[4,8]{1,0}"), (F, "parameter"), (P, "("), (I, "0"), (P, ")"), (P, ","),
        (C, "metadata={"), (C, "op_name="), (C, '"x"'), (C, "}"),
        (K, "ROOT"), (V, "%reduce_fusion"), (O, "="), (T, "f32[8]{0}"), (F, "fusion"), (P, "("), (V, "%x.1"),
        (P, ")"), (P, ","), (A, "kind"), (O, "="), (N, "kLoop"), (P, ","), (A, "calls"), (O, "="),
        (L, "%fused_computation"),
        (P, "}"),
    ]


def test_hlo_classifies_fusions_calls_and_attributes(by_slug):
    tokens = set(_tokens(HloLexer(), by_slug["mlp"]["compiled"]["cpu"]["text"]))
    assert {(F, "fusion"), (F, "dot"), (F, "convert"), (F, "multiply"), (F, "tanh")} <= tokens
    assert {(L, "%fused_computation.3"), (L, "%main.1"), (K, "ENTRY"), (K, "ROOT")} <= tokens
    assert {(T, "bf16[64,128]{1,0}"), (Name.Constant, "kLoop"), (A, "lhs_contracting_dims")} <= tokens
    scan = _stream(HloLexer(), by_slug["scan"]["compiled"]["cpu"]["text"])
    assert _has_run(scan, [(F, "pad"), (P, "(")])
    assert _has_run(scan, [(A, "padding"), (O, "="), (Number.Integer, "0_0_0x0_1_1")])
    loop = _stream(HloLexer(), "%w = (s32[], f32[3]{0}) while(%t), condition=%cond.1, body=%body.2")
    assert _has_run(loop, [(F, "while"), (P, "("), (V, "%t"), (P, ")"), (P, ","), (A, "condition"), (O, "="),
                           (L, "%cond.1"), (P, ","), (A, "body"), (O, "="), (L, "%body.2")])
    tuples = _stream(HloLexer(), "%t = (s32[], /*index=5*/u32[4]{0}) tuple(%a, %b)")
    assert (Comment.Multiline, "/*index=5*/") in tuples
    cond = _stream(HloLexer(), "%c = (f32[4]{0}) conditional(%p, %a, %b), branch_computations={%region_0.1, %region_1.2}")
    assert _has_run(cond, [(L, "%region_0.1"), (P, ","), (L, "%region_1.2"), (P, "}")])
    conv = set(_tokens(HloLexer(), "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"))
    assert {(Number.Integer, "3x3"), (Number.Integer, "1_1x1_1"), (Name, "b01f_01io"), (O, "->")} <= conv


def _both_loops(lexer_class, text):
    from pygments.lexer import RegexLexer

    lexer = lexer_class(stripnl=False, ensurenl=False)
    fast, slow = list(lexer.get_tokens_unprocessed(text)), list(RegexLexer.get_tokens_unprocessed(lexer, text))
    assert list(lexer.pairs(text)) == [(ttype, value) for _, ttype, value in slow]  # a listing's tokens, unplaced
    return fast, slow


def test_one_match_per_token_gives_pygments_own_tokens_on_every_built_in_listing():
    """The lexers join each state's rules into one regex (lexers._OneMatchPerToken); Pygments' own loop,
    trying the rules one by one, is the oracle, on every jaxpr, StableHLO and compiled listing."""
    from dumpgym.drills._stored import builtin_corpus

    for program in builtin_corpus().programs:
        listings = [(JaxprLexer, program.jaxpr), (StableHloLexer, program.stablehlo),
                    *((HloLexer, layer.text) for layer in program.compiled.values())]
        for lexer_class, text in listings:
            fast, slow = _both_loops(lexer_class, text)
            assert fast == slow, (program.slug, lexer_class.__name__)


@pytest.mark.parametrize("lexer_class", [JaxprLexer, StableHloLexer, HloLexer])
def test_one_match_per_token_gives_pygments_own_tokens_on_text_no_rule_matches(lexer_class):
    # Characters no rule takes (Error tokens), an aside left open across a line end, states left open at the end.
    texts = ["\x00§€ ¶\n%a = f32[2] add(\x01", "metadata={op_name=\"x\n  y}} {", "loc(\"a\" (\n{ lambda ; {",
             "", "\n\n", "ROOT %x = (f32[], s32[]) tuple(%a, %b), calls=%c, to_apply={%d, \n",
             # Markup, entities and bidirectional overrides where names, strings and asides stand.
             '%<b>.1 = f32[2]{0} add(%a&amp;, %\u202eb), metadata={op_name="</script>\u2066&lt;"}\n'
             'let \u202ef = { lambda ; a:f32[<]. let b:f32[] = add a 1.0:f32[] in (b) }\n'
             '%0 = "stablehlo.<x>"(%a) : tensor<2x&f32> loc("\u202e<" (\n"&"))']
    for text in texts:
        fast, slow = _both_loops(lexer_class, text)
        assert fast == slow, text
