"""The compiled HLO layer: every instruction naming a source op is tied to the right equation, instructions
whose metadata XLA dropped are tied by dataflow, and only XLA's plumbing is left as its own."""
import copy
import re

import pytest

from dumpgym.programs import SLUGS, builtin_program

CPU_COMPILED = [s for s in SLUGS if builtin_program(s).platform == "cpu"]  # a Mosaic kernel has no CPU compile
from dumpgym.record.schema import ProgramRecord, RecordError
from dumpgym.record.targets import CPU

OP_NAME = re.compile(r'op_name="([^"]*)"')

# Lowerings that emit inner steps under those steps' own names (the StableHLO oracle sees the
# same): integer_pow[y=-2] under jvp becomes mul/div, an all-reduce's combiner is an add, and
# argmax's comparator region is built from compares and selects.
# `logistic` is lowered as 1 / (1 + exp(-x)); `random_bits` as threefry's counters (iota_2x32_shape)
# and rounds of adds, rotations and xors, in a loop on CPU (jax._src.prng, random/threefry2x32.py);
# a scatter-add's combiner region is an add; a gather in FILL_OR_DROP mode masks out-of-bounds rows (slicing.py `_gather_fill`); a scan's own
# loop counts, slices its xs and writes its ys (jax._src.lax.control_flow.loops `_scan_impl`).
COMPOSITE = {
    "integer_pow": {"mul", "div", "broadcast_in_dim"},
    "psum_invariant": {"add"}, "scatter-add": {"add"},
    "argmax": {"gt", "ne", "or", "eq", "lt", "and", "select_n", "reduce", "iota"},
    "logistic": {"neg", "exp", "add", "div"},
    "random_bits": {"add", "sub", "xor", "or", "shift_left", "shift_right_logical", "slice", "concatenate",
                    "iota_2x32_shape", "lt", "convert_element_type", "squeeze"},
    "gather": {"ge", "le", "and", "select_n", "reduce_and"},
    # a reversed scan (backpropagation through time) indexes its xs at length - i - 1
    "scan": {"add", "sub", "lt", "dynamic_slice", "dynamic_update_slice", "broadcast_in_dim", "squeeze"},
}


def _scopes(text: str) -> set[str]:
    """Every op_name path that is a proper prefix of another in the text: a scope JAX pushed on the
    name stack (`jit(f)`, `while/body`, `closed_call`, `jvp(jit(take_along_axis))`), naming no primitive.
    An instruction named after a scope alone (a constant XLA materialised in a loop body) says
    which body it is in, not which primitive."""
    out = set()
    for path in set(OP_NAME.findall(text)):
        parts = path.split("/")
        out |= {"/".join(parts[:k]) for k in range(1, len(parts))}
    return out


def _argument_names(text: str) -> set[str]:
    """The op_names of the entry computation's parameters (the program's arguments), read from the text."""
    entry = text[text.index("\nENTRY "):]
    return {m.group(1) for m in re.finditer(r'parameter\(\d+\), metadata=\{op_name="([^"/]*)"', entry)}


def _most_specific(record, eqns):
    eqns = set(eqns)
    parents = {record["eqns"][e]["parent"] for e in eqns}
    return {e for e in eqns if e not in parents}


# The CPU's and the GPU's (the described H100) compiles, judged alike; a Mosaic kernel has neither.
CPU_AND_GPU = [pytest.param(s, layer, id=f"{s}-{layer}") for layer in ("cpu", "gpu") for s in CPU_COMPILED]


@pytest.mark.parametrize("slug, layer", CPU_AND_GPU)
def test_instructions_with_op_name_are_attributed_consistently(slug, layer, by_slug):
    """Judged from the plain compile's own op_name (no tags): its last component names the primitive."""
    record = by_slug[slug]
    hlo = record["compiled"][layer]
    assert _op_names_agree(record, hlo) > 0 and hlo["stats"]["unattributed_with_op_name"] == 0


def _regions_applied(text: str) -> dict[str, list[str]]:
    """Each region a `to_apply=` names -> the lines that apply it (text alone)."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        for region in re.findall(r"\bto_apply=%([\w.\-]+)", line):
            out.setdefault(region, []).append(line)
    return out


def _op_names_agree(record, hlo) -> int:
    """Assert every instruction with an op_name naming a primitive is attributed to an equation of
    that primitive (or of one lowered through it); return how many were judged."""
    lines = hlo["text"].splitlines()
    slug = record["slug"]
    arguments, scopes = _argument_names(hlo["text"]), _scopes(hlo["text"])
    applied, bodies = _regions_applied(hlo["text"]), _bodies(hlo["text"])
    checked = 0
    for ins in hlo["instructions"]:
        match = OP_NAME.search(lines[ins["line"] - 1])
        if not match or ins["opcode"] == "fusion":
            continue
        path = match.group(1)
        path = _judged_name(lines[ins["line"] - 1], bodies)
        if ins["computation"] in applied:
            # rule 5: a region does the work of what applies it, whose op_names it is judged by
            holders = [_judged_name(h, bodies) for h in applied[ins["computation"]]]
            path = next((h for h in holders if h and "/" in h), path)
        if "/" not in path and (path in arguments or ins["opcode"] == "parameter") and not ins["eqns"]:
            continue  # an argument (or XLA's copy or bitcast of it): its op_name is the argument's name
        if "/" not in path and not path.startswith("jit("):
            continue  # a name XLA gave (the partitioner names what it adds after an instruction): no primitive
        assert ins["eqns"], f"{slug}: {ins['name']} names {path!r} but is not attributed"
        primitives = {record["eqns"][e]["primitive"] for e in _most_specific(record, ins["eqns"])}
        last = path.split("/")[-1]
        if path in scopes:
            continue  # named after the enclosing jit, loop body or call: no primitive to judge by
        composite = any(last in COMPOSITE.get(p, ()) for p in primitives)
        assert last in primitives or composite, f"{slug}: {ins['name']} op_name {path!r}, attributed to {primitives}"
        checked += 1
    return checked


def _bodies(text: str) -> dict[str, list[str]]:
    """Each computation of a compiled HLO text by name: its instruction lines (read from the text alone)."""
    out, name = {}, None
    for line in text.splitlines():
        header = re.match(r"(?:ENTRY )?%([\w.\-]+) \(", line)
        if header and line.rstrip().endswith("{"):
            name = header.group(1)
            out[name] = []
        elif line.startswith("}"):
            name = None
        elif name is not None:
            out[name].append(line)
    return out


# A reduce-window whose combiner region's ROOT is one of these is that reduction plus the broadcast of its
# result (docs/corpus.md, rule 4), whatever equation its own metadata names.
WINDOW_REDUCTION = {"maximum": "reduce_max", "minimum": "reduce_min", "add": "reduce_sum"}


def _region_root(bodies: dict[str, list[str]], region: str) -> str | None:
    """The opcode of a region's ROOT instruction (text alone)."""
    root = next((b for b in bodies.get(region, []) if b.lstrip().startswith("ROOT ")), "")
    found = re.search(r" = \S+ ([\w\-]+)\(", root)
    return found.group(1) if found else None


def _judged_name(line: str, bodies: dict[str, list[str]]) -> str | None:
    """The op_name path an instruction line is judged by: its metadata's, but for a reduce-window the
    reduction its combiner makes in its place (rule 4: `.../sub` on sdpa's TPU window is `.../reduce_max`)."""
    match = OP_NAME.search(line)
    if match is None:
        return None
    if window := re.search(r" reduce-window\(.*\bto_apply=%([\w.\-]+)", line):
        reduction = WINDOW_REDUCTION.get(_region_root(bodies, window.group(1)), "reduce-window")
        return "/".join((*match.group(1).split("/")[:-1], reduction))
    return match.group(1)


def _named_in_fusion(text: str, line: int) -> set[str]:
    """The primitives whose op_names stand in the fusion on `line` and every computation it calls (text alone).
    A region applied with `to_apply=` names nothing of its own: it does its holder's work, whatever reducer
    XLA first made it for (docs/corpus.md, rule 5; embed-xent's GPU scatter applies an `add` region carrying
    a `reduce_sum`'s name); a reduce-window names the reduction its combiner makes (rule 4), not its tag."""
    bodies = _bodies(text)
    fusion_line = text.splitlines()[line - 1]
    scopes = _scopes(text)

    def named(computation, seen):
        out = set()
        if computation in seen:
            return out
        seen.add(computation)
        for body_line in bodies.get(computation, []):
            match = OP_NAME.search(body_line)
            window = re.search(r" reduce-window\(.*\bto_apply=%([\w.\-]+)", body_line)
            if window:
                out.add(WINDOW_REDUCTION.get(_region_root(bodies, window.group(1)), "reduce-window"))
            elif match and "/" in match.group(1) and match.group(1) not in scopes and _does_named_work(body_line, match.group(1)):
                out.add(match.group(1).split("/")[-1])
            for callee in re.findall(r"\bcalls=%([\w.\-]+)", body_line):
                out |= named(callee, seen)
        return out

    in_body = named(re.search(r"calls=%([\w.\-]+)", fusion_line).group(1), set())
    own = OP_NAME.search(fusion_line)
    if own and "/" in own.group(1) and own.group(1) not in scopes:
        # a fusion named after a dot whose body cannot contract (a copy XLA wrapped) only serves it
        if own.group(1).split("/")[-1] != "dot_general" or _opcodes_in(text, line) & CONTRACTING_OPCODES - {"broadcast"}:
            in_body.add(own.group(1).split("/")[-1])
    return in_body


# What can do a contraction's work (docs/corpus.md, rule 7): the contraction, a kernel or fusion holding one,
# or the floating-point arithmetic XLA rewrites one into (with the broadcasts feeding its multiply).
CONTRACTING_OPCODES = {"dot", "convolution", "custom-call", "fusion", "multiply", "reduce", "add", "convert",
                       "reduce-window", "broadcast"}


def _does_named_work(line: str, op_name: str) -> bool:
    """Whether an instruction named after a dot_general can do its work (text alone): a bitcast, copy,
    constant, layout transpose or the partitioner's integer index arithmetic carries the dot's name
    but serves it."""
    if op_name.split("/")[-1] != "dot_general":
        return True
    opcode, dtype = re.search(r" = \S+ ([\w\-]+)\(", line), re.search(r" = \(?([a-z0-9]+)\[", line)
    if opcode is None or dtype is None:
        return True
    return opcode.group(1) in CONTRACTING_OPCODES and dtype.group(1).startswith(("f", "bf"))


# The opcode an equation's work takes in the compiled text where XLA dropped its op_name (the
# dataflow inference names it then): judged by what the body holds, not by the attribution.
OPCODE_OF = {"broadcast_in_dim": "broadcast", "convert_element_type": "convert", "dot_general": "dot",
             "reduce_sum": "reduce", "reduce_max": "reduce", "reduce_min": "reduce",
             "max": "maximum", "min": "minimum"}
DATA_MOVES = {"transpose", "broadcast", "reshape", "slice", "pad", "concatenate", "reverse", "iota"}


def _opcodes_in(text: str, line: int) -> set[str]:
    """The opcodes of the instructions in the computation the fusion on `line` calls, in the fusions nested
    in it (TPU fusions call fusions) and in the regions they apply (a reduce-window's `maximum`), read from
    the text alone."""
    bodies = _bodies(text)
    stack, seen, out = [re.search(r"calls=%([\w.\-]+)", text.splitlines()[line - 1]).group(1)], set(), set()
    while stack:
        called = stack.pop()
        if called in seen:
            continue
        seen.add(called)
        for body_line in bodies.get(called, []):
            if m := re.search(r" = \S+ ([\w\-]+)\(", body_line):
                out.add(m.group(1))
            stack += re.findall(r"(?:calls|to_apply)=%([\w.\-]+)", body_line)
    return out


def _explains(named: set[str], primitives: set[str], opcodes: set[str] = frozenset(),
              containers: set[str] = frozenset(), fed: set[str] = frozenset()) -> bool:
    """Whether the primitives a fusion's text names are exactly these equations' (inner steps of
    composites allowed, and the names of containers among them, as remat2 for what its own
    transpose emits); a listed primitive the text does not name must have its opcode in the body,
    or be what the fusion feeds while the body moves data."""
    explained = {p for p in named if p in primitives | containers
                 or any(p in COMPOSITE.get(q, ()) for q in primitives | containers)}
    unnamed = {q for q in primitives if q not in named and q not in COMPOSITE}
    # A body that only moves data (a transpose laying out a dot's operand) serves the equation it
    # feeds; so does one data move among other work, for the primitive the fusion's users name.
    moves_data = opcodes - PLUMBING <= DATA_MOVES
    lays_out = bool(opcodes & DATA_MOVES)
    return explained == named and all(OPCODE_OF.get(q, q) in opcodes or moves_data or (lays_out and q in fed)
                                      for q in unnamed)


def _fed(text: str, line: int) -> set[str]:
    """The primitives named by the op_names of the instructions that read the fusion on `line` (text alone)."""
    name = re.search(r"%([\w.\-]+) = ", text.splitlines()[line - 1]).group(1)
    reads = re.compile(rf"%{re.escape(name)}[,)]")
    out = set()
    for other in text.splitlines():
        head, _, rest = other.partition(" = ")
        if rest and reads.search(rest) and (m := OP_NAME.search(rest)) and "/" in m.group(1):
            out.add(m.group(1).split("/")[-1])
    return out


def _enclosing(record, eqns) -> set[str]:
    """The primitives of the containers (jit, scan, remat2) around these equations, from the jaxpr's nesting."""
    out = set()
    for e in eqns:
        while (e := record["eqns"][e]["parent"]) is not None:
            out.add(record["eqns"][e]["primitive"])
    return out


def _containers(record, eqns) -> set[str]:
    """The primitives of the container equations (jit, remat2, scan) among these."""
    parents = {record["eqns"][e]["parent"] for e in eqns}
    return {record["eqns"][e]["primitive"] for e in eqns if e in parents}


@pytest.mark.parametrize("slug, layer", CPU_AND_GPU)
def test_every_fusion_lists_what_it_absorbed(slug, layer, by_slug):
    """Judged from the plain compile's text: the primitives named in a fusion's body are its equations'."""
    record = by_slug[slug]
    hlo = record["compiled"][layer]
    checked = 0
    for fusion in hlo["fusions"]:
        in_body = _named_in_fusion(hlo["text"], fusion["line"])
        primitives = {record["eqns"][e]["primitive"] for e in _most_specific(record, fusion["eqns"])}
        opcodes = _opcodes_in(hlo["text"], fusion["line"])
        containers = _containers(record, fusion["eqns"])
        fed = _fed(hlo["text"], fusion["line"])
        assert _explains(in_body, primitives, opcodes, containers, fed), (slug, fusion["name"], in_body, primitives)
        checked += bool(fusion["eqns"])
    assert checked == sum(1 for f in hlo["fusions"] if f["eqns"])  # every fusion with equations was judged


def test_mlp_fuses_the_gelu_chain(by_slug):
    record = by_slug["mlp"]
    sets = [[record["eqns"][e]["primitive"] for e in f["eqns"]] for f in record["compiled"]["cpu"]["fusions"]]
    assert ["broadcast_in_dim", "add", "integer_pow", "mul", "add", "mul", "tanh", "add", "mul", "mul"] in sets
    assert record["compiled"]["cpu"]["backend"] == "cpu"
    assert record["compiled"]["cpu"]["text"].startswith("HloModule jit_mlp_block")
    assert "FileNames" not in record["compiled"]["cpu"]["text"]  # no paths of the machine that built it


def _instruction(record, name):
    return next(i for i in record["compiled"]["cpu"]["instructions"] if i["name"] == name)


def _eqn_at(record, primitive, line):
    return next(e["id"] for e in record["eqns"] if e["primitive"] == primitive and e["jaxpr_lines"][0] == line)


def test_moe_last_einsum_is_the_dot_whose_metadata_xla_dropped(by_slug):
    """`%dot.3` carries no op_name; it reads the one-hot and the experts' outputs and feeds the
    last einsum's convert, so it is that einsum's dot_general."""
    record = by_slug["moe"]
    last = max((e for e in record["eqns"] if e["primitive"] == "dot_general"), key=lambda e: e["jaxpr_lines"][0])
    dot = _instruction(record, "dot.3")
    assert "metadata" not in record["compiled"]["cpu"]["text"].splitlines()[dot["line"] - 1]
    assert (dot["opcode"], dot["eqns"], dot["via"]) == ("dot", [last["id"]], "inferred")


def test_moe_transpose_copy_fusion_holds_the_transpose_at_its_root(by_slug):
    record = by_slug["moe"]
    transpose = _eqn_at(record, "transpose", 19)
    fusion = next(f for f in record["compiled"]["cpu"]["fusions"] if f["name"] == "transpose_copy_fusion.1")
    assert transpose in fusion["eqns"]
    called = re.search(r"calls=%([\w.\-]+)", record["compiled"]["cpu"]["text"].splitlines()[fusion["line"] - 1]).group(1)
    ins = [i for i in record["compiled"]["cpu"]["instructions"] if i["computation"] == called and i["opcode"] == "transpose"]
    assert [(i["eqns"], i["via"]) for i in ins] == [([transpose], "inferred")]


def test_mlp_bias_broadcast_is_the_broadcast_the_add_emitted(by_slug):
    """`broadcast_in_dim` to [1,512] has no instruction of its own: XLA merged it into the broadcast
    that `add` emitted, which keeps add's tag (its own equation) and absorbs the bias broadcast (rule 2)."""
    record = by_slug["mlp"]
    bias, add = _eqn_at(record, "broadcast_in_dim", 6), _eqn_at(record, "add", 7)
    instructions = [i for i in record["compiled"]["cpu"]["instructions"] if i["opcode"] != "fusion"]
    assert not [i for i in instructions if bias in i["eqns"]]
    holders = [i for i in instructions if any(a["eqn"] == bias for a in i.get("absorbed", ()))]
    assert [(i["opcode"], i["eqns"], i["via"], i["absorbed"]) for i in holders] == [
        ("broadcast", [add], "tag", [{"eqn": bias, "rule": 2}])]
    assert any(bias in f["eqns"] and add in f["eqns"] for f in record["compiled"]["cpu"]["fusions"])


PLUMBING = {"parameter", "constant", "tuple", "gettupleelement", "copy", "bitcast", "convert", "fusion"}
PRECISION = {"bf16", "f16", "f32"}


@pytest.mark.parametrize("slug", CPU_COMPILED)
def test_xla_own_instructions_are_plumbing(slug, by_slug):
    """What no equation computes is XLA's plumbing: parameters, constants, tuples, copies, layout
    bitcasts, the float-normalization converts around bf16 work, and fusions of only those."""
    hlo = by_slug[slug]["compiled"]["cpu"]
    lines = hlo["text"].splitlines()
    own = [i for i in hlo["instructions"] if i["via"] == "none"]
    assert {i["opcode"] for i in own} <= PLUMBING, slug
    for ins in own:
        text = lines[ins["line"] - 1]
        if ins["opcode"] == "convert":  # a precision round trip, not a convert_element_type
            to, frm = re.search(r" = (\w+)\[", text).group(1), None
            operand = re.search(r"convert\(%([\w.\-]+)\)", text).group(1)
            frm = next(re.search(r" = (\w+)\[", l).group(1) for l in lines
                       if re.match(rf"\s*(ROOT )?%{re.escape(operand)} = ", l))
            assert {to, frm} <= PRECISION, (slug, text)
        if ins["opcode"] == "fusion":
            # of only XLA's own instructions, or of layout and index work that serves a contraction
            # but does none of it (docs/corpus.md, rule 7)
            called = re.search(r"calls=%([\w.\-]+)", text).group(1)
            for i in hlo["instructions"]:
                if i["computation"] == called and i["via"] != "none":
                    served = {by_slug[slug]["eqns"][e]["primitive"] for e in i["eqns"]}
                    assert served <= {"dot_general"} and not _does_named_work(lines[i["line"] - 1],
                                                                               "x/dot_general"), text
    assert hlo["stats"]["compiler_own"] == len(own)


@pytest.mark.parametrize("slug", CPU_COMPILED)
def test_via_says_how_each_instruction_is_known(slug, by_slug):
    hlo = by_slug[slug]["compiled"]["cpu"]
    regions = set(re.findall(r"to_apply=%([\w.\-]+)", hlo["text"]))
    for ins in hlo["instructions"]:
        assert (ins["via"] == "none") == (not ins["eqns"]), ins
        if ins["via"] == "region":
            assert ins["computation"] in regions, ins
        elif ins["computation"] in regions:
            assert ins["via"] == "none", ins
    s = hlo["stats"]
    assert s["by_tag"] + s["inferred"] + s["in_regions"] + s["compiler_own"] == s["instructions"]
    assert s["attributed"] == s["instructions"] - s["compiler_own"]


def test_a_via_outside_the_contract_is_refused(by_slug):
    record = copy.deepcopy(by_slug["moe"])
    record["compiled"]["cpu"]["instructions"][0]["via"] = "guessed"
    with pytest.raises(RecordError, match=r"instructions\[0\]\.via"):
        ProgramRecord.from_json(record)


@pytest.fixture(scope="module")
def fresh_moe(programs):
    """moe compiled here and now (its text depends on this CPU, so only properties are checked)."""
    from dumpgym.corpus.pipeline import program_record

    return program_record(programs["moe"], targets=[CPU]).to_json()


def test_a_fresh_compile_leaves_no_work_unattributed(fresh_moe):
    """On whatever CPU this runs: every instruction that is not plumbing computes an equation, and
    every dot and transpose computes one of a primitive that does that work."""
    hlo = fresh_moe["compiled"]["cpu"]
    eqns = fresh_moe["eqns"]
    for ins in hlo["instructions"]:
        if ins["opcode"] not in PLUMBING:
            assert ins["eqns"], ins
        if ins["opcode"] == "dot":
            assert any(eqns[e]["primitive"] == "dot_general" for e in ins["eqns"]), ins
    assert {eqns[e]["primitive"] for i in hlo["instructions"] if i["opcode"] == "transpose" for e in i["eqns"]} \
        <= {"transpose", "dot_general"}
    dots = [e["id"] for e in eqns if e["primitive"] == "dot_general"]
    assert all(hlo["lines_by_eqn"].get(str(d)) for d in dots)  # every einsum has compiled lines


def small_block(x, w, b):
    """A transposed matmul, a bias and a GELU in bf16: converts, a transpose and a broadcast to attribute."""
    import jax
    import jax.numpy as jnp

    y = jnp.einsum("td,fd->ft", x, w).T + b
    return jax.nn.gelu(y).sum(axis=0)


def test_a_fresh_compile_of_a_small_function_attributes_all_its_work():
    from dumpgym.corpus.pipeline import program_record
    from dumpgym.traced.program import Program

    program = Program("small-block", "small block", "", small_block, ("bf16[16,32]", "bf16[8,32]", "bf16[8]"))
    record = program_record(program, targets=[CPU]).to_json()
    hlo = record["compiled"]["cpu"]
    for ins in hlo["instructions"]:
        if ins["opcode"] not in PLUMBING:
            assert ins["eqns"] and ins["via"] in ("tag", "inferred", "region"), ins
    computing = {e["id"] for e in record["eqns"] if e["primitive"] in ("dot_general", "tanh", "reduce_sum")}
    assert computing <= {int(k) for k in hlo["lines_by_eqn"]}


# ---------------------------------------------------------------------------------------------
# The fusion drill (GYM·05).

@pytest.fixture(scope="module")
def fusion_items(read_pool):
    return [i for i in read_pool if i["drill"] == "fusions"]


def _tapped(record, item):
    """The equations whose first jaxpr line is one of the item's answer rows (primitive, line), read from
    the jaxpr text and the record's line spans: exactly one printed equation starts on each row."""
    jaxpr = record["jaxpr"].splitlines()
    out = []
    for n in item["lines"]:
        starting = [e for e in record["eqns"] if e["jaxpr_lines"][0] == n]
        assert len(starting) == 1, (item["fusion"], n, jaxpr[n - 1])
        assert re.search(rf"= {starting[0]['primitive']}\b", jaxpr[n - 1]), (n, jaxpr[n - 1])
        out.append((starting[0]["primitive"], n))
    return out


def test_fusion_items_ask_for_a_set_of_jaxpr_lines_with_a_reason_for_each(fusion_items, by_slug):
    assert fusion_items
    for item in fusion_items:
        assert item["form"] == "lines" and item["eqn"] is None and item["weight"] > 0
        assert len(item["lines"]) >= 2 and item["lines"] == sorted(set(item["lines"]))
        jaxpr_rows = by_slug[item["program"]]["jaxpr"].count("\n") + 1
        assert all(1 <= n <= jaxpr_rows for n in item["lines"])
        # every row of the set says which instruction of this compile does its work
        assert all("%" in item["explain"][str(n)] for n in item["lines"]), item["fusion"]
        assert item["feedback"].startswith(f"%{item['fusion']}'s body does the work of {len(item['lines'])} ")
        assert item["skill"] in ("kLoop", "kInput", "kOutput", "kCustom")


def test_fusion_items_show_the_jaxpr_then_the_call_line_the_body_and_the_backend(fusion_items, by_slug):
    for item in fusion_items:
        hlo = by_slug[item["program"]]["compiled"][item["layer"]]
        lines = hlo["text"].splitlines()
        call = lines[item["hlo_line"] - 1]
        called = re.search(r"calls=%([\w.\-]+)", call).group(1)
        jaxpr, what, shown_call, body, *rest = item["shown"]
        assert jaxpr == by_slug[item["program"]]["jaxpr"]  # the rows to tap are the whole jaxpr's
        if hlo["backend"] == "tpu":
            assert f"libtpu {hlo['libtpu_version']} for {hlo['device_kind']} ({hlo['topology']}), without a TPU" in what
        elif hlo["backend"] == "gpu":
            assert f"XLA for {hlo['device_kind']} ({hlo['topology']}), without a GPU" in what
        else:
            assert f"XLA for {hlo['backend'].upper()}" in what and hlo["host"] in what
        # the call line and the bodies beside their listing's numbers: the question and feedback cite them
        unnumbered = [re.sub(r"(?m)^ *\d+  ", "", b) for b in (shown_call, body, *rest)]
        assert shown_call == f"{item['hlo_line']:>3}  {call.strip()}"
        assert unnumbered[1].startswith(f"%{called} (") and body.endswith("}")
        assert all(b in hlo["text"] for b in unnumbered[1:])
        assert not re.search(r"line \d", item["question"].split("(")[0])  # the question names no jaxpr line


def test_fusion_drill_answers_are_what_the_compiled_text_says_was_fused(fusion_items, by_slug):
    """Judged from XLA's text and the jaxpr text alone: not from the attribution the drill is built on. Every
    layer's items are judged, the GPU's among them, and none is let off."""
    assert {i["layer"] for i in fusion_items} >= {"cpu", "tpu", "gpu"}
    wrong = set()
    for item in fusion_items:
        record = by_slug[item["program"]]
        text = record["compiled"][item["layer"]]["text"]
        assert f"%{item['fusion']} = " in text.splitlines()[item["hlo_line"] - 1]
        answer = _tapped(record, item)
        named = _named_in_fusion(text, item["hlo_line"])
        opcodes = _opcodes_in(text, item["hlo_line"])
        fed = _fed(text, item["hlo_line"])
        containers = _enclosing(record, {_eqn_at(record, p, n) for p, n in answer})
        if not _explains(named, {p for p, _ in answer}, opcodes, containers, fed):
            wrong.add((item["program"], item["layer"], item["fusion"]))
    assert not wrong


def _fusion_line(record, layer, name) -> int:
    return next(f["line"] for f in record["compiled"][layer]["fusions"] if f["name"] == name)


def test_the_judge_reads_a_region_as_its_holders_work_and_a_window_as_its_reduction(by_slug):
    """The text-only judge follows docs/corpus.md rules 4 and 5, read from the text: embed-xent's GPU scatter
    applies an `add` region XLA first made for a `reduce_sum` (and named so), yet the fusion does a
    scatter-add, no reduce_sum; sdpa's TPU reduce-window carries `sub`'s name, yet its `maximum` combiner
    makes it the row's reduce_max."""
    embed = by_slug["embed-xent"]["compiled"]["gpu"]["text"]
    for name in ("input_scatter_fusion", "input_scatter_fusion.1"):
        line = _fusion_line(by_slug["embed-xent"], "gpu", name)
        called = re.search(r"calls=%([\w.\-]+)", embed.splitlines()[line - 1]).group(1)
        (region,) = [r for b in _bodies(embed)[called] for r in re.findall(r"to_apply=%([\w.\-]+)", b)]
        assert any('op_name="jit(embed_xent)/jvp()/reduce_sum"' in b for b in _bodies(embed)[region])
        named = _named_in_fusion(embed, line)
        assert "scatter-add" in named and "reduce_sum" not in named, (name, named)
    sdpa = by_slug["sdpa"]["compiled"]["tpu"]["text"]
    line = _fusion_line(by_slug["sdpa"], "tpu", "fusion.9")
    (window,) = [b for c in _bodies(sdpa).values() for b in c if " reduce-window(" in b and "/sub" in b]
    assert "reduce_max" in _named_in_fusion(sdpa, line) and "maximum" in _opcodes_in(sdpa, line), window


def test_gpu_fusion_items_name_the_gpu_listing_and_come_from_many_programs(fusion_items, by_slug):
    gpu = [i for i in fusion_items if i["layer"] == "gpu"]
    assert len({i["program"] for i in gpu}) >= 6
    for item in gpu:
        text = by_slug[item["program"]]["compiled"]["gpu"]["text"]
        assert f"%{item['fusion']} = " in text.splitlines()[item["hlo_line"] - 1]
        assert f"GPU compiled HLO line {item['hlo_line']}" in item["question"]
        assert item["card"].endswith("/gpu"), item["card"]  # not the CPU's card of a fusion of one name


# Opcodes (as the text prints them) that do no arithmetic: a body of only these does no dot's, no reduction's work.
NO_ARITHMETIC = {"parameter", "constant", "tuple", "get-tuple-element", "copy", "bitcast", "fusion", "transpose",
                 "broadcast", "reshape", "slice", "dynamic-slice", "pad", "concatenate", "reverse", "iota",
                 "all-gather", "all-reduce", "clamp", "convert"}


def test_a_fusion_is_asked_only_where_its_body_does_the_work_of_every_answered_dot(fusion_items, by_slug):
    """A dot or a reduction in the answer needs an instruction in the printed body that can do that
    arithmetic (a dot, convolution, multiply, reduce, ...), read from the text: a copy, bitcast or transpose
    never computes a matmul (issue 33: sdpa's %copy_bitcast_fusion.1 was answered with a dot_general)."""
    for item in fusion_items:
        record = by_slug[item["program"]]
        text = record["compiled"][item["layer"]]["text"]
        heavy = {p for p, _ in _tapped(record, item)} & {"dot_general", "reduce_sum", "reduce_max", "argmax"}
        if heavy:
            assert _opcodes_in(text, item["hlo_line"]) - NO_ARITHMETIC, (item["program"], item["fusion"], heavy)


def test_bitcast_and_copy_fusions_are_not_answered_with_a_dot(fusion_items, by_slug):
    asked = {(i["program"], i["layer"], i["fusion"]) for i in fusion_items}
    record = by_slug["sdpa"]
    fusion = next(f for f in record["compiled"]["cpu"]["fusions"] if f["name"] == "copy_bitcast_fusion.1")
    # its body (a multiply, convert, transpose, copy and bitcast) does no dot's work: neither the record
    # credits it with the dot whose operand it moves, nor, if asked, is a dot_general among its answer
    assert "dot" not in _opcodes_in(record["compiled"]["cpu"]["text"], fusion["line"])
    assert "dot_general" not in {record["eqns"][e]["primitive"] for e in fusion["eqns"]}
    for item in fusion_items:
        if (item["program"], item["layer"]) == ("sdpa", "cpu") and item["fusion"] == "copy_bitcast_fusion.1":
            assert "dot_general" not in {record["eqns"][e]["primitive"] for e in item["eqns"]}
    assert ("fsdp-step", "tpu", "constant_dynamic-slice_fusion") not in asked


def test_a_fusion_that_kept_one_copy_of_two_equal_equations_is_asked_with_both(fusion_items, by_slug):
    """Issue 33: in scan's TPU %slice_add_fusion.1 one slice instruction does lines 52 and 58 (both take
    column 0 of `s`, written with other strides): its rows to tap hold both."""
    record = by_slug["scan"]
    jaxpr = record["jaxpr"].splitlines()
    for n in (52, 58):
        assert re.search(r"slice\[limit_indices=\(8, 1\) start_indices=\(0, 0\) strides=\(1, [12]\)\] s$", jaxpr[n - 1])
    (item,) = [i for i in fusion_items if (i["program"], i["layer"], i["fusion"]) == ("scan", "tpu", "slice_add_fusion.1")]
    assert {52, 58} <= set(item["lines"])  # asked since the attribution holds both (rule 3, equal work kept once)


def test_a_row_left_out_or_tapped_wrongly_is_explained(fusion_items, by_slug):
    """Each answer row says why it is in; a row of a nearby equation outside says where it went."""
    from dumpgym.drills.answer import from_json

    for item in fusion_items:
        form = from_json({"form": "lines", "lines": item["lines"], "explain": item["explain"]})
        first, *rest = item["lines"]
        missed = form.check(rest)
        assert not missed.right and missed.missing == (first,) and missed.reason.startswith(f"Line {first}, ")
        assert form.check(item["lines"]).right
    # a neighbour placed elsewhere is explained in this compile's terms
    outside = [r for i in fusion_items for k, r in i["explain"].items() if int(k) not in i["lines"]]
    assert outside and any("stayed outside" in r and "%" in r for r in outside)


# ---------------------------------------------------------------------------------------------
# The compiled facts (`ir/hlo_facts.py`): recorded once at compile time, checked against XLA itself.

def _layers(corpus):
    """(slug, layer name, typed CompiledLayer, XLA's own parse of its text, the typed program record) for
    every committed layer."""
    from jaxlib import xla_client

    for p in corpus["programs"]:
        record = ProgramRecord.from_json(p, p["slug"])
        for name, layer in record.compiled.items():
            yield p["slug"], name, layer, xla_client.hlo.hlo_module_from_text(layer.text), record


@pytest.fixture(scope="module")
def layers(corpus):
    return list(_layers(corpus))


@pytest.mark.compiled_hlo
def test_recorded_operands_and_users_are_what_xlas_graph_links(layers):
    from dumpgym.drills._tpu import Listing

    checked = 0
    for slug, name, layer, module, _ in layers:
        assert layer.has_facts, (slug, name)
        line_of = {i.name: i.line for i in layer.instructions}
        bound = {i.name: i for c in module.computations() for i in c.instructions()}
        listing = Listing(layer)
        for ins in layer.instructions:
            xla = bound[ins.name]
            assert ins.operands == tuple(line_of[o.name] for o in xla.operands()), (slug, name, ins.name)
            users = sorted(line_of[u.name] for u in xla.users() if u.name in line_of)
            assert [u.line for u in listing.users(ins)] == users, (slug, name, ins.name)
            checked += 1
    assert checked > 1000


@pytest.mark.compiled_hlo
def test_recorded_shapes_and_printed_opcodes_are_what_xla_prints_for_each_instruction(layers):
    from jaxlib import xla_client

    for slug, name, layer, module, _ in layers:
        bound = {i.name: i for c in module.computations() for i in c.instructions()}
        for ins in layer.instructions:
            shape = layer.shapes[ins.shape]
            printed = bound[ins.name].to_string().split(" = ", 1)[1]
            assert printed.startswith(f"{shape.text} {layer.printed(ins)}("), (slug, name, printed)
            members = xla_client.Shape(shape.text)
            members = members.tuple_shapes() if members.is_tuple() else [members]
            assert [layer.buffers[b].text for b in shape.buffers] == \
                [str(m) for m in members if not m.is_tuple() and "{" in str(m)]


@pytest.mark.compiled_hlo
def test_recorded_kernel_choices_and_dot_columns_are_what_xla_prints(layers):
    """A custom call's target and a backend_config's emitter kind are what XLA's own printing of the
    instruction says; a dot's `printed_end` is the end of its last dims attribute on its line."""
    import re

    targets = kinds = dots = 0
    for slug, name, layer, module, _ in layers:
        bound = {i.name: i for c in module.computations() for i in c.instructions()}
        lines = layer.text.splitlines()
        for ins in layer.instructions:
            printed = bound[ins.name].to_string()
            target = re.search(r'custom_call_target="([^"]+)"', printed)
            assert ins.custom_call_target == (target.group(1) if target and ins.opcode == "customcall" else ""), \
                (slug, name, ins.name)
            kind = re.search(r'backend_config=.*?"kind":"(__[^"]+)"', printed)
            assert ins.backend_kind == (kind.group(1) if kind else ""), (slug, name, ins.name)
            targets, kinds = targets + bool(ins.custom_call_target), kinds + bool(ins.backend_kind)
            if ins.dot is not None:
                line = lines[ins.line - 1]
                cut = ins.dot.printed_end
                assert re.search(r"_dims=\{[\d,]*\}$", line[:cut]) and "_dims=" not in line[cut:], (slug, name, line)
                dots += 1
    assert targets and kinds and dots


@pytest.mark.compiled_hlo
def test_recorded_computations_are_xlas_with_their_roots(layers):
    for slug, name, layer, module, _ in layers:
        spans = {c.name: c for c in layer.computations}
        printed = {c.name for c in module.computations()}
        assert printed <= set(spans) | {n for n in printed if not any(i.computation == n for i in layer.instructions)}
        for ins in layer.instructions:
            first, last = spans[ins.computation].lines
            assert first < ins.line < last, (slug, name, ins.name)
        for c in layer.computations:
            root = next(i for i in layer.instructions if i.line == c.root)
            assert layer.text.splitlines()[c.root - 1].lstrip().startswith(f"ROOT %{root.name} = ")
        (entry,) = [c for c in layer.computations if c.entry]
        assert layer.text.splitlines()[entry.lines[0] - 1].startswith(f"ENTRY %{entry.name} ")


@pytest.mark.compiled_hlo
def test_recorded_loop_counters_count_what_xla_and_the_scan_say(layers):
    """Where XLA writes the trip count it proved into a while's backend_config (`known_trip_count`, the
    CPU and GPU compiles) the recorded counter counts the same, in the slot XLA names
    (`known_induction_variable`); a counter of a scan's while counts the scan's `length`."""
    from dumpgym.drills._loops import trip_count

    by_xla = by_scan = 0
    for slug, name, layer, module, record in layers:
        lines = layer.text.splitlines()
        owner = {i.line: i.eqns for i in layer.instructions}
        for w in layer.while_counters:
            runs = trip_count(w.init, w.step, w.direction, w.limit)
            n = re.search(r'"known_trip_count":\{"n":"(\d+)"\}', lines[w.line - 1])
            slot = re.search(r'"known_induction_variable":\{"tuple_index":"(\d+)"\}', lines[w.line - 1])
            if n is not None:
                assert w.exact and runs == int(n.group(1)), (slug, name, w)
                assert slot is None or w.slot == int(slot.group(1)), (slug, name, w)
                by_xla += 1
            scans = [e for e in owner[w.line] if record.eqns[e].primitive == "scan"]
            if scans:
                assert w.exact and runs == record.eqns[max(scans)].params["length"], (slug, name, w)
                by_scan += 1
    assert by_xla >= 4 and by_scan >= 6


def _known_loops():
    import jax.numpy as jnp
    from jax import lax

    def fori(lo, hi):
        return lambda x: lax.fori_loop(lo, hi, lambda i, x: jnp.sin(x) * i, x)

    def while_(start, test, step):
        def f(x):
            return lax.while_loop(lambda s: test(s[0]), lambda s: (s[0] + step, jnp.sin(s[1]) + s[0]), (start, x))[1]
        return f

    def scan(length, reverse):
        return lambda x: lax.scan(lambda c, y: (jnp.sin(c) + y, c), x[0], x, length=length, reverse=reverse)[0]

    return [
        (fori(0, 10), (10, 8)), (fori(3, 17), (14, 8)), (scan(24, True), (24, 8)), (scan(6, False), (6, 8)),
        (while_(2, lambda i: i < 20, 3), (1, 8)), (while_(11, lambda i: i > 0, -2), (1, 8)),
        (while_(0, lambda i: i <= 9, 1), (1, 8)),
    ]


def _runs_in_jax(case: int) -> int:
    """The body's runs of each known loop, as JAX counts them when it runs the loop on the CPU."""
    import jax
    from jax import lax

    with jax.default_device(jax.devices("cpu")[0]):
        runs = [
            lax.fori_loop(0, 10, lambda i, n: n + 1, 0), lax.fori_loop(3, 17, lambda i, n: n + 1, 0),
            lax.scan(lambda n, _: (n + 1, None), 0, None, length=24, reverse=True)[0],
            lax.scan(lambda n, _: (n + 1, None), 0, None, length=6)[0],
            lax.while_loop(lambda s: s[0] < 20, lambda s: (s[0] + 3, s[1] + 1), (2, 0))[1],
            lax.while_loop(lambda s: s[0] > 0, lambda s: (s[0] - 2, s[1] + 1), (11, 0))[1],
            lax.while_loop(lambda s: s[0] <= 9, lambda s: (s[0] + 1, s[1] + 1), (0, 0))[1],
        ]
    return int(runs[case])


@pytest.mark.compiled_hlo
@pytest.mark.needs_tpu
@pytest.mark.parametrize("case", range(7))
def test_a_fresh_compile_records_the_loop_counter_jax_runs(case):
    """Each known loop compiled for the TPU and the CPU: the recorded counter counts what JAX runs; where
    XLA says how many times (`known_trip_count`), it says the same."""
    from dumpgym.corpus.pipeline import program_record
    from dumpgym.drills._loops import trip_count
    from dumpgym.traced.program import Program
    from dumpgym.record.targets import TPU

    f, shape = _known_loops()[case]
    arg = f"f32[{','.join(map(str, shape))}]"
    record = program_record(Program(f"loop-{case}", "a loop", "", f, (arg,)), targets=[TPU, CPU])
    expected = _runs_in_jax(case)
    (w,) = record.compiled["tpu"].while_counters
    assert trip_count(w.init, w.step, w.direction, w.limit) == expected
    cpu = record.compiled["cpu"]
    for w in cpu.while_counters:  # the CPU's, where its counter can be read (not when its start is a parameter)
        assert trip_count(w.init, w.step, w.direction, w.limit) == expected
        known = re.search(r'"known_trip_count":\{"n":"(\d+)"\}', cpu.text.splitlines()[w.line - 1])
        assert known is None or int(known.group(1)) == expected


@pytest.mark.compiled_hlo
def test_recorded_entry_layouts_are_the_ones_jax_reports_for_a_fresh_compile(programs):
    """The entry parameters' and outputs' layouts of a fresh CPU compile, recorded, are what JAX's
    `input_formats`/`output_formats` say the compiled executable takes and returns."""
    import jax

    from dumpgym.corpus.pipeline import program_record
    from dumpgym.drills._tpu import Listing
    from jax_reference import jit_of

    checked = 0
    for slug in ("moe", "layernorm", "scan-layers"):
        program = programs[slug]
        layer = program_record(program, targets=[CPU]).compiled["cpu"]
        compiled = jit_of(program.function).lower(*program.example_args()).compile()
        listing = Listing(layer)
        inputs = jax.tree.leaves(compiled.input_formats[0])
        for p in layer.entry_parameters:
            (b,) = listing.definition(listing.at[p.line]).buffers
            assert b.minor_to_major == tuple(reversed(inputs[p.number].layout.major_to_minor)), (slug, p)
            checked += 1
        entry = next(c for c in layer.computations if c.entry)
        outputs = listing.definition(listing.at[entry.root]).buffers
        formats = jax.tree.leaves(compiled.output_formats)
        assert [b.minor_to_major for b in outputs] == [tuple(reversed(f.layout.major_to_minor)) for f in formats]
    assert checked >= 5


@pytest.mark.compiled_hlo
def test_recorded_aliases_lend_only_donated_arguments(corpus, programs):
    """Every `input_output_alias` entry recorded names a parameter whose argument JAX donated."""
    import jax

    from jax_reference import jit_of

    checked = 0
    for slug, name, layer, _, _ in _layers(corpus):
        program = programs[slug]
        if not layer.aliases or program.mesh or program.platform != "cpu":
            continue
        donated = [a.donated for a in jax.tree.leaves(jit_of(program.function).lower(*program.example_args()).args_info)]
        numbers = {p.number for p in layer.entry_parameters}
        assert len(numbers) == len(donated)  # XLA kept every argument: parameter k is argument k
        for a in layer.aliases:
            assert donated[a.parameter], (slug, name, a)
            checked += 1
    assert checked >= 3



_TRAILING = ("metadata", "backend_config", "frontend_attributes", "sharding", "operand_layout_constraints")


def test_each_instructions_tail_is_where_its_line_prints_those_attributes(by_slug):
    """`Instruction.tail` against the line itself, found with `str.find`: each trailing attribute's first `, NAME=`
    is at the column recorded (absent ones not recorded), in line order; the shortened line keeps none of them,
    and `without` drops only the ones named."""
    from dumpgym.record.schema import ProgramRecord

    checked = 0
    for slug, data in by_slug.items():
        for target, layer in ProgramRecord.from_json(data, slug).compiled.items():
            lines = layer.text.splitlines()
            for ins in layer.instructions:
                line = lines[ins.line - 1]
                found = {name: line.find(f", {name}=") for name in _TRAILING}
                assert ins.tail == {n: at for n, at in sorted(found.items(), key=lambda kv: kv[1]) if at >= 0}, \
                    (slug, target, ins.line)
                short = ins.short(line)
                assert not any(f", {name}=" in short for name in _TRAILING) and line.strip().startswith(short)
                kept = ins.without(line, frozenset({"backend_config"}))
                assert ", backend_config=" not in kept and kept.count(", metadata=") == line.count(", metadata=")
                checked += bool(ins.tail)
    assert checked > 1000


def test_a_dots_printed_algorithm_is_recorded_and_nothing_else_is(whole_corpus):
    """The cost stage times a dot by the algorithm it prints (`algorithm=dot_bf16_bf16_f32` runs at the bf16
    rate): the record carries it for every dot that prints one among its own attributes, and no other dot
    has one; some built-in compile prints one."""
    printed = 0
    for program in whole_corpus["programs"]:
        for target, layer in program["compiled"].items():
            lines = layer["text"].splitlines()
            for ins in layer["instructions"]:
                if ins["opcode"] != "dot":
                    continue
                own = lines[ins["line"] - 1].split(", metadata=")[0]
                said = re.search(r", algorithm=(\w+)", own)
                assert ins["dot"].get("algorithm", "") == (said.group(1) if said else ""), (program["slug"], target)
                printed += bool(said)
    assert printed
