"""The TPU-layer drills (layouts, units, fusions on the TPU layer), checked against XLA's own objects.

Programs are compiled again with `jax.jit(f).lower(*args).compile()` for the first chip of the v5e
topology libtpu describes (`dumpgym.traced.devices.topology_devices`), and the answers are compared with
what XLA says: `input_formats` for parameter layouts, `memory_analysis()` for padded sizes, the
compiled module's computations and opcodes for where matrix multiplies sit.
"""
from __future__ import annotations

import re
from collections import Counter

import pytest

from dumpgym.ir import hlo_facts
from dumpgym.drills import _tpu, layouts
from dumpgym.drills._spread import spread_weight
from jax_reference import jit_of

pytestmark = pytest.mark.needs_tpu

TPU_KINDS = ("layouts", "units")


@pytest.fixture(scope="session")
def tpu_items(read_pool):
    # the units kind's `unit` step reads the GPU compile too: tests/test_drills_units.py checks it
    return {kind: [i for i in read_pool if i["drill"] == kind and i.get("step") != "unit"] for kind in TPU_KINDS} | {
        "fusions": [i for i in read_pool if i["drill"] == "fusions" and i["layer"] == "tpu"]}


@pytest.fixture(scope="session")
def devices():
    from dumpgym.traced.devices import topology_devices

    return topology_devices("v5e:2x2")


@pytest.fixture(scope="session")
def recompiled(programs, devices):
    """slug -> XLA's compile of each single-device built-in program for the topology's first chip."""
    import jax

    from dumpgym.traced.program import parse_arg

    out = {}
    for program in programs.values():
        if program.mesh:
            continue  # sharded programs need their mesh moved onto the topology; the others suffice here
        args = [parse_arg(a).to_struct() for a in program.args]
        with jax.default_device(devices[0]):
            out[program.slug] = jit_of(program.function).lower(*args).compile()
    return out


def _module(compiled):
    return compiled.runtime_executable().hlo_modules()[0]


def _by_name(module) -> dict:
    return {ins.name: (comp.name, ins) for comp in module.computations() for ins in comp.instructions()}


# --- every kind: counts and fields ---

@pytest.mark.parametrize("kind", [*TPU_KINDS, "fusions"])
def test_each_tpu_kind_has_at_least_thirty_items_over_the_built_in_corpus(tpu_items, kind):
    assert len(tpu_items[kind]) >= 30


@pytest.mark.parametrize("kind", TPU_KINDS)
def test_tpu_items_have_the_fields_the_drills_need(tpu_items, corpus, kind):
    from pool_checks import assert_choice_item

    slugs = {p["slug"]: p for p in corpus["programs"]}
    for item in tpu_items[kind]:
        hlo = slugs[item["program"]]["compiled"]["tpu"]
        assert item["layer"] == "tpu" and item["question"].endswith(("?", "."))
        compile_note = [b for b in item["shown"][:2] if b.startswith("compiled by libtpu")]
        assert compile_note and compile_note[0].startswith(f"compiled by libtpu {hlo['libtpu_version']} for TPU v5 lite")
        assert "without a TPU" in compile_note[0]
        assert 1 <= item["hlo_line"] <= hlo["text"].count("\n") + 1
        if kind == "fusions":
            assert_choice_item(item)
        else:  # what the learner builds: a typed value or a set of tapped lines, and one line of why
            assert "value" in item or "answer_lines" in item
            # at most 1, a padded shape's times its spread (drills/_spread.py: a shape few programs pad weighs more)
            most = spread_weight(layouts.SHAPE_STEP, item["value"]) if item.get("step") == "padded-shape" else 1
            assert item["feedback"] and 0 < item["weight"] <= round(most, 3)


def test_tpu_fusion_items_name_the_compile_after_the_jaxpr(tpu_items, corpus):
    slugs = {p["slug"]: p for p in corpus["programs"]}
    for item in tpu_items["fusions"]:
        hlo = slugs[item["program"]]["compiled"]["tpu"]
        assert item["form"] == "lines" and item["shown"][0] == slugs[item["program"]]["jaxpr"]
        assert item["shown"][1].startswith(f"compiled by libtpu {hlo['libtpu_version']} for TPU v5 lite")
        assert 1 <= item["hlo_line"] <= hlo["text"].count("\n") + 1


def test_cpu_fusion_items_are_untouched_by_the_tpu_layer(read_pool):
    cpu = [i for i in read_pool if i["drill"] == "fusions" and i["layer"] == "cpu"]
    assert cpu and all(i["shown"][1].startswith("compiled by XLA for CPU") for i in cpu)
    assert all("TPU" not in i["question"] for i in cpu)


def test_tpu_fusion_questions_name_the_tpu_listing(tpu_items, corpus):
    slugs = {p["slug"]: p for p in corpus["programs"]}
    for item in tpu_items["fusions"]:
        line = slugs[item["program"]]["compiled"]["tpu"]["text"].splitlines()[item["hlo_line"] - 1]
        assert f"%{item['fusion']} = " in line and "TPU compiled HLO line" in item["question"]


# --- reading XLA's notation ---

def test_the_line_parser_reads_what_xla_prints_for_every_instruction(recompiled):
    from jaxlib import xla_client

    checked = 0
    for compiled in recompiled.values():
        for comp in _module(compiled).computations():
            for ins in comp.instructions():
                name, shape, opcode = hlo_facts.defined(ins.to_string())
                assert name == ins.name, ins.to_string()
                assert str(xla_client.Shape(shape)) == shape  # the whole shape, as XLA prints it back
                # the record spells opcodes as XLA's enum does; the printed word is that without dashes,
                # except where the enum abbreviates (kExp prints `exponential`)
                enum = str(ins.opcode).removeprefix("HloOpcode.k").lower()
                assert opcode.replace("-", "") == enum or opcode.startswith(enum), (opcode, enum)
                checked += 1
    assert checked > 500


def test_memory_space_names_are_jaxs_tpu_memory_space_numbers():
    from jax._src.tpu_custom_call import MemorySpace  # JAX's own table of TPU memory-space colours

    words = {"HBM": "HBM", "VMEM": "VMEM", "SEMAPHORE_MEM": "semaphore", "SMEM": "SMEM", "HOST": "host"}
    for space, word in words.items():
        assert _tpu.MEMORY_SPACES[MemorySpace[space].color].startswith(word)
    assert set(_tpu.MEMORY_SPACES) == {MemorySpace[s].color for s in words}


def test_the_memory_space_is_read_off_xlas_layout():
    for n in range(7):
        text = f"f32[8,128]{{1,0:T(8,128)S({n})}}" if n else "f32[8,128]{1,0:T(8,128)}"
        assert hlo_facts.read_buffer(text).memory_space == n


def _xla_bytes(devices, dims, dtype, minor_to_major=None, tiles=None):
    """What XLA's memory analysis says one argument of this shape (and layout, if given) takes."""
    import jax
    from jax.experimental.layout import Format, Layout
    from jax.sharding import SingleDeviceSharding

    sharding = SingleDeviceSharding(devices[0])
    if minor_to_major is not None:
        sharding = Format(Layout(tuple(reversed(minor_to_major)), tuple(tiles)), sharding)
    with jax.default_device(devices[0]):
        compiled = jax.jit(lambda x: x).lower(jax.ShapeDtypeStruct(dims, dtype, sharding=sharding)).compile()
    layout = compiled.input_formats[0][0].layout
    return compiled.memory_analysis().argument_size_in_bytes, tuple(reversed(layout.major_to_minor)), layout.tiling


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8", "bool", "int32"])
def test_padded_size_is_what_xla_allocates_for_the_layout_it_picks(devices, dtype):
    import numpy as np

    for dims in [(3, 5), (5,), (), (9, 129), (64, 128), (2, 3, 5), (600,), (7, 300), (4, 64, 129), (1, 8)]:
        size, minor_to_major, tiles = _xla_bytes(devices, dims, dtype)
        assert _tpu.padded_elements(dims, minor_to_major, tiles) * np.dtype(dtype).itemsize == size, (dims, tiles)


def test_padding_answers_are_what_xla_allocates_beyond_the_data(tpu_items, devices):
    import jax.numpy as jnp
    import numpy as np

    checked, refused = 0, 0
    for buffer in sorted({i["buffer"] for i in tpu_items["layouts"] if i["step"] == "bytes"})[:60]:
        b = hlo_facts.read_buffer(buffer)
        item = next(i for i in tpu_items["layouts"] if i["step"] == "bytes" and i["buffer"] == buffer)
        dtype = jnp.dtype(_numpy_dtype(b.dtype))
        try:
            size, _, _ = _xla_bytes(devices, b.dims, dtype, b.minor_to_major, b.tiles)
        except Exception:  # XLA refuses a layout it would not pick for an argument (a small tile): no check
            refused += 1
            continue
        assert item["value"] == str(size - int(np.prod(b.dims)) * dtype.itemsize), buffer
        checked += 1
    assert checked >= 30 and refused < checked


def test_padded_shapes_hold_what_xla_allocates_for_single_tile_layouts(tpu_items, devices):
    import jax.numpy as jnp
    import numpy as np

    checked = 0
    for item in tpu_items["layouts"]:
        if item["step"] != "padded-shape":
            continue
        b = hlo_facts.read_buffer(item["buffer"])
        if len(b.tiles) != 1 or b.memory_space:  # a sub-tile packs inside the tile; XLA's bytes then say more
            continue
        dtype = jnp.dtype(_numpy_dtype(b.dtype))
        try:
            size, _, _ = _xla_bytes(devices, b.dims, dtype, b.minor_to_major, b.tiles)
        except Exception:
            continue
        padded = tuple(int(d) for d in item["value"][1:-1].split(","))
        assert int(np.prod(padded)) * dtype.itemsize == size, item["buffer"]
        assert all(p >= d for p, d in zip(padded, b.dims)) and padded != b.dims
        checked += 1
    assert checked >= 20


def _numpy_dtype(short: str) -> str:
    return {"bf16": "bfloat16", "f32": "float32", "s32": "int32", "u32": "uint32", "pred": "bool",
            "s8": "int8", "u8": "uint8", "f16": "float16"}[short]


def test_memory_space_rows_are_those_whose_shape_xla_puts_in_that_space(tpu_items, recompiled, corpus):
    from jaxlib import xla_client

    slugs = {p["slug"]: p for p in corpus["programs"]}
    checked = 0
    for item in tpu_items["layouts"]:
        if item["step"] != "memory-space" or item["program"] not in recompiled:
            continue
        by_name = _by_name(_module(recompiled[item["program"]]))
        first, last = item["hlo_lines"]
        rows = slugs[item["program"]]["compiled"]["tpu"]["text"].splitlines()[first - 1:last]
        found = []
        for k, row in enumerate(rows, start=1):
            name = re.match(r"\s*(?:ROOT )?%([\w.\-]+) = ", row).group(1)
            # XLA's own shape of the instruction in a fresh compile, its layouts printed back by XLA
            shape = xla_client.Shape(hlo_facts.defined(by_name[name][1].to_string())[1])
            arrays = shape.tuple_shapes() if shape.is_tuple() else [shape]
            marks = [re.search(r"S\((\d+)\)", a.layout().to_string()) for a in arrays if a.is_array()]
            spaces = {int(m.group(1)) if m else 0 for m in marks}
            if item["space"] in spaces:
                found.append(k)
        assert found == item["answer_lines"], (item["program"], first)
        checked += 1
    assert checked >= 30


def test_layout_items_quote_shapes_xla_prints_in_a_fresh_compile(tpu_items, recompiled):
    texts = {slug: _module(c).to_string() for slug, c in recompiled.items()}
    for item in tpu_items["layouts"]:
        if item["program"] in texts and "buffer" in item:
            assert item["buffer"] in texts[item["program"]], (item["program"], item["buffer"])


def test_the_sub_tile_misreading_is_offered_for_bf16(tpu_items):
    rules = Counter(m["rule"] for i in tpu_items["layouts"] for m in i.get("misread", {}).values())
    assert {"major-to-minor", "tile-numbers-swapped", "sub-tile-as-tile", "no-padding", "element-width",
            "logical-order", "total-for-padding"} <= set(rules)


def test_no_layouts_reason_says_nothing_is_padded_where_the_answer_pads(tpu_items):
    # Issue 33: 40 scalar `bytes` items said the tile "pads nothing" while the answer padded 1 element to 256.
    asked = [i for i in tpu_items["layouts"] if i["step"] in ("bytes", "padded-shape")]
    assert asked
    for item in asked:
        b = hlo_facts.read_buffer(item["buffer"])
        assert b.dims and item["value"] not in ("0", "[" + ",".join(map(str, b.dims)) + "]"), item["buffer"]
        said = [m["reason"] for m in item["misread"].values()] + [item["feedback"]]
        assert not any("pads nothing" in r or "nothing: the sizes" in r for r in said), item["buffer"]


def test_a_scalars_padding_is_said_as_a_whole_tile():
    scalar = hlo_facts.read_buffer("bf16[]{:T(256)}")
    assert layouts._padding_words(scalar) == "its one element to a whole tile of 256"
    assert layouts._bytes(scalar) is None  # every scalar takes 512 bytes: not asked


def test_padding_example_from_the_docs():
    assert hlo_facts.read_buffer("f32[3,5]{1,0:T(8,128)}").padded_bytes() == 8 * 128 * 4
    assert hlo_facts.read_buffer("bf16[3,5]{1,0:T(8,128)(2,1)}").padded_bytes() == 8 * 128 * 2
    assert hlo_facts.read_buffer("bf16[]{:T(256)}").padded_bytes() == 256 * 2
    b = hlo_facts.read_buffer("f32[300,5]{0,1:T(8,128)}")
    assert layouts.padded_shape(b.dims, b.minor_to_major, b.tiles[0]) == (384, 8)
    assert layouts._bytes(hlo_facts.read_buffer("f32[3,5]{1,0:T(8,128)}"))[0] == str(4096 - 60)


# --- which unit ---

def _matmuls_in(module, name: str) -> list:
    """The convolutions and dots instruction `name` is or calls (transitively), by XLA's opcodes."""
    computations = {c.name: c for c in module.computations()}
    _, ins = _by_name(module)[name]
    stack, seen, found = [ins], set(), []
    while stack:
        cur = stack.pop()
        if str(cur.opcode) in ("HloOpcode.kConvolution", "HloOpcode.kDot"):
            found.append(cur)
        for callee in re.findall(r"\b(?:calls|to_apply)=%([\w.\-]+)", cur.to_string()):
            if callee not in seen:
                seen.add(callee)
                stack += list(computations[callee].instructions())
    return found


def _matmul_in(module, name: str) -> bool:
    """Whether instruction `name` is, or calls (transitively), a convolution or dot, by XLA's opcodes."""
    return bool(_matmuls_in(module, name))


def _jaxpr_holds_a_dot(program) -> bool:
    """Whether JAX's own jaxpr of the program has a dot_general anywhere (a kernel's body included)."""
    from jax_reference import jaxpr_of

    return "dot_general" in str(jaxpr_of(program.function, program.example_args()))


def test_unit_answers_follow_xlas_opcodes(tpu_items, recompiled, programs):
    """Every `mxu` item (none on the built-in corpus: see the next test) taps what XLA's fresh compile says runs
    on the MXU, among rows that print alike (one opcode, one fusion kind) on both sides of the answer."""
    for item in tpu_items["units"]:
        if item["step"] != "mxu" or item["program"] not in recompiled:
            continue
        module = _module(recompiled[item["program"]])
        by_name = _by_name(module)
        expected, by_look = [], {}
        for k, name in enumerate(item["instructions"], start=1):
            if name is None:
                continue  # a brace or a signature: nothing runs there
            text = by_name[name][1].to_string()
            kernel = 'custom_call_target="tpu_custom_call"' in text
            mxu = _matmul_in(module, name) or (kernel and _jaxpr_holds_a_dot(programs[item["program"]]))
            look = (str(by_name[name][1].opcode), (re.search(r"\bkind=(\w+)", text) or [None, ""])[1])
            by_look.setdefault(look, set()).add(mxu)
            if mxu:
                expected.append(k)
        assert item["answer_lines"] == expected, (item["program"], item["instruction"])
        assert any(len(answers) == 2 for answers in by_look.values()), (item["program"], item["instruction"])


def test_on_the_built_in_tpu_compiles_a_fusions_kind_says_whether_it_feeds_the_mxu(tpu_items, recompiled):
    """Why the built-in corpus asks no `mxu` item: in XLA's fresh TPU compiles a fusion holds a convolution or dot
    exactly when its kind is kOutput, so the row's own `kind=` answers it without its body being read."""
    fusions = 0
    for slug, compiled in recompiled.items():
        module = _module(compiled)
        for comp, ins in _by_name(module).values():
            if str(ins.opcode) != "HloOpcode.kFusion":
                continue
            kind = re.search(r"\bkind=(\w+)", ins.to_string())[1]
            assert (kind == "kOutput") == _matmul_in(module, ins.name), (slug, ins.name, kind)
            fusions += 1
    assert fusions >= 100
    assert not [i for i in tpu_items["units"] if i["step"] == "mxu"]


def test_mxu_shape_answers_are_what_xla_says_the_fusions_one_multiply_makes(tpu_items, recompiled):
    import numpy as np
    from jaxlib import xla_client

    from dumpgym.drills.answer import read_aval

    checked = 0
    for item in tpu_items["units"]:
        if item["step"] != "mxu-shape" or item["program"] not in recompiled:
            continue
        found = _matmuls_in(_module(recompiled[item["program"]]), item["instruction"])
        assert [m.name for m in found] == [item["matmul"]], (item["program"], item["instruction"])
        # XLA's own shape of that instruction, in a fresh compile, in JAX's spelling
        shape = xla_client.Shape(hlo_facts.defined(found[0].to_string())[1])
        made = read_aval(f"{np.dtype(shape.numpy_dtype()).name}{list(shape.dimensions())}")
        assert item["value"] == made, (item["program"], item["instruction"])
        assert made not in item["misread"]
        checked += 1
    assert checked >= 30
