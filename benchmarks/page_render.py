"""First render time and page weight of the gym in headless Chromium.

    python benchmarks/page_render.py [--runs 5]

Serves the built-in corpus twice, once from `dumpgym serve`'s in-memory server (gzip, as any static
host compresses) and once from `python -m http.server` (no compression), loads the page in Debian's
chromium and prints, as medians over the runs:

- first render: first contentful paint, and the moment app.js has wired every section;
- page weight: bytes a first visit transfers until the page settles (HTML, CSS, the modules the top
  of the page uses, the one drill split it fetched); listings, the x-ray and the scheduler come later;
- listing text: characters of the corpus's source, jaxpr and StableHLO listings, which the page
  fetches program by program as they near the screen;
- the ratio of the two. Targets: first paint <= 300 ms, weight <= 1.5 x listing text.

Then it traces and compiles the 24-layer transformer stack of `transformer_stack.py` (about 1,900
equations), builds a gym around it, and times the x-ray on it, with its compiled HLO column:
choosing the program (which fetches and lays out the compiled listing), and one hover.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from playwright.sync_api import sync_playwright

from dumpgym.site import build

from dumpgym.serve import server as serve

from dumpgym.site import files as site

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
MEASURE = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const all = [nav, ...performance.getEntriesByType('resource')];
  const paint = performance.getEntriesByName('first-contentful-paint')[0];
  const ready = performance.getEntriesByName('dumpgym:ready')[0];
  return {
    fcp: paint ? paint.startTime : null,
    ready: ready ? ready.startTime : null,
    dcl: nav.domContentLoadedEventEnd,
    transfer: all.reduce((a, e) => a + e.transferSize, 0),
    decoded: all.reduce((a, e) => a + e.decodedBodySize, 0),
    files: all.length,
  };
}"""


# A page with one line of text: what first paint costs on this machine, right now, for anything.
BASELINE = b"<!doctype html><html><head><title>baseline</title></head><body><p>baseline</p></body></html>"


def measure(browser, url: str, runs: int, ready: str = "html[data-ready]") -> dict:
    samples = []
    for _ in range(runs + 1):  # the first run warms Chromium's own caches; it is dropped
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.goto(url)
        page.wait_for_selector(ready)
        page.wait_for_load_state("networkidle")
        samples.append(page.evaluate(MEASURE))
        context.close()
    samples = samples[1:]
    return {k: statistics.median(s[k] for s in samples) if samples[0][k] is not None else None for k in samples[0]}


XRAY = """async (slug) => {
  const root = document.getElementById('xray');
  root.scrollIntoView();
  const pick = root.querySelector('[data-xray-pick]');
  const t0 = performance.now();
  pick.value = slug;
  pick.dispatchEvent(new Event('change'));
  while (root.dataset.program !== slug || !root.hasAttribute('data-ready')) await new Promise((r) => setTimeout(r, 1));
  const load = performance.now() - t0;
  const rows = [...root.querySelectorAll('[data-xray-col=jaxpr] [data-line]')];
  const t1 = performance.now();
  for (const r of rows) r.dispatchEvent(new MouseEvent('mouseover', {bubbles: true}));
  const hover = (performance.now() - t1) / rows.length;
  const count = (layer) => root.querySelectorAll(`[data-xray-col=${layer}] [data-line]`).length;
  return {load, hover, jaxpr: rows.length, stablehlo: count('stablehlo'), hlo: count('hlo'),
          fusions: root.querySelectorAll('[data-fusion-line]').length};
}"""


def stack_program() -> dict:
    """The corpus record of the 24-layer transformer stack, with its compiled layer (traces and compiles with JAX)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from transformer_stack import ARGS, transformer_stack

    from dumpgym.corpus.pipeline import program_record
    from dumpgym.traced.program import Program

    return program_record(Program(slug="stack", title="24-layer transformer stack",
                                  lesson="The x-ray at scale.", function=transformer_stack, args=ARGS),
                          compiled=True).to_json()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-stack", action="store_true", help="skip the x-ray on the 24-layer stack")
    args = parser.parse_args(argv)
    chromium = shutil.which("chromium")
    if not chromium:
        print("chromium is not installed (apt-get install -y chromium)", file=sys.stderr)
        return 2

    corpus, drills = site.load_inputs()
    files = site.render_site(corpus, drills)
    text = sum(len(p[k]) for p in corpus["programs"] for k in ("source", "jaxpr", "stablehlo"))
    print(f"corpus: {len(corpus['programs'])} programs, {text:,} characters of listings "
          f"(source + jaxpr + StableHLO); site: {len(files)} files, index.html {len(files['index.html']):,} bytes")

    gym = serve.make_server(serve.Site({**files, "baseline.html": BASELINE}), "127.0.0.1", 0)
    threading.Thread(target=gym.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as out:
        build.build_site(out, corpus, drills)
        port = gym.server_address[1] + 1
        plain = subprocess.Popen([sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", out],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = plain.stdout.readline()  # "Serving HTTP on 127.0.0.1 port NNNN ..."
        port = int(line.split(" port ")[1].split()[0])
        plain_url = f"http://127.0.0.1:{port}/"
        for _ in range(100):
            try:
                urllib.request.urlopen(plain_url, timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, args=ARGS)
                results = {
                    "dumpgym serve (gzip)": measure(browser, serve.url_of(gym), args.runs),
                    "python -m http.server (raw)": measure(browser, plain_url, args.runs),
                }
                baseline = measure(browser, serve.url_of(gym) + "baseline.html", args.runs, ready="p")
                browser.close()
        finally:
            plain.terminate()
            gym.shutdown()

    print(f"\nmedians of {args.runs} loads at 1280x900:")
    print(f"{'server':30} {'first paint':>11} {'wired':>8} {'files':>6} {'transferred':>12} {'listing text':>13} {'ratio':>6}")
    for name, r in results.items():
        print(f"{name:30} {r['fcp']:9.0f}ms {r['ready']:6.0f}ms {r['files']:6.0f} {r['transfer']:12,.0f} "
              f"{text:13,.0f} {r['transfer'] / text:5.2f}x")
    gz = results["dumpgym serve (gzip)"]
    print(f"a one-line page on the same server, same run: first paint {baseline['fcp']:.0f} ms "
          f"(the gym's is {gz['fcp'] / baseline['fcp']:.1f}x that; absolute times move with the machine's load)")
    print(f"\na first visit decodes to {gz['decoded']:,.0f} bytes; the listings ({text:,.0f} chars) come as programs near the screen")
    if not args.no_stack:
        stack = stack_program()
        data = {**corpus, "programs": [corpus["programs"][0], stack]}
        big = serve.make_server(serve.Site(site.render_site(data, {"schema": "dumpgym.drills/1", "items": []})),
                                "127.0.0.1", 0)
        threading.Thread(target=big.serve_forever, daemon=True).start()
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=ARGS)
            runs = []
            for _ in range(args.runs):
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(serve.url_of(big))
                page.wait_for_selector("html[data-ready]")
                page.wait_for_load_state("networkidle")
                page.wait_for_timeout(500)  # a learner picks a program after the page has settled
                runs.append(page.evaluate(XRAY, "stack"))
                page.close()
            browser.close()
        big.shutdown()
        x = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"\nx-ray on the 24-layer stack ({len(stack['eqns']):,} equations, {x['jaxpr']:,} jaxpr + "
              f"{x['stablehlo']:,} StableHLO + {x['hlo']:,} compiled HLO lines, {x['fusions']:,} fusions): "
              f"choosing it {x['load']:.0f} ms, one hover {x['hover'] * 1000:.0f} µs (median of {args.runs}; "
              f"a hover lights its group in all three columns and scrolls the other two)")

    ok_paint = gz["fcp"] <= 300
    ok_weight = gz["transfer"] <= 1.5 * text
    print(f"targets: first paint <= 300 ms: {'met' if ok_paint else 'MISSED'} ({gz['fcp']:.0f} ms); "
          f"weight <= 1.5x listing text: {'met' if ok_weight else 'MISSED'} ({gz['transfer'] / text:.2f}x, compressed transfer)")
    return 0 if ok_paint and ok_weight else 1


if __name__ == "__main__":
    raise SystemExit(main())
