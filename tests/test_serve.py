"""The server: GET and HEAD of the built files only, no traversal, no JAX, its URL printed, its load bounded,
only its own Host answered, security headers on every answer."""
from __future__ import annotations

import gzip
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from dumpgym import drills

from dumpgym.site import kept as kept_files

from dumpgym.serve import server as serve

from dumpgym.site import files as site
from dumpgym.drills import _stored, read_pool

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gym(corpus, pool):
    # `serve.get` renders the default gym once per process (test_get_serves_the_page_...); when that gym
    # is this corpus and pool (no programs added in the default folder), its files are the ones a render
    # of them makes, so they are reused rather than rendered a second time.
    default = serve._default_site()
    if json.loads(default.files["corpus.json"]) == corpus and read_pool(json.loads(default.files["drills.json"])) == pool:
        return serve.Site(default.files)
    return serve.Site(site.render_site(corpus, pool))


@contextmanager
def running(srv):
    """`srv` serving in a thread until the block ends."""
    # A short poll lets shutdown() return at once rather than after serve_forever's default half second.
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def server(gym):
    with running(serve.make_server(gym, "127.0.0.1", 0)) as srv:
        yield srv


def request(server, method, path, headers=None):
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=5)
    conn.request(method, path, headers=headers or {})
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, dict(response.getheaders()), body


def connect(server, data=b""):
    """A raw connection to `server`, having sent `data`."""
    sock = socket.create_connection(server.server_address[:2], timeout=10)
    sock.sendall(data)
    return sock


def raw(server, data):
    """(status, headers, body) of the answer to the bytes `data`, sent as they are."""
    with connect(server, data) as sock:
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, dict(response.getheaders()), response.read()


def closed_by_peer(sock) -> bool:
    """Whether the other end closed `sock` (waiting up to its timeout), having sent nothing."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_get_serves_the_page_with_its_security_headers():
    status, headers, body = serve.get("/")
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["Content-Security-Policy"] == site.CSP + "; frame-ancestors 'none'"
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert b"<title>dumpgym" in body
    assert int(headers["Content-Length"]) == len(body)


@pytest.mark.parametrize("path, kind", [
    ("/static/app.js", "text/javascript; charset=utf-8"),
    ("/static/gym.css", "text/css; charset=utf-8"),
    ("/corpus.json", "application/json; charset=utf-8"),
    ("/data/programs/mlp.json", "application/json; charset=utf-8"),
    ("/index.html?x=1#y", "text/html; charset=utf-8"),
])
def test_files_come_with_their_types(gym, path, kind):
    status, headers, _ = gym.get(path)
    assert (status, headers["Content-Type"]) == (200, kind)


def test_the_json_served_is_the_corpus(gym, corpus):
    status, _, body = gym.get("/corpus.json")
    assert status == 200 and json.loads(body) == corpus


@pytest.mark.parametrize("path", [
    "/../pyproject.toml", "/static/../../site.py", "/%2e%2e/%2e%2e/etc/passwd", "/static/..%2f..%2fserve.py",
    "/static/%2E%2E/x", "/..\\..\\x", "/static\\..\\index.html", "/%00", "/./index.html", "relative",
])
def test_paths_leaving_the_site_are_refused(gym, path):
    status, _, body = gym.get(path)
    assert status == 400 and b"refused" in body


def test_missing_files_are_404(gym):
    assert gym.get("/nope.html")[0] == 404
    assert gym.get("/static/")[0] == 404  # no directory listings


def test_gzip_when_the_client_accepts_it(gym):
    plain = gym.get("/")[2]
    status, headers, body = gym.get("/", accept_gzip=True)
    assert status == 200 and headers["Content-Encoding"] == "gzip" and headers["Vary"] == "Accept-Encoding"
    assert gzip.decompress(body) == plain and len(body) < len(plain) / 4


def test_over_a_socket_only_get_and_head_are_answered(server):
    status, headers, body = request(server, "GET", "/")
    assert status == 200 and body.startswith(b"<!doctype html>")
    status, headers, body = request(server, "HEAD", "/")
    assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
        status, headers, _ = request(server, method, "/")
        assert status == 405 and headers["Allow"] == "GET, HEAD"
    assert request(server, "GET", "/../../etc/passwd")[0] == 400
    status, headers, body = request(server, "GET", "/", {"Accept-Encoding": "gzip, br"})
    assert headers["Content-Encoding"] == "gzip" and gzip.decompress(body).startswith(b"<!doctype html>")


def test_the_command_binds_localhost_unless_told_otherwise(monkeypatch):
    """What `dumpgym serve` (and bare `dumpgym`) hands to serve.serve when given no options."""
    from dumpgym import cli

    seen = []
    monkeypatch.setattr(serve, "serve", lambda **kwargs: seen.append(kwargs))
    assert cli.main(["serve"]) == 0 and cli.main([]) == 0
    assert seen == [{"host": "127.0.0.1", "port": 8000, "open_browser": False, "corpus_dir": None}] * 2


def test_importing_and_answering_does_not_import_jax():
    # serve makes a listing when it is first asked for: ask for one file of every kind.
    code = ("import sys, dumpgym.serve.server as s; assert 'jax' not in sys.modules, 'import'; "
            "assert s.get('/')[0] == 200; assert 'jax' not in sys.modules, 'get'; "
            "files = s._default_site().files; "
            "kinds = ('data/listings/', 'data/compiled/cpu/', 'data/compiled/tpu/', 'data/compiled/gpu/', 'data/drills/', "
            "'data/programs/', 'data/reference.json', 'corpus.json', 'drills.json', 'static/'); "
            "asked = [next(p for p in files if p.startswith(k)) for k in kinds]; "
            "assert all(s.get('/' + p)[0] == 200 for p in asked), asked; "
            "assert 'jax' not in sys.modules, asked")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_serve_prints_its_url_and_serves_it(tmp_path):
    code = "from dumpgym.serve import server; server.serve(port=0, corpus_dir=r'%s')" % tmp_path
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)
    try:
        line = proc.stdout.readline()
        assert line.startswith("dumpgym: the gym is at http://127.0.0.1:"), line + proc.stderr.read()
        url = line.split(" at ", 1)[1].split()[0]
        with urllib.request.urlopen(url, timeout=5) as r:
            assert r.status == 200 and b"dumpgym" in r.read()
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(url, data=b"x=1", method="POST"), timeout=5)
        assert refused.value.code == 405
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_busy_port_is_one_clear_error_said_before_rendering(server, monkeypatch):
    def render(cls, corpus_dir=None):
        raise AssertionError("serve() rendered the gym before finding its port taken")

    monkeypatch.setattr(serve.Site, "start", classmethod(render))
    port = server.server_address[1]
    with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
        serve.serve(port=port)


def test_serve_renders_the_page_before_its_url_and_a_listing_when_asked(monkeypatch, tmp_path):
    monkeypatch.setattr(kept_files, "kept_root", lambda: tmp_path)  # no listing kept by an earlier start
    made = []
    real = site.listing_lines
    monkeypatch.setattr(site, "listing_lines", lambda *a: made.append(a[1]) or real(*a))
    gym = serve.Site.build()
    assert gym.files["index.html"] is gym.files["index.html"]  # made once, by build()
    assert not made
    status, _, body = gym.get("/data/listings/mlp.json")
    assert status == 200 and made == [layer for layer in json.loads(body) if layer != "schema"] and made
    assert json.loads(body)["jaxpr"] and gym.get("/data/listings/nowhere.json")[0] == 404


def test_a_template_that_fails_fails_before_serve_says_where_the_gym_is(monkeypatch, capsys):
    def broken():
        raise RuntimeError("the template failed")

    monkeypatch.setattr(site, "_environment", broken)
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    with pytest.raises(RuntimeError, match="the template failed"):
        serve.serve(port=port)
    assert "the gym is at" not in capsys.readouterr().out


def test_a_render_that_fails_frees_the_port(monkeypatch):
    def render(cls, corpus_dir=None):
        raise RuntimeError("the render failed")

    monkeypatch.setattr(serve.Site, "start", classmethod(render))
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    with pytest.raises(RuntimeError, match="the render failed"):
        serve.serve(port=port)
    with socket.create_server(("127.0.0.1", port)):  # bound again at once: serve() closed its socket
        pass


def test_connections_wait_in_a_deep_backlog_until_the_server_accepts(gym):
    srv = serve.make_server(gym, "127.0.0.1", 0)
    assert srv.request_queue_size >= 128
    host = f"127.0.0.1:{srv.server_address[1]}".encode()
    # Nothing accepts yet: with the old backlog of 5, most of these connects time out.
    socks = [connect(srv, b"GET /corpus.json HTTP/1.0\r\nHost: " + host + b"\r\n\r\n") for _ in range(100)]
    with running(srv):
        for sock in socks:
            with sock:
                response = http.client.HTTPResponse(sock)
                response.begin()
                assert response.status == 200


def test_a_half_sent_request_is_dropped_after_the_timeout(gym):
    with running(serve.make_server(gym, "127.0.0.1", 0, timeout=0.5)) as srv:
        with connect(srv, b"GET / HT") as sock:
            assert closed_by_peer(sock)


def test_a_request_head_trickled_byte_by_byte_is_dropped_too(gym):
    with running(serve.make_server(gym, "127.0.0.1", 0, timeout=1)) as srv:
        with connect(srv, b"G") as sock:
            sock.settimeout(0.2)
            for _ in range(100):  # 20 s of one byte each 0.2 s: a timeout per read alone never fires
                try:
                    if sock.recv(1) == b"":
                        break
                except TimeoutError:
                    sock.sendall(b"E")
                except ConnectionResetError:
                    break
            else:
                pytest.fail("the server kept a trickling connection open")


def test_connections_are_bounded_and_a_waiting_one_is_served_when_one_frees(gym):
    with running(serve.make_server(gym, "127.0.0.1", 0, connections=2, timeout=30)) as srv:
        held = [connect(srv, b"GET / HTTP/1.0\r\n") for _ in range(2)]
        with connect(srv, b"GET /corpus.json HTTP/1.0\r\n\r\n") as waiting:
            waiting.settimeout(0.5)
            with pytest.raises(TimeoutError):  # both connections are taken by the half-sent heads
                waiting.recv(1)
            held.pop().close()
            waiting.settimeout(10)
            response = http.client.HTTPResponse(waiting)
            response.begin()
            assert response.status == 200
        held.pop().close()


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "localhost:1", "127.0.0.1.evil.example",
                                  "localhost.evil.example:{port}", "[::2]:{port}"])
@pytest.mark.parametrize("path", ["/", "/corpus.json", "/data/programs/mlp.json"])
def test_a_foreign_host_gets_421_and_no_data(server, host, path):
    status, headers, body = request(server, "GET", path, {"Host": host.format(port=server.server_address[1])})
    assert status == 421 and headers["Content-Type"] == "text/plain; charset=utf-8"
    assert body.startswith(b"refused") and b"programs\"" not in body and len(body) < 200


@pytest.mark.parametrize("host", ["localhost", "localhost:{port}", "LocalHost:{port}", "127.0.0.1",
                                  "127.0.0.1:{port}", "[::1]", "[::1]:{port}"])
def test_loopback_hosts_are_answered(server, host):
    status, _, body = request(server, "GET", "/corpus.json", {"Host": host.format(port=server.server_address[1])})
    assert status == 200 and json.loads(body)["programs"]


def test_the_bound_address_is_a_host_answered(gym):
    try:
        srv = serve.make_server(gym, "127.0.0.2", 0)
    except OSError:
        pytest.skip("127.0.0.2 is not a loopback address here")
    with running(srv):
        port = srv.server_address[1]
        assert request(srv, "GET", "/", {"Host": f"127.0.0.2:{port}"})[0] == 200
        assert request(srv, "GET", "/", {"Host": "127.0.0.3"})[0] == 421


def test_host_may_be_missing_only_from_http_1_0(server):
    assert raw(server, b"GET /corpus.json HTTP/1.0\r\n\r\n")[0] == 200
    status, _, body = raw(server, b"GET /corpus.json HTTP/1.1\r\n\r\n")
    assert status == 421 and b"programs" not in body
    status, _, body = raw(server, b"GET /corpus.json HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n\r\n")
    assert status == 421 and b"programs" not in body


HOST = b"Host: localhost\r\n"


@pytest.mark.parametrize("data, code", [
    (b"GET / HTTP/1.0\r\n" + HOST + b"\r\n", 200),
    (b"GET /nope HTTP/1.0\r\n" + HOST + b"\r\n", 404),
    (b"GET /../x HTTP/1.0\r\n" + HOST + b"\r\n", 400),
    (b"GET / HTTP/1.0\r\nHost: evil.example\r\n\r\n", 421),
    (b"DELETE / HTTP/1.0\r\n" + HOST + b"\r\n", 405),
    (b"BREW / HTTP/1.0\r\n" + HOST + b"\r\n", 501),
    (b"GET / HTTP/9.9\r\n" + HOST + b"\r\n", 505),
    (b"GET / XTTP/1.0\r\n" + HOST + b"\r\n", 400),
    (b"GET /\r\n\r\n", 421),  # HTTP/0.9: no Host, and no headers unless the server insists
    (b"GET /" + b"a" * 65532, 414),  # exactly what the server reads, so closing sends no reset
    (b"GET / HTTP/1.0\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(101)), 431),
    (b"GET / HTTP/1.0\r\nX: " + b"y" * 65536, 431),
])
def test_every_answer_carries_the_security_headers(server, data, code):
    status, headers, body = raw(server, data)
    assert status == code
    assert headers["Content-Security-Policy"] == site.CSP + "; frame-ancestors 'none'"
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert int(headers["Content-Length"]) == len(body)
    if code != 200:
        assert headers["Content-Type"] == "text/plain; charset=utf-8" and b"<" not in body


def test_every_address_warns_once_that_the_data_is_on_the_network(gym, capsys):
    with running(serve.listen(gym, "0.0.0.0", 0)) as srv:
        port = srv.server_address[1]
        assert request(srv, "GET", "/", {"Host": f"some-machine.lan:{port}"})[0] == 200
    out, err = capsys.readouterr()
    assert out == f"dumpgym: the gym is at http://127.0.0.1:{port}/ (0 programs; Ctrl-C stops)\n"
    assert err.count("\n") == 1 and err.startswith("dumpgym: warning: listening on 0.0.0.0")
    assert "file paths and sources of your added programs" in err and "visible on the network" in err


def test_loopback_does_not_warn(gym, capsys):
    serve.listen(gym, "127.0.0.1", 0).server_close()
    assert capsys.readouterr().err == ""


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="no IPv6 loopback on this machine")
def test_ipv6_loopback_and_every_ipv6_address_are_served(gym, capsys):
    with running(serve.make_server(gym, "::1", 0)) as srv:
        url = serve.url_of(srv)
        assert url == f"http://[::1]:{srv.server_address[1]}/"
        with urllib.request.urlopen(url + "corpus.json", timeout=5) as r:
            assert r.status == 200 and json.loads(r.read())["programs"]
        assert request(srv, "GET", "/", {"Host": "evil.example"})[0] == 421
    with running(serve.listen(gym, "::", 0)) as srv:
        with urllib.request.urlopen(f"http://[::1]:{srv.server_address[1]}/", timeout=5) as r:
            assert r.status == 200
    assert "warning: listening on ::," in capsys.readouterr().err


# Slow clients hold nobody: every connection is a coroutine on one event loop, not a thread.

def held_open(sock) -> bool:
    """Whether the server still holds `sock` open (nothing arrives within a short wait, and no close)."""
    sock.settimeout(0.2)
    try:
        return sock.recv(1) != b""
    except TimeoutError:
        return True
    except ConnectionResetError:
        return False


def test_a_normal_get_is_answered_while_200_half_sent_requests_are_held(gym):
    with running(serve.make_server(gym, "127.0.0.1", 0, timeout=600)) as srv:
        slow = [connect(srv, b"GET / HTTP/1.0\r\nHost: localh") for _ in range(200)]
        try:
            # The thread-per-connection server held its 32 workers until each head's deadline (here 10 minutes).
            status, _, body = request(srv, "GET", "/corpus.json")
            assert status == 200 and json.loads(body)["programs"]
            assert all(held_open(sock) for sock in slow[:5] + slow[-5:])
        finally:
            for sock in slow:
                sock.close()


def test_a_normal_get_is_answered_while_40_clients_never_read_a_large_file(gym):
    with running(serve.make_server(gym, "127.0.0.1", 0, timeout=600)) as srv:
        stalled = []
        for _ in range(40):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # takes a few KB and then nothing
            sock.connect(srv.server_address[:2])
            sock.sendall(b"GET /corpus.json HTTP/1.0\r\nHost: localhost\r\n\r\n")
            stalled.append(sock)
        try:
            status, _, body = request(srv, "GET", "/static/app.js")
            assert status == 200 and body == gym.files["static/app.js"]
        finally:
            for sock in stalled:
                sock.close()


def test_a_client_that_stops_reading_is_dropped_at_the_write_deadline(gym):
    with running(serve.make_server(gym, "127.0.0.1", 0, timeout=0.5)) as srv:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(srv.server_address[:2])
        with sock:
            sock.sendall(b"GET /corpus.json HTTP/1.0\r\nHost: localhost\r\n\r\n")
            sock.settimeout(30)
            received, dropped = 0, False
            for _ in range(10_000):  # read a little, then stop reading until the server gives up on us
                try:
                    chunk = sock.recv(1024)
                except ConnectionResetError:
                    dropped = True
                    break
                if not chunk:
                    dropped = True
                    break
                received += len(chunk)
                if received > 8192:
                    threading.Event().wait(1.5)  # past the deadline for the next chunk
                    received = -10 ** 9  # read on, to see the end, without pausing again
            assert dropped and received < 0 and received + 10 ** 9 < len(gym.files["corpus.json"])


def test_a_slow_render_holds_no_other_answer(monkeypatch):
    release, started = threading.Event(), threading.Event()

    def slow_listing() -> bytes:
        started.set()
        release.wait(30)
        return b'{"slow": true}'

    files = site.SiteFiles({"slow.json": slow_listing, "index.html": lambda: b"<!doctype html>quick"})
    with running(serve.make_server(serve.Site(files), "127.0.0.1", 0)) as srv:
        answers = []
        waiting = threading.Thread(target=lambda: answers.append(request(srv, "GET", "/slow.json")))
        waiting.start()
        assert started.wait(30)
        try:
            status, _, body = request(srv, "GET", "/")  # made on the loop? then this waits for the render
            assert (status, body) == (200, b"<!doctype html>quick") and not answers
        finally:
            release.set()
            waiting.join(30)
        assert answers[0][0] == 200 and answers[0][2] == b'{"slow": true}'


@pytest.mark.parametrize("value, gzipped", [
    ("gzip", True), ("gzip, br", True), ("br;q=1, gzip;q=0.5", True), ("GZIP", True), ("x-gzip", True),
    ("*", True), ("br, *;q=0.1", True),
    ("gzip;q=0", False), ("gzip; q=0.000", False), ("identity", False), ("", False), ("br", False),
    ("*;q=0", False), ("gzip;q=0, *", False), ("gzipped", False), ("x-gzip;q=0", False), ("gzip;q=nan", False),
])
def test_gzip_only_when_accept_encoding_admits_it(server, value, gzipped):
    status, headers, body = request(server, "GET", "/", {"Accept-Encoding": value})
    assert status == 200 and headers.get("Content-Encoding") == ("gzip" if gzipped else None)
    assert (gzip.decompress(body) if gzipped else body).startswith(b"<!doctype html>")


def _drill_splits(gym) -> list[str]:
    return sorted(path for path in gym.files if path.startswith("data/drills/") and path.count("/") == 3)


def test_a_start_with_no_items_kept_serves_the_page_at_once_and_then_the_whole_gym(tmp_path, monkeypatch):
    monkeypatch.setenv("DUMPGYM_CACHE_DIR", str(tmp_path / "empty-cache"))  # as after an upgrade
    made = []
    real = drills.items_for
    monkeypatch.setattr(drills, "items_for", lambda p, *rest: made.append(p.slug) or real(p, *rest))
    gym, rest = serve.Site.start(tmp_path / "no-added-programs")
    assert made == [] and rest is not None
    status, _, page = gym.get("/")
    assert status == 200 and b"data-drills-pending" in page and b"are being made" in page
    pending = json.loads(gym.get("/data/drills/pending.json")[2])
    assert pending["pending"] == [p.slug for p in _stored.builtin_corpus().programs]
    assert read_pool(json.loads(gym.get("/drills.json")[2]))["items"] == [] and _drill_splits(gym) == []
    stages = []
    whole = rest(stages.append)
    assert stages == [] and made == pending["pending"]  # one stage (built-ins only): nothing handed over early
    assert json.loads(whole.get("/data/drills/pending.json")[2])["pending"] == []
    assert b"data-drills-pending" not in whole.get("/")[2]
    built = serve.Site.build(tmp_path / "no-added-programs")  # what a start with every item kept serves
    assert made == pending["pending"] and whole.get("/drills.json") == built.get("/drills.json")
    assert _drill_splits(whole) == _drill_splits(built) and _drill_splits(built)
    assert whole.get("/")[2] == built.get("/")[2] and "data/drills/pending.json" not in built.files


def test_serve_prints_its_url_before_making_the_items_it_has_not_kept(tmp_path):
    code = "from dumpgym.serve import server; server.serve(port=0, corpus_dir=r'%s')" % (tmp_path / "corpus")
    env = {**os.environ, "DUMPGYM_CACHE_DIR": str(tmp_path / "empty-cache")}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT, env=env)
    try:
        line = proc.stdout.readline()
        assert line.startswith("dumpgym: the gym is at http://127.0.0.1:"), line + proc.stderr.read()
        url = line.split(" at ", 1)[1].split()[0]
        with urllib.request.urlopen(url, timeout=30) as r:
            assert b"are being made" in r.read()
        for _ in range(3000):  # the thread makes them; the test waits as the page does, by asking (10 min at most)
            with urllib.request.urlopen(url + "data/drills/pending.json", timeout=30) as r:
                if not json.loads(r.read())["pending"]:
                    break
            time.sleep(0.2)
        else:
            pytest.fail("serve never made the drill items it had not kept")
        with urllib.request.urlopen(url, timeout=30) as r:
            page = r.read()
        assert b"are being made" not in page and b'data-drill="shapes"' in page
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    said = proc.stderr.read()
    assert "making the drill items that are not kept yet" in said and "every drill item is ready" in said


def test_a_start_whose_item_making_breaks_says_so_in_one_line_and_stops_saying_pending(tmp_path, monkeypatch, capsys):
    from dumpgym.site import inputs

    monkeypatch.setenv("DUMPGYM_CACHE_DIR", str(tmp_path / "empty-cache"))

    def broken(sources, warn=None):
        raise RuntimeError("a bug in making items")
    monkeypatch.setattr(inputs, "kept_pool", broken)
    gym, rest = serve.Site.start(tmp_path / "no-added-programs")
    assert b"are being made" in gym.get("/")[2]
    whole = rest()  # the page asks pending.json: it must stop hearing "pending", or it waits forever
    assert json.loads(whole.get("/data/drills/pending.json")[2])["pending"] == []
    assert b"data-drills-pending" not in whole.get("/")[2]
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["dumpgym: error: making the drill items stopped (RuntimeError: a bug in making items); "
                   "the gym serves the items made before"]


def test_the_watcher_reads_what_an_add_or_a_remove_changed_and_never_waits_on_one(tmp_path):
    """`serve` looks at the folder of added programs every second (`corpus_state`): the index and the records
    it lists, never the kept items a start writes beside them; `what_changed` says it by slug; while an add
    holds the folder's lock the look is `busy`, and is made again a second later."""
    from dumpgym.corpus.user import INDEX_SCHEMA, locked

    folder = tmp_path / "added"
    assert serve.corpus_state(folder) == ()
    folder.mkdir()

    def write(slugs, **records):
        for slug, text in records.items():
            (folder / f"{slug}.json").write_text(text)
        (folder / "index.json").write_text(json.dumps({"schema": INDEX_SCHEMA, "programs": slugs}))
        return serve.corpus_state(folder)

    empty = write([])
    one = write(["a"], a="{}")
    assert [name for name, *_ in one] == ["index.json", "a.json"]
    (folder / "a.drills.json").write_text("kept items")  # what a start writes: not a change
    assert serve.corpus_state(folder) == one
    assert serve.what_changed(empty, one) == "The added programs changed while the gym ran: added `a`."
    two = write(["a", "b"], a='{"edited": 1}', b="{}")
    assert serve.what_changed(one, two) == ("The added programs changed while the gym ran: added `b`; "
                                            "replaced `a`.")
    assert serve.what_changed(two, write(["b"])) == "The added programs changed while the gym ran: removed `a`."
    with locked(folder, exclusive=True):
        assert serve.corpus_state(folder) == ("busy",)


def test_a_dump_modules_old_page_answers_with_a_redirect_to_its_program_in_the_xray(server):
    """`open` showed each module on a page of its own (`/dump/SLUG.html`); its program is in the gym's x-ray
    now, and a link kept from then is redirected there (over HTTP, as a browser asks)."""
    host, port = server.server_address[:2]
    for path, location in (("/dump/jit-train-step.html", "/?xray=dump-jit-train-step#xray"),
                           ("/dump/", "/#corpus"), ("/dump/index.html", "/#corpus")):
        conn = http.client.HTTPConnection(host, port, timeout=30)
        conn.request("GET", path)
        answer = conn.getresponse()
        answer.read()
        conn.close()
        assert (answer.status, answer.getheader("Location")) == (302, location), path
    for path in ("/dump/Not-A-Slug.html", "/dump/a/b.html"):  # nothing a module's slug can be: not found
        conn = http.client.HTTPConnection(host, port, timeout=30)
        conn.request("GET", path)
        assert conn.getresponse().status == 404, path
        conn.close()
