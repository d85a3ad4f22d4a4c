"""The compiled HLO layer: every instruction naming a source op is tied to the right equation."""
import re

import pytest

from dumpgym.drills import build_pool
from dumpgym.programs import SLUGS

OP_NAME = re.compile(r'op_name="([^"]*)"')

# Lowerings that emit inner steps under those steps' own names (the StableHLO oracle sees the
# same): integer_pow[y=-2] under jvp becomes mul/div, an all-reduce's combiner is an add, and
# argmax's comparator region is built from compares and selects.
COMPOSITE = {
    "integer_pow": {"mul", "div", "broadcast_in_dim"},
    "psum_invariant": {"add"},
    "argmax": {"gt", "ne", "or", "eq", "lt", "and", "select_n", "reduce", "iota"},
}


def _most_specific(record, eqns):
    eqns = set(eqns)
    parents = {record["eqns"][e]["parent"] for e in eqns}
    return {e for e in eqns if e not in parents}


@pytest.mark.parametrize("slug", SLUGS)
def test_instructions_with_op_name_are_attributed_consistently(slug, by_slug):
    """Judged from the plain compile's own op_name (no tags): its last component names the primitive."""
    record = by_slug[slug]
    hlo = record["hlo"]
    lines = hlo["text"].splitlines()
    arguments = {i["name"] for i in hlo["instructions"] if i["opcode"] == "parameter"}
    checked = 0
    for ins in hlo["instructions"]:
        match = OP_NAME.search(lines[ins["line"] - 1])
        if not match or ins["opcode"] == "fusion":
            continue
        path = match.group(1)
        if "/" not in path and ins["name"] in arguments and not ins["eqns"]:
            continue  # an argument: its op_name is the parameter's name
        assert ins["eqns"], f"{slug}: {ins['name']} names {path!r} but is not attributed"
        primitives = {record["eqns"][e]["primitive"] for e in _most_specific(record, ins["eqns"])}
        last = path.split("/")[-1]
        if last.startswith("jit("):
            continue  # a constant named only after the enclosing jit: the path names no primitive to judge by
        composite = any(last in COMPOSITE.get(p, ()) for p in primitives)
        assert last in primitives or composite, f"{slug}: {ins['name']} op_name {path!r}, attributed to {primitives}"
        checked += 1
    assert checked > 0 and hlo["stats"]["unattributed_with_op_name"] == 0


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


def _named_in_fusion(text: str, line: int) -> set[str]:
    """The primitives whose op_names stand in the fusion on `line` and every computation it calls (text alone)."""
    bodies = _bodies(text)
    fusion_line = text.splitlines()[line - 1]

    def named(computation, seen):
        out = set()
        if computation in seen:
            return out
        seen.add(computation)
        for body_line in bodies.get(computation, []):
            match = OP_NAME.search(body_line)
            if match and "/" in match.group(1) and not match.group(1).split("/")[-1].startswith("jit("):
                out.add(match.group(1).split("/")[-1])
            for callee in re.findall(r"(?:calls|to_apply)=%([\w.\-]+)", body_line):
                out |= named(callee, seen)
        return out

    in_body = named(re.search(r"calls=%([\w.\-]+)", fusion_line).group(1), set())
    own = OP_NAME.search(fusion_line)
    if own and "/" in own.group(1):
        in_body.add(own.group(1).split("/")[-1])
    return in_body


def _explains(named: set[str], primitives: set[str]) -> bool:
    """Whether the primitives a fusion's text names are exactly these equations' (inner steps of composites allowed)."""
    explained = {p for p in named if p in primitives or any(p in COMPOSITE.get(q, ()) for q in primitives)}
    return explained == named and primitives <= named | {q for q in primitives if q in COMPOSITE}


@pytest.mark.parametrize("slug", SLUGS)
def test_every_fusion_lists_what_it_absorbed(slug, by_slug):
    """Judged from the plain compile's text: the primitives named in a fusion's body are its equations'."""
    record = by_slug[slug]
    hlo = record["hlo"]
    checked = 0
    for fusion in hlo["fusions"]:
        in_body = _named_in_fusion(hlo["text"], fusion["line"])
        primitives = {record["eqns"][e]["primitive"] for e in _most_specific(record, fusion["eqns"])}
        assert _explains(in_body, primitives), f"{slug}: {fusion['name']} body names {in_body}, listed {primitives}"
        checked += bool(in_body)
    assert checked == sum(1 for f in hlo["fusions"] if f["eqns"])  # every fusion with equations was judged


def test_mlp_fuses_the_gelu_chain(by_slug):
    record = by_slug["mlp"]
    sets = [[record["eqns"][e]["primitive"] for e in f["eqns"]] for f in record["hlo"]["fusions"]]
    assert ["add", "integer_pow", "mul", "add", "mul", "tanh", "add", "mul", "mul"] in sets
    assert record["hlo"]["backend"] == "cpu"
    assert record["hlo"]["text"].startswith("HloModule jit_mlp_block")
    assert "FileNames" not in record["hlo"]["text"]  # no paths of the machine that built it


def test_fusion_drill_answers_are_what_the_compiled_text_says_was_fused(corpus, by_slug):
    """Judged from XLA's text and the jaxpr text alone: not from the attribution the drill is built on."""
    items = [i for i in build_pool(corpus)["items"] if i["drill"] == "fusions"]
    assert items
    for item in items:
        record = by_slug[item["program"]]
        text, jaxpr = record["hlo"]["text"], record["jaxpr"].splitlines()
        assert f"%{item['fusion']} = " in text.splitlines()[item["hlo_line"] - 1]
        named = _named_in_fusion(text, item["hlo_line"])
        answer = [re.fullmatch(r"(\S+) \(line (\d+)\)", part).groups()
                  for part in item["options"][item["answer"]].split(", ")]
        assert _explains(named, {primitive for primitive, _ in answer}), (item["fusion"], named, answer)
        for primitive, line in answer:  # the line the answer names prints that primitive
            assert re.search(rf"= {primitive}\b", jaxpr[int(line) - 1]), (primitive, jaxpr[int(line) - 1])
        assert len(set(item["options"])) == len(item["options"])
