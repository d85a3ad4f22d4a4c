"""`dumpgym serve`: the gym from memory over HTTP, with the standard library and without importing JAX.

The server answers GET and HEAD for the files `site.render_site` made and nothing else: no
directory listings, no paths outside the site, no request bodies read, no code run for the browser.
`get(path)` answers one request without a socket, for tests and for a quick look from Python.
"""
from __future__ import annotations

import gzip
import sys
import webbrowser
from functools import lru_cache
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from dumpgym.site import CSP, load_inputs, render_site

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json; charset=utf-8",
    ".svg": "image/svg+xml",
}
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
_GZIP_MIN = 1024


class Site:
    """The gym's files in memory, answering requests by path."""

    def __init__(self, files: dict[str, bytes]):
        self.files = dict(files)
        self._gzipped: dict[str, bytes] = {}

    @classmethod
    def build(cls, corpus_dir=None) -> "Site":
        """Render the gym for the built-in corpus plus the programs added under `corpus_dir`."""
        corpus, drills = load_inputs(corpus_dir)
        site = cls(render_site(corpus, drills))
        site.programs = len(corpus["programs"])
        return site

    def resolve(self, target: str) -> str | None:
        """The site file a request target names, or None for anything outside the site."""
        path = unquote(urlsplit(target).path)
        if not path.startswith("/") or "\x00" in path or "\\" in path:
            return None
        parts = path.split("/")[1:]
        if any(part in (".", "..") for part in parts):
            return None
        rel = "/".join(parts)
        if rel == "" or rel.endswith("/"):
            rel += "index.html"
        return rel

    def get(self, target: str, accept_gzip: bool = False) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, body) for a GET of `target`; gzip-encoded when the client accepts it."""
        rel = self.resolve(target)
        if rel is None:
            return _plain(HTTPStatus.BAD_REQUEST, "refused: that path leaves the site\n")
        body = self.files.get(rel)
        if body is None:
            return _plain(HTTPStatus.NOT_FOUND, f"not found: /{rel}\n")
        headers = {"Content-Type": TYPES.get(_suffix(rel), "application/octet-stream"), **HEADERS}
        if len(body) >= _GZIP_MIN and _suffix(rel) in TYPES:
            headers["Vary"] = "Accept-Encoding"
            if accept_gzip:
                if rel not in self._gzipped:
                    self._gzipped[rel] = gzip.compress(body, compresslevel=6, mtime=0)
                body = self._gzipped[rel]
                headers["Content-Encoding"] = "gzip"
        headers["Content-Length"] = str(len(body))
        return HTTPStatus.OK, headers, body


def _suffix(rel: str) -> str:
    dot = rel.rfind(".")
    return rel[dot:] if dot > rel.rfind("/") else ""


def _plain(status: HTTPStatus, text: str) -> tuple[int, dict[str, str], bytes]:
    body = text.encode("utf-8")
    return status, {"Content-Type": "text/plain; charset=utf-8", **HEADERS, "Content-Length": str(len(body))}, body


@lru_cache(maxsize=1)
def _default_site() -> Site:
    return Site.build()


def get(path: str, corpus_dir=None) -> tuple[int, dict[str, str], bytes]:
    """Fetch one path of the gym without a socket: (status, headers, body)."""
    site = _default_site() if corpus_dir is None else Site.build(corpus_dir)
    return site.get(path)


class _Handler(BaseHTTPRequestHandler):
    site: Site
    server_version = "dumpgym"
    sys_version = ""

    def _answer(self, with_body: bool) -> None:
        accept = "gzip" in self.headers.get("Accept-Encoding", "")
        status, headers, body = self.site.get(self.path, accept_gzip=accept)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if with_body:
            self.wfile.write(body)

    def do_GET(self):  # noqa: N802 (http.server's naming)
        self._answer(True)

    def do_HEAD(self):  # noqa: N802
        self._answer(False)

    def _refuse(self):
        status, headers, body = _plain(HTTPStatus.METHOD_NOT_ALLOWED, "only GET and HEAD are served\n")
        self.send_response(status)
        for name, value in {**headers, "Allow": "GET, HEAD", "Connection": "close"}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse

    def log_message(self, format, *args):  # quiet: one line per request would drown the URL
        pass


def make_server(site: Site, host: str = "127.0.0.1", port: int = 8000) -> ThreadingHTTPServer:
    """An HTTP server for `site`, bound but not yet serving (port 0 picks a free port)."""
    handler = type("Handler", (_Handler,), {"site": site})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


def url_of(server: ThreadingHTTPServer) -> str:
    """The http:// URL a bound server answers on."""
    host, port = server.server_address[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def serve(host: str = "127.0.0.1", port: int = 8000, open_browser: bool = False, corpus_dir=None) -> None:
    """Serve the gym (built-in corpus plus added programs) until interrupted, printing its URL."""
    site = Site.build(corpus_dir)
    try:
        server = make_server(site, host, port)
    except OSError as e:
        raise OSError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    url = url_of(server)
    print(f"dumpgym: the gym is at {url} ({site.programs} programs; Ctrl-C stops)", flush=True)
    if open_browser:
        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("dumpgym: stopped", file=sys.stderr)
    finally:
        server.server_close()
