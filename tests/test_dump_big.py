"""A dump's module too big to make a program of, shown streamed by `open`: made cheaply from a real dump made
here (its optimised HLO's computations repeated until the file is megabytes, `BIG_FILE` lowered to below it),
its page's windows checked against the file's own lines, its counts against XLA's parser of the module
dumped, and the gym checked to answer while the module's line index is held unmade. The line index of a file
with CR LF endings, blank lines, a line longer than a chunk and no last newline is checked against Python's
own split of it, at several chunk sizes; JAX's files kept once per text against their bytes."""
import html
from array import array
import re
import shutil
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter

import pytest

from dump_programs import dump_script
from dumpgym import cli

# A scope whose name needs escaping on a page, carried by the instructions into the dump's op_names.
SCRIPT = r'''
import jax, jax.numpy as jnp

@jax.jit
def step(w, x):
    with jax.named_scope('<i>&"'):
        h = jnp.tanh(x @ w)
    return (h * 2).sum(axis=0), jnp.exp(h) + 1

step(jnp.ones((8, 16)), jnp.ones((4, 8)))
'''
REPEATS = 1200
WINDOW, CUT = 50, 120


def _blocks(text: str) -> tuple[str, list[tuple[str, list[str]]]]:
    """The head of an HLO text (up to its first computation) and its computations, each (header name, lines)."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(("%", "ENTRY ")))
    blocks, current = [], None
    for line in lines[first:]:
        if line.startswith(("%", "ENTRY ")):
            current = (line.split(" (", 1)[0].removeprefix("ENTRY ").lstrip("%"), [line])
            blocks.append(current)
        elif current is not None and line:
            current[1].append(line)
    return "\n".join(lines[:first]), blocks


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """(folder, the big optimised HLO's path, its lines, {computation: header line}, the module's real text)."""
    root = tmp_path_factory.mktemp("big")
    dump_script(SCRIPT, None, root / "real")
    folder = root / "dump"
    shutil.copytree(root / "real", folder)
    path = next(folder.glob("module_*.jit_step.cpu_after_optimizations.txt"))
    real = path.read_text()
    head, blocks = _blocks(real)
    # Every computation but the ENTRY repeated, renamed in its header (the listing as a big model's reads: many
    # fusions), then the ENTRY: written as XLA lays a module out, a blank line after each computation.
    out, headers = [*head.split("\n"), ""], {}
    for k in range(REPEATS):
        for name, block in blocks[:-1]:
            headers[f"{name}.r{k}"] = len(out) + 1
            out += [block[0].replace(f"%{name} ", f"%{name}.r{k} ", 1), *block[1:], ""]
    headers[blocks[-1][0]] = len(out) + 1
    out += [*blocks[-1][1], ""]
    path.write_text("\n".join(out))
    assert path.stat().st_size > 2_000_000
    return folder, path, "\n".join(out).split("\n")[:-1], headers, real


def _opcodes(text: str, spelled) -> tuple[Counter, Counter]:
    """XLA's own count of a module's instructions by opcode, (its ENTRY's, the other computations'): each opcode
    of XLA's parser spelled as XLA's printer prints that instruction (the one of `spelled` it prints before its
    operands)."""
    from jaxlib import _hlo

    module = _hlo.hlo_module_from_text(text)
    entry, others = Counter(), Counter()
    computations = list(module.computations())
    for c in computations:
        for instruction in c.instructions():
            printed = instruction.to_string().split(" = ", 1)[1]
            (name,) = {s for s in spelled if f" {s}(" in printed.split("), ", 1)[0] + ")"}
            (entry if c is computations[-1] else others)[name] += 1
    return entry, others


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            return r.status, r.read().decode("utf-8")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8")


def _listing(page: str) -> list[tuple[int, str, int]]:
    """(number, text, bytes left out) of each line of a window's listing, as the page shows it."""
    body = page.split("data-listing>", 1)[1].split("</pre>", 1)[0]
    rows = []
    for m in re.finditer(r'<span class="l" id="L(\d+)"><span class="n"[^>]*>\d+</span>(.*?)</span>(?=<span class="l"|$)', body):
        text, cut = m.group(2), 0
        if '<span class="cut">' in text:
            text, tail = text.split(' <span class="cut">', 1)
            cut = int(re.search(r"… ([\d,]+) more bytes", tail).group(1).replace(",", ""))
        rows.append((int(m.group(1)), html.unescape(text), cut))
    return rows


def test_open_shows_a_big_module_streamed_and_its_windows_are_the_files_lines(big, tmp_path, monkeypatch):
    from dumpgym.ir import parse
    from dumpgym.serve import server as serve
    from dumpgym.serve.big import BigModules

    folder, path, lines, headers, real = big
    monkeypatch.setattr(parse, "BIG_FILE", path.stat().st_size // 2)
    served = []
    monkeypatch.setattr(serve, "serve", lambda **kwargs: served.append(kwargs))
    assert cli.main(["open", str(folder), "--corpus", str(tmp_path / "corpus")]) == 0
    streamed = served[0]["big"]
    (slug,) = streamed.indexes
    assert served[0]["start"] == f"big/{slug}.html"  # `open` lands on it: the biggest module
    assert "dump-" + slug not in {r.slug for r in served[0]["shown"]}
    streamed.close()  # the pass `open` started; made again here, held
    # The index's pass held once its process has started (the hook tests hold it with): the gym answers meanwhile.
    streamed = BigModules([i.module for i in streamed.indexes.values()], streamed.indexer, WINDOW, CUT,
                          gate=threading.Event())
    site, _ = serve.Site.start(tmp_path / "corpus", big=streamed.links())
    server = serve.make_server(site, port=0)
    server.big = streamed
    streamed.start()
    streamed.listen()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = serve.url_of(server)
    try:
        status, index = _get(url)
        assert status == 200 and f'<a href="big/{slug}.html"><bdi>jit_step</bdi></a>' in index
        status, page = _get(f"{url}big/{slug}.html")
        assert status == 200 and "The line index is being made" in page
        assert [(n, text) for n, text, _ in _listing(page)] == [(n, lines[n - 1][:CUT]) for n in range(1, WINDOW + 1)]
        status, later = _get(f"{url}big/{slug}.html?line=500")
        assert status == 200 and "This window is past the lines indexed so far" in later and "data-listing" not in later
        assert _get(url)[0] == 200 and _get(url + "corpus.json")[0] == 200  # still, with the pass held
        streamed.gate.set()
        deadline = time.monotonic() + 120
        while "The line index is being made" in page and time.monotonic() < deadline:
            time.sleep(0.2)
            page = _get(f"{url}big/{slug}.html")[1]
        # Every window is the file's own lines, numbered as the file numbers them; a long line cut, saying how
        # many bytes are left out.
        assert f"Shown: lines 1–{WINDOW} of {len(lines):,}" in page
        for first in (1, 2, WINDOW + 1, len(lines) - 7):
            rows = _listing(_get(f"{url}big/{slug}.html?line={first}")[1])
            assert [n for n, _, _ in rows] == list(range(first, min(first + WINDOW, len(lines) + 1)))
            for n, text, left_out in rows:
                raw = lines[n - 1].encode()
                assert (text.encode(), left_out) == (raw[:CUT], max(len(raw) - CUT, 0)), n
        # Going to a computation lands on its header; to a line that is not there, says so.
        name = next(n for n in headers if n.endswith(".r123"))
        rows = _listing(_get(f"{url}big/{slug}.html?computation={name}")[1])
        assert rows[0][0] == headers[name] and rows[0][1].startswith(f"%{name} (")
        status, page = _get(f"{url}big/{slug}.html?line={len(lines) + 1}")
        assert status == 404 and "is not a line of it" in page
        status, page = _get(f"{url}big/{slug}.html?computation=%3Cscript%3E")
        assert status == 404 and "no computation is named &#39;&lt;script&gt;&#39;" in page and "<script>" not in page
        # Escaped: the scope's `<i>&"` reaches the page as text.
        scoped = next(n for n, line in enumerate(lines, 1) if '<i>&\\"' in line)
        page = _get(f"{url}big/{slug}.html?line={scoped}")[1]
        assert "&lt;i&gt;&amp;" in page and "<i>" not in page
        # A link kept from the module's old page (`dump/SLUG.html`) leads here.
        status, page = _get(f"{url}dump/{slug}.html")
        assert status == 200 and f"Shown: lines 1–{WINDOW} of {len(lines):,}" in page
        # What the pass counted is what XLA's parser counts in the module dumped, its computations repeated.
        page = _get(f"{url}big/{slug}.html")[1]
        shown = {op: int(n.replace(",", "")) for op, n in
                 re.findall(r'<tr><td>([a-z0-9-]+)</td><td class="right">([\d,]+)</td></tr>', page)}
        entry, others = _opcodes(real, shown)
        assert shown == {op: entry[op] + others[op] * REPEATS for op in entry | others}
        entry_name = list(headers)[-1]
        assert f'<a href="?line={headers[entry_name]}"><bdi>{entry_name}</bdi></a> (ENTRY)' in page
        assert f"Computations: {len(headers):,}" in page
        # The ENTRY's parameters: as many as XLA's parser finds there, numbered as it numbers them.
        assert len(re.findall(r'<tr><td class="right">(\d+)</td><td><a href="\?line=', page)) == entry["parameter"]
    finally:
        server.shutdown()
        server.server_close()


def test_a_window_shows_controls_and_bidi_overrides_as_code_points_and_cuts_on_a_character(big):
    from dumpgym.site.big_page import Window, listing_html

    _, _, lines, _, _ = big
    line = lines[-3]  # an instruction of the real ENTRY
    raw = (line[:10] + "\u202e<b>" + line[10:]).encode()
    cut = len(line[:10].encode()) + 4  # inside the override's three bytes, after one of them
    markup, n_cut = listing_html(Window(first=7, lines=((raw[:cut - 2], len(raw) - cut + 2), (b"\x1b[2J", 0)),
                                        total=None, size=0))
    assert n_cut == 1 and "\u202e" not in markup and "\x1b" not in markup
    # The character the cut split is left out whole, and counted with what is left out.
    assert f'<span class="cut">… {len(raw) - len(line[:10].encode()):,} more bytes' in markup and "\ufffd" not in markup
    whole, _ = listing_html(Window(first=1, lines=((raw, 0),), total=1, size=len(raw)))
    assert 'title="U+202E, shown, not obeyed">U+202E</span>&lt;b&gt;' in whole
    assert ">U+001B</span>[2J" in markup


def test_the_index_process_is_a_fresh_interpreter_and_says_what_it_read(big):
    import json
    import subprocess

    from dumpgym.record.streamed import StreamedHlo

    _, path, lines, headers, _ = big
    run = subprocess.run([sys.executable, "-m", "dumpgym.ir.hlo_index", str(path)], capture_output=True, timeout=120)
    assert run.returncode == 0
    out, offsets, facts = run.stdout, b"", None
    while out:
        head, out = out.split(b"\n", 1)
        kind, *numbers = head.split()
        body, out = out[:int(numbers[-1])], out[int(numbers[-1]):]
        if kind == b"D":
            facts = StreamedHlo.from_json(json.loads(body))
        else:  # P (bytes read, offsets found since) or O (the offsets left)
            offsets += body
    assert facts.lines == len(lines) and facts.size == path.stat().st_size
    assert [(c.name, c.line) for c in facts.computations] == list(headers.items())
    # The offsets are where each line starts, the file's size last.
    text = path.read_bytes()
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == 10]
    assert array("Q", offsets).tolist() == starts
    assert len(offsets) == 8 * (len(lines) + 1) == facts.index_bytes


def test_while_the_index_is_made_the_lines_it_reached_are_served_and_no_more(big):
    """The server serves every line the pass has indexed (its offsets arrive as found), says where it is for a
    line past them, and leaves the computations to the end; the lines are the file's own."""
    from dumpgym.serve.big import BigModule, BigModules

    _, path, lines, headers, _ = big
    streamed = BigModules([BigModule("jit-step", "jit_step", path, "a test")], ["unused"], WINDOW, CUT)
    index = streamed.indexes["jit-step"]
    text = path.read_bytes()
    reached = 3 * WINDOW + 5
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == 10][:reached]
    index.offsets, index.state, index.read, index.lines = array("Q", starts), "reading", starts[-1], reached
    status, _, body = streamed.answer(f"/big/jit-step.html?line={3 * WINDOW}")  # a window the pass cut short
    page = body.decode()
    rows = _listing(page)
    assert status == 200 and [n for n, _, _ in rows] == list(range(3 * WINDOW, reached + 1))
    assert all(text_ == lines[n - 1][:CUT] for n, text_, _ in rows)
    assert f"{reached:,} lines so far" in page and " of " not in page.split("Shown: ", 1)[1].split(";", 1)[0]
    assert streamed.answer("/big/jit-step.html?" + "&".join(f"line={n}" for n in range(9)))[0] == 400
    assert streamed.answer("/big/jit-step.html?line=-3")[0] == 404
    status, _, body = streamed.answer(f"/big/jit-step.html?line={reached + 1}")
    assert status == 200 and "This window is past the lines indexed so far" in body.decode()
    assert "data-listing" not in body.decode()
    name = next(iter(headers))
    status, _, body = streamed.answer(f"/big/jit-step.html?computation={name}")
    assert status == 200 and "the computations are found when the line index is made" in body.decode()


def _edge_file(real: str, long_bytes: int) -> tuple[bytes, str]:
    """The module's text written as a line index must still take it: CR LF line endings, a blank line more
    after each computation, one instruction's `op_name` made `long_bytes` longer (a line longer than a chunk)
    and no newline after the last line. Returns the bytes and the same module with plain newlines (what
    XLA's parser is given)."""
    lines = real.split("\n")
    at = next(i for i, line in enumerate(lines) if 'op_name="' in line and line.startswith("  "))
    lines[at] = lines[at].replace('op_name="', 'op_name="' + "x" * long_bytes, 1)
    spaced = []
    for line in lines:
        spaced.append(line)
        if line == "}":
            spaced.append("")
    text = "\n".join(spaced).rstrip("\n")
    return text.replace("\n", "\r\n").encode(), text


@pytest.mark.parametrize("chunk", [7, 4096, None])
def test_the_line_index_is_the_files_own_lines_and_the_counts_xlas(big, tmp_path, chunk):
    """The pass over a file with CR LF endings, blank lines, a line longer than its chunk and no last newline:
    its offsets are where Python's own split of the file starts each line, its counts what XLA's parser
    counts of the module, its computations the headers read from the text, its ENTRY's parameters XLA's."""
    from jaxlib import _hlo

    from dumpgym.ir.hlo_index import CHUNK, index_hlo
    from dumpgym.serve.big import _head_window, _indexed_window

    _, _, _, _, real = big
    data, text = _edge_file(real, 3 * (chunk or CHUNK))
    path = tmp_path / "module.txt"
    path.write_bytes(data)
    facts, offsets = index_hlo(path, chunk=chunk or CHUNK)
    pieces = data.splitlines(keepends=True)
    starts = [0]
    for piece in pieces:
        starts.append(starts[-1] + len(piece))
    assert offsets.tolist() == starts and facts.lines == len(pieces) and facts.size == len(data)
    assert facts.longest_line == max(map(len, pieces)) > (chunk or CHUNK)
    # Counts: XLA's parser of the same module.
    module = _hlo.hlo_module_from_text(text)
    computations = list(module.computations())
    spelled = {op for op, _ in facts.opcodes} | {"parameter"}
    entry, others = _opcodes(text, spelled)
    assert dict(facts.opcodes) == dict(entry + others) and facts.unread == 0
    assert sorted(c.instructions for c in facts.computations) == sorted(len(list(c.instructions())) for c in computations)
    # Computations: each header as the text numbers its lines.
    lines = data.decode().split("\r\n")
    headers = [(line.split(" ", 1)[0].removeprefix("%"), n) for n, line in enumerate(lines, 1) if line.startswith("%")]
    headers += [(line.split(" ", 2)[1].removeprefix("%"), n) for n, line in enumerate(lines, 1) if line.startswith("ENTRY ")]
    assert [(c.name, c.line) for c in facts.computations] == headers
    assert [c.entry for c in facts.computations] == [False] * (len(headers) - 1) + [True]
    # The ENTRY's parameters: XLA's, numbered as it numbers them.
    params = [i.to_string() for i in computations[-1].instructions() if " parameter(" in i.to_string()]
    assert [(p.number, p.name) for p in facts.parameters] == sorted(
        (int(s.split(" parameter(", 1)[1].split(")", 1)[0]), s.split(" = ", 1)[0].split()[-1].lstrip("%")) for s in params)
    assert all(lines[p.line - 1].lstrip().startswith(f"%{p.name} = ") for p in facts.parameters)
    # Windows, from the index and from the head: the lines Python reads from the file, each cut at CUT bytes.
    with open(path, encoding="utf-8") as f:
        read = [line.removesuffix("\n") for line in f]
    for first in (1, 2, len(read) - 3):
        window = _indexed_window(path, offsets, first, WINDOW, CUT)
        expected = [line.encode() for line in read[first - 1:first - 1 + WINDOW]]
        assert window.lines == tuple((raw[:CUT], max(len(raw) - CUT, 0)) for raw in expected)
    head = _head_window(path, len(read) + 5, CUT, budget=len(data) + 1)  # a budget of the whole file
    assert head.total == len(read) and head.lines == tuple(
        (raw[:CUT], max(len(raw) - CUT, 0)) for raw in (line.encode() for line in read))


REPEATED = r'''
import jax, jax.numpy as jnp
# Both functions named f are defined on lines of two digits: their StableHLO's locations are as long.
#
#
#
#
#
#
jax.jit(lambda x: jnp.cos(x))(jnp.ones(2))  # a function traced once

def f(x):
    return jnp.sin(x) * 2.0
jax.jit(f)(jnp.ones(3))
jax.clear_caches()
jax.jit(f)(jnp.ones(3))  # the same text again

def f(x):
    return jnp.sin(x) * 3.0
jax.jit(f)(jnp.ones(3))  # a text of the same size, not the same
'''


def test_jaxs_files_are_one_entry_per_distinct_text_hashing_only_those_that_may_repeat(tmp_path, monkeypatch):
    """A function traced twice to the same text is one entry repeated once; one of the same size and another
    text is its own (a file is hashed only where another of its name has its size: those are): checked
    against the files' own bytes. A file alone of its size is not hashed."""
    from dumpgym.dumps import folder as reader

    dump_script(REPEATED, tmp_path, None)
    hashed = []
    real_digest = reader._digest
    monkeypatch.setattr(reader, "_digest", lambda path: hashed.append(path.name) or real_digest(path))
    for pattern, form in ((reader._JAXPR_FILE, "jaxpr"), (reader._MLIR_FILE, "mlir")):
        paths = sorted(p for p in tmp_path.iterdir() if pattern.fullmatch(p.name))
        entries = [reader._Ir(int(pattern.fullmatch(p.name).group(1)), pattern.fullmatch(p.name).group(2), p, "")
                   for p in paths]
        kept = reader._newest(entries)
        texts = {}
        for p in paths:  # by number: the newest of each text kept, the older counted
            texts.setdefault((pattern.fullmatch(p.name).group(2), p.read_bytes()), []).append(p)
        assert sorted((e.path.name, e.repeats) for e in kept) == sorted(
            (max(ps, key=lambda p: int(pattern.fullmatch(p.name).group(1))).name, len(ps) - 1) for ps in texts.values()), form
        named_f = [p for p in paths if pattern.fullmatch(p.name).group(2).endswith("f")]
        assert len(named_f) == 3 and len({p.stat().st_size for p in named_f}) == 1, form  # all three the same size
        assert len({p.read_bytes() for p in named_f}) >= 2, form  # of one size, not all one text
        assert form == "mlir" or any(len(ps) > 1 for ps in texts.values())  # a jaxpr repeated
        alone = [p.name for p in paths if sum(q.stat().st_size == p.stat().st_size
                                                and pattern.fullmatch(q.name).group(2) == pattern.fullmatch(p.name).group(2) for q in paths) == 1]
        assert alone and not set(alone) & set(hashed), form


def test_the_first_window_read_before_the_index_reads_no_further_than_its_budget(big, tmp_path):
    """Before the line index is made, the first window reads at most its budget of the file's head: the lines
    that end within it are the file's own, the line the budget ends within is shown cut and says its length is
    not known yet (not read through: a constant of 300 MB on one line), and the window ends there."""
    from dumpgym.serve.big import _head_window
    from dumpgym.site.big_page import listing_html

    _, _, _, _, real = big
    data, _ = _edge_file(real, 50_000)
    path = tmp_path / "module.txt"
    path.write_bytes(data)
    with open(path, encoding="utf-8") as f:
        read = [line.removesuffix("\n") for line in f]
    long = next(n for n, line in enumerate(read) if len(line) > 50_000)
    budget = sum(len(line.encode()) + 2 for line in read[:long]) + 1_000  # within the long line
    window = _head_window(path, len(read), CUT, budget=budget)
    assert window.total is None and len(window.lines) == long + 1
    assert window.lines[:long] == tuple((raw[:CUT], max(len(raw) - CUT, 0)) for raw in (line.encode() for line in read[:long]))
    assert window.lines[long] == (read[long].encode()[:CUT], None)
    markup, cut = listing_html(window)
    assert "how many bytes: once the line index is made" in markup and cut == 1 + sum(len(line.encode()) > CUT for line in read[:long])


# A loop carrying a tuple (tuple-typed instructions: `parameter`, `tuple`, `while`), `get-tuple-element` and
# `dynamic-update-slice` (opcodes longer than two and three 8-byte words), a dict argument (its parameters'
# op_names carry escaped quotes) and several outputs.
LOOPED = r'''
import jax, jax.numpy as jnp

@jax.jit
def loop(params, x):
    def body(i, carry):
        h, acc = carry
        h = jnp.tanh(h @ params["w"]) + params["b"]
        return h, jax.lax.dynamic_update_slice(acc, h[:1], (i, 0))
    h, acc = jax.lax.fori_loop(0, 3, body, (x, jnp.zeros((3, 8))))
    return h.sum(), acc, jnp.concatenate([acc, acc]).reshape(8, 6)

loop({"w": jnp.ones((8, 8)), "b": jnp.ones(8)}, jnp.ones((4, 8)))
'''


@pytest.fixture(scope="module")
def looped(tmp_path_factory):
    """The optimised HLO of `LOOPED`, as XLA dumped it."""
    root = tmp_path_factory.mktemp("looped")
    dump_script(LOOPED, None, root)
    return next(root.glob("module_*.jit_loop.cpu_after_optimizations.txt")).read_text()


def _variants(text: str) -> dict[str, str]:
    """The module written as XLA's parser still reads it but the pass reads otherwise: as dumped; its layouts
    tiled (a `(` within every matrix's shape, before its opcode); its instructions indented by a tab or four
    spaces (each then read alone); its lines ended by CR LF."""
    lines = text.split("\n")
    return {"dumped": text, "tiled": text.replace("{1,0}", "{1,0:T(2,128)}"),
            "indented": "\n".join(line.replace("  ", "\t" if k % 2 else "    ", 1) if line.startswith("  ") else line
                                  for k, line in enumerate(lines)),
            "crlf": text.replace("\n", "\r\n")}


@pytest.mark.parametrize("chunk", [5, 97, 4096, None])
def test_the_pass_over_tuples_long_opcodes_and_tiled_layouts_counts_what_xla_parses(looped, tmp_path, chunk):
    """Each form of a module with tuple shapes, opcodes of 17 and 20 bytes and parameters whose op_names hold
    escapes: the opcodes, each computation's instructions, the ENTRY's parameters (number, name, shape, op_name)
    are XLA's parser's of the same text, the offsets where Python's split of the file starts each line."""
    from jaxlib import _hlo

    from dumpgym.ir.hlo_index import CHUNK, index_hlo

    for form, text in _variants(looped).items():
        path = tmp_path / f"{form}.txt"
        path.write_bytes(text.encode())
        facts, offsets = index_hlo(path, chunk=chunk or CHUNK)
        data = path.read_bytes()
        starts = [0]
        for piece in data.splitlines(keepends=True):
            starts.append(starts[-1] + len(piece))
        assert offsets.tolist() == starts, form
        plain = text.replace("\r\n", "\n")
        module = _hlo.hlo_module_from_text(plain)
        spelled = {op for op, _ in facts.opcodes} | {"parameter"}
        entry, others = _opcodes(plain, spelled)
        assert dict(facts.opcodes) == dict(entry + others) and facts.unread == 0, form
        assert {"get-tuple-element", "dynamic-update-slice", "tuple", "while"} <= set(dict(facts.opcodes)), form
        assert {c.name: c.instructions for c in facts.computations} == {
            c.name: len(list(c.instructions())) for c in module.computations()}, form
        printed = [i.to_string() for i in list(module.computations())[-1].instructions()]
        params = sorted((int(s.split(" parameter(", 1)[1].split(")", 1)[0]), s.split(" = ", 1)[0].split()[-1].lstrip("%"),
                         s.split(" = ", 1)[1].split(" parameter(", 1)[0], re.search(r'op_name="((?:[^"\\]|\\.)*)"', s).group(1))
                        for s in printed if " parameter(" in s)
        assert [(p.number, p.name, p.shape, p.op_name) for p in facts.parameters] == params, form
        assert any("\\'" in p.op_name for p in facts.parameters) and any("(" in p.shape for p in facts.parameters) == (form == "tiled")


def _odd_lines(head: int) -> tuple[list[bytes], list[bytes]]:
    """Instruction lines and headers that no XLA prints but a file may hold, each a case of its own for the
    pass's reading: (lines for a computation's body, header lines each opening a computation)."""
    body = [b"  %a = f32[] negate(%p)", b"  ROOT %r = f32[] add(%a, %a)", b"  ROOT = x = f32[] add(%a)",
            b"  ROOT %x=y = f32[] add(%a)", b"  %eq = = f32[] add(%a)",
            b"  ROOT = = f32[] add(%a)", b"  = = f32[] add(%a)", b"  abc\nx = y",  # its first space is the next line's b"  %s = f32[] Negate(%a)",
            b"  %sp = f32[] ne gate(%a)", b"  %v = f32[]", b"  %w = f32[] negate", b"  %nop = f32[] (%a)",
            b"  %t = (f32[], s32[]) tuple(%a, %b)", b"  %tt = ((f32[]), (s32[1]{0:T(2)})) tuple(%a, %b)",
            b"  %tl = f32[1]{0:T(2)(1)} add(%a)", b"  %cr = f32[] add(%a)\r", b"  %e = f32[] add\r",
            b"  no equals here", b"  %q =f32[] add(%a)", b"  a", b"  ", b"\t", b"  %tab\t= f32[] add(%a)",
            b"  %dot.1 = f32[] dot(%a), metadata={op_name=\"x = y\"}", b"  %u = f32[] add(%a) = z(",
            b"  %n\xc3\xa9 = f32[] add(%a)", b"  %bad\xff = f32[] add(%a)", b"  %o = f32[] c\xc3\xa9(%a)",
            b"  %big = f32[] constant(" + b"1" * (head + 10) + b")", b"  %far = f32[] " + b"k" * (head + 10) + b"(%a)",
            b"  %n" + b"n" * head + b" = f32[] add(%a)"]  # its ` = ` past the head read
    for size in (1, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 40):  # two of each length, their last bytes apart
        body += [b"  %%op%d = f32[] " % size + (b"ab-_9" * 9)[:size - 1] + last + b"(%a)" for last in (b"x", b"y")]
    body += [b"  %%p%d = f32[%d]{0} parameter(%d), metadata={op_name=\"a\\\"b\\\\\"}" % (k, k, k) for k in range(3)]
    headers = [b"%c (p: f32[]) -> f32[] {", b"%%cc (p) -> f32[] {", b"%na(me) -> f32[] {", b"%n\xc3\xa4me (p) -> f32[] {",
               b"%bad\xff\xfe name {", b"%trailing {   ", b"%cr {\r", b"%tab {\t", b"ENTRY %e2 (p: f32[]) -> f32[] {",
               b"ENTRY e3 {", b"ENTRYX {", b"%x" + b"y" * head, b"{", b"%% {", b"%%( {", b"%\xe2\x82 {"]
    return body, headers


@pytest.mark.parametrize("chunk, buckets", [(7, None), (61, None), (4096, None), (None, None), (61, 1)])
def test_the_pass_reads_every_line_as_reading_it_alone_does(chunk, buckets, tmp_path, monkeypatch):
    """Lines no XLA prints (tuples and tiles, opcodes of every length around the words they are read in, no
    ` = `, no `(`, CR before the newline, bytes that are not UTF-8, lines longer than the head read, names
    with `%%`, `(` and escapes) within computations and outside them, headers of every form, some file
    without a last newline: what the pass finds, chunk after chunk, is what reading each line alone finds
    (`_Pass.line`, the reading the pass's every shortcut must agree with), its offsets where each line starts.
    With the opcodes counted in two buckets, distinct opcodes share one: each is still its own."""
    import random

    from dumpgym.ir import hlo_index
    from dumpgym.ir.hlo_index import CHUNK, HEAD, _Pass, index_hlo

    if buckets is not None:
        monkeypatch.setattr(hlo_index, "_BUCKET_BITS", buckets)

    body, headers = _odd_lines(HEAD)
    others = [b"HloModule m {", b"1 {", b"} trailing", b"}", b"", b"\r", b"FileNames", b"  %out = f32[] add(%a)"]
    rng = random.Random(chunk or 0)
    for attempt in range(3):
        lines = [b"HloModule m, is_scheduled=true", b""]
        for header in rng.sample(headers, len(headers)):
            lines.append(header)
            lines += rng.sample(body, rng.randint(0, len(body))) + rng.sample(others, rng.randint(0, 2))
            if rng.random() < 0.7:
                lines.append(b"}")
        lines += [b"ENTRY %main (p: f32[]) -> f32[] {", *body, b"}"] if attempt != 2 else []
        data = b"\n".join(lines) + (b"\n" if attempt != 1 else b"")
        path = tmp_path / f"odd{attempt}.txt"
        path.write_bytes(data)
        facts, offsets = index_hlo(path, chunk=chunk or CHUNK)
        alone = _Pass()
        pieces = data.split(b"\n")
        pieces = pieces[:-1] if data.endswith(b"\n") else pieces
        for number, line in enumerate(pieces, 1):
            alone.line(number, line[:HEAD])
        alone._close()
        starts = [0]
        for piece in pieces:
            starts.append(min(starts[-1] + len(piece) + 1, len(data)))
        assert offsets.tolist() == starts
        assert [(c.name, c.line, c.entry, c.instructions) for c in facts.computations] == alone.computations
        assert dict(facts.opcodes) == {k.decode(): n for k, n in alone.opcodes.items()} and facts.unread == alone.unread
        assert facts.parameters == tuple(sorted(alone.parameters, key=lambda p: p.number))
        assert alone.unread and (attempt == 2 or alone.parameters and any(c[2] for c in alone.computations))
