"""Browser fixtures: the gym built as static files, served by `python -m http.server`, driven by Chromium.

Chromium is Debian's (`apt-get install chromium`), never a Playwright download. Without it the
browser tests skip on a workstation and fail under CI, where skipping would hide them.
"""
from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

from dumpgym.site import build

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
    # The pages of a site share one renderer process (per context): with `fresh_page`'s keeper open,
    # each test's page joins a running process instead of starting its own.
    "--process-per-site",
]
# The options of the `page` fixture's context: a test that opens a desktop page of its own passes them too,
# so that its page shares that context (and its renderer process and HTTP cache) instead of starting one.
DESKTOP = {"viewport": {"width": 1280, "height": 900}, "accept_downloads": True}
# A program whose user-given words try to become markup: the page must show them as text.
HOSTILE_TITLE = '<img src=x id=pwned> & "quotes" </script>'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def gym_data(corpus):
    """The built-in corpus plus one hostile added program, and its drill pool."""
    from dumpgym.drills import build_pool

    data = copy.deepcopy(corpus)
    evil = copy.deepcopy(next(p for p in data["programs"] if p["slug"] == "rmsnorm"))
    # An added program whose x-ray has not been computed and that was added without `--hlo`:
    # the page must still show it, dimmed, in two columns.
    evil.update(slug="evil", title=HOSTILE_TITLE, lesson="</p><b>not bold</b> & <script>alert(1)</script>",
                xray=[], lowered_to_nothing=[],
                xray_stats={**evil["xray_stats"], "mapped_equations": 0, "mapped_jaxpr_lines": 0,
                            "mapped_stablehlo_op_lines": 0})
    evil["compiled"] = {}  # no compiled layer for any target
    data["programs"].append(evil)
    return data, build_pool(data)


def built_once(tmp_path_factory, name: str, build_into):
    """The directory `name`, filled by `build_into(directory)` once per test run: under pytest-xdist the
    first worker to ask builds it while the others wait, then all serve the same files."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # this run's directory, shared by its workers
    out, done = root / name, root / f"{name}.built"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            build_into(out)
            done.touch()
    return out


@pytest.fixture(scope="session")
def built_once_dir(tmp_path_factory):
    """`built_once`, for tests that build a site of their own."""
    return lambda name, build_into: built_once(tmp_path_factory, name, build_into)


@pytest.fixture(scope="session")
def site_dir(tmp_path_factory, request):
    """The gym written by `build_site`."""
    return built_once(tmp_path_factory, "site", lambda out: build.build_site(out, *request.getfixturevalue("gym_data")))


@contextlib.contextmanager
def http_server(directory):
    """`python -m http.server` on a free localhost port serving `directory`; yields its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(directory)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 15
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("python -m http.server did not start")
            time.sleep(0.05)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def serve_pool(built_once_dir):
    """`serve_pool(name, corpus, pool)`: a context manager that builds the gym of that corpus and pool once
    per run (under `name`) and yields the URL it is served at."""
    @contextlib.contextmanager
    def serve(name, corpus, pool):
        out = built_once_dir(name, lambda out: build.build_site(out, corpus, pool))
        with http_server(out) as url:
            yield url
    return serve


@pytest.fixture(scope="session")
def serve_directory():
    """`http_server`, for tests that build a site of their own."""
    return http_server


@pytest.fixture(scope="session")
def hostile_title():
    """The title of the added program whose words try to become markup."""
    return HOSTILE_TITLE


@pytest.fixture(scope="session")
def base_url(site_dir):
    """The static build served by the standard library's `http.server`."""
    with http_server(site_dir) as url:
        yield url


@pytest.fixture(scope="session")
def fetch_json(base_url):
    """GET a JSON file of the served site, as the page would. The site does not change while the tests
    run: each file is fetched once, and parsed anew on every call (a test may change what it gets)."""
    fetched: dict[str, bytes] = {}

    def fetch(rel: str):
        if rel not in fetched:
            with urllib.request.urlopen(base_url + rel, timeout=5) as r:
                fetched[rel] = r.read()
        if rel == "drills.json":  # packed, as `dumpgym drills` prints it
            from dumpgym.drills import read_pool

            return read_pool(json.loads(fetched[rel]))
        return json.loads(fetched[rel])
    return fetch


@pytest.fixture(scope="session")
def browser():
    """Debian's chromium under Playwright."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        message = "chromium is not installed: run `apt-get install -y chromium` (never `playwright install`)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield b
        b.close()


class Console:
    """Console errors and uncaught exceptions of one page, until `detach`."""

    def __init__(self, page):
        self.errors: list[str] = []
        self.uncaught: list[str] = []  # the uncaught exceptions alone
        self.page = page
        self.handlers = {
            "console": lambda m: m.type == "error" and self.errors.append(m.text),
            "pageerror": lambda e: (self.errors.append(f"uncaught: {e}"), self.uncaught.append(str(e))),
            "dialog": lambda d: (self.errors.append(f"dialog: {d.message}"), d.dismiss()),
        }
        for event, handler in self.handlers.items():
            page.on(event, handler)

    def detach(self) -> None:
        for event, handler in self.handlers.items():
            self.page.remove_listener(event, handler)


# Storage a page of a kept context starts without: every kind the browser keeps for an origin. The HTTP
# cache is not storage: it stays, so each test's page load revalidates or reuses the files instead of
# fetching every one of them anew.
STORAGE_TYPES = "all"


@pytest.fixture(scope="session")
def kept_context(browser):
    """`kept_context(**options)`: one browser context per set of options, kept for the session (so its
    HTTP cache is too). Only `fresh_page` opens pages in it, one test at a time."""
    made = {}

    def get(**options):
        key = repr(sorted(options.items()))
        if key not in made:
            made[key] = browser.new_context(**options)
        return made[key]

    yield get
    for context in made.values():
        context.close()


def origin_of(url: str) -> str:
    scheme, _, host = url.split("/")[:3]
    return f"{scheme}//{host}"


# Read by `fresh_page`: what localStorage held when the page's first document started, before its scripts.
STORAGE_AT_START = "window.__storageAtStart = Object.keys(localStorage);"


# What a test may do to its page that would outlast the next navigation: such a page is closed after
# the test instead of being kept as the context's tab (`_new_tab` wraps these to mark the tab when called).
LASTING_CHANGES = ("add_init_script", "set_viewport_size", "emulate_media", "route", "route_from_har",
                   "expose_function", "expose_binding", "set_extra_http_headers", "set_default_timeout",
                   "set_default_navigation_timeout")


def _new_tab(context):
    """A page of `context` that `fresh_page` may reuse from test to test, until a test changes it."""
    tab = context.new_page()
    tab.add_init_script(STORAGE_AT_START)
    for name in LASTING_CHANGES:
        method = getattr(tab, name)

        def changed(*args, _method=method, **kwargs):
            tab.__dict__["changed"] = True
            return _method(*args, **kwargs)
        setattr(tab, name, changed)
    return tab


def fresh_page(context, url: str):
    """A page of `context` on `url`, once the page has wired itself, as if in a context of its own:
    every other page of the context is closed and the origin's storage is cleared before it loads, so it
    starts with empty localStorage. Its `console` collects errors.

    The page is the context's tab, kept from the last test unless that test changed it (see
    `LASTING_CHANGES`): a new tab costs Chromium about 40% more than a navigation of a kept one. The
    tab leaves its last document for about:blank first, so that no script of it runs once the storage
    is cleared, and the mouse is moved back to where a new tab has it (the app keeps no sessionStorage,
    the one kind of storage a new tab would have empty and a kept one not)."""
    close_pages(context)
    keepers = context.__dict__.setdefault("keepers", {})
    if origin_of(url) not in keepers:
        # A document of the site that runs no script, left open behind the test's pages: it keeps the
        # site's renderer process running between tests (see --process-per-site).
        keepers[origin_of(url)] = keeper = context.new_page()
        keeper.goto(urllib.parse.urljoin(url, "static/icon.svg"))
    pg = context.__dict__.get("tab")
    if pg is None:
        pg = context.__dict__["tab"] = _new_tab(context)
    else:
        pg.console.detach()
        pg.mouse.move(0, 0)
        pg.goto("about:blank")
    # In front: a keeper opened since would leave the tab hidden, where animation frames (which
    # Playwright waits on before it clicks) are throttled.
    pg.bring_to_front()
    pg.console = Console(pg)
    cdp = context.new_cdp_session(pg)
    cdp.send("Storage.clearDataForOrigin", {"origin": origin_of(url), "storageTypes": STORAGE_TYPES})
    cdp.detach()
    pg.goto(url)
    pg.wait_for_selector("html[data-ready]")
    leftover = pg.evaluate("window.__storageAtStart")
    assert leftover == [], f"the page started with another test's localStorage: {leftover}"
    return pg


def close_pages(context) -> None:
    """Close every page of a kept context but its keepers and its tab (the tab too, once a test has
    changed it in a way that would outlast a navigation)."""
    keepers = context.__dict__.get("keepers", {}).values()
    tab = context.__dict__.get("tab")
    if tab is not None and (tab.__dict__.get("changed") or tab.is_closed()):
        context.__dict__.pop("tab")
        tab = None
    for pg in context.pages:
        if not any(pg is k for k in keepers) and pg is not tab:
            pg.close()


@pytest.fixture(scope="session")
def open_fresh(kept_context):
    """`open_fresh(url, **context_options)`: `fresh_page` on `url` in the kept context of those options.
    Close it with `close_pages(page.context)`."""
    return lambda url, **options: fresh_page(kept_context(**options), url)


@contextlib.contextmanager
def checked_page(context, url: str):
    """`fresh_page(context, url)` for the block; afterwards its pages are closed and any console error fails."""
    pg = fresh_page(context, url)
    yield pg
    close_pages(context)
    assert pg.console.errors == [], f"console errors: {pg.console.errors}"


@pytest.fixture(scope="session")
def checked_on(kept_context):
    """`checked_on(url, **context_options)`: `checked_page` on `url` in the kept context of those options
    (the desktop's by default)."""
    return lambda url, **options: checked_page(kept_context(**(options or DESKTOP)), url)


@pytest.fixture
def page(kept_context, base_url):
    """A fresh page (its own localStorage) on the gym; the test fails on any console error."""
    with checked_page(kept_context(**DESKTOP), base_url) as pg:
        yield pg


def _other_value(form: dict) -> str:
    """A value of a typed form's spelling that is not its answer (for answering wrongly on purpose)."""
    value = form["value"]
    if form["spelling"] == "int":
        return str(int(value) + 1)
    if form["spelling"] == "dtype":
        return "f32" if value != "f32" else "bf16"
    return value.replace("[", "[7,", 1) if "[" in value else "(7," + value[1:]


class Gym:
    """Drive the drills the way a learner would, knowing answers only from the served drills JSON."""

    def __init__(self, page, fetch_json):
        self.page = page
        self.fetch_json = fetch_json

    def open(self, kind: str) -> None:
        self.page.click(f"#tab-{kind}")
        self.page.wait_for_selector(f"#drill-{kind}[data-state=asking]")

    def item(self, kind: str) -> dict:
        """The drill item on screen, looked up in its JSON split by the panel's item id, as the drill tests
        read an item (`pool_checks.readable`: `shown` is its context as Python resolves it)."""
        from pool_checks import readable

        from dumpgym.record.schema import ProgramRecord

        _, slug, index = self.page.get_attribute(f"#drill-{kind}", "data-item").split("/")
        item = self.fetch_json(f"data/drills/{kind}/{slug}.json")["items"][int(index)]
        # A block may show another program's listing (a change's partner): its record is fetched too.
        others = {block["program"]: ProgramRecord.from_json(self.fetch_json(f"data/programs/{block['program']}.json"))
                  for block in item["context"] if "program" in block}
        # `answer_form`: the answer form as the pool has it, beside the fields `readable` spreads out.
        return {**readable(item, self.fetch_json(f"data/programs/{slug}.json"), others), "answer_form": item["answer"]}

    def options(self, kind: str) -> list[str]:
        """The options on screen, in the order shown (a re-asked question shows them in a new order)."""
        return self.page.locator(f"#drill-{kind} [data-opt] code").all_inner_texts()

    def answer(self, kind: str, right: bool = True, keys: bool = False) -> dict:
        """Answer the question on screen, rightly or not, by click or by digit key; returns the item."""
        item = self.item(kind)
        panel = self.page.locator(f"#drill-{kind}")
        if "options" in item:
            index = item["answer"] if right else next(i for i in range(len(item["options"])) if i != item["answer"])
            if keys:  # the key of the option's place on screen
                self.page.keyboard.press(str(self.options(kind).index(str(item["options"][index])) + 1))
            else:
                text = item["options"][index]
                panel.get_by_role("button", name=text if isinstance(text, str) else json.dumps(text), exact=True).click()
        elif item["answer_form"]["form"] == "typed":
            form = item["answer_form"]
            wrong = next(iter(form.get("misread", {})), None) or _other_value(form)
            panel.locator("[data-typed-input]").fill(form["value"] if right else wrong)
            panel.locator("[data-typed-input]").press("Enter")
        elif item["answer_form"]["form"] == "axes":
            form = item["answer_form"]
            want = set(form["axes"]) if right else set(form["axes"]) ^ {0}
            for axis in sorted(want):
                panel.locator(f"[data-axis='{axis}']").click()
            panel.locator("[data-submit]").click()
        elif item["answer_form"]["form"] == "lines":
            want = set(item["answer_form"]["lines"])
            if not right:  # one row too many (or, if every row is in the set, one too few)
                rows = panel.locator("[data-pick] [data-line]").count()
                more = next((n for n in range(1, rows + 1) if n not in want), None)
                want = want | {more} if more else want - {min(want)}
            for line in sorted(want):
                panel.locator(f"[data-pick] [data-line='{line}']").click()
            panel.locator("[data-submit]").click()
        else:
            lines = panel.locator("[data-pick] [data-line]").count()
            accepted = set(item.get("accepted_lines") or [item["answer_line"]])
            line = item["answer_line"] if right else next(n for n in range(1, lines + 1) if n not in accepted)
            panel.locator(f"[data-pick] [data-line='{line}']").click()
        self.page.wait_for_selector(f"#drill-{kind}[data-state=answered]")
        return item

    def next(self, kind: str, key: str = "Enter") -> None:
        self.page.keyboard.press(key)
        self.page.wait_for_selector(f"#drill-{kind}[data-state=asking]")

    def streak(self, kind: str) -> tuple[int, int]:
        panel = self.page.locator(f"#drill-{kind}")
        return (int(panel.locator("[data-streak-current]").inner_text()),
                int(panel.locator("[data-streak-best]").inner_text()))


@pytest.fixture
def gym(page, fetch_json):
    """A `Gym` driver on the page."""
    return Gym(page, fetch_json)
