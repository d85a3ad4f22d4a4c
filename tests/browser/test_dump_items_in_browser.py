"""The drill items of dumps without a jaxpr, on the page: `dumpgym open` of the folders users write most (XLA's
files alone, for the CPU and for a TPU v5e through libtpu), made here in a subprocess from the programs of
`tests/dump_drill_programs.py`. Such items point into a layer a traced program has not, the HLO before
optimisations (a fusion's lines to tap, a dot whose kernel is asked); for every item, the blocks the page
resolves from its references (`static/context.js`, the code a drill and the path run) are the blocks
`dumpgym.drills.item.resolve` makes. Before, the page looked that layer up under a key its listings file does
not use and showed "could not load the question's listings" instead of the question."""
import json
import threading
import urllib.request

import pytest
from conftest import DESKTOP, checked_page

from dump_programs import make_dump
from dumpgym import cli
from dumpgym.drills import build_pool
from dumpgym.drills.item import resolve
from dumpgym.record.schema import ProgramRecord
from dumpgym.serve import server as serve

pytestmark = pytest.mark.browser

NAMES = ("fit_while", "transformer_train_step")


@pytest.fixture(scope="module", params=["cpu", pytest.param("tpu", marks=pytest.mark.needs_tpu)])
def served(request, tmp_path_factory):
    """A folder of XLA's files alone for the platform, opened with `dumpgym open` (its server call caught) and
    served; yields (the URL `open` starts at, the base URL, the dump's records as served)."""
    root = tmp_path_factory.mktemp(f"items-{request.param}")
    folder = make_dump(root / "dump", NAMES, request.param, module="dump_drill_programs", jax_modes=None)
    caught = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(serve, "serve", lambda **kwargs: caught.append(kwargs))
        assert cli.main(["open", str(folder)]) == 0
    site, _ = serve.Site.start(root / "corpus", shown=caught[0]["shown"])
    server = serve.make_server(site, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = serve.url_of(server)
    records = {}
    for record in caught[0]["shown"]:
        slug = record.slug if hasattr(record, "slug") else record["slug"]
        with urllib.request.urlopen(f"{base}/data/programs/{slug}.json", timeout=60) as reply:
            records[slug] = json.loads(reply.read())
    try:
        yield f"{base}/{caught[0]['start']}", records
    finally:
        server.shutdown()
        server.server_close()


def test_the_page_shows_each_item_of_a_dump_without_a_jaxpr_as_python_resolves_it(served, kept_context):
    start, records = served
    asked = set()
    with checked_page(kept_context(**DESKTOP), start) as page:
        page.wait_for_selector("#xray[data-ready]", timeout=60000)
        for slug, served_record in records.items():
            record = ProgramRecord.from_json(served_record)
            for item in build_pool({"programs": [served_record]})["items"]:
                if not any("layer" in block for block in item["context"]):
                    continue
                asked.update((item["drill"], block["layer"]) for block in item["context"] if "layer" in block)
                shown = page.evaluate("async ([slug, context]) => (await import('./static/context.js'))"
                                      ".resolveContext(slug, context)", [slug, item["context"]])
                assert shown == resolve(item["context"], record), (slug, item["drill"], item["card"])
    # The items that point into the HLO before optimisations were among them (a fusion's lines on every target;
    # a dot's kernel on a TPU).
    assert ("fusions", "hlo-before") in asked, sorted(asked)
