"""Every count that README.md and docs/ state about the corpus, the pool, the page or the registries is
checked against them: one row per number, the sentence's pattern with the number captured, and the
function that computes it. Item counts are checked against the pool fixture, so a change to the items
fails here until the docs say what the pool now holds."""
import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORDS = {"no": 0, "half": 0.5, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
         "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "sixteen": 16, "seventeen": 17,
         "twenty-nine": 29, "thirty": 30, "thirty-three": 33}


def number(text: str):
    """A number as a doc writes it: `1,229`, `19`, `sixteen`, `Twenty-nine`, `no`."""
    return WORDS[text.lower()] if text.lower() in WORDS else int(text.replace(",", ""))


def tally(text: str) -> dict[str, int]:
    """A breakdown as a doc writes it: `48 `contraction`, 44 `reduction``, `5 in fsdp-step, 1 in auto-sharded`
    or `grads 4 each, train-step 3`."""
    pairs = (re.findall(r"(\d+) `([^`]+)`", text) or re.findall(r"(\d+) in ([a-z][\w-]*)", text)
             or [(n, name) for name, n in re.findall(r"([a-z][\w-]*) (\d+)", text)])
    return {name: int(n) for n, name in pairs}


def doc(name: str) -> str:
    """A doc's text with every run of white space one space, so that a sentence reads the same across a wrap."""
    return " ".join((ROOT / name).read_text(encoding="utf-8").split())


class Facts:
    """What the counts are counted from: the committed corpus and its drill pool."""

    def __init__(self, corpus: dict, pool: dict):
        from pool_checks import readable_pool

        self.programs = corpus["programs"]
        self.by_slug = {p["slug"]: p for p in self.programs}
        # Each item as the drill tests read it: its answer form's fields (`options`, `answer`, `rules`) beside its own.
        self.pool = {**pool, "items": readable_pool(pool, corpus)}

    def items(self, drill: str, **fields) -> list[dict]:
        """The pool's items of one kind whose fields have the values given (`layer="cpu"`: the CPU compile's)."""
        return [i for i in self.pool["items"] if i["drill"] == drill and all(i.get(k) == v for k, v in fields.items())]

    def count(self, drill: str, by: str, **fields) -> dict[str, int]:
        """How many items of one kind each value of the field `by` has."""
        return dict(Counter(i[by] for i in self.items(drill, **fields)))


def _shard_map_programs(f: Facts) -> int:
    return sum(any(e["primitive"] == "shard_map" for e in p["eqns"]) for p in f.programs)


def _filler_options(f: Facts) -> int:
    from dumpgym.drills._misreadings import FILLER

    return sum(m["rule"] in FILLER for i in f.items("shapes") for m in i["misread"].values())


def _spread(step: str, answer: str) -> int:
    """How many built-in programs, variants counted, give a decisions "what for" answer."""
    from dumpgym.drills._decision_why import builtin_spread

    return builtin_spread()[step, answer]


def _spot_decisions(f: Facts) -> list[dict]:
    """The decisions items that ask to spot a line (the others ask what a line is for: they have `why`)."""
    return [i for i in f.items("decisions") if "why" not in i]


def _common_decisions_share(f: Facts) -> float:
    """`half` when broadcasts and upcasts hold at most half the spot decisions' weight, else their share."""
    weights = Counter()
    for item in _spot_decisions(f):
        weights[item["decision"]] += item["weight"]
    share = (weights["hidden-broadcast"] + weights["upcast"]) / sum(weights.values())
    return 0.5 if share <= 0.5 else share


def _partitioned_programs(f: Facts) -> str:
    having = {i["program"] for i in f.items("partitioner")}
    return ", ".join(p["slug"] for p in f.programs if p["slug"] in having)


def _backward_forms(f: Facts, step: str) -> dict[str, int]:
    """How many of a backward step's items each answer form holds."""
    return dict(Counter(_form(i) for i in f.items("backward", step=step)))


def _form(item: dict) -> str:
    """A readable item's answer form (named by `readable` for forms other than choice and line)."""
    return item.get("form") or ("choice" if "options" in item else "line")


def _backward_scan_operands(f: Facts) -> int:
    (scan,) = [e for e in f.by_slug["rnn-bptt"]["eqns"] if e["primitive"] == "scan" and e["params"]["reverse"]]
    return len(scan["inputs"])


def _layers_of_major_axis(f: Facts) -> dict[str, int]:
    return f.count("buffers", "layer", step="major-axis")


def _xray_stat(name: str):
    return lambda f: sum(p["xray_stats"][name] for p in f.programs)


def _bands() -> int:
    return int(re.search(r"const BANDS = (\d+);", (ROOT / "src/dumpgym/static/xray.js").read_text()).group(1))


def _fluency() -> int:
    from dumpgym.site.curriculum import FLUENCY

    return FLUENCY


# (file, the sentence's pattern with the number captured, what it counts). The pattern is matched against
# the doc with white space collapsed and must match exactly once. A function returning a dict compares with
# a breakdown (`tally`), one returning a string with the captured text itself.
ROWS = [
    ("README.md", r"(\S+) real programs are traced by JAX", lambda f: len(f.programs)),
    ("README.md", r"dequantisation and (\w+) `shard_map` programs", _shard_map_programs),
    ("README.md", r"([\d,]+) of the corpus's [\d,]+ op lines are attributed", _xray_stat("mapped_stablehlo_op_lines")),
    ("README.md", r"of the corpus's ([\d,]+) op lines are attributed", _xray_stat("stablehlo_op_lines")),
    ("docs/site.md", r"`(\d+) in a row is the fluency bar`", lambda f: _fluency()),
    ("docs/site.md", r"Each equation gets one of (\w+) colour bands", lambda f: _bands()),
    # GYM·02, shapes
    ("docs/drills.md", r"In the built-in corpus \((\d+) programs, \d+ equations\)", lambda f: len(f.programs)),
    ("docs/drills.md", r"\(\d+ programs, (\d+) equations\) this asks",
     lambda f: sum(len(p["eqns"]) for p in f.programs)),
    ("docs/drills.md", r"this asks (\d+) equations:", lambda f: len(f.items("shapes"))),
    ("docs/drills.md", r"this asks \d+ equations: ((?:\d+ `[\w-]+`(?:, )?)+);", lambda f: f.count("shapes", "skill")),
    ("docs/drills.md", r"they name (\d+) misreadings, \d+ of them fillers",
     lambda f: sum(len(i["misread"]) for i in f.items("shapes"))),
    ("docs/drills.md", r"misreadings, (\d+) of them fillers", _filler_options),
    ("docs/drills.md", r"in the built-in corpus (no) `none` item survives",
     lambda f: len(f.items("shapes", skill="none"))),
    # GYM·03, decisions
    ("docs/drills.md", r"the two common kinds hold at most (half) the spot items' weight", _common_decisions_share),
    ("docs/drills.md", r"The built-in corpus gives (\d+) decision items", lambda f: len(f.items("decisions"))),
    ("docs/drills.md", r"about a second; `keepdims` (\d+), `astype` \d+",
     lambda f: _spread("hidden-broadcast", "keepdims")),
    ("docs/drills.md", r"about a second; `keepdims` \d+, `astype` (\d+)",
     lambda f: _spread("upcast", "astype")),
    ("docs/drills.md", r"(\d+) that ask what a line is for", lambda f: len(f.items("decisions")) - len(_spot_decisions(f))),
    ("docs/drills.md", r"ask what a line is for \((\d+ `hidden-broadcast`, \d+ `upcast`, \d+ `transpose`, \d+ `mark`)\)",
     lambda f: dict(Counter(i["step"] for i in f.items("decisions") if "why" in i))),
    ("docs/drills.md", r"(\d+) spot items \(", lambda f: len(_spot_decisions(f))),
    ("docs/drills.md", r"spot items \((\d+ `hidden-broadcast`, \d+ `upcast`, \d+ `transpose`, \d+ `iota-mask`, \d+ `remat`, "
                       r"\d+ `collective`)\)", lambda f: dict(Counter(i["decision"] for i in _spot_decisions(f)))),
    ("docs/drills.md", r"the first decision to run, and the rare decisions occur in few built-in programs: a remat only "
                       r"in remat and ckpt-policy \((\d+) items", lambda f: len(f.items("decisions", decision="remat"))),
    ("docs/drills.md", r"only in psum and collective-matmul \((\d+) items", lambda f: len(f.items("decisions", decision="collective"))),
    ("docs/drills.md", r"scan-layers and sdpa \((\d+) items\)", lambda f: len(f.items("decisions", decision="iota-mask"))),
    # GYM·05, fusions: programs
    ("docs/drills.md", r"\d+ TPU items, from (\d+) programs", lambda f: len({i["program"] for i in f.items("fusions")})),
    # GYM·05, fusions
    ("docs/drills.md", r"so that the scan's (\w+) look-alike fusions",
     lambda f: len(f.items("fusions", program="scan", layer="cpu"))),
    ("docs/drills.md", r"The built-in corpus gives (\d+) CPU items and \d+ TPU items",
     lambda f: len(f.items("fusions", layer="cpu"))),
    ("docs/drills.md", r"gives \d+ CPU items and (\d+) TPU items", lambda f: len(f.items("fusions", layer="tpu"))),
    ("docs/drills.md", r"from \d+ programs, and (\d+) GPU items from \d+", lambda f: len(f.items("fusions", layer="gpu"))),
    ("docs/drills.md", r"\d+ GPU items from (\d+)\.",
     lambda f: len({i["program"] for i in f.items("fusions", layer="gpu")})),
    # GYM·12, kernels
    ("docs/drills.md", r"The built-in corpus gives (\d+) items \(\d+ `triton-gemm`", lambda f: len(f.items("kernels"))),
    ("docs/drills.md", r"items \((\d+ `triton-gemm`, \d+ `mxu`, \d+\s`folded`)\)", lambda f: f.count("kernels", "skill")),
    ("docs/drills.md", r"`folded`\) from (\d+) programs, with 2 to 6 options",
     lambda f: len({i["program"] for i in f.items("kernels")})),
    # GYM·13, cost
    ("docs/drills.md", r"The built-in corpus gives (\d+) cost items", lambda f: len(f.items("cost"))),
    ("docs/drills.md", r"cost items: (\d+ `dominant`, \d+ `padding`, \d+ `sends`, \d+ `bound`)",
     lambda f: f.count("cost", "step")),
    ("docs/drills.md", r"\(`dominant`: (\d+) TPU and \d+ GPU", lambda f: len(f.items("cost", step="dominant", layer="tpu"))),
    ("docs/drills.md", r"`dominant`: \d+ TPU and (\d+) GPU", lambda f: len(f.items("cost", step="dominant", layer="gpu"))),
    ("docs/drills.md", r"\d+ GPU, from (\d+) programs, \d+ with four options",
     lambda f: len({i["program"] for i in f.items("cost", step="dominant")})),
    ("docs/drills.md", r"from \d+ programs, (\d+) with four options",
     lambda f: sum(len(i["options"]) == 4 for i in f.items("cost", step="dominant"))),
    ("docs/drills.md", r"`padding` from (\d+) programs", lambda f: len({i["program"] for i in f.items("cost", step="padding")})),
    ("docs/drills.md", r"`sends` from (\d+) programs: \d+ `cpu`",
     lambda f: len({i["program"] for i in f.items("cost", step="sends")})),
    ("docs/drills.md", r"`sends` from \d+ programs: (\d+ `cpu`, \d+ `tpu`, \d+ `gpu`)",
     lambda f: f.count("cost", "layer", step="sends")),
    ("docs/drills.md", r"So `bound` gives (\d+) items here", lambda f: len(f.items("cost", step="bound"))),
    # GYM·06, partitioner
    ("docs/drills.md", r"In the built-in corpus \(([\w, -]+)\) the drill gives", _partitioned_programs),
    ("docs/drills.md", r"the drill gives (\d+) items: \d+ `shard-shape`", lambda f: len(f.items("partitioner"))),
    ("docs/drills.md", r"(\d+)\s`shard-shape` \(\d+ StableHLO",
     lambda f: len(f.items("partitioner", step="shard-shape"))),
    ("docs/drills.md", r"`shard-shape` \((\d+) StableHLO, \d+ TPU, \d+ GPU\)",
     lambda f: len(f.items("partitioner", step="shard-shape", layer="stablehlo"))),
    ("docs/drills.md", r"`shard-shape` \(\d+ StableHLO, (\d+) TPU, \d+ GPU\)",
     lambda f: len(f.items("partitioner", step="shard-shape", layer="tpu"))),
    ("docs/drills.md", r"`shard-shape` \(\d+ StableHLO, \d+ TPU, (\d+) GPU\)",
     lambda f: len(f.items("partitioner", step="shard-shape", layer="gpu"))),
    ("docs/drills.md", r"(\d+) `group-axis` \(\d+ TPU, \d+ GPU:", lambda f: len(f.items("partitioner", step="group-axis"))),
    ("docs/drills.md", r"`group-axis` \((\d+) TPU, \d+ GPU:", lambda f: len(f.items("partitioner", step="group-axis", layer="tpu"))),
    ("docs/drills.md", r"`group-axis` \(\d+ TPU, (\d+) GPU:", lambda f: len(f.items("partitioner", step="group-axis", layer="gpu"))),
    ("docs/drills.md", r"\d+ GPU: (\d+) collectives",
     lambda f: len(f.items("partitioner", step="group-axis", skill="collective"))),
    ("docs/drills.md", r"collectives, (\d+) copies;", lambda f: len(f.items("partitioner", step="group-axis", skill="copies"))),
    ("docs/drills.md", r"copies; ((?:[a-z][\w-]* \d+(?:, )?)+)\)",
     lambda f: f.count("partitioner", "program", step="group-axis")),
    ("docs/drills.md", r"meshes of `sharded` and `psum` give (no) group items",
     lambda f: sum(i["program"] in ("sharded", "psum") for i in f.items("partitioner", step="group-axis"))),
    # GYM·07, loops
    ("docs/drills.md", r"every `while` of the TPU and GPU compiles\. (\w+) questions \(`step`\)",
     lambda f: len(f.count("loops", "step"))),
    ("docs/drills.md", r"\(rnn-bptt's backward scan alone has (\w+) operands\)", _backward_scan_operands),
    ("docs/drills.md", r"The built-in corpus gives (\d+) items: \d+ `role`", lambda f: len(f.items("loops"))),
    ("docs/drills.md", r"gives \d+ items: (\d+ `role`, \d+ `body-aval`, \d+ `branch`, \d+ `trips`)",
     lambda f: f.count("loops", "step")),
    ("docs/drills.md", r"`trips` \(((?:[a-z][\w-]* \d+(?:, )?)+)\): \d+ `trips` of the TPU",
     lambda f: f.count("loops", "program")),
    # GYM·08, backward
    ("docs/drills.md", r"The built-in corpus gives (\d+) items: \d+ `wrt`", lambda f: len(f.items("backward"))),
    ("docs/drills.md", r"(\d+) `wrt` \(\d+ choices", lambda f: len(f.items("backward", step="wrt"))),
    ("docs/drills.md", r"`wrt` \((\d+) choices, \d+ taps\)", lambda f: _backward_forms(f, "wrt").get("choice", 0)),
    ("docs/drills.md", r"`wrt` \(\d+ choices, (\d+) taps\)", lambda f: _backward_forms(f, "wrt").get("line", 0)),
    ("docs/drills.md", r"(\d+) `cotangent` \(\d+ choices", lambda f: len(f.items("backward", step="cotangent"))),
    ("docs/drills.md", r"`cotangent` \((\d+) choices,", lambda f: _backward_forms(f, "cotangent").get("choice", 0)),
    ("docs/drills.md", r"`cotangent` \(\d+ choices,\s+(\d+) typed\)", lambda f: _backward_forms(f, "cotangent").get("typed", 0)),
    ("docs/drills.md", r"(\d+) `residual` \(\d+ taps", lambda f: len(f.items("backward", step="residual"))),
    ("docs/drills.md", r"`residual` \((\d+) taps,", lambda f: _backward_forms(f, "residual").get("line", 0)),
    ("docs/drills.md", r"taps, (\d+) choice of sets, ckpt-policy's\)",
     lambda f: sum(_form(i) == "choice" for i in f.items("backward", step="residual", program="ckpt-policy"))),
    ("docs/drills.md", r"wrt by program: ((?:[\w-]+ \d+(?:, |,\s+)?)+)\.",
     lambda f: f.count("backward", "program", step="wrt")),
    # GYM·09, buffers
    ("docs/drills.md", r"minor or major of another\. (\w+) questions", lambda f: len(f.count("buffers", "step"))),
    ("docs/drills.md", r"\(sdpa alone gives (\d+)\)", lambda f: len(f.items("buffers", program="sdpa"))),
    ("docs/drills.md", r"The built-in corpus gives (\d+) items: \d+ `lowered-alias`",
     lambda f: len(f.items("buffers"))),
    ("docs/drills.md", r"(\d+) `lowered-alias`, \d+", lambda f: len(f.items("buffers", step="lowered-alias"))),
    ("docs/drills.md", r"(\d+) `compiled-alias` \(", lambda f: len(f.items("buffers", step="compiled-alias"))),
    ("docs/drills.md", r"`compiled-alias` \((\d+) TPU, \d+ CPU\)",
     lambda f: len(f.items("buffers", step="compiled-alias", layer="tpu"))),
    ("docs/drills.md", r"(\d+) `copy-or-bitcast` \(", lambda f: len(f.items("buffers", step="copy-or-bitcast"))),
    ("docs/drills.md", r"`copy-or-bitcast` \((\d+) copies",
     lambda f: sum(i["copies"] for i in f.items("buffers", step="copy-or-bitcast"))),
    ("docs/drills.md", r"copies, (\d+) bitcasts,",
     lambda f: sum(not i["copies"] for i in f.items("buffers", step="copy-or-bitcast"))),
    ("docs/drills.md", r"bitcasts, from (\d+) programs\)",
     lambda f: len({i["program"] for i in f.items("buffers", step="copy-or-bitcast")})),
    ("docs/drills.md", r"(\d+) `minor-axis`, \d+ `major-axis`", lambda f: len(f.items("buffers", step="minor-axis"))),
    ("docs/drills.md", r"(\d+) `major-axis` \(\d+ CPU", lambda f: len(f.items("buffers", step="major-axis"))),
    ("docs/drills.md", r"`major-axis` \((\d+) CPU, \d+ TPU\)", lambda f: _layers_of_major_axis(f).get("cpu", 0)),
    ("docs/drills.md", r"`major-axis` \(\d+ CPU, (\d+) TPU\)", lambda f: _layers_of_major_axis(f).get("tpu", 0)),
    # GYM·10, layouts
    ("docs/drills.md", r"`layouts` (\w+) questions \(`step`\), every answer built",
     lambda f: len(f.count("layouts", "step"))),
    ("docs/drills.md", r"\(the unrolled scan has (\d+) buffers\)",
     lambda f: len({i["buffer"] for i in f.items("layouts", program="scan") if "buffer" in i})),
    ("docs/drills.md", r"The built-in corpus gives (\d+) items: \d+ `padded-shape`", lambda f: len(f.items("layouts"))),
    ("docs/drills.md", r"items: (\d+ `padded-shape`, \d+ `memory-space`, \d+ `bytes`)",
     lambda f: f.count("layouts", "step")),
    ("docs/drills.md", r"on (\d+) distinct buffers in \d+ programs",
     lambda f: sum(len({b["text"] for b in l["buffers"] if b["memory_space"] == 6})
                   for p in f.programs for l in p["compiled"].values() if l["backend"] == "tpu")),
    # GYM·11, units
    ("docs/drills.md", r"corpus gives (\d+) items: \d+ `mxu`", lambda f: len(f.items("units"))),
    ("docs/drills.md", r"items: \d+ `mxu`, (\d+) `mxu-shape` \(", lambda f: f.count("units", "step")["mxu-shape"]),
    ("docs/drills.md", r"items: (\d+) `mxu`, \d+ `mxu-shape` \(", lambda f: f.count("units", "step").get("mxu", 0)),
    ("docs/drills.md", r"\(\d+ `fusion-bodies`, (\d+ `as-returned`, \d+ `epilogue`)\) from",
     lambda f: f.count("units", "skill", step="mxu-shape")),
    ("docs/drills.md", r"`epilogue`\) from (\d+) programs \(the programs",
     lambda f: len({i["program"] for i in f.items("units", step="mxu-shape")})),
    ("docs/drills.md", r"and (\d+) `unit` \(\d+ `mxu`", lambda f: len(f.items("units", step="unit"))),
    ("docs/drills.md", r"`unit` \((\d+ `mxu`, \d+ `vpu`, \d+ `dma`, \d+ `tensor`, \d+ `cuda`)\)",
     lambda f: f.count("units", "skill", step="unit")),
    ("docs/drills.md", r"`cuda`\) from (\d+) programs, \d+ of the TPU",
     lambda f: len({i["program"] for i in f.items("units", step="unit")})),
    ("docs/drills.md", r"programs, (\d+) of the TPU compile, \d+ of the GPU's",
     lambda f: len(f.items("units", step="unit", layer="tpu"))),
    ("docs/drills.md", r"\d+ of the TPU compile, (\d+) of the GPU's;",
     lambda f: len(f.items("units", step="unit", layer="gpu"))),
]


@pytest.fixture(scope="module")
def facts(corpus, pool):
    return Facts(corpus, pool)


@pytest.mark.parametrize("name, pattern, compute", ROWS, ids=[f"{n}:{p[:48]}" for n, p, _ in ROWS])
def test_each_count_the_docs_state_is_what_the_corpus_and_pool_give(name, pattern, compute, facts):
    found = re.findall(pattern, doc(name))
    assert len(found) == 1, f"{name}: {pattern!r} matches {len(found)} times, not once"
    expected = compute(facts)
    if isinstance(expected, dict):
        assert tally(found[0]) == expected, f"{name}: {found[0]!r}"
    elif isinstance(expected, str):
        assert found[0] == expected, name
    else:
        assert number(found[0]) == expected, f"{name}: {found[0]!r} should be {expected}"


def test_the_path_in_site_md_is_curriculum_path_with_each_chapters_drills():
    from dumpgym import drills
    from dumpgym.site.curriculum import FLUENCY, PATH

    text = doc("docs/site.md")
    said = re.search(r"\*\*path\*\* \(`curriculum.PATH`, heading `([^`]*)`\): steps numbered 1 to (\d+) in\s+"
                     r"order, without gaps: (.*?)\. A step", text, re.S)
    assert said[1] == f"from {PATH[0].title} to {PATH[-1].title}"
    # Each step is its number and title, in order; the guide's chapters are named after them.
    assert int(said[2]) == len(PATH)
    assert " ".join(said[3].split()).split(" · ") == [f"{c.step} {c.title}" for c in PATH]
    serve = re.search(r"(\d+(?:, \d+)*) and (\d+)\s+serve chapters (\d+(?:, \d+)*) and (\d+)", text)
    assert serve, "site.md says which steps serve which guide chapters"
    assert [int(n) for n in (*serve[1].split(", "), serve[2])] == [c.step for c in PATH if c.number]
    assert [*serve[3].split(", "), serve[4]] == [c.number for c in PATH if c.number]
    listed = re.search(r"each naming its drill \((.*?)\)\. ", text).group(1).split("; ")
    *chapters, bar = PATH
    assert listed == [f"{c.id}: " + " · ".join(f"`{t.drill}`" for t in c.targets) for c in chapters] + [
        f"{bar.number}: every drill"]
    assert sorted(t.drill for t in bar.targets) == sorted(drills.kinds())
    assert {t.streak for t in bar.targets} == {2 * FLUENCY}
    assert f"Chapter {bar.number}, the bar, asks twice the fluency bar" in text


def test_site_md_lists_each_drill_kind_in_the_pages_order(pool):
    from dumpgym.site import curriculum

    text = doc("docs/site.md")
    drills_part = text[text.index("- **drills**:"):text.index("**Context.**")]
    named = re.findall(r" - `([a-z-]+)`(?: and `([a-z-]+)`)?:", drills_part)
    assert [name for pair in named for name in pair if name] == [k.name for k in curriculum.drill_kinds(pool)]
