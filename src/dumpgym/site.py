"""Stage six: the gym as static files, highlighted and escaped at build time, read by plain ES modules.

`render_site` turns a corpus ("dumpgym.corpus/1") and a drill pool ("dumpgym.drills/1") into a dict of
relative paths to bytes; `build_site` writes that dict to a folder and `serve` serves it from memory.
The page reads per-program and per-drill splits of exactly those JSON objects, so what it shows is
what `dumpgym export` and `dumpgym drills` print.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources

from jinja2 import Environment, PackageLoader
from markupsafe import Markup, escape
from pygments.token import Token

PROGRESS_KEY = "dumpgym.progress/1"
REFERENCE_SCHEMA = "dumpgym.reference/1"
HLO_LISTING_SCHEMA = "dumpgym.hlo-listing/1"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'none'"
)
_SLUG = re.compile(r"[a-z0-9-]+")


@dataclass(frozen=True)
class DrillKind:
    """How the page names one drill kind: its number on the gym floor, a title and a one-line aim."""

    name: str
    number: str
    title: str
    aim: str


@dataclass(frozen=True)
class Target:
    """A streak to reach in one drill kind; reaching it checks the target off for good."""

    drill: str
    streak: int


@dataclass(frozen=True)
class Chapter:
    """One stop on the path: a book chapter, what it trains, and the streaks that prove it."""

    number: str
    title: str
    aim: str
    targets: tuple[Target, ...]

    def key(self, target: Target) -> str:
        """The id under which the page records this target as reached."""
        return f"{self.number}/{target.drill}/{target.streak}"


DRILL_KINDS = (
    DrillKind("decoder", "01", "dot_general, decoded",
              "Read dimension_numbers and name the contracted and batch axes of each side."),
    DrillKind("shapes", "02", "shape on sight",
              "Say what comes out of one equation: every dimension and the dtype."),
    DrillKind("decisions", "03", "the framework's hand",
              "Click the line the framework wrote for you: a broadcast, an upcast, a remat mark, a collective."),
    DrillKind("fusions", "05", "what XLA fused",
              "Name the equations XLA merged into one fusion of the compiled program."),
)
FLUENCY = 10  # "10 in a row is the fluency bar"

PATH = (
    Chapter("02", "jaxprs on sight", "Every binder carries its aval; read the output before you read the op.",
            (Target("shapes", FLUENCY),)),
    Chapter("03", "contractions", "einsum, matmul and attention all become dot_general; decode its axis lists.",
            (Target("decoder", FLUENCY),)),
    Chapter("04", "lowering", "Find what JAX and XLA add between your code and the machine.",
            (Target("decisions", FLUENCY),)),
    Chapter("12", "the bar", "Read any dump on sight: twice the fluency bar, in every drill.",
            (Target("decoder", 2 * FLUENCY), Target("shapes", 2 * FLUENCY), Target("decisions", 2 * FLUENCY))),
)

# Pygments token types to one-letter classes; anything unlisted (punctuation, variables) stays bare,
# which keeps the page light: a listing is mostly variables and punctuation.
_TOKEN_CLASSES = (
    (Token.Comment, "c"), (Token.Keyword.Type, "t"), (Token.Keyword, "k"), (Token.Name.Function, "f"),
    (Token.Name.Builtin, "b"), (Token.Name.Attribute, "a"),
    (Token.Name.Class, "t"), (Token.Name.Decorator, "k"), (Token.Name.Label, "f"), (Token.Name.Constant, "b"),
    (Token.Name.Tag, "a"), (Token.Literal.Number, "n"), (Token.Literal.String, "s"), (Token.Literal, "n"),
)


@lru_cache(maxsize=None)
def token_class(ttype) -> str:
    """The short CSS class for a Pygments token type, or "" for tokens left unstyled."""
    for parent, cls in _TOKEN_CLASSES:
        if ttype in parent:
            return cls
    return ""


def lexer_for(layer: str):
    """A fresh Pygments lexer for "source", "jaxpr", "stablehlo" or "hlo" (ours for the dumps); None for other text."""
    from pygments.lexers.python import PythonLexer

    from dumpgym.lexers import HloLexer, JaxprLexer, StableHloLexer

    lexer = {"source": PythonLexer, "jaxpr": JaxprLexer, "stablehlo": StableHloLexer, "hlo": HloLexer}.get(layer)
    return lexer(stripnl=False, ensurenl=False) if lexer else None


def _line_tokens(text: str, lexer) -> list[list[tuple[str, str]]]:
    """The text split into lines, each a list of (class, text) runs with neighbours of one class merged."""
    pairs = lexer.get_tokens(text) if lexer is not None else [(Token.Text, text)]
    lines: list[list[tuple[str, str]]] = [[]]
    for ttype, value in pairs:
        cls = token_class(ttype)
        for i, part in enumerate(value.split("\n")):
            if i:
                lines.append([])
            if not part:
                continue
            run = lines[-1]
            if run and (run[-1][0] == cls or (not part.strip() and not run[-1][0])):
                run[-1] = (run[-1][0], run[-1][1] + part)
            else:
                run.append((cls if part.strip() else "", part))
    want = text.count("\n") + 1
    return (lines + [[] for _ in range(want - len(lines))])[:want]


def _render_line(runs: list[tuple[str, str]], links: list[tuple[int, int, str]]) -> str:
    """One line's runs as HTML, each (start, end, anchor) character range of `links` wrapped in an op link."""
    cuts = sorted({0} | {p for a, b, _ in links for p in (a, b)})
    out, pos = [], 0
    for cls, value in runs:
        bounds = [pos] + [c for c in cuts if pos < c < pos + len(value)] + [pos + len(value)]
        for start, stop in zip(bounds, bounds[1:]):
            piece = value[start - pos: stop - pos]
            link = next((l for l in links if l[0] <= start and stop <= l[1]), None)
            body = str(escape(piece))
            if cls and not link:
                body = f"<span class={cls}>{body}</span>"
            if link and start == link[0]:
                body = f"<a class=o href=#{link[2]}>" + body
            if link and stop == link[1]:
                body += "</a>"
            out.append(body)
        pos += len(value)
    return "".join(out)


def render_listing(text: str, layer: str, links: dict[int, list[tuple[str, str]]] | None = None) -> Markup:
    """Highlighted HTML for a listing: one `<span data-line=N>` per line, op names linked to their cards.

    `links` maps a 1-based line to the ops printed on it, in order, as (name as printed, card anchor);
    each name is looked for after the previous one (`reduce ... applies stablehlo.add` holds two).
    """
    links = links or {}
    rows = []
    for number, runs in enumerate(_line_tokens(text, lexer_for(layer)), start=1):
        found = []
        if number in links:
            raw, after = "".join(v for _, v in runs), 0
            for name, anchor in links[number]:
                at = _find_op(raw, name, after)
                if at >= 0:
                    found.append((at, at + len(name), anchor))
                    after = at + len(name)
        rows.append(f"<span data-line={number}>{_render_line(runs, found)}\n</span>")
    return Markup(f'<pre class=ls data-layer={layer}><code>{"".join(rows)}</code></pre>')


def hlo_listing(text: str) -> dict:
    """The compiled HLO highlighted at build time, for the page to fetch when it shows it.

    Each line is a list of runs: bare text as a string, a highlighted run as [class, text]. The page
    builds the markup itself with its escaping `html` helper, so no markup travels as data.
    """
    lines = [[value if not cls else [cls, value] for cls, value in runs] for runs in _line_tokens(text, lexer_for("hlo"))]
    return {"schema": HLO_LISTING_SCHEMA, "lines": lines}


def _find_op(line: str, name: str, after: int = 0) -> int:
    """Where an op name stands on its line (from `after`): after `= ` for equations and ops, else its first match."""
    for pattern in (rf"= {re.escape(name)}(?=[\[\s(\"]|$)", rf"\"{re.escape(name)}\"", rf"\b{re.escape(name)}\b"):
        m = re.compile(pattern).search(line, after)
        if m:
            return m.start() + (2 if m.group().startswith("= ") else 1 if m.group().startswith('"') else 0)
    return -1


def card_anchor(name: str) -> str:
    """The fragment id of an op's card in the reference section."""
    return "op-" + re.sub(r"[^a-z0-9_.-]+", "-", name.lower())


def _op_cards(corpus: dict) -> tuple[list[dict], dict[str, str]]:
    """The reference cards (ours, from `dumpgym.reference`, in its reading order) and op name -> card anchor.

    Every op the corpus prints gets a card: its own, or an honest fallback. The cards travel as
    `data/reference.json`, which the page renders when the reference section comes near.
    """
    from dumpgym import reference

    cards = {card.name: card for card in reference.cards()}
    anchors: dict[str, str] = {}
    seen_in: dict[str, list[str]] = {}
    for p in corpus["programs"]:
        for name in [e["primitive"] for e in p["eqns"]] + [o["name"] for o in p.get("stablehlo_ops", [])]:
            if name not in anchors:
                card = reference.card_for(name) or reference.fallback_card(name)
                cards.setdefault(card.name, card)
                anchors[name] = card_anchor(card.name)
            slugs = seen_in.setdefault(anchors[name], [])
            if p["slug"] not in slugs:
                slugs.append(p["slug"])
    views = [
        {
            **asdict(card), "anchor": card_anchor(card.name),
            "pairs": [[other, card_anchor(other)] for other in card.pairs if other in cards],
            "seen_in": seen_in.get(card_anchor(card.name), []),
        }
        for card in cards.values()
    ]
    return views, anchors


def program_view(program: dict, anchors: dict[str, str]) -> dict:
    """What the corpus and x-ray sections need of one program: highlighted listings and computed counts."""
    if not _SLUG.fullmatch(program["slug"]):
        raise ValueError(f"program slug {program['slug']!r} must use only a-z, 0-9 and '-'")
    eqn_links: dict[int, list[tuple[str, str]]] = {}
    for e in program["eqns"]:
        eqn_links.setdefault(e["jaxpr_lines"][0], []).append((e["primitive"], anchors[e["primitive"]]))
    op_links: dict[int, list[tuple[str, str]]] = {}
    for o in program.get("stablehlo_ops", []):
        printed = o["name"].split(".", 1)[1] if o["name"].startswith("func.") else o["name"]
        op_links.setdefault(o["line"], []).append((printed, anchors[o["name"]]))
    compiled = program.get("hlo") or {}
    return {
        "slug": program["slug"], "title": program["title"], "lesson": program["lesson"],
        "args": program.get("args", []), "entry": program.get("entry", ""), "mesh": program.get("mesh"),
        "eqns": len(program["eqns"]), "groups": len(program.get("xray", [])),
        "listings": {
            "source": render_listing(program["source"], "source"),
            "jaxpr": render_listing(program["jaxpr"], "jaxpr", eqn_links),
            "stablehlo": render_listing(program["stablehlo"], "stablehlo", op_links),
        },
        "lines": {k: program[k].count("\n") + 1 for k in ("source", "jaxpr", "stablehlo")},
        # The compiled layer is long: the page fetches it (data/hlo/SLUG.json) when it shows it.
        "hlo_lines": compiled["text"].count("\n") + 1 if compiled.get("text") else 0,
        "hlo_backend": compiled.get("backend", ""),
    }


def drill_kinds(pool: dict) -> list[DrillKind]:
    """The drill kinds to show, in gym order: the known ones the pool holds (the first three always),
    then any other kind a drills module registers, numbered after them (04 is the x-ray)."""
    present = list(dict.fromkeys(item["drill"] for item in pool["items"]))
    known = [k for k in DRILL_KINDS if k.number <= "03" or k.name in present]
    last = max([4] + [int(k.number) for k in known])
    extra = [DrillKind(name, f"{last + i + 1:02d}", name.replace("-", " "), "")
             for i, name in enumerate(n for n in present if n not in {k.name for k in known})]
    return known + extra


def _splits(corpus: dict, pool: dict) -> dict[str, object]:
    """The JSON files the page fetches: each program object, its highlighted compiled HLO, and each drill
    kind's items per program."""
    files: dict[str, object] = {f"data/programs/{p['slug']}.json": p for p in corpus["programs"]}
    for p in corpus["programs"]:
        if (p.get("hlo") or {}).get("text"):
            files[f"data/hlo/{p['slug']}.json"] = hlo_listing(p["hlo"]["text"])
    for (kind, slug), items in _group_items(pool).items():
        files[f"data/drills/{kind}/{slug}.json"] = {"schema": pool["schema"], "items": items}
    return files


def _group_items(pool: dict) -> dict[tuple[str, str], list[dict]]:
    groups: dict[tuple[str, str], list[dict]] = {}
    for item in pool["items"]:
        if not _SLUG.fullmatch(item["drill"]) or not _SLUG.fullmatch(item["program"]):
            raise ValueError(f"drill item names {item['drill']!r}/{item['program']!r}: only a-z, 0-9 and '-'")
        groups.setdefault((item["drill"], item["program"]), []).append(item)
    return groups


def totals(corpus: dict, pool: dict) -> dict:
    """Counts shown on the page, all computed from the data."""
    programs = corpus["programs"]
    stats = [p.get("xray_stats") or {} for p in programs]
    return {
        "programs": len(programs),
        "eqns": sum(len(p["eqns"]) for p in programs),
        "groups": sum(len(p.get("xray", [])) for p in programs),
        "op_lines": sum(s.get("stablehlo_op_lines", 0) for s in stats),
        "mapped_op_lines": sum(s.get("mapped_stablehlo_op_lines", 0) for s in stats),
        "lowered_to_nothing": sum(len(p.get("lowered_to_nothing", [])) for p in programs),
        "items": Counter(item["drill"] for item in pool["items"]),
        "listing_lines": sum(p[k].count("\n") + 1 for p in programs for k in ("source", "jaxpr", "stablehlo")),
    }


def ticks(text: str) -> Markup:
    """Escape prose and set its `backticked` spans as code, the way the op cards write op text."""
    parts = str(text).split("`")
    if len(parts) % 2 == 0:  # an unmatched backtick: show the text as it is
        return Markup(escape(text))
    return Markup("".join(f"<code>{escape(p)}</code>" if i % 2 else str(escape(p)) for i, p in enumerate(parts)))


def _environment() -> Environment:
    env = Environment(loader=PackageLoader("dumpgym", "templates"), autoescape=True,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["plural"] = lambda n, word, many=None: f"{n} {word if n == 1 else (many or word + 's')}"
    env.filters["ticks"] = ticks
    return env


def render_site(corpus: dict, drills: dict) -> dict[str, bytes]:
    """Every file of the gym, by relative path: index.html, the JSON it reads, its ES modules and CSS."""
    cards, anchors = _op_cards(corpus)
    programs = [program_view(p, anchors) for p in corpus["programs"]]
    groups = _group_items(drills)
    kinds = drill_kinds(drills)
    pools = {k.name: " ".join(f"{slug}:{len(items)}" for (kind, slug), items in groups.items() if kind == k.name)
             for k in kinds}
    page = _environment().get_template("index.html").render(
        corpus=corpus, programs=programs, cards=cards, kinds=kinds, pools=pools, path=PATH,
        totals=totals(corpus, drills), csp=CSP, progress_key=PROGRESS_KEY, fluency=FLUENCY,
    )
    files = {"index.html": page.encode("utf-8")}
    files["data/reference.json"] = _json({"schema": REFERENCE_SCHEMA, "cards": cards})
    files["corpus.json"] = _json(corpus, indent=1)
    files["drills.json"] = _json(drills, indent=1)
    for path, obj in _splits(corpus, drills).items():
        files[path] = _json(obj)
    static = resources.files("dumpgym") / "static"
    for entry in static.iterdir():
        if entry.is_file() and entry.name.endswith((".js", ".css", ".svg")):
            files[f"static/{entry.name}"] = entry.read_bytes()
    return files


def _json(obj, indent=None) -> bytes:
    separators = None if indent else (",", ":")
    return (json.dumps(obj, indent=indent, separators=separators, ensure_ascii=False) + "\n").encode("utf-8")


def load_inputs(corpus_dir=None, warn=None) -> tuple[dict, dict]:
    """The corpus (built-in plus the user's added programs) and its drill pool, without importing JAX.

    A damaged added program is skipped with a one-line warning (on stderr unless `warn` is given):
    the page still serves everything else.
    """
    import sys

    from dumpgym.corpus import load_corpus
    from dumpgym.drills import build_pool

    corpus = load_corpus(corpus_dir, warn or (lambda line: print(f"dumpgym: warning: {line}", file=sys.stderr)))
    return corpus, build_pool(corpus)
