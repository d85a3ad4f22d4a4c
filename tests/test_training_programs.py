"""The second part of the built-in corpus (loops, branches, a training step, sharding by jit): what each lesson claims, checked against the committed dumps and, where it computes something, against JAX."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dumpgym.programs import SLUGS, builtin_program

TRAINING = ("scan-layers", "decode-loop", "cond-switch", "train-step", "ckpt-policy", "auto-sharded",
            "embed-xent", "dropout", "sdpa", "rnn-bptt", "grad-accum", "fsdp-step", "pallas-matmul")


def _normals(seed: int, *shapes, dtype=np.float32) -> list:
    """Standard normal arrays for a program's inputs, drawn by NumPy: `jax.random.normal` compiles a
    generator for each shape (seconds apiece on CPU), and any random inputs serve these comparisons."""
    rng = np.random.default_rng(seed)
    return [jnp.asarray(np.asarray(rng.standard_normal(s), np.float32).astype(dtype)) for s in shapes]


def top(program: dict) -> list[dict]:
    """The top-level equations of a program record."""
    return [e for e in program["eqns"] if e["parent"] is None]


def children(program: dict, parent: int) -> list[dict]:
    return [e for e in program["eqns"] if e["parent"] == parent]


def op_lines(program: dict, name: str) -> list[str]:
    """The StableHLO lines on which an op of this name stands."""
    text = program["stablehlo"].splitlines()
    return [text[op["line"] - 1] for op in program["stablehlo_ops"] if op["name"] == name]


def test_the_second_part_follows_the_seventeen():
    assert SLUGS[17:17 + len(TRAINING)] == TRAINING


# A program that lowers for TPU only has no CPU compile.
@pytest.mark.parametrize("slug", [s for s in TRAINING if builtin_program(s).platform == "cpu"])
def test_every_program_has_both_compiled_layers(slug, by_slug):
    program = by_slug[slug]
    assert program["compiled"]["cpu"]["backend"] == "cpu" and program["compiled"]["tpu"]["backend"] == "tpu"
    assert program["compiled"]["cpu"]["stats"]["unattributed_with_op_name"] == 0


def test_scan_layers_is_one_scan_over_four_layers_with_consts_carry_and_xs(by_slug):
    program = by_slug["scan-layers"]
    (scan,) = [e for e in program["eqns"] if e["primitive"] == "scan"]
    assert scan["parent"] is None
    params = scan["params"]
    assert (params["length"], params["num_consts"], params["num_carry"]) == (4, 1, 1)
    consts, carry, xs = scan["inputs"][:1], scan["inputs"][1:2], scan["inputs"][2:]
    assert consts == [{"shape": [16, 16], "dtype": "bool"}]  # the causal mask, built outside the loop
    assert carry == [{"shape": [16, 32], "dtype": "float32"}]  # the residual stream
    assert [x["shape"][0] for x in xs] == [4, 4, 4, 4]  # the stacked weights
    assert scan["outputs"] == [{"shape": [16, 32], "dtype": "float32"}, {"shape": [4], "dtype": "float32"}]
    # the body (printed once, in a `let` block) is one layer: six matmuls (q/k/v in one, scores,
    # probs @ v, out, up, down)
    body = children(program, scan["id"])
    assert sum(e["primitive"] == "dot_general" for e in body) == 6


def test_scan_layers_lowers_to_a_while_counting_to_four_and_compiles_with_its_trip_count(by_slug):
    program = by_slug["scan-layers"]
    assert len(op_lines(program, "stablehlo.while")) == 1
    assert any("compare  LT" in line or "compare LT" in line for line in op_lines(program, "stablehlo.compare"))
    assert "dense<4> : tensor<i32>" in program["stablehlo"]
    assert len(op_lines(program, "stablehlo.dynamic_slice")) == 4  # one per stacked weight
    assert '"known_trip_count":{"n":"4"}' in program["compiled"]["cpu"]["text"]


def test_decode_loop_is_a_while_with_a_cond_and_a_body_and_no_gather(by_slug):
    program = by_slug["decode-loop"]
    (loop,) = [e for e in top(program) if e["primitive"] == "while"]
    assert {"cond_jaxpr", "body_jaxpr"} <= set(loop["params"]) and "length" not in loop["params"]
    inside = {e["primitive"] for e in program["eqns"] if e["parent"] == loop["id"]}
    assert {"argmax", "dynamic_slice", "scatter", "tanh", "ne", "and"} <= inside
    assert all(e["primitive"] != "gather" for e in program["eqns"])
    (line,) = op_lines(program, "stablehlo.while")
    text = program["stablehlo"]
    assert "cond {" in text and "} do {" in text


def test_decode_loop_decodes_greedily_as_a_python_loop_would(programs):
    program = programs["decode-loop"]
    embed, w_hidden, w_vocab = _normals(0, (64, 32), (32, 32), (32, 64))  # decodes all 8 tokens, as key(1) did
    prompt = jnp.int32(5)

    @jax.jit  # one step of the Python loop, compiled once rather than op by op for each token
    def step(h, token):
        h = jnp.tanh(embed[token] + h @ w_hidden)
        return h, jnp.argmax(h @ w_vocab)

    tokens, h = [5], jnp.zeros(32)
    while len(tokens) < 8 and tokens[-1] != 0:
        h, token = step(h, tokens[-1])
        tokens.append(int(token))
    expected = tokens + [0] * (8 - len(tokens))
    assert jax.jit(program.function)(prompt, embed, w_hidden, w_vocab).tolist() == expected


def test_cond_switch_both_branch_calls_are_cond_with_a_converted_predicate_and_a_clamped_index(by_slug):
    program = by_slug["cond-switch"]
    eqns = top(program)
    conds = [e for e in eqns if e["primitive"] == "cond"]
    assert len(conds) == 2
    first, second = conds
    before = eqns[eqns.index(first) - 1]
    assert before["primitive"] == "convert_element_type" and before["outputs"][0]["dtype"] == "int32"
    assert before["inputs"][0]["dtype"] == "bool"
    # lax.cond's branches print false first: branch 0 is the identity (no equation), branch 1 divides
    (div,) = children(program, first["id"])
    assert div["primitive"] == "div"
    lines = program["jaxpr"].splitlines()
    branches = [i for i in range(first["jaxpr_lines"][0], first["jaxpr_lines"][1] + 1) if "lambda" in lines[i - 1]]
    assert len(branches) == 2 and div["jaxpr_lines"] == [branches[1], branches[1]]
    assert " = div " not in lines[branches[0] - 1]
    assert eqns[eqns.index(second) - 1]["primitive"] == "clamp"
    assert len(op_lines(program, "stablehlo.case")) == 2


def test_train_step_donates_seven_buffers_as_jax_lowers_it(by_slug, programs):
    import jax

    program = by_slug["train-step"]
    assert not any(e["primitive"] == "jit" for e in program["eqns"])  # traced by its own jit: no wrapper
    # JAX's own lowering of the jitted step, the dump a user prints: the donated arguments alias outputs.
    lowered = programs["train-step"].function.lower(*programs["train-step"].example_args())
    assert program["stablehlo"] == lowered.as_text()
    main = next(line for line in program["stablehlo"].splitlines() if "func.func public @main" in line)
    aliases = [int(n) for n in re.findall(r"tf\.aliasing_output = (\d+)", main)]
    assert aliases == list(range(7))
    for layer in ("cpu", "tpu"):
        header = program["compiled"][layer]["text"].splitlines()[0]
        assert "input_output_alias={" in header
        assert sorted(int(n) for n in re.findall(r"\{\d+\}: \((\d+), \{\}", header)) == list(range(7))
    eqns = program["eqns"]
    prims = [e["primitive"] for e in eqns]
    assert prims.count("pow") == 4  # 0.9**count and 0.999**count, for each weight
    assert prims.count("sqrt") == 2 and prims.count("add_any") == 3 and prims.count("transpose") == 2


def test_train_step_takes_an_adam_step_as_optax_would(programs):
    import optax

    w1, w2, x, y = _normals(2, (32, 64), (64, 16), (16, 32), (16, 16))
    zeros = [jnp.zeros_like(w1), jnp.zeros_like(w2)]

    def loss(params):
        return jnp.mean((jax.nn.gelu(x @ params[0]) @ params[1] - y) ** 2)

    optimizer = optax.adam(1e-3, b1=0.9, b2=0.999, eps=1e-8)

    @jax.jit  # optax's step compiled once, rather than each of its operations dispatched (and compiled) alone
    def reference(params):
        state = optimizer.init(params)
        updates, _ = optimizer.update(jax.grad(loss)(params), state)
        return optax.apply_updates(params, updates), loss(params)

    expected, expected_loss = reference([w1, w2])
    out = programs["train-step"].function(jnp.copy(w1), jnp.copy(w2), *[jnp.copy(z) for z in zeros * 2],
                                          jnp.float32(0), x, y)
    np.testing.assert_allclose(out[0], expected[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[1], expected[1], rtol=1e-5, atol=1e-6)
    assert float(out[6]) == 1.0 and float(out[7]) == pytest.approx(float(expected_loss), rel=1e-6)


def test_ckpt_policy_saves_the_dots_and_recomputes_the_sin(by_slug):
    program = by_slug["ckpt-policy"]
    (remat,) = [e for e in program["eqns"] if e["primitive"] == "remat2"]
    assert remat["params"]["policy"].startswith("DotsSaveable")
    outside = [e["primitive"] for e in top(program)]
    assert outside[:5] == ["dot_general", "reduce_precision", "sin", "dot_general", "reduce_precision"]
    assert all(e["params"] == {"exponent_bits": 8, "mantissa_bits": 23}
               for e in program["eqns"] if e["primitive"] == "reduce_precision")
    body = [e["primitive"] for e in program["eqns"] if e["parent"] == remat["id"]]
    assert {"sin", "cos"} <= set(body) and "reduce_precision" not in body
    # the saved values go into remat2 and through the barrier: both reduce_precision results
    (barrier,) = op_lines(program, "stablehlo.optimization_barrier")
    assert barrier.split("optimization_barrier")[1].split(",")[:2] == [" %1", " %4"]


def test_auto_sharded_has_shardings_on_main_a_constraint_and_a_compiled_all_reduce(by_slug):
    program = by_slug["auto-sharded"]
    assert [e["primitive"] for e in program["eqns"]].count("sharding_constraint") == 1
    assert all(e["primitive"] != "shard_map" for e in program["eqns"])
    main = next(line for line in program["stablehlo"].splitlines() if "func.func public @main" in line)
    assert main.count("sdy.sharding = #sdy.sharding<@mesh") == 3
    assert '[{"data"}, {}]' in main and '[{}, {"model"}]' in main and '[{"model"}, {}]' in main
    assert len(op_lines(program, "sdy.sharding_constraint")) == 1
    assert "all-reduce(" in program["compiled"]["cpu"]["text"] and "all-reduce(" in program["compiled"]["tpu"]["text"]
    assert program["compiled"]["tpu"]["topology"] == "v5e:2x4"


def test_embed_xent_gathers_forward_and_scatter_adds_backward(by_slug):
    program = by_slug["embed-xent"]
    primitives = [e["primitive"] for e in program["eqns"]]
    assert primitives.count("gather") == 2 and primitives.count("scatter-add") == 2
    last = top(program)[-3:]
    assert [e["primitive"] for e in last] == ["broadcast_in_dim", "scatter-add", "add_any"]
    assert last[-1]["outputs"] == [{"shape": [64, 32], "dtype": "float32"}]


def test_embed_xent_matches_optax_cross_entropy(programs):
    import optax

    (table,) = _normals(3, (64, 32))
    rng = np.random.default_rng(4)
    tokens, labels = (jnp.asarray(rng.integers(0, 64, 16), jnp.int32) for _ in range(2))

    def reference(table):
        logits = table[tokens] @ table.T
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    # Both sides jitted: each compiled once instead of dispatched (and compiled) primitive by primitive.
    value, grad = jax.jit(programs["embed-xent"].function)(table, tokens, labels)
    np.testing.assert_allclose(value, jax.jit(reference)(table), rtol=1e-5)
    np.testing.assert_allclose(grad, jax.jit(jax.grad(reference))(table), rtol=1e-4, atol=1e-6)


def test_dropout_takes_a_typed_key_and_draws_random_bits(by_slug):
    program = by_slug["dropout"]
    assert program["args"][-1] == "key<fry>[]"
    assert "key<fry>[]" in program["jaxpr"]
    (bits,) = [e for e in program["eqns"] if e["primitive"] == "random_bits"]
    assert bits["params"] == {"bit_width": 32, "shape": [8, 32]}
    assert [e["primitive"] for e in program["eqns"] if e["parent"] == bits["parent"]][:8] == [
        "convert_element_type", "convert_element_type", "broadcast_in_dim", "broadcast_in_dim",
        "random_bits", "shift_right_logical", "or", "bitcast_convert_type"]
    main = next(line for line in program["stablehlo"].splitlines() if "func.func public @main" in line)
    assert "tensor<2xui32>" in main and "func.func private @threefry2x32" in program["stablehlo"]
    assert len(op_lines(program, "stablehlo.while")) == 1  # threefry's rounds, rolled on CPU


def test_dropout_leaves_exactly_the_key_constraint_unlinked(by_slug):
    program = by_slug["dropout"]
    stats = program["xray_stats"]
    assert stats["mapped_stablehlo_op_lines"] == stats["stablehlo_op_lines"] - 1
    linked = {line for g in program["xray"] for line in g["stablehlo_lines"]}
    (unlinked,) = [op for op in program["stablehlo_ops"] if op["line"] not in linked]
    assert unlinked["name"] == "sdy.sharding_constraint"


def test_dropout_keeps_about_nine_in_ten_and_scales_them(programs):
    x, w = jnp.ones((8, 32)), jnp.eye(32)
    out = jax.jit(programs["dropout"].function)(x, w, jax.random.key(0))  # one compile, not one per primitive
    kept = np.asarray(out) != 0
    np.testing.assert_allclose(np.asarray(out)[kept], 1 / 0.9, rtol=1e-6)
    assert 0.8 < kept.mean() < 1.0


def test_sdpa_is_grouped_query_attention_with_an_f32_softmax(by_slug):
    program = by_slug["sdpa"]
    eqns = top(program)
    assert eqns[0]["primitive"] == "reshape" and eqns[0]["params"]["new_sizes"] == [2, 16, 2, 2, 8]
    dots = [e for e in eqns if e["primitive"] == "dot_general"]
    assert [d["params"]["dimension_numbers"][1] for d in dots] == [[[0, 2], [0, 2]], [[0, 2], [1, 2]]]
    assert dots[0]["outputs"][0]["dtype"] == "float32" and dots[1]["outputs"][0]["dtype"] == "bfloat16"
    (convert,) = [e for e in eqns if e["primitive"] == "convert_element_type"]
    assert eqns.index(convert) == eqns.index(dots[1]) - 1 and convert["params"]["new_dtype"] == "bfloat16"
    assert [e["primitive"] for e in eqns[-3:]] == ["transpose", "transpose", "reshape"]
    assert eqns[-1]["outputs"] == [{"shape": [2, 16, 4, 8], "dtype": "bfloat16"}]
    assert {"iota", "ge"} <= {e["primitive"] for e in program["eqns"]}


def test_sdpa_matches_attention_written_out(programs):
    q, k, v = _normals(6, (2, 16, 4, 8), (2, 16, 2, 8), (2, 16, 2, 8), dtype=jnp.bfloat16)

    @jax.jit  # compiled once, as the program below, rather than op by op
    def written_out(q, k, v):
        kk, vv = jnp.repeat(k, 2, axis=2), jnp.repeat(v, 2, axis=2)
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, kk, preferred_element_type=jnp.float32) / np.sqrt(8)
        scores = jnp.where(jnp.tril(jnp.ones((16, 16), bool)), scores, -jnp.inf)
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores).astype(jnp.bfloat16), vv)

    expected = written_out(q, k, v)
    np.testing.assert_allclose(np.asarray(jax.jit(programs["sdpa"].function)(q, k, v), np.float32),
                               np.asarray(expected, np.float32), rtol=2e-2, atol=2e-2)


def test_no_lesson_in_the_second_part_is_left_to_write(programs):
    for slug in TRAINING:
        assert "TODO" not in programs[slug].lesson and re.search(r"[.]$", programs[slug].lesson), slug


def test_rnn_bptt_is_a_forward_scan_and_a_reversed_backward_scan(by_slug):
    program = by_slug["rnn-bptt"]
    forward, backward = [e for e in program["eqns"] if e["primitive"] == "scan"]
    assert forward["parent"] is None and backward["parent"] is None
    params = lambda e: {k: e["params"][k] for k in ("length", "num_consts", "num_carry", "reverse")}  # noqa: E731
    assert params(forward) == {"length": 12, "num_consts": 3, "num_carry": 1, "reverse": False}
    assert params(backward) == {"length": 12, "num_consts": 1, "num_carry": 4, "reverse": True}
    shapes = lambda avals: [a["shape"] for a in avals]  # noqa: E731
    # forward: the three weights, the hidden state, the inputs; it stacks the state, tanh and 1 - tanh
    assert shapes(forward["inputs"]) == [[32, 32], [16, 32], [1, 32], [8, 32], [12, 8, 16]]
    assert shapes(forward["outputs"]) == [[8, 32], [12], [12, 8, 32], [12, 8, 32], [12, 8, 32]]
    body = [e for e in program["eqns"] if e["parent"] == forward["id"]]
    assert [e["primitive"] for e in body][-4:] == ["tanh", "sub", "mul", "reduce_sum"]
    # backward: w_h alone as a const, then the three gradient sums and the state's cotangent as carries
    assert shapes(backward["inputs"][:5]) == [[32, 32], [32, 32], [16, 32], [32], [8, 32]]
    inner = [e for e in program["eqns"] if e["parent"] == backward["id"] and e["primitive"] == "dot_general"]
    batch_contractions = [e for e in inner if e["params"]["dimension_numbers"][0] == [[0], [0]]]
    assert len(batch_contractions) == 2  # dW_x and dW_h contract the batch axis


def test_rnn_bptt_matches_the_gradient_of_the_unrolled_loop(programs):
    rng = np.random.default_rng(0)
    w_h, w_x = rng.normal(size=(32, 32)) * 0.1, rng.normal(size=(16, 32)) * 0.1
    b, h0, xs = rng.normal(size=32) * 0.1, rng.normal(size=(8, 32)), rng.normal(size=(12, 8, 16))
    args = [jnp.asarray(a, jnp.float32) for a in (w_h, w_x, b, h0, xs)]

    def unrolled(w_h, w_x, b):
        h, total = args[3], 0.0
        for x in args[4]:
            h = jnp.tanh(h @ w_h + x @ w_x + b)
            total = total + jnp.sum(h * h)
        return total + jnp.sum(h)

    # Both jitted: the twelve unrolled steps and the two scans compiled once, not primitive by primitive.
    expected = jax.jit(jax.grad(unrolled, argnums=(0, 1, 2)))(*args[:3])
    for got, want in zip(jax.jit(programs["rnn-bptt"].function)(*args), expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_rnn_bptt_compiles_each_scan_to_a_while_of_twelve_trips(by_slug):
    for layer in ("cpu", "tpu"):
        text = by_slug["rnn-bptt"]["compiled"][layer]["text"]
        assert sum(" while(" in line for line in text.splitlines()) == 2, layer
    # the CPU compiler writes the trip count it proved; the TPU one leaves it to the condition
    assert by_slug["rnn-bptt"]["compiled"]["cpu"]["text"].count('"known_trip_count":{"n":"12"}') == 2


def test_fsdp_step_states_shardings_on_arguments_and_two_constraints(by_slug):
    program = by_slug["fsdp-step"]
    assert [e["primitive"] for e in program["eqns"]].count("sharding_constraint") == 2
    main = next(line for line in program["stablehlo"].splitlines() if "func.func public @main" in line)
    assert main.count('[{"data"}, {"model"}]') == 1 and main.count('[{"model"}, {"data"}]') == 1  # the weights
    assert main.count('[{"data"}, {}]') == 2  # the batch
    assert len(op_lines(program, "sdy.sharding_constraint")) == 2
    assert all(e["outputs"][0]["shape"] in ([64, 128], [128, 64]) for e in program["eqns"]
               if e["primitive"] == "sharding_constraint")  # global shapes


def _groups_over(mesh, axis: str) -> set:
    """The device groups of a collective over one mesh axis, as sets of device ids."""
    ids = np.vectorize(lambda d: d.id)(mesh.devices)
    moved = np.moveaxis(ids, mesh.axis_names.index(axis), -1)
    return {frozenset(row) for row in moved.reshape(-1, moved.shape[-1]).tolist()}


@pytest.mark.needs_tpu
def test_fsdp_step_gathers_over_data_reduces_over_model_and_scatters_on_tpu(programs):
    from dumpgym.traced.devices import retarget, topology_devices

    program = programs["fsdp-step"]
    devices = topology_devices("v5e:2x4")
    memo = {}
    args = [jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=retarget(s.sharding, devices, memo))
            for s in program.example_args()]
    mesh = args[0].sharding.mesh

    from jax_reference import with_mesh

    module = jax.jit(with_mesh(program.function, mesh)).lower(*args).compile().runtime_executable().hlo_modules()[0]
    by_opcode: dict = {}
    for computation in module.computations():
        for instruction in computation.instructions():
            by_opcode.setdefault(instruction.opcode.name, []).append(instruction)

    def groups(instruction) -> set:
        # jaxlib binds no replica groups: read the attribute as XLA prints it, explicit or as an iota list
        text = re.search(r"replica_groups=(\{[{}\d,]*\}|\[[\d,]+\]<=\[[\d,]+\](?:T\([\d,]+\))?)",
                         instruction.to_string()).group(1)
        if text.startswith("{"):
            return {frozenset(map(int, g.split(","))) for g in re.findall(r"\{([\d,]+)\}", text)}
        shape, dims, perm = re.fullmatch(r"\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", text).groups()
        ints = lambda t: [int(v) for v in t.split(",")]  # noqa: E731
        ids = np.arange(np.prod(ints(dims))).reshape(ints(dims))
        ids = ids.transpose(ints(perm)) if perm else ids
        return {frozenset(row) for row in ids.reshape(ints(shape)).tolist()}

    # device ids in replica groups are positions in the compile's device assignment: the mesh's order
    position = {d.id: k for k, d in enumerate(mesh.devices.flat)}
    to_positions = lambda gs: {frozenset(position[i] for i in g) for g in gs}  # noqa: E731
    assert all(groups(i) == to_positions(_groups_over(mesh, "data")) for i in by_opcode["kAllGather"])
    assert any(groups(i) == to_positions(_groups_over(mesh, "model")) for i in by_opcode["kAllReduce"])
    assert any(c.name.startswith("all-reduce-scatter") for c in module.computations())


def test_pallas_matmul_is_one_opaque_kernel_at_every_layer(by_slug):
    program = by_slug["pallas-matmul"]
    (call,) = [e for e in program["eqns"] if e["primitive"] == "pallas_call"]
    assert "grid=(2, 2)" in call["params"]["grid_mapping"]
    kernel = [e["primitive"] for e in program["eqns"] if e["parent"] == call["id"]]
    assert kernel == ["get", "get", "dot_general", "max", "convert_element_type", "swap"]
    assert len(op_lines(program, "stablehlo.custom_call")) == 1
    assert "stablehlo.custom_call @tpu_custom_call" in program["stablehlo"]
    assert program["platform"] == "tpu" and "cpu" not in program["compiled"]  # a Mosaic kernel has no CPU compile
    calls = [i for i in program["compiled"]["tpu"]["instructions"] if i["opcode"] == "customcall"]
    assert len(calls) == 1 and calls[0]["eqns"] == [call["id"]]
    assert 'custom_call_target="tpu_custom_call"' in program["compiled"]["tpu"]["text"]


def test_pallas_matmul_kernel_computes_relu_of_the_matmul(programs):
    from jax.experimental import pallas as pl

    from dumpgym.programs import pallas_matmul

    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.normal(size=(256, 512)), jnp.bfloat16)
    w = jnp.asarray(rng.normal(size=(512, 256)), jnp.bfloat16)
    interpreted = pl.pallas_call(
        pallas_matmul._matmul_relu_kernel, grid=(2, 2),
        in_specs=[pl.BlockSpec((128, 512), lambda i, j: (i, 0)), pl.BlockSpec((512, 128), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((128, 128), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((256, 256), jnp.bfloat16), interpret=True)(x, w)
    expected = jnp.maximum(jnp.dot(x, w, preferred_element_type=jnp.float32), 0).astype(jnp.bfloat16)
    np.testing.assert_allclose(np.asarray(interpreted, np.float32), np.asarray(expected, np.float32), rtol=1e-2)



def test_a_program_has_a_cpu_compile_exactly_when_it_lowers_for_cpu(programs, by_slug):
    assert all(by_slug[s].get("platform", "cpu") == p.platform for s, p in programs.items())
    assert all(("cpu" in by_slug[s]["compiled"]) == (p.platform == "cpu") for s, p in programs.items())
