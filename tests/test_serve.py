"""The server: GET and HEAD of the built files only, no traversal, no JAX, its URL printed."""
from __future__ import annotations

import gzip
import http.client
import inspect
import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from dumpgym import serve, site

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gym(corpus):
    from dumpgym.drills import build_pool

    return serve.Site(site.render_site(corpus, build_pool(corpus)))


@pytest.fixture(scope="module")
def server(gym):
    srv = serve.make_server(gym, "127.0.0.1", 0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def request(server, method, path, headers=None):
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=5)
    conn.request(method, path, headers=headers or {})
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, dict(response.getheaders()), body


def test_get_serves_the_page_with_its_security_headers():
    status, headers, body = serve.get("/")
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["Content-Security-Policy"] == site.CSP
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


def test_binds_localhost_unless_told_otherwise():
    params = inspect.signature(serve.serve).parameters
    assert params["host"].default == "127.0.0.1"
    assert params["port"].default == 8000
    assert params["open_browser"].default is False


def test_importing_and_answering_does_not_import_jax():
    code = ("import sys, dumpgym.serve as s; assert 'jax' not in sys.modules, 'import'; "
            "assert s.get('/')[0] == 200; assert 'jax' not in sys.modules, 'get'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_serve_prints_its_url_and_serves_it(tmp_path):
    code = "from dumpgym import serve; serve.serve(port=0, corpus_dir=r'%s')" % tmp_path
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


def test_a_busy_port_is_one_clear_error(server):
    port = server.server_address[1]
    with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
        serve.serve(port=port)
