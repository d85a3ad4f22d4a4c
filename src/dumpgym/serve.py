"""`dumpgym serve`: the gym from memory over HTTP, with the standard library and without importing JAX.

The server answers GET and HEAD for the files of `site.site_files` and nothing else (the page is
rendered before the URL is printed, each listing when the page first fetches it): no
directory listings, no paths outside the site, no request bodies read, no code run for the browser.
It answers only requests addressed to it (the `Host` check that defeats DNS rebinding), with a
bounded pool of workers, a deep listen backlog and a deadline on each request head.
`get(path)` answers one request without a socket, for tests and for a quick look from Python.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import ipaddress
import socket
import sys
import threading
import time
import webbrowser
from collections.abc import Mapping
from functools import lru_cache
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from dumpgym.site import CSP, SiteFiles, load_inputs, site_files

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json; charset=utf-8",
    ".svg": "image/svg+xml",
}
# frame-ancestors is ignored in a <meta> policy, so the page's CSP lacks it and only the header can carry it.
SERVED_CSP = CSP if "frame-ancestors" in CSP else CSP + "; frame-ancestors 'none'"
HEADERS = {
    "Content-Security-Policy": SERVED_CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
BACKLOG = 128
WORKERS = 32
TIMEOUT = 5.0
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
_GZIP_MIN = 1024


class Site:
    """The gym's files in memory, answering requests by path."""

    def __init__(self, files: Mapping[str, bytes], programs: int = 0):
        self.files = files if isinstance(files, SiteFiles) else dict(files)
        self.programs = programs
        self._gzipped: dict[str, bytes] = {}

    @classmethod
    def build(cls, corpus_dir=None) -> "Site":
        """The gym for the built-in corpus plus the programs added under `corpus_dir`: the page is
        rendered now, each listing when it is first asked for (`site.SiteFiles`)."""
        corpus, drills = load_inputs(corpus_dir)
        files = site_files(corpus, drills)
        files["index.html"]  # a template that fails, fails here, before serve() says where the gym is
        return cls(files, programs=len(corpus["programs"]))

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
        if rel not in self.files:
            return _plain(HTTPStatus.NOT_FOUND, f"not found: /{rel}\n")
        body = self.files[rel]
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


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


@lru_cache(maxsize=1)
def _default_site() -> Site:
    return Site.build()


def get(path: str, corpus_dir=None) -> tuple[int, dict[str, str], bytes]:
    """Fetch one path of the gym without a socket: (status, headers, body)."""
    site = _default_site() if corpus_dir is None else Site.build(corpus_dir)
    return site.get(path)


class _HeadDeadline(io.RawIOBase):
    """A connection's reading side that gives up `seconds` after it opened, however slowly bytes trickle in."""

    def __init__(self, sock: socket.socket, seconds: float):
        self._sock = sock
        self._deadline = time.monotonic() + seconds

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request head took too long")
        self._sock.settimeout(left)
        return self._sock.recv_into(buffer)


class _Handler(BaseHTTPRequestHandler):
    site: Site
    timeout = TIMEOUT
    server_version = "dumpgym"
    sys_version = ""

    def setup(self):
        super().setup()
        # A socket timeout restarts with every byte, so a client trickling its head would keep a worker
        # forever; one deadline per connection (one request each: HTTP/1.0) bounds the whole head.
        self.rfile = io.BufferedReader(_HeadDeadline(self.connection, self.timeout))

    def _send(self, status: int, headers: dict[str, str], body: bytes, with_body: bool = True) -> None:
        self.connection.settimeout(self.timeout)  # the answer gets its own time, whatever the head used
        if self.request_version == "HTTP/0.9":
            # http.server leaves this version on requests it could not parse and then writes no status
            # line and no headers; no browser speaks HTTP/0.9, so every answer gets both.
            self.request_version = "HTTP/1.0"
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if with_body:
            self.wfile.write(body)

    def _addressed_here(self) -> bool:
        hosts = self.headers.get_all("Host") or []
        if not hosts:  # browsers always send Host; only an HTTP/1.0 client may leave it out
            return self.request_version == "HTTP/1.0"
        allowed = self.server.hosts
        return len(hosts) == 1 and (allowed is None or hosts[0].strip().lower() in allowed)

    def _answer(self, with_body: bool) -> None:
        if not self._addressed_here():
            self.close_connection = True
            status, headers, body = _plain(HTTPStatus.MISDIRECTED_REQUEST, "refused: this server answers only for "
                                           "the address it listens on (or localhost)\n")
        else:
            accept = "gzip" in self.headers.get("Accept-Encoding", "")
            status, headers, body = self.site.get(self.path, accept_gzip=accept)
        self._send(status, headers, body, with_body)

    def do_GET(self):  # noqa: N802 (http.server's naming)
        self._answer(True)

    def do_HEAD(self):  # noqa: N802
        self._answer(False)

    def _refuse(self):
        status, headers, body = _plain(HTTPStatus.METHOD_NOT_ALLOWED, "only GET and HEAD are served\n")
        self.close_connection = True
        self._send(status, {**headers, "Allow": "GET, HEAD", "Connection": "close"}, body)

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse

    def send_error(self, code, message=None, explain=None):
        """Answer an error in plain text with the headers every answer carries (http.server's page has none)."""
        status = HTTPStatus(code)
        status, headers, body = _plain(status, f"{code} {message or status.phrase}\n")
        self.close_connection = True
        self._send(status, {**headers, "Connection": "close"}, body, self.command != "HEAD")

    def log_message(self, format, *args):  # quiet: one line per request would drown the URL
        pass


class GymServer(ThreadingHTTPServer):
    """A threading HTTP server with a deep listen backlog, at most `workers` threads, and IPv6 when the host is."""

    request_queue_size = BACKLOG
    daemon_threads = True
    block_on_close = False  # Ctrl-C must not wait for a stalled client; its thread ends with the process
    hosts: frozenset[str] | None = None

    def __init__(self, address: tuple[str, int], handler, workers: int = WORKERS):
        self.address_family = socket.getaddrinfo(address[0] or None, address[1], type=socket.SOCK_STREAM,
                                                 flags=socket.AI_PASSIVE)[0][0]
        self._slots = threading.BoundedSemaphore(workers)
        super().__init__(address, handler)
        self.hosts = _hosts(self.server_address[0], address[0], self.server_address[1])

    def server_bind(self):
        if self.address_family == socket.AF_INET6:  # `::` serves IPv4 too, as `python -m http.server` does
            with contextlib.suppress(AttributeError, OSError):
                self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()

    def process_request(self, request, client_address):
        # Waiting here, in the accept loop, leaves further connections in the kernel's backlog
        # rather than in threads or memory.
        self._slots.acquire()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def _hosts(bound: str, given: str, port: int) -> frozenset[str] | None:
    """The Host values a server bound to `bound` answers, with or without its port; None (any) on a wildcard."""
    if ipaddress.ip_address(bound.split("%")[0]).is_unspecified:
        return None
    names = {*LOOPBACK_HOSTS, _bracket(bound), _bracket(given.lower())}
    return frozenset(n for name in names for n in (name, f"{name}:{port}"))


def make_server(site: Site, host: str = "127.0.0.1", port: int = 8000, *, workers: int = WORKERS,
                timeout: float = TIMEOUT) -> GymServer:
    """An HTTP server for `site`, bound but not yet serving (port 0 picks a free port)."""
    handler = type("Handler", (_Handler,), {"site": site, "timeout": timeout})
    return GymServer((host, port), handler, workers)


def url_of(server: ThreadingHTTPServer) -> str:
    """The http:// URL a bound server answers on (its loopback address when bound to every address)."""
    host, port = server.server_address[:2]
    if ipaddress.ip_address(host.split("%")[0]).is_unspecified:
        host = "::1" if ":" in host else "127.0.0.1"
    return f"http://{_bracket(host)}:{port}/"


def exposed(server: ThreadingHTTPServer) -> bool:
    """Whether other machines can reach `server` (bound to an address that is not loopback)."""
    return not ipaddress.ip_address(server.server_address[0].split("%")[0]).is_loopback


def listen(site: Site, host: str = "127.0.0.1", port: int = 8000) -> GymServer:
    """Bind `site` to host:port and print its URL, and on stderr a warning when the network can reach it."""
    server = _bind(site, host, port)
    _announce(server, host)
    return server


def _bind(site: Site, host: str, port: int) -> GymServer:
    try:
        return make_server(site, host, port)
    except OSError as e:
        raise OSError(f"cannot listen on {_bracket(host)}:{port}: {e.strerror or e}") from None


def _announce(server: GymServer, host: str) -> None:
    programs = server.RequestHandlerClass.site.programs
    print(f"dumpgym: the gym is at {url_of(server)} ({programs} programs; Ctrl-C stops)", flush=True)
    if exposed(server):
        print(f"dumpgym: warning: listening on {host}, the gym's data (file paths and sources of your added "
              "programs) is visible on the network", file=sys.stderr, flush=True)


def serve(host: str = "127.0.0.1", port: int = 8000, open_browser: bool = False, corpus_dir=None) -> None:
    """Serve the gym (built-in corpus plus added programs) until interrupted, printing its URL.

    The port is bound before the gym is rendered (a few seconds): a busy port is said at once, and a
    browser that connects early waits in the listen backlog until the gym is there.
    """
    server = _bind(Site({}), host, port)
    try:
        server.RequestHandlerClass.site = Site.build(corpus_dir)
        _announce(server, host)
        if open_browser:
            webbrowser.open(url_of(server))
        server.serve_forever()
    except KeyboardInterrupt:
        print("dumpgym: stopped", file=sys.stderr)
    finally:
        server.server_close()
