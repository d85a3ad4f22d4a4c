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


@pytest.mark.parametrize("slug", SLUGS)
def test_every_fusion_lists_what_it_absorbed(slug, by_slug):
    """Judged from the plain compile's text: the primitives named in a fusion's body are its equations'."""
    record = by_slug[slug]
    hlo = record["hlo"]
    bodies = _bodies(hlo["text"])
    lines = hlo["text"].splitlines()

    def named(computation, seen):
        out = set()
        if computation in seen:
            return out
        seen.add(computation)
        for line in bodies.get(computation, []):
            match = OP_NAME.search(line)
            if match and "/" in match.group(1) and not match.group(1).split("/")[-1].startswith("jit("):
                out.add(match.group(1).split("/")[-1])
            for callee in re.findall(r"(?:calls|to_apply)=%([\w.\-]+)", line):
                out |= named(callee, seen)
        return out

    checked = 0
    for fusion in hlo["fusions"]:
        callee = re.search(r"calls=%([\w.\-]+)", lines[fusion["line"] - 1]).group(1)
        in_body = named(callee, set())
        own = OP_NAME.search(lines[fusion["line"] - 1])
        if own and "/" in own.group(1):
            in_body.add(own.group(1).split("/")[-1])
        primitives = {record["eqns"][e]["primitive"] for e in _most_specific(record, fusion["eqns"])}
        explained = {p for p in in_body if p in primitives or any(p in COMPOSITE.get(q, ()) for q in primitives)}
        assert explained == in_body, f"{slug}: {fusion['name']} body names {in_body - explained} not in {primitives}"
        assert primitives <= in_body | {q for q in primitives if q in COMPOSITE}, (
            f"{slug}: {fusion['name']} lists {primitives - in_body} that its body never names")
        checked += bool(in_body)
    assert checked == sum(1 for f in hlo["fusions"] if f["eqns"])  # every fusion with equations was judged


def test_mlp_fuses_the_gelu_chain(by_slug):
    record = by_slug["mlp"]
    sets = [[record["eqns"][e]["primitive"] for e in f["eqns"]] for f in record["hlo"]["fusions"]]
    assert ["add", "integer_pow", "mul", "add", "mul", "tanh", "add", "mul", "mul"] in sets
    assert record["hlo"]["backend"] == "cpu"
    assert record["hlo"]["text"].startswith("HloModule jit_mlp_block")
    assert "FileNames" not in record["hlo"]["text"]  # no paths of the machine that built it


def test_fusion_drill_answers_come_from_the_attribution(corpus, by_slug):
    items = [i for i in build_pool(corpus)["items"] if i["drill"] == "fusions"]
    assert items
    for item in items:
        record = by_slug[item["program"]]
        fusion = next(f for f in record["hlo"]["fusions"] if f["name"] == item["fusion"])
        names = [f"{record['eqns'][e]['primitive']} (line {record['eqns'][e]['jaxpr_lines'][0]})"
                 for e in _most_specific(record, fusion["eqns"])]
        assert sorted(item["options"][item["answer"]].split(", ")) == sorted(names)
        assert len(set(item["options"])) == len(item["options"])

