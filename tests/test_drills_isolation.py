"""A drill kind that fails on one program costs that kind on that program only: one line says so, the
page notes it, and every other kind and program keeps its items; `drills`, `build` and `serve` go on."""
import json

import pytest

from dumpgym import cli, drills
from dumpgym.drills import build_pool, items_for
from dumpgym.record.schema import ProgramRecord
from dumpgym.site.files import render_site


@pytest.fixture
def layouts_fail_on_mlp(monkeypatch, tmp_path):
    """The layouts kind, made to raise on mlp alone (as the int4 program made it raise: a sub-byte dtype),
    with a cache folder of its own: the items it makes are kept by the code's digest, which this changes not."""
    monkeypatch.setenv("DUMPGYM_CACHE_DIR", str(tmp_path / "cache"))
    kind = drills.kinds()["layouts"]
    real = kind.make

    def make(program):
        if program.slug == "mlp":
            raise ZeroDivisionError("integer division or modulo by zero")
        return real(program)

    monkeypatch.setitem(drills._kinds, "layouts", type(kind)(**{**kind.__dict__, "make": make}))


def _two(corpus):
    return {**corpus, "programs": [p for p in corpus["programs"] if p["slug"] in ("mlp", "rmsnorm")]}


def test_the_pool_keeps_every_other_item_and_lists_what_was_skipped(layouts_fail_on_mlp, corpus):
    small = _two(corpus)
    warned = []
    pool = build_pool(small, warned.append)
    assert pool["skipped"] == [{"drill": "layouts", "program": "mlp",
                                "why": "ZeroDivisionError: integer division or modulo by zero"}]
    assert warned == ["drill kind 'layouts' failed on program 'mlp' (ZeroDivisionError: integer division or "
                      "modulo by zero); it asks nothing of it"]
    got = {(i["drill"], i["program"]) for i in pool["items"]}
    assert ("layouts", "mlp") not in got and ("layouts", "rmsnorm") in got and ("fusions", "mlp") in got
    mlp = ProgramRecord.from_json(small["programs"][0])
    # every other kind's items of mlp are what they are with nothing failing
    others = [i.to_json() for i in items_for(mlp, []) if i.drill != "layouts"]
    assert [i for i in pool["items"] if i["program"] == "mlp"] == others


def test_without_a_list_to_note_it_in_the_failure_raises(layouts_fail_on_mlp, by_slug):
    with pytest.raises(ZeroDivisionError):
        items_for(ProgramRecord.from_json(by_slug["mlp"]))


def test_the_page_says_which_drill_skipped_which_program(layouts_fail_on_mlp, corpus):
    small = _two(corpus)
    page = render_site(small, build_pool(small))["index.html"].decode()
    assert "The layouts drill asks nothing of <code>mlp</code>: it failed on that program" in page


def test_dumpgym_drills_warns_in_one_line_and_prints_the_pool(layouts_fail_on_mlp, capsys, monkeypatch):
    assert cli.main(["drills", "mlp", "rmsnorm", "--alone"]) == 0
    out, err = capsys.readouterr()
    assert err.strip().splitlines() == ["dumpgym: warning: drill kind 'layouts' failed on program 'mlp' "
                                        "(ZeroDivisionError: integer division or modulo by zero); it asks nothing of it"]
    assert json.loads(out)["skipped"][0]["program"] == "mlp"


def test_a_pool_with_nothing_skipped_has_no_skipped_list(corpus):
    assert "skipped" not in build_pool(_two(corpus))
