"""The static site: same JSON as the CLI, every listing line addressable, everything escaped, nothing remote."""
from __future__ import annotations

import copy
import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markupsafe import escape

from dumpgym.site import curriculum

from dumpgym.site import highlight

from dumpgym.site import files as site
from dumpgym.record.schema import Corpus
from dumpgym.drills import build_pool, printed_pool, read_pool

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = '<img src=x onerror=alert(1)> & "q" </script>'


@pytest.fixture(scope="module")
def small(corpus):
    """Three programs: two built-in ones and an added one whose user-given words are markup."""
    data = copy.deepcopy(corpus)
    keep = [p for p in data["programs"] if p["slug"] in ("mlp", "layernorm")]
    evil = copy.deepcopy(next(p for p in data["programs"] if p["slug"] == "softmax"))
    evil.update(slug="evil", title=HOSTILE, lesson=HOSTILE)
    data["programs"] = keep + [evil]
    return data, build_pool(data)


@pytest.fixture(scope="module")
def files(small):
    return site.render_site(*small)


@pytest.fixture(scope="module")
def page(files):
    return files["index.html"].decode("utf-8")


class Parsed(HTMLParser):
    """Every start tag with its attributes, and the text between tags, as a browser would read them."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


@pytest.fixture(scope="module")
def parsed(page):
    return Parsed(page)


def listing_of(files, slug: str, layer: str) -> list[list]:
    """A listing as the page fetches it: one list of runs per line."""
    data = json.loads(files[f"data/listings/{slug}.json"])
    assert data["schema"] == "dumpgym.listings/1"
    return data[layer]


def run_text(run) -> str:
    return run if isinstance(run, str) else run[1]


def links_of(lines: list[list]) -> list[tuple[str, str]]:
    """(card anchor, linked text) of every op link in a listing."""
    return [(run[2], run[1]) for runs in lines for run in runs if not isinstance(run, str) and len(run) == 3]


def test_the_site_ships_exactly_the_json_the_cli_prints(files, small):
    corpus, pool = small
    assert json.loads(files["corpus.json"]) == corpus
    assert files["drills.json"] == printed_pool(pool)  # packed, byte for byte as `dumpgym drills` prints it
    assert read_pool(json.loads(files["drills.json"])) == pool
    for program in corpus["programs"]:
        assert json.loads(files[f"data/programs/{program['slug']}.json"]) == program


def test_drill_splits_partition_the_pool_in_order(files, small):
    _, pool = small
    rebuilt = {}
    for path, body in files.items():
        if path.startswith("data/drills/"):
            split = json.loads(body)
            assert split["schema"] == pool["schema"]
            _, _, kind, slug = path.removesuffix(".json").split("/")
            assert all(item["drill"] == kind and item["program"] == slug for item in split["items"])
            rebuilt[(kind, slug)] = split["items"]
    expected = {}
    for item in pool["items"]:
        expected.setdefault((item["drill"], item["program"]), []).append(item)
    assert rebuilt == expected


def test_each_drill_panel_names_its_splits_with_item_counts_and_weights(page, small):
    _, pool = small
    for kind in {item["drill"] for item in pool["items"]}:
        pool_attr = re.search(rf'data-drill="{kind}" data-pool="([^"]*)"', page)[1]
        for entry in pool_attr.split():
            slug, n, weight, *_base = entry.split(":")
            mine = [i for i in pool["items"] if i["drill"] == kind and i["program"] == slug]
            assert int(n) == len(mine)
            assert float(weight) == pytest.approx(sum(i["weight"] for i in mine), rel=1e-5)


def test_every_listing_line_is_one_list_of_runs(files, small):
    corpus, _ = small
    for program in corpus["programs"]:
        for layer in ("source", "jaxpr", "stablehlo"):
            assert len(listing_of(files, program["slug"], layer)) == program[layer].count("\n") + 1


def test_listings_read_back_to_the_exact_dump_text(files, small):
    corpus, _ = small
    for program in corpus["programs"]:
        for layer in ("source", "jaxpr", "stablehlo"):
            lines = listing_of(files, program["slug"], layer)
            assert "\n".join("".join(run_text(r) for r in runs) for runs in lines) == program[layer]


def test_the_page_holds_no_listing_it_fetches_them(page, files, small):
    corpus, _ = small
    for program in corpus["programs"]:
        assert f"data/listings/{program['slug']}.json" in files
        assert program["jaxpr"].splitlines()[1] not in page


def test_dump_text_and_user_names_are_escaped(page, parsed):
    assert HOSTILE not in page
    assert [t for t, _ in parsed.tags].count("img") == 0
    assert sum(1 for d in parsed.text if d == HOSTILE) >= 2  # the title and the lesson, as text
    assert "tensor<64x512xbf16>" not in page


def test_no_inline_script_no_inline_style_and_a_content_security_policy(parsed):
    metas = [a for t, a in parsed.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert [m["content"] for m in metas] == [site.CSP]
    assert "unsafe-inline" not in site.CSP and "default-src 'self'" in site.CSP
    scripts = [a for t, a in parsed.tags if t == "script"]
    assert scripts == [{"type": "module", "src": "static/app.js"}]
    for tag, attrs in parsed.tags:
        assert "style" not in attrs and not any(name.startswith("on") for name in attrs), tag
    assert "style" not in [t for t, _ in parsed.tags]


def test_every_url_is_relative_and_local(parsed, files):
    urls = [a[name] for _, a in parsed.tags for name in ("href", "src") if name in a]
    assert urls
    for url in urls:
        assert not re.match(r"^(?:[a-z]+:|//|/)", url), url
        if not url.startswith("#"):
            assert url in files, url
    ids = {a["id"] for _, a in parsed.tags if "id" in a}
    ids |= {c["anchor"] for c in json.loads(files["data/reference.json"])["cards"]}
    for url in urls:
        if url.startswith("#"):
            assert url[1:] in ids, url
    for name, body in files.items():
        if name.endswith((".js", ".css")):
            text = body.decode()
            assert not re.search(r"https?://|url\(\s*['\"]?(?:https?:)?//", text), name
            for module in re.findall(r"from '\./([\w-]+\.js)'", text):
                assert f"static/{module}" in files, f"{name} imports missing {module}"


def card_anchors(files) -> set[str]:
    return {c["anchor"] for c in json.loads(files["data/reference.json"])["cards"]}


def test_op_names_in_listings_link_to_cards_that_exist(files, small):
    corpus, _ = small
    anchors = card_anchors(files)
    links = [link for p in corpus["programs"] for layer in ("jaxpr", "stablehlo")
             for link in links_of(listing_of(files, p["slug"], layer))]
    assert links and {target for target, _ in links} <= anchors
    assert ("op-dot_general", "dot_general") in links_of(listing_of(files, "mlp", "jaxpr"))
    assert ("op-stablehlo.dot_general", "stablehlo.dot_general") in links_of(listing_of(files, "mlp", "stablehlo"))
    primitives = {e["primitive"] for p in corpus["programs"] for e in p["eqns"]}
    linked = {name for _, name in links}
    assert primitives <= linked


def test_every_op_the_corpus_uses_has_a_card(files, small):
    from dumpgym import reference

    corpus, _ = small
    anchors = card_anchors(files)
    names = {e["primitive"] for p in corpus["programs"] for e in p["eqns"]}
    names |= {o["name"] for p in corpus["programs"] for o in p["stablehlo_ops"]}
    for name in names:
        card = reference.card_for(name) or reference.fallback_card(name)
        assert site.card_anchor(card.name) in anchors, name


def test_reference_cards_are_our_cards_in_reading_order_with_where_they_are_used(files, small):
    from dumpgym import reference

    corpus, _ = small
    data = json.loads(files["data/reference.json"])
    assert data["schema"] == site.REFERENCE_SCHEMA
    names = [c["name"] for c in data["cards"]]
    assert names[: len(reference.cards())] == [c.name for c in reference.cards()]
    by_name = {c["name"]: c for c in data["cards"]}
    assert by_name["dot_general"]["seen_in"] == [
        p["slug"] for p in corpus["programs"] if any(e["primitive"] == "dot_general" for e in p["eqns"])]
    assert ["stablehlo.dot_general", "op-stablehlo.dot_general"] in by_name["dot_general"]["pairs"]


def test_counts_on_the_page_are_computed(page, small):
    corpus, pool = small
    n_eqns = sum(len(p["eqns"]) for p in corpus["programs"])
    n_groups = sum(len(p["xray"]) for p in corpus["programs"])
    assert "3 programs, traced" in page
    assert f"{n_eqns} equations, {n_groups} x-ray groups and {len(pool['items'])} drill items" in page
    assert "3 programs at three layers" in page
    assert f"{len(json.loads(site.render_site(*small)['data/reference.json'])['cards'])} ops" in page
    for kind in ("shapes", "decoder", "decisions"):
        n = sum(1 for i in pool["items"] if i["drill"] == kind)
        assert f"{n} items from" in page


def test_the_path_numbers_its_steps_from_one_and_names_the_guide_chapters(page, small):
    # The steps are numbered 1..N, in order, without gaps; a step that serves a chapter of the guide names
    # it after its number; the drills are named by their skill, the x-ray by what it shows.
    _, pool = small
    steps = re.findall(r'<span class="num" data-step="(\d+)">(\d+)</span>', page)
    assert [int(a) for a, _ in steps] == [int(b) for _, b in steps] == list(range(1, len(curriculum.PATH) + 1))
    assert re.findall(r'data-guide="(\d+)"', page) == [ch.number for ch in curriculum.PATH if ch.number]
    badges = re.findall(r'<span class="num">([^<]*)</span>', page)
    assert not [b for b in badges if re.search(r"\d", b)]  # no other number on a badge
    tabs = [(k, html.unescape(t)) for k, t in re.findall(r'data-drill-tab="([a-z-]+)">([^<]*)</button>', page)]
    titles = {k["name"]: k["title"] for k in pool["kinds"]}
    assert tabs == [(k.name, titles[k.name]) for k in curriculum.drill_kinds(pool)]
    summary = [(k, html.unescape(t)) for k, t in re.findall(r'data-open-drill="([a-z-]+)">([^<]*)</a> <span class="count">',
                                                            page)]
    assert summary == tabs
    for kind, title in tabs:  # a path target names its drill by the same title
        assert re.search(rf'data-open-drill="{kind}">{re.escape(str(escape(title)))}</a>', page)
    assert "drill 0" not in page and "drills 0" not in page


def test_next_starts_at_the_first_chapter_and_the_path_says_where_you_stand(page):
    first = curriculum.PATH[0]
    nxt = re.search(r'<a class="next-go" href="#drill-(\w+)" data-open-drill="(\w+)" data-next="target">next</a>\s*'
                    r'<span data-next-what>([^<]*)</span>', page)
    assert nxt.groups() == ("shapes", "shapes", f"{first.label}: shape on sight, {first.targets[0].streak} in a row")
    assert re.findall(r'<li class="chapter" data-chapter="([^"]+)"[^>]*data-here', page) == [first.id]
    n = sum(len(ch.targets) for ch in curriculum.PATH)
    assert f"{n} targets in {len(curriculum.PATH)} steps, none reached yet" in page


def test_a_compiled_hlo_tab_only_where_the_program_has_one(page, small):
    corpus, _ = small
    for program in corpus["programs"]:
        has = any(layer["text"] for layer in program["compiled"].values())
        layers = re.search(rf'id="p-{program["slug"]}".*?data-layers="([^"]*)"', page, re.S)[1]
        assert ("hlo:" in layers) == has
        for layer in program["compiled"].values():
            assert layer["text"] not in page  # fetched on demand, not inlined


def test_the_corpus_compiled_tab_switches_between_the_layers_the_program_has_labelled_from_the_registry(page, small):
    from dumpgym.record.targets import TARGETS

    corpus, _ = small
    # The buttons, once for the page: every target the corpus holds, in the registry's order, labelled from it.
    choices = re.search(r"<template data-compiled-choices>(.*?)</template>", page, re.S)[1]
    buttons = [(i, html.unescape(name), label) for i, name, label in re.findall(
        r'<button type="button" data-compiled-target="([^"]+)" aria-pressed="false" title="([^"]*)">([^<]*)</button>',
        choices)]
    held = [t for t in TARGETS.values() if any(p["compiled"].get(t.id, {}).get("text") for p in corpus["programs"])]
    assert held and buttons == [(t.id, t.name, t.label) for t in held]
    for program in corpus["programs"]:
        article = re.search(rf'<article class="program" id="p-{program["slug"]}".*?</article>', page, re.S).group()
        has = [t for t in TARGETS.values() if program["compiled"].get(t.id, {}).get("text")]
        said = re.search(r'data-target="([^"]*)" data-compiled="([^"]*)"', article)
        if not has:
            assert said is None
            continue
        # Each program names only the layers it has, first shown first (the registry's order, as the x-ray).
        assert said[1] == has[0].id
        assert said[2] == " ".join(f"{t.id}:{program['compiled'][t.id]['text'].count(chr(10)) + 1}" for t in has)


def test_a_compiled_listing_names_what_compiled_it_as_the_record_does(files, small):
    corpus, _ = small
    for program in corpus["programs"]:
        for target, layer in program["compiled"].items():
            if layer["text"]:
                by = json.loads(files[f"data/compiled/{target}/{program['slug']}.json"])["compiled_by"]
                assert by == {k: layer.get(k, "") for k in site._COMPILED_BY}
                assert by["backend"] == layer["backend"] and by["jaxlib_version"] == layer["jaxlib_version"]


def test_compiled_hlo_ships_as_highlighted_runs_that_read_back_to_the_text(files, small):
    corpus, _ = small
    classes = {cls for _, cls in highlight._TOKEN_CLASSES}
    for program in corpus["programs"]:
        path = f"data/compiled/cpu/{program['slug']}.json"
        if not program["compiled"].get("cpu", {}).get("text"):
            assert path not in files
            continue
        split = json.loads(files[path])
        assert split["schema"] == highlight.HLO_LISTING_SCHEMA
        lines = ["".join(r if isinstance(r, str) else r[1] for r in runs) for runs in split["lines"]]
        assert "\n".join(lines) == program["compiled"]["cpu"]["text"]
        runs = [r for line in split["lines"] for r in line if not isinstance(r, str)]
        # a class name and text, or a link's class, text and card anchor: no markup travels
        assert runs and {r[0] for r in runs} <= classes | {"o"} and all(len(r) == 3 for r in runs if r[0] == "o")
    mlp = json.loads(files["data/compiled/cpu/mlp.json"])["lines"]
    fusion = next(f for f in next(p for p in corpus["programs"] if p["slug"] == "mlp")["compiled"]["cpu"]["fusions"])
    assert ["o", "fusion", "op-hlo-fusion"] in mlp[fusion["line"] - 1] and ["b", fusion["kind"]] in mlp[fusion["line"] - 1]


def test_every_compiled_instruction_links_its_opcode_to_a_card_that_exists(files, small):
    corpus, _ = small
    anchors = card_anchors(files)
    for program in corpus["programs"]:
        for target, layer in program["compiled"].items():
            lines = json.loads(files[f"data/compiled/{target}/{program['slug']}.json"])["lines"]
            for ins in layer["instructions"]:
                links = [r for r in lines[ins["line"] - 1] if not isinstance(r, str) and len(r) == 3]
                assert len(links) == 1, (program["slug"], target, ins)
                _, text, anchor = links[0]
                assert text.replace("-", "") == ins["opcode"] or ins["opcode"] in ("exp", "sin", "cos"), (text, ins)
                assert anchor in anchors


def test_every_opcode_in_the_corpus_compiled_listings_has_a_real_card(corpus):
    """No fallback: each printed opcode has a compiled-HLO card or the StableHLO card of the op it came from."""
    from dumpgym import reference
    from dumpgym.record.schema import Corpus

    typed = Corpus.from_json(corpus)
    printed = set()
    for program in typed.programs:
        for layer in program.compiled.values():
            if layer.backend in ("cpu", "tpu"):  # as before targets were a registry: the GPU's opcodes are not read yet
                ops = site.compiled_ops(layer)
                assert set(ops) == {i.line for i in layer.instructions}, program.slug  # every instruction read
                printed |= set(ops.values())
    assert {"all-reduce", "all-gather", "custom-call", "while", "fusion", "copy-start"} <= printed
    assert all(reference.card_for(op, "hlo") is not None for op in printed), \
        sorted(op for op in printed if reference.card_for(op, "hlo") is None)


def test_a_bad_slug_is_refused_rather_than_put_in_a_url(small):
    corpus, pool = copy.deepcopy(small)
    corpus["programs"][0]["slug"] = "../../etc"
    with pytest.raises(ValueError, match="slug"):
        site.render_site(corpus, pool)


def test_ticks_turns_backticks_into_code_and_escapes_the_rest():
    assert site.ticks("use `a<b` & c") == "use <code>a&lt;b</code> &amp; c"
    assert site.ticks("odd ` tick <") == "odd ` tick &lt;"


def test_docs_describe_every_section_drill_kind_and_the_progress_key():
    text = (ROOT / "docs" / "site.md").read_text()
    for word in ["path", "x-ray", "corpus", "reference", site.PROGRESS_KEY, "build_site", "serve", "get("]:
        assert word in text, word
    from dumpgym.drills import kinds

    for name in kinds():
        assert f"`{name}`" in text, name


def test_a_path_target_in_a_drill_without_items_is_named_not_linked(page, small):
    """The small corpus (mlp, layernorm) has no loop: the loops chapter's target is said, not a dead link."""
    _, pool = small
    present = {k["name"] for k in pool["kinds"]}
    assert "loops" not in present
    target = re.search(r'<li data-target="loops/loops/10".*?</li>', page, re.S).group()
    assert "href=" not in target and "no program here has items for it" in target
    assert all(f'href="#drill-{k}"' in page for k in present)


def test_site_files_make_a_listing_only_when_it_is_read_and_make_it_as_render_site_does(small, files, monkeypatch):
    made = []
    for name in ("listing_lines", "hlo_listing"):
        real = getattr(site, name)
        monkeypatch.setattr(site, name, lambda *a, _real=real, _name=name: made.append(_name) or _real(*a))
    lazy = site.site_files(*small)
    assert list(lazy) == list(files)  # every path known up front, in render_site's order
    assert lazy["index.html"] == files["index.html"] and not made
    assert "data/listings/mlp.json" in lazy and "data/listings/nowhere.json" not in lazy and not made
    assert lazy["data/listings/mlp.json"] == files["data/listings/mlp.json"]
    layers = [key for key in json.loads(files["data/listings/mlp.json"]) if key != "schema"]
    assert made == ["listing_lines"] * len(layers)  # that program's listings, nothing else
    lazy["data/listings/mlp.json"]
    assert len(made) == len(layers)  # kept, not made again


def test_site_files_read_from_many_threads_are_what_render_site_makes(small, files):
    from concurrent.futures import ThreadPoolExecutor

    lazy = site.site_files(*small)
    paths = sorted(files) * 3
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lazy.__getitem__, paths))
    assert got == [files[p] for p in paths]


def test_each_change_is_a_file_of_its_two_compiles_side_by_side(whole_corpus):
    """Every compile with one change gets, per target both sides have, the file the "one change" section
    reads: cost/compare.py's diff of the two records, and the picker names it."""
    import dataclasses
    import json

    from dumpgym.cost.compare import compare_layer
    from dumpgym.site.files import change_views, site_files

    record = Corpus.from_json(whole_corpus)
    by_slug = {p.slug: p for p in record.programs}
    views = change_views(record)
    assert len(views) >= 6
    assert {v.slug for v in views} == {p.slug for p in record.programs if p.change}
    files = site_files(record, {"schema": "dumpgym.drills/2", "kinds": [], "items": []})
    page = files["index.html"].decode()
    for view in views:
        assert f'value="{view.slug}" data-base="{view.base}"' in page
        for t in view.targets:
            got = json.loads(files[f"data/change/{t.id}/{view.slug}.json"])
            want = json.loads(json.dumps(dataclasses.asdict(compare_layer(by_slug[view.base], by_slug[view.slug], t.id))))
            assert got == {"schema": "dumpgym.change/1", **want}


def test_a_change_whose_base_is_missing_is_not_offered(whole_corpus):
    from dumpgym.site.files import change_views

    assert "mlp-f32" in {v.slug for v in change_views(Corpus.from_json(whole_corpus))}
    data = {**whole_corpus, "programs": [p for p in whole_corpus["programs"] if p["slug"] != "mlp"]}
    assert "mlp-f32" not in {v.slug for v in change_views(Corpus.from_json(data))}


def test_a_variants_pool_entries_name_the_program_it_is_a_variant_of(whole_corpus, whole_pool):
    """Each drill panel's `data-pool` gives a variant's entry a fourth field, `slug:count:weight:base`, the
    corpus's `variant_of` (the page draws no family twice in a row from it); a program's own entry has none."""
    page = site.site_files(whole_corpus, whole_pool)["index.html"].decode()
    variant_of = {p["slug"]: p.get("variant_of") for p in whole_corpus["programs"]}
    assert not any(variant_of[base] for base in variant_of.values() if base)  # no variant of a variant: one step
    named = {}
    for kind, attr in re.findall(r'data-drill="([a-z0-9-]+)" data-pool="([^"]*)"', page):
        for entry in attr.split():
            slug, _n, _weight, *base = entry.split(":")
            assert base == [variant_of[slug]] * bool(variant_of[slug]), (kind, entry)
            named[slug] = base
    assert {slug for slug, base in named.items() if base} == {slug for slug, base in variant_of.items() if base}


def test_a_variant_of_a_variant_is_of_the_first_programs_family(whole_corpus):
    data = copy.deepcopy(whole_corpus)
    for p in data["programs"]:
        if p["slug"] == "mlp-3":
            p["variant_of"] = "mlp-2"
    bases = site.variant_bases(Corpus.from_json(data))
    assert bases["mlp-3"] == bases["mlp-2"] == bases["mlp-f32"] == "mlp"
    assert bases == {p["slug"]: (p["variant_of"] if p["slug"] != "mlp-3" else "mlp")
                     for p in whole_corpus["programs"] if p.get("variant_of")}


def test_each_path_step_has_a_worked_example_taken_live_from_the_pool(whole_corpus):
    """Every step but the bar shows an item of its own drill, answered: the pool's item with that card, its
    question, answer and feedback as the drill computed them, and its context (which the page resolves)."""
    from dumpgym.drills import build_pool
    from dumpgym.drills.item import resolve

    record = Corpus.from_json(whole_corpus)
    pool = build_pool(whole_corpus)
    examples = site.path_examples(record, pool)
    assert set(examples) == {ch.id for ch in curriculum.PATH if ch.example}
    items = {(i["card"], i["layer"]): i for i in pool["items"]}  # a decoder card is asked at every layer
    programs = {p.slug: p for p in record.bases}
    for ch in curriculum.PATH[:-1]:
        ex = examples[ch.id]
        item = items[ex["card"], ex["layer_id"]]
        assert item["drill"] == ch.example.drill and item["program"] == ex["program"] in programs
        assert json.loads(ex["context"]) == item["context"]
        assert (ex["question"], ex["feedback"]) == (item["question"], item["feedback"])
        answer = item["answer"]
        right = {"choice": lambda: str(answer["options"][answer["index"]]), "typed": lambda: answer["value"],
                 "axes": lambda: f"ax{'is' if len(answer['axes']) == 1 else 'es'} "
                                 + ", ".join(map(str, answer["axes"]))}[answer["form"]]()
        assert ex["answer"] == right
        assert sum(map(len, resolve(item["context"], programs[ex["program"]]))) <= 1600


@pytest.fixture(scope="module")
def with_yours(corpus):
    from yours_corpus import with_an_added_program

    data = with_an_added_program(corpus)
    pool = build_pool(data)
    return data, pool, site.render_site(data, pool)["index.html"].decode("utf-8")


def test_your_programs_come_first_and_marked_in_the_picker_and_the_corpus(with_yours):
    data, pool, page = with_yours
    parsed = Parsed(page)
    options = [a["value"] for tag, a in parsed.tags if tag == "option" and "value" in a]
    assert options == ["mine", "mlp", "ckpt-policy"]  # in the x-ray's picker, first
    groups = re.findall(r'<optgroup label="([^"]+)"', page)
    assert groups == ["your programs", "built-in"]
    assert "mine · \u2068my block\u2069" in [t.strip() for t in parsed.text]
    cards = [a["data-program"] for tag, a in parsed.tags if tag == "article" and "data-program" in a]
    assert cards == ["mine", "mlp", "ckpt-policy"]  # in the corpus section, first
    assert [a for tag, a in parsed.tags if "data-yours-path" in a]  # the path's box, filled in the browser


def test_the_page_says_what_each_compile_would_add_to_an_added_programs_drills(with_yours):
    """Once, as data the added cards' lines are written from in the browser (yours.js; the browser test reads
    them): per compile target, its flag and the drill kinds whose items read that target's compile."""
    data, pool, page = with_yours
    card = page[page.index('id="p-mine"'):page.index("</article>", page.index('id="p-mine"'))]
    assert 'data-compiled="cpu:' in card and "tpu:" not in card and "Two dots and a gelu" in card
    section = next(a for tag, a in Parsed(page).tags if a.get("id") == "corpus")
    adds = {t: (label, flag, kinds) for t, label, flag, kinds in json.loads(section["data-hlo-adds"])}
    assert {t: flag for t, (_, flag, _) in adds.items()} == {"tpu": "--hlo tpu", "gpu": "--hlo gpu", "cpu": "--hlo"}
    # The TPU's own drills come with `--hlo tpu`, the GPU's kernels with `--hlo gpu` and not with the TPU's.
    assert {"layouts", "units"} <= set(adds["tpu"][2]) and "kernels" in adds["gpu"][2] and "kernels" not in adds["tpu"][2]
    # and exactly the kinds with items on that compile in the pool (the built-in programs'), but those that need
    # another program's compile beside it (a change's: `diff`), which one add cannot make
    assert "diff" not in {k for _, _, kinds in adds.values() for k in kinds}
    for target, (_, _, kinds) in adds.items():
        on = {i["drill"] for i in pool["items"] if not any("program" in b for b in i["context"])
              and (i["layer"] == target or any(b.get("layer") == target for b in i["context"]))}
        assert set(kinds) == on, target
    # without added programs the page carries none of it
    plain = site.render_site({**data, "programs": data["programs"][:2]}, build_pool({**data, "programs": data["programs"][:2]}))
    assert b"data-hlo-adds" not in plain["index.html"] and b"data-yours-path" not in plain["index.html"]
