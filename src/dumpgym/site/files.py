"""The gym's files (`SiteFiles`): the page, highlighted and escaped at build time, read by plain ES modules.

`site_files` turns a corpus ("dumpgym.corpus/2", read once as a typed `Corpus`) and a drill pool
("dumpgym.drills/2") into a mapping of relative paths to bytes, each file made when first read;
`render_site` makes them all, `build_site` writes them to a folder, and `serve` serves the mapping
from memory, so its page is up before every listing is lexed. The page reads per-program and
per-drill splits of exactly those JSON objects, so what it shows is what `dumpgym export` and
`dumpgym drills` print.
"""
from __future__ import annotations

import gzip
import json
import re
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from functools import cache, partial
from importlib import resources

from jinja2 import Environment, PackageLoader
from markupsafe import Markup, escape

from dumpgym.cost.compare import CompareError, compare_layer
from dumpgym.cost.view import cost_file
from dumpgym.site.curriculum import FLUENCY, PATH, drill_kinds, first_step
from dumpgym.drills import printed_pool
from dumpgym.site.highlight import LISTINGS_SCHEMA, hlo_listing, listing_lines
from dumpgym.record.schema import CompiledLayer, Corpus, ProgramRecord
from dumpgym.record.targets import TARGETS, CompileTarget, Target

PROGRESS_KEY = "dumpgym.progress/2"
CHANGE_SCHEMA = "dumpgym.change/1"
REFERENCE_SCHEMA = "dumpgym.reference/1"
PENDING_SCHEMA = "dumpgym.drills-pending/1"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'none'"
)
_SLUG = re.compile(r"[a-z0-9-]+")
# The files made from the whole corpus or the whole pool (up to a second each, where a program's takes
# milliseconds): `serve` makes them apart from the others.
WHOLE_FILES = frozenset({"corpus.json", "drills.json"})


@dataclass(frozen=True)
class CompiledView:
    """One compiled layer of a program as the corpus section's switch offers it: its target and length."""

    target: CompileTarget
    lines: int


@dataclass(frozen=True)
class VariantView:
    """A traced variant of a program (`mlp-2`) as its base's card names it: where a drill's context links
    and what title it shows (`data.js` `programTitle`)."""

    slug: str
    title: str


@dataclass(frozen=True)
class ProgramView:
    """What the corpus and x-ray sections show of one program in the page: its words and computed counts.
    Its listings are data (data/listings/SLUG.json), fetched when the page shows them."""

    slug: str
    title: str
    lesson: str
    args: tuple[str, ...]
    entry: str
    mesh: dict[str, int] | None
    eqns: int
    groups: int
    lines: dict[str, int]
    # The compiled layers are long: the page fetches one (data/compiled/TARGET/SLUG.json) when it shows it.
    compiled: tuple[CompiledView, ...]  # the layers the program has, in the registry's order
    hlo_target: str  # the compile target id of the layer the corpus section shows first ("" for none)
    added: bool
    jax_version: str | None
    variants: tuple[VariantView, ...] = ()  # the same program at other shapes, drawn in drills only
    dumped: bool = False  # a dump's module: compiled by the run that wrote it, never by an add here


def kinds_by_target(pool: dict) -> dict[str, set[str]]:
    """For each compile target id, the drill kinds some item of the pool reads its compile in (the item's
    `layer`, or a block of its context): what compiling a program for that target lets the drills ask. An
    item that also shows another program's listing (a compile with one change beside its base's) is not
    counted: one program compiled once cannot make it."""
    found: dict[str, set[str]] = {}
    for item in pool["items"]:
        if any("program" in b for b in item["context"]):
            continue
        layers = {item.get("layer")} | {b.get("layer") for b in item["context"]}
        for layer in layers & TARGETS.keys():
            found.setdefault(layer, set()).add(item["drill"])
    return found


def hlo_adds(pool: dict, kinds) -> list[list]:
    """What compiling an added program for each registered target would let the drills ask: the target's id and
    label, the `dumpgym add` flag that asks for it (`--hlo tpu`), and the drill kinds (in tab order) whose items
    read that target's compile somewhere in the pool. The page carries it once, as data; an added program's
    card says the lines of the targets it lacks (`static/yours.js`)."""
    reads = kinds_by_target(pool)
    return [[t.id, t.label, "--hlo" if t.id == "cpu" else f"--hlo {t.id}", [k.name for k in kinds if k.name in reads[t.id]]]
            for t in TARGETS.values() if reads.get(t.id)]


@dataclass(frozen=True)
class ChangeView:
    """A compile of a program with one change, as the "one change" section's picker offers it: the changed
    record's slug, its base's slug, the change in words, and the compile targets both have."""

    slug: str
    base: str
    change: str
    targets: tuple[CompileTarget, ...]


def change_views(corpus: Corpus) -> list[ChangeView]:
    """Every compile with one change whose base is in the corpus, in the order of the bases."""
    bases = {p.slug: p for p in corpus.programs}
    order = {p.slug: i for i, p in enumerate(corpus.programs)}
    views = []
    for p in sorted((p for p in corpus.programs if p.change and p.variant_of in bases),
                    key=lambda p: (order[p.variant_of], order[p.slug])):
        base = bases[p.variant_of]
        common = {t for t in _compiled_layers(base) if t in _compiled_layers(p)}
        if common:
            views.append(ChangeView(p.slug, base.slug, p.change, tuple(_targets(common))))
    return views


def change_file(base: ProgramRecord, changed: ProgramRecord, target: str) -> dict:
    """The two compiles of a change for one target, side by side (`compare.compare_layer`), as the page reads
    them: what appeared, vanished and changed, counts, buffers, time, and each equation's lines in both. A
    layer recorded without the facts the comparison needs says so in `problem`."""
    try:
        diff = compare_layer(base, changed, target)
    except CompareError as e:
        return {"schema": CHANGE_SCHEMA, "base": base.slug, "changed": changed.slug, "target": target, "problem": str(e)}
    return {"schema": CHANGE_SCHEMA, **asdict(diff)}


def _listings(program: ProgramRecord) -> dict[str, str]:
    """The listings of a program, by layer: its source, jaxpr and StableHLO; for a dump's module, the HLO before
    optimisations (`hlo_before`, highlighted as HLO) and the source lines its stack frames name (`dump_source`)."""
    out = {"source": program.source, "jaxpr": program.jaxpr, "stablehlo": program.stablehlo}
    if program.dump is not None:
        out.update(hlo_before=program.dump.hlo_before, dump_source=program.dump.source)
    return out


def _line_count(text: str) -> int:
    return text.count("\n") + 1


def card_anchor(name: str, layer: str = "") -> str:
    """The fragment id of an op's card in the reference section (a compiled-HLO card's: `op-hlo-copy`)."""
    return "op-" + ("hlo-" if layer == "hlo" else "") + re.sub(r"[^a-z0-9_.-]+", "-", name.lower())


def _op_names(program: ProgramRecord) -> list[str]:
    """Every primitive, StableHLO op and compiled opcode (as `hlo:NAME`) the program prints, in listing order."""
    compiled = [f"hlo:{name}" for layer in _compiled_layers(program).values() for name in compiled_ops(layer).values()]
    return [e.primitive for e in program.eqns] + [o.name for o in program.stablehlo_ops] + compiled


def compiled_ops(layer: CompiledLayer) -> dict[int, str]:
    """Each compiled instruction's opcode as its line prints it (`all-reduce`), by line, as the compile
    stage recorded it; none for a record written before it.

    An async wrapper (`asyncstart`) prints as the op it wraps (`reduce-scatter-start`), a name that is
    not its own opcode's: it is left unlinked, as the page has always left it.
    """
    return {ins.line: printed for ins in layer.instructions
            if not ins.opcode.startswith("async") and (printed := layer.printed(ins)) is not None}


def _compiled_layers(program: ProgramRecord) -> dict[str, CompiledLayer]:
    """The program's compiled layers that hold a listing, by compile target id."""
    return {target: layer for target, layer in program.compiled.items() if layer.text}


def _op_cards(corpus: Corpus) -> tuple[list[dict], dict[str, str]]:
    """The reference cards (ours, from `dumpgym.reference`, in its reading order) and op name -> card anchor.

    Every op the corpus prints gets a card: its own, or an honest fallback. The cards travel as
    `data/reference.json`, which the page renders when the reference section comes near.
    """
    from dumpgym import reference

    # Keyed by anchor: a compiled-HLO card may share its name with a jaxpr card (`copy`).
    cards = {card_anchor(card.name, card.layer): card for card in reference.cards()}
    anchors: dict[str, str] = {}
    # A StableHLO card that compiled listings print under their own spelling: the card says so, and the
    # search finds it by that spelling with "compiled" or "hlo" (a reader filtering for what a listing shows).
    printed_as: dict[str, set[str]] = {}
    names = {p.slug: _op_names(p) for p in corpus.programs}
    for p in corpus.programs:  # variants too: a drill's listing links every op it prints to a card
        for name in names[p.slug]:
            if name not in anchors:
                card = _card_of(name)
                anchors[name] = card_anchor(card.name, card.layer)
                cards.setdefault(anchors[name], card)
                bare = name.removeprefix("hlo:")
                if name != bare and card.name != bare:  # `dynamic-slice`, read from stablehlo.dynamic_slice
                    printed_as.setdefault(anchors[name], set()).add(bare)
    named = {card.name for card in cards.values()}
    seen_in: dict[str, list[str]] = {anchor: [] for anchor in cards}
    for p in corpus.bases:  # a card counts the gym's programs, not their variants at other shapes
        for anchor in dict.fromkeys(anchors[name] for name in names[p.slug]):
            seen_in[anchor].append(p.slug)
    def compiled(card) -> list[list[str]]:
        # A StableHLO op's card links the opcodes it compiles into; an opcode's card, the ops it comes from.
        linked = reference.compiled_as(card) or [reference.card_for(name) for name in card.compiled_from]
        return [[c.name, card_anchor(c.name, c.layer)] for c in linked]
    views = [
        {
            **asdict(card), "anchor": anchor,
            "pairs": [[other, card_anchor(other)] for other in card.pairs if other in named],
            "compiled": compiled(card), "hlo": sorted(printed_as.get(anchor, ())),
            "search": reference.search_text(card) + (
                " " + reference.fold(" ".join(["compiled", "hlo", *sorted(printed_as[anchor])]))
                if anchor in printed_as else ""),
            "seen_in": seen_in[anchor],
        }
        for anchor, card in cards.items()
    ]
    return views, anchors


def _card_of(name: str):
    """The reference card of an op name as `_op_names` gives it: its own, or an honest fallback. A compiled
    opcode is keyed `hlo:NAME`: `copy` in compiled HLO is not the jaxpr's `copy`."""
    from dumpgym import reference

    layer = "hlo" if name.startswith("hlo:") else None
    bare = name.removeprefix("hlo:")
    return reference.card_for(bare, layer) or reference.fallback_card(bare, layer)


def program_anchors(program: ProgramRecord) -> dict[str, str]:
    """Op name -> card anchor for the ops one program prints: as `_op_cards` gives them for any corpus
    holding it (an op's card is its name's alone)."""
    anchors: dict[str, str] = {}
    for name in _op_names(program):
        if name not in anchors:
            card = _card_of(name)
            anchors[name] = card_anchor(card.name, card.layer)
    return anchors


def op_links(program: ProgramRecord, anchors: dict[str, str]) -> dict[str, dict[int, list[tuple[str, str]]] | None]:
    """Per layer, the ops each listing line prints, as (name as printed, card anchor), for the links to cards."""
    eqn_links: dict[int, list[tuple[str, str]]] = {}
    for e in program.eqns:
        eqn_links.setdefault(e.jaxpr_lines[0], []).append((e.primitive, anchors[e.primitive]))
    stablehlo_links: dict[int, list[tuple[str, str]]] = {}
    for o in program.stablehlo_ops:
        printed = o.name.split(".", 1)[1] if o.name.startswith("func.") else o.name
        stablehlo_links.setdefault(o.line, []).append((printed, anchors[o.name]))
    return {"source": None, "jaxpr": eqn_links, "stablehlo": stablehlo_links}


def variant_bases(corpus: Corpus) -> dict[str, str]:
    """The base of each traced variant (`mlp-2`, `mlp-f32` → `mlp`): the program its `variant_of` chain ends
    at, which the drill panels' `data-pool` names so that the page never draws one family twice in a row."""
    of = {p.slug: p.variant_of for p in corpus.programs if p.variant_of is not None}
    bases = {}
    for slug in of:
        base, seen = of[slug], {slug}
        while base in of and base not in seen:  # a variant of a variant (none today), never round a loop
            seen.add(base)
            base = of[base]
        bases[slug] = base
    return bases


def program_view(program: ProgramRecord, variants: tuple[ProgramRecord, ...] = ()) -> ProgramView:
    """What the corpus and x-ray sections show of one program in the page: its words and computed counts,
    and the slugs and titles of its traced `variants`."""
    texts = _listings(program)
    # In the registry's order, as the x-ray's switch: the first is the layer shown first (none for a program
    # added without one).
    layers = _compiled_layers(program)
    compiled = tuple(CompiledView(t, _line_count(layers[t.id].text)) for t in _targets(layers))
    return ProgramView(
        slug=program.slug, title=program.title, lesson=program.lesson,
        args=program.args, entry=program.entry, mesh=program.mesh,
        eqns=len(program.eqns), groups=len(program.xray),
        lines={layer: _line_count(text) for layer, text in texts.items()},
        compiled=compiled, hlo_target=compiled[0].target.id if compiled else "",
        added=program.added, jax_version=program.jax_version,
        variants=tuple(VariantView(v.slug, v.title) for v in variants), dumped=program.dump is not None,
    )


def page_targets(corpus: Corpus) -> list[CompileTarget]:
    """The compile targets the page's x-ray switch offers: every registered one that some program of the
    corpus was compiled for, in the registry's order, then any other a program names (an added
    program's), labelled by its id."""
    return _targets({t for p in corpus.programs for t in _compiled_layers(p)})


def _targets(present) -> list[CompileTarget]:
    """The compile targets of these ids: the registered ones in the registry's order, then any other (an
    added program's), labelled by its id."""
    known = [t for t in TARGETS.values() if t.id in present]
    others = sorted(set(present) - TARGETS.keys())
    return known + [CompileTarget(t, t.upper(), f"{t}, as the program's record names it", Target(t)) for t in others]


def program_splits(program: ProgramRecord, anchors: dict[str, str]) -> dict[str, Callable[[], object]]:
    """The JSON files made from one program's record alone (`kept.py` keeps them by it), each as a function
    that makes it: its program object, highlighted listings, and each compiled layer's HLO and costs."""
    slug = program.slug
    files: dict[str, Callable[[], object]] = {f"data/programs/{slug}.json": program.to_json,
                                              f"data/listings/{slug}.json": partial(_listings_file, program, anchors)}
    for name, layer in _compiled_layers(program).items():
        files[f"data/compiled/{name}/{slug}.json"] = partial(_compiled_file, layer, anchors)
        files[f"data/cost/{name}/{slug}.json"] = partial(cost_file, layer, name)
    return files


def _splits(corpus: Corpus, pool: dict, anchors: dict[str, str]) -> dict[str, Callable[[], object]]:
    """The JSON files the page fetches, each as a function that makes it: each program object (from
    its record's `to_json`, as the corpus's `to_json` writes it), its highlighted listings, each compiled layer's HLO
    (data/compiled/TARGET/SLUG.json, by compile target id) and its costs (data/cost/TARGET/SLUG.json,
    `cost/view.py`), each compile with one change beside its base's (data/change/TARGET/SLUG.json,
    `cost/compare.py`), and each drill kind's items per program."""
    # The first program file costs one record's writing, not the whole corpus's (a quarter of a second).
    files: dict[str, Callable[[], object]] = {f"data/programs/{p.slug}.json": p.to_json for p in corpus.programs}
    for p in corpus.programs:
        files.update(program_splits(p, anchors))
    bases = {p.slug: p for p in corpus.programs}
    for view in change_views(corpus):
        for t in view.targets:
            files[f"data/change/{t.id}/{view.slug}.json"] = partial(
                change_file, bases[view.base], bases[view.slug], t.id)
    for (kind, slug), items in _group_items(pool).items():
        files[f"data/drills/{kind}/{slug}.json"] = partial(lambda items: {"schema": pool["schema"], "items": items},
                                                           items)
    return files


def _listings_file(program: ProgramRecord, anchors: dict[str, str]) -> dict:
    links = op_links(program, anchors)
    lexers = {"hlo_before": "hlo", "dump_source": "text"}
    return {"schema": LISTINGS_SCHEMA,
            **{layer: listing_lines(text, lexers.get(layer, layer), links.get(layer))
               for layer, text in _listings(program).items()}}


# What compiled a layer, as its record says: the listing file carries it, so that a section showing the
# listing names its backend (compiled.js `backendNote`) without fetching the whole record.
_COMPILED_BY = ("backend", "jaxlib_version", "host", "device_kind", "topology", "libtpu_version", "cuda_plugin_version")


def _compiled_file(layer: CompiledLayer, anchors: dict[str, str]) -> dict:
    compiled_links = {line: [(op, anchors[f"hlo:{op}"])] for line, op in compiled_ops(layer).items()}
    # Where each instruction's trailing attributes start (`Instruction.tail`): a context block `cut` there.
    cuts = {str(i.line): min(i.tail.values()) for i in layer.instructions if i.tail}
    return {**hlo_listing(layer.text, compiled_links), "cuts": cuts,
            "compiled_by": {f: getattr(layer, f) for f in _COMPILED_BY}}


def _group_items(pool: dict) -> dict[tuple[str, str], list[dict]]:
    groups: dict[tuple[str, str], list[dict]] = {}
    for item in pool["items"]:
        if not _SLUG.fullmatch(item["drill"]) or not _SLUG.fullmatch(item["program"]):
            raise ValueError(f"drill item names {item['drill']!r}/{item['program']!r}: only a-z, 0-9 and '-'")
        groups.setdefault((item["drill"], item["program"]), []).append(item)
    return groups


_LAYER_WORDS = {"jaxpr": "jaxpr", "stablehlo": "StableHLO"}
_EXAMPLE_CHARS = 1600  # a worked example's screen at most: a lesson's example is read, not scrolled


def _answer_words(answer: dict) -> str:
    """An item's right answer in words, as the drills' verdict says it (static/answer.js `answerText`)."""
    form = answer["form"]
    if form == "choice":
        return str(answer["options"][answer["index"]])
    if form == "typed":
        return answer["value"]
    if form == "axes":
        axes = answer["axes"]
        return f"{'axis' if len(axes) == 1 else 'axes'} {', '.join(map(str, axes))}" if axes else "no axis"
    if form == "line":
        return f"line {answer['line']}"
    return f"lines {', '.join(map(str, answer['lines']))}"


def path_examples(corpus: Corpus, pool: dict) -> dict[str, dict]:
    """Each path step's worked example, by chapter id: the first item of the pool that its `Example` names,
    from a program of the gym's own, with a small screen; its context (references into the program's
    listings, which the page resolves), its question, its answer and its feedback, all as the drill computed
    them (nothing typed here)."""
    from dumpgym.drills.item import resolve

    programs = {p.slug: p for p in corpus.bases}
    out = {}
    for ch in PATH:
        want = ch.example
        if want is None:
            continue
        for item in pool["items"]:
            if (item["drill"] != want.drill or item["program"] not in programs or item.get("step") != want.step
                    or (want.primitive and item.get("primitive") != want.primitive) or not item.get("feedback")
                    or item["answer"]["form"] not in ("choice", "typed", "axes")):
                continue
            blocks = resolve(item["context"], programs[item["program"]])
            if sum(map(len, blocks)) > _EXAMPLE_CHARS:
                continue
            layer = item["layer"]
            # The page resolves the context from the listings it fetches (static/context.js), as a drill does:
            # it holds no listing itself.
            out[ch.id] = {"program": item["program"], "card": item["card"], "layer_id": layer,
                          "context": json.dumps(item["context"]),
                          "layer": _LAYER_WORDS.get(layer, f"compiled HLO, {layer.upper()}"),
                          "question": item["question"], "answer": _answer_words(item["answer"]),
                          "feedback": item["feedback"]}
            break
    return out


def totals(corpus: Corpus, pool: dict) -> dict:
    """Counts shown on the page, all computed from the data: of the gym's programs, not their variants
    (the items are every record's)."""
    programs = corpus.bases
    return {
        "programs": len(programs),
        "eqns": sum(len(p.eqns) for p in programs),
        "groups": sum(len(p.xray) for p in programs),
        "op_lines": sum(p.xray_stats.stablehlo_op_lines for p in programs),
        "mapped_op_lines": sum(p.xray_stats.mapped_stablehlo_op_lines for p in programs),
        "lowered_to_nothing": sum(len(p.lowered_to_nothing) for p in programs),
        "items": Counter(item["drill"] for item in pool["items"]),
        "listing_lines": sum(_line_count(text) for p in programs for text in _listings(p).values()),
    }


def ticks(text: str) -> Markup:
    """Escape prose and set its `backticked` spans as code, the way the op cards write op text."""
    parts = str(text).split("`")
    if len(parts) % 2 == 0:  # an unmatched backtick: show the text as it is
        return Markup(escape(text))
    return Markup("".join(f"<code>{escape(p)}</code>" if i % 2 else str(escape(p)) for i, p in enumerate(parts)))


@cache  # one per process: Jinja compiles the template once and keeps it
def _environment() -> Environment:
    env = Environment(loader=PackageLoader("dumpgym", "templates"), autoescape=True,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["plural"] = lambda n, word, many=None: f"{n} {word if n == 1 else (many or word + 's')}"
    env.filters["ticks"] = ticks
    return env


def gzipped(body: bytes) -> bytes:
    """`body` compressed for the wire: the same bytes every time (no timestamp in the header)."""
    return gzip.compress(body, compresslevel=6, mtime=0)


class SiteFiles(Mapping):
    """A site's files by relative path, each made the first time it is read, then kept.

    `serve` answers the page before it has lexed every listing (most of a render): a listing is made
    when the page first fetches it. Safe to read from several threads: a file is made once however many
    ask for it at once. With `kept` (`kept_files.KeptFiles`), the files named in `keep`, and their
    compressed bytes, are read from disk where an earlier start made them, and kept there when made.
    """

    def __init__(self, makers: dict[str, Callable[[], bytes]], kept=None, keep: frozenset[str] = frozenset()):
        self._makers = makers
        self._made: dict[str, bytes] = {}
        self._gzipped: dict[str, bytes] = {}
        self._kept, self._keep = kept, keep
        self._lock = threading.Lock()
        self._making: dict[str, threading.Lock] = {}  # one lock per file: a slow listing holds up no other

    @classmethod
    def of(cls, files: Mapping[str, bytes]) -> "SiteFiles":
        """Files already made, by relative path."""
        made = cls({path: partial(_given, body) for path, body in files.items()})
        made._made.update(files)
        return made

    def __getitem__(self, path: str) -> bytes:
        made = self._made.get(path)
        return made if made is not None else self._make(path, path, self._made, self._makers[path])

    def gzipped(self, path: str) -> bytes:
        """The file at `path` compressed for the wire (`gzipped`), the first time it is asked for, then kept."""
        made = self._gzipped.get(path)
        return made if made is not None else self._make(path + ".gz", path, self._gzipped, lambda: gzipped(self[path]))

    def _make(self, name: str, path: str, into: dict[str, bytes], make: Callable[[], bytes]) -> bytes:
        with self._lock:
            lock = self._making.setdefault(name, threading.Lock())
        with lock:
            if path not in into:
                kept = self._kept if path in self._keep else None
                body = None if kept is None else kept.read(name)
                if body is None:
                    body = make()
                    if kept is not None:
                        kept.write(name, body)
                into[path] = body
            return into[path]

    @property
    def kept(self):
        """Where the files named in `keep` are kept on disk (a `kept_files.KeptFiles`), or None."""
        return self._kept

    @property
    def keep(self) -> frozenset[str]:
        """The paths of the files kept on disk (none without `kept`)."""
        return self._keep if self._kept is not None else frozenset()

    def forget(self, path: str) -> None:
        """Let go of the file at `path` and its compressed bytes (a render worker keeps them on disk only)."""
        with self._lock:
            self._made.pop(path, None)
            self._gzipped.pop(path, None)

    def made(self, path: str) -> bool:
        """Whether the file at `path` is made (reading it now is quick)."""
        return path in self._made

    def compressed(self, path: str) -> bool:
        """Whether the file at `path` is made and compressed (`gzipped(path)` now is quick)."""
        return path in self._gzipped

    def __contains__(self, path) -> bool:  # without making the file (Mapping's would)
        return path in self._makers

    def __iter__(self):
        return iter(self._makers)

    def __len__(self) -> int:
        return len(self._makers)


def _given(body: bytes) -> bytes:
    return body


def site_files(corpus: Corpus | dict, drills: dict, pending: tuple[str, ...] | None = None, *, kept=False,
               news: str = "", big: tuple = ()) -> SiteFiles:
    """Every file of the gym, by relative path, made when first read: index.html, the JSON it reads,
    its ES modules and CSS. With `kept`,
    the JSON files made from the corpus (not the pool's) are read from the cache where an earlier start
    made them, and kept there when made (`site/kept.py`); `kept` may be the `kept_files.KeptFiles` of
    this corpus to share (the stages of one `serve` start share one).

    With `pending` (`serve` while it makes the items an add or an upgrade left unkept), `drills` holds the
    other programs' items only: the page says whose are still being made, and `data/drills/pending.json`
    lists them (empty in the site `serve` swaps in once they are made), which the page asks until it is.
    `news` is a line the page shows at its top, as a notice (`serve`: the added programs changed while it ran);
    `big`, a notice linking to each page of a dump's module shown streamed ((path, name, why) each)."""
    # Callers hold the corpus as the JSON they loaded; it is read (and validated) here, once.
    record = corpus if isinstance(corpus, Corpus) else Corpus.from_json(corpus)
    cards, anchors = _op_cards(record)
    written = cache(record.to_json)
    yours = [p.slug for p in record.programs if p.added]
    alone = asked_alone(drills, yours)

    def page() -> bytes:
        # The corpus and x-ray sections list the gym's programs; variants are drawn in drills only.
        groups = _group_items(drills)
        kinds = drill_kinds(drills)
        views = [program_view(p, tuple(v for v in record.programs if v.variant_of == p.slug)) for p in record.bases]
        # The learner's own programs come first (the corpus section, the x-ray's picker).
        programs = [v for v in views if v.added] + [v for v in views if not v.added]
        # `slug:count:weight`: the page draws a program by its items' summed weight without fetching its split;
        # a variant's entry adds `:base`, the program it is a variant of (schedule.js: one family, not twice in a row).
        bases = variant_bases(record)
        pools = {k.name: " ".join(f"{slug}:{len(items)}:{_weight(items):g}" + (f":{bases[slug]}" if slug in bases else "")
                                  for (kind, slug), items in groups.items() if kind == k.name)
                 for k in kinds}
        # `slug:weight`: the learner's programs whose items of a kind are asked, drilled alone, with the
        # others' items of `data/drills/with/KIND/SLUG.json` (their summed weight). The lines saying why are in
        # that file, fetched when "only your programs" is checked: the page grows by an entry per program, not
        # by a line per step.
        withs = {k.name: " ".join(f"{slug}:{_weight(items):g}" for (kind, slug), (items, _) in alone.items()
                                  if kind == k.name) for k in kinds}
        return _environment().get_template("index.html").render(
            corpus=record, programs=programs, changes=change_views(record), cards=cards, kinds=kinds, pools=pools,
            withs=withs, path=PATH, targets=page_targets(record),
            first=first_step(kinds), examples=path_examples(record, drills), hlo_adds=hlo_adds(drills, kinds),
            totals=totals(record, drills), skipped=drills.get("skipped", []), yours=yours, csp=CSP,
            progress_key=PROGRESS_KEY, fluency=FLUENCY, pending=pending or (), news=news,
            big=big,
        ).encode("utf-8")

    makers: dict[str, Callable[[], bytes]] = {
        "index.html": page,
        "data/reference.json": lambda: _json({"schema": REFERENCE_SCHEMA, "cards": cards}),
        "corpus.json": lambda: _corpus_json(record, written),
        "drills.json": lambda: printed_pool(drills),  # what `dumpgym drills` prints: packed
    }
    for path, make in _splits(record, drills, anchors).items():
        makers[path] = partial(lambda make: _json(make()), make)
    for (kind, slug), (items, whys) in alone.items():
        makers[f"data/drills/with/{kind}/{slug}.json"] = partial(
            lambda items, whys: _json({"schema": drills["schema"], "items": items, "notes": whys}), items, whys)
    # The JSON files made from the corpus and the code alone; not the pool's (quick to split, and `serve` may
    # serve a pool still being made), the page (made at start-up) or the package's own files (read as they are).
    keep = frozenset(path for path in makers if path.endswith(".json") and path != "drills.json"
                     and not path.startswith("data/drills/"))
    static = resources.files("dumpgym") / "static"
    for entry in static.iterdir():
        if entry.is_file() and entry.name.endswith((".js", ".css", ".svg")):
            makers[f"static/{entry.name}"] = entry.read_bytes
    for entry in (static / "vendor").iterdir():  # third-party modules, copied verbatim (scripts/vendor-*)
        if entry.is_file() and entry.name.endswith(".js"):
            makers[f"static/vendor/{entry.name}"] = entry.read_bytes
    if pending is not None:
        makers["data/drills/pending.json"] = lambda: _json({"schema": PENDING_SCHEMA, "pending": list(pending)})
    if not kept:
        return SiteFiles(makers)
    from dumpgym.site.kept import KeptFiles

    return SiteFiles(makers, kept if isinstance(kept, KeptFiles) else KeptFiles(record), keep)


def render_site(corpus: Corpus | dict, drills: dict) -> dict[str, bytes]:
    """Every file of the gym, made now, by relative path (what `build_site` writes)."""
    files = site_files(corpus, drills)
    return {path: files[path] for path in files}


def _corpus_json(record: Corpus, written: Callable[[], dict]) -> bytes:
    """corpus.json: exactly what `dumpgym export` prints. Where the corpus starts with the built-in programs
    as they were read, that part is the committed corpus file's own bytes (the same JSON, written by
    `corpus build`) and only the added programs are encoded, each as it sits two levels deep."""
    from dumpgym.drills._stored import builtin_bytes, builtin_corpus

    builtin = builtin_corpus() if builtin_corpus.cache_info().currsize else None  # never parsed here
    n = len(builtin.programs) if builtin else 0
    close = b"\n ]\n}\n"
    whole = builtin_bytes() if builtin else b""
    if not (builtin and n and len(record.programs) >= n and whole.endswith(close)
            and (record.schema, record.jax_version) == (builtin.schema, builtin.jax_version)
            and all(mine is theirs for mine, theirs in zip(record.programs, builtin.programs))):
        corpus = written()
        return _json({**corpus, "programs": [_exported(p) for p in corpus["programs"]]}, indent=1)
    added = [json.dumps(_exported(program.to_json()), indent=1, ensure_ascii=False).replace("\n", "\n  ")
             for program in record.programs[n:]]
    return whole[:-len(close)] + b"".join(b",\n  " + text.encode("utf-8") for text in added) + close


def _exported(program: dict) -> dict:
    """A program's JSON as `dumpgym export` prints it: `corpus/user.py`'s `load_corpus` marks an added one last."""
    if "added" not in program:
        return program
    return {**{k: v for k, v in program.items() if k != "added"}, "added": program["added"]}


def _json(obj, indent=None) -> bytes:
    separators = None if indent else (",", ":")
    return (json.dumps(obj, indent=indent, separators=separators, ensure_ascii=False) + "\n").encode("utf-8")


def load_inputs(corpus_dir=None, warn=None) -> tuple[dict, dict]:
    """The corpus (built-in plus the user's added programs) and its drill pool, without importing JAX.

    A damaged added program, and a drill kind that fails on one program, are skipped with a one-line
    warning (on stderr unless `warn` is given): the page still serves everything else.
    """
    import sys

    from dumpgym.drills import build_pool
    from dumpgym.drills._stored import StoredItems
    from dumpgym.terminal import printable
    from dumpgym.corpus.user import load_corpus, user_corpus_dir

    warn = warn or (lambda line: print(f"dumpgym: warning: {printable(line)}", file=sys.stderr))
    corpus = load_corpus(corpus_dir, warn)
    # An added program's items are kept beside its record: a big model is read, not drilled again.
    return corpus, build_pool(corpus, warn, StoredItems(user_corpus_dir(corpus_dir)))


def asked_alone(pool: dict, yours: list[str]) -> dict[tuple[str, str], tuple[list[dict], list[str]]]:
    """(kind, slug) -> the other programs' items one of the learner's programs is asked with when drilled
    alone ("only your programs"), reweighted, and one line per step saying why (`drills/_together.py`)."""
    from dumpgym.drills._together import each_alone

    out: dict[tuple[str, str], tuple[list[dict], list[str]]] = {}
    for slug, steps in (each_alone(pool["items"], yours) if yours else {}).items():
        for step in steps:
            items, whys = out.setdefault((step.drill, slug), ([], []))
            items.extend(step.partners)
            whys.append(step.why)
    return out


def _weight(items: list[dict]) -> float:
    """The summed `weight` of a program's items of one kind, as the page's sampler weighs them."""
    return sum(item["weight"] for item in items)  # every "dumpgym.drills/2" item has its weight
