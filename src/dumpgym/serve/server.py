"""`dumpgym serve`: the gym from memory over HTTP, with the standard library and without importing JAX.

The server answers GET and HEAD for the files of `site.site_files` and nothing else (the page is
rendered before the URL is printed, from `inputs.gym_start`: each program's kept drill items read,
each record parsed once, and the items not kept made after, in a thread; each listing is made when
the page first fetches it, or read where a start before kept it, or, on a first start, kept ahead of
its asking by render worker processes, `render_pool`): no
directory listings, no paths outside the site, no request bodies read, no code run for the browser.
It answers only requests addressed to it (the `Host` check that defeats DNS rebinding), on one
asyncio event loop (standard library only), with a deep listen backlog and a read and a write
deadline on each connection: a slow client holds a coroutine, not a thread, and nobody else.
`get(path)` answers one request without a socket, for tests and for a quick look from Python.
"""
from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import os
import re
import socket
import sys
import threading
import time
import webbrowser
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from email.utils import formatdate
from functools import lru_cache
from http import HTTPStatus
from urllib.parse import unquote, urlsplit

try:
    import fcntl
except ImportError:  # no flock on this platform: the folder is read unlocked, as `corpus/user.py`'s `locked` does
    fcntl = None

from dumpgym.gcpause import collector_paused
from dumpgym.record import dtypes
from dumpgym.serve.big import BigModules
from dumpgym.serve.http_head import READ_LIMIT, Refused, accepts_gzip, read_head
from dumpgym.site.inputs import gym_start
from dumpgym.serve.item_maker import ItemMaker, Makers, Superseded
from dumpgym.serve.render_pool import RenderPool
from dumpgym.site.files import CSP, WHOLE_FILES, SiteFiles, site_files
from dumpgym.terminal import printable

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
BACKLOG = 1024  # the kernel caps it at net.core.somaxconn
CONNECTIONS = 1024  # served at once, each a coroutine of a few kilobytes; more wait in the backlog
TIMEOUT = 5.0
CHUNK = 64 * 1024
RENDER_WORKERS = 2  # threads that make and gzip files on first request (GIL-bound: more only contend)
SEND_BUFFER = 128 * 1024  # per connection (Linux doubles it): what a client that stops reading costs the kernel
REFUSED_METHODS = frozenset({"POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
_GZIP_MIN = 1024


class Site:
    """The gym's files in memory, answering requests by path."""

    def __init__(self, files: Mapping[str, bytes], programs: int = 0):
        self.files = files if isinstance(files, SiteFiles) else SiteFiles.of(files)
        self.programs = programs

    @classmethod
    def build(cls, corpus_dir=None, shown: tuple = ()) -> "Site":
        """The gym for the built-in corpus plus the programs added under `corpus_dir` (and `shown`'s records,
        in memory, in front), every program's drill
        items made if not kept: the page is rendered now, each listing when it is first asked for
        (`site.SiteFiles`)."""
        start = gym_start(corpus_dir, shown=shown)
        return cls._rendered(start.corpus, start.whole_pool())

    @classmethod
    def start(cls, corpus_dir=None, news: str = "", shown: tuple = (), big: tuple = ()
              ) -> tuple["Site", Callable[..., "Site"] | None]:
        """The gym as `build` makes it, at once: with the drill items of the programs whose items are kept
        (`inputs.gym_start`), and, if some are not (after an add, or an upgrade), `rest(ready=None,
        before=None)`, which makes them (keeping them) and gives the whole gym, to swap in when done; `ready`
        is given the gym of each stage before (the built-in programs' items, then each added program's), and
        `before` each stage's slugs before it is made (`GymStart.whole_pool`: `serve` waits there for its
        item maker, and raises `Superseded` to stop). Until the whole
        is there the page says whose items are being made, and asks `data/drills/pending.json`. `news`: a
        line the page shows at its top (what changed in the added programs while `serve` ran); `shown`:
        records in memory shown first (`gym_start`); `big`: the pages of modules shown streamed, to link to
        (`BigModules.links`)."""
        start = gym_start(corpus_dir, shown=shown)
        from dumpgym.site.kept import KeptFiles

        kept = KeptFiles(start.corpus, digests=start.digests())  # one for every stage: a render worker's files serve each (`render_pool`)
        if not start.pending:
            return cls._rendered(start.corpus, start.pool, kept=kept, news=news, big=big), None
        # Making items loads ml_dtypes (`dtypes.is_numpy`), whose extension holds the GIL for about a second
        # as it loads: loaded here, before the URL is printed, it stalls none of the loop's answers.
        dtypes.is_numpy("bfloat16")

        def rest(ready: Callable[["Site"], None] | None = None, before: Callable[[list[str]], None] | None = None
                 ) -> "Site":
            made = [start.pool]  # the last stage's pool: what is served should a later stage fail

            def staged(pool: dict, pending: tuple[str, ...]) -> None:
                made[0] = pool
                if ready is not None:
                    ready(cls._rendered(start.corpus, pool, pending, kept, news, big))
            try:
                whole = start.whole_pool(staged, before)
            except Superseded:  # a newer start is served: nothing to say, nothing more to make
                raise
            except Exception as e:  # a bug (a kind failing on one program is skipped inside): say it, stop waiting
                print(f"dumpgym: error: making the drill items stopped ({printable(f'{type(e).__name__}: {e}')}); "
                      "the gym serves the items made before", file=sys.stderr, flush=True)
                whole = made[0]
            with collector_paused():  # the whole gym's objects, all kept (as each stage's, `whole_pool`)
                return cls._rendered(start.corpus, whole, (), kept, news, big)
        return cls._rendered(start.corpus, start.pool, start.pending, kept, news, big), rest

    @classmethod
    def _rendered(cls, corpus, drills, pending=None, kept=True, news="", big=()) -> "Site":
        files = site_files(corpus, drills, pending, kept=kept, news=news, big=big)  # the JSON a start made is read back
        files["index.html"]  # a template that fails, fails here, before serve() says where the gym is
        # The gym's programs, as the page counts them: a traced variant at other shapes is not one.
        site = cls(files, programs=len(corpus.bases))
        for gzipped in (False, True):  # answered once now: the first GET / is answered on the loop, at once
            site.get("/", accept_gzip=gzipped)
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
        if rel not in self.files:
            moved = moved_dump_page(rel)
            if moved is not None:
                return _moved(moved)
            return _plain(HTTPStatus.NOT_FOUND, f"not found: /{rel}\n")
        body = self.files[rel]
        headers = {"Content-Type": TYPES.get(_suffix(rel), "application/octet-stream"), **HEADERS}
        if _compressible(rel, len(body)):
            headers["Vary"] = "Accept-Encoding"
            if accept_gzip:
                body = self.files.gzipped(rel)
                headers["Content-Encoding"] = "gzip"
        headers["Content-Length"] = str(len(body))
        return HTTPStatus.OK, headers, body

    def ready(self, target: str, accept_gzip: bool = False) -> bool:
        """Whether `get(target)` is quick: an error, or a file already made (and compressed, if asked and due)."""
        rel = self.resolve(target)
        if rel is None or rel not in self.files:
            return True
        if not self.files.made(rel):
            return False
        return not accept_gzip or self.files.compressed(rel) or not _compressible(rel, len(self.files[rel]))

    def kept_whole(self, rel: str) -> bool:
        """Whether the file at `rel` is kept on disk (`site/kept.py`), and its compressed bytes too where `get`
        sends them: a start, or a render worker, reads it and makes nothing (each kept file's first line read)."""
        kept = self.files.kept
        length = None if kept is None else kept.length(rel)
        return length is not None and (not _compressible(rel, length) or kept.length(rel + ".gz") is not None)


def _compressible(rel: str, length: int) -> bool:
    """Whether a file of `length` bytes at `rel` is sent compressed to a client that accepts gzip."""
    return length >= _GZIP_MIN and _suffix(rel) in TYPES


def _suffix(rel: str) -> str:
    dot = rel.rfind(".")
    return rel[dot:] if dot > rel.rfind("/") else ""


# The pages a dump's modules had before they were programs of the gym (`dump/SLUG.html`, `dump/index.html`): the
# module's program in the x-ray now, so that links kept from then still lead to it.
_DUMP_PAGE = re.compile(r"dump/([a-z0-9-]{1,58})\.html")


def moved_dump_page(rel: str) -> str | None:
    """Where an old dump page's path `rel` is now (`/?xray=dump-SLUG#xray`, the gym for its index), or None."""
    if rel in ("dump/index.html", "dump"):
        return "/#corpus"
    m = _DUMP_PAGE.fullmatch(rel)
    return f"/?xray=dump-{m.group(1)}#xray" if m else None


def _moved(location: str) -> tuple[int, dict[str, str], bytes]:
    status, headers, body = _plain(HTTPStatus.FOUND, f"moved to {location}\n")
    return status, {**headers, "Location": location}, body


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


class GymServer:
    """The gym over HTTP on one asyncio event loop: every connection a coroutine, none a thread.

    A connection costs a few kilobytes however slowly its client sends or reads, so slow clients hold
    nobody else. Each has a read deadline (`timeout` for the whole request head, however slowly it
    trickles in) and a write deadline (`timeout` for each 64 KB of the answer the client takes).
    At most `connections` are served at once; more wait in the kernel's listen backlog. A file is
    rendered or compressed, the first time it is asked for, in a worker thread, never on the loop; with
    `renderers` (a `render_pool.RenderPool`, which `serve` forks), a kept file is made in a worker process
    and read back from disk by a thread.
    HTTP/1.0: one request per connection, closed after the answer.
    """

    request_queue_size = BACKLOG

    def __init__(self, address: tuple[str, int], site: Site, connections: int = CONNECTIONS,
                 timeout: float = TIMEOUT):
        family = socket.getaddrinfo(address[0] or None, address[1], type=socket.SOCK_STREAM,
                                    flags=socket.AI_PASSIVE)[0][0]
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # `::` serves IPv4 too, as `python -m http.server` does
                with contextlib.suppress(AttributeError, OSError):
                    self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            self.socket.bind(address)
            self.socket.listen(self.request_queue_size)
        except BaseException:
            self.socket.close()
            raise
        self.socket.setblocking(False)
        self.server_address = self.socket.getsockname()
        self.site, self.connections, self.timeout = site, connections, timeout
        self.hosts = _hosts(self.server_address[0], address[0], self.server_address[1])
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._stopped = threading.Event()
        self._shutdown = threading.Event()  # asked before the loop ran: serve_forever returns at once
        self.closed = threading.Event()  # set by `server_close`: the folder's watcher stops looking
        self._workers = ThreadPoolExecutor(max_workers=RENDER_WORKERS, thread_name_prefix="dumpgym-render")
        # The files of the whole corpus or pool take up to seconds to make: in a lane of their own, so that
        # no program's file queues behind them (once, two of them held both workers for a second).
        self._whole = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dumpgym-render-whole")
        # (site, file, gzipped) -> the render in flight: the 50 first requests of one file wait for one render of it,
        # not 50 (which would hold every worker, each blocked on the file's lock, and queue the other files).
        self._rendering: dict[tuple[Site, str, bool], asyncio.Future] = {}
        # Worker processes that make the kept files (`render_pool`), where `serve` could fork them: a first
        # start's renders then run on other cores, not on this process's GIL beside every answer.
        self.renderers: RenderPool | None = None
        # The pages of a dump's modules too big to make programs of (`open`), in a lane of their own: a window is
        # read from a file of hundreds of megabytes, and queues behind no program's file, nor they behind it.
        self.big: BigModules | None = None
        self._big_lane = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dumpgym-big")
        # The processes making the drill items a start found not kept (`item_maker`), stopped with the server.
        self.makers = Makers()
        # Held while a start is made the newest and swapped in, and while an older start's stage asks whether it
        # is still the newest and swaps itself in: otherwise that stage, asked just before a newer start, could
        # be swapped in just after it, and the page would show the gym before the change until the next one.
        self.swapping = threading.Lock()

    def serve_forever(self, poll_interval: float | None = None) -> None:
        """Serve until `shutdown()` (from another thread) or Ctrl-C. `poll_interval` is accepted and unused."""
        self._stopped.clear()
        try:
            asyncio.run(self._serve())
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop `serve_forever` (called from another thread) and wait until it has returned."""
        self._shutdown.set()
        loop, stop = self._loop, self._stop
        if loop is None or stop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop already closed
            loop.call_soon_threadsafe(stop.set)
        self._stopped.wait()

    def server_close(self) -> None:
        """Close the listening socket (the port is free again at once)."""
        self.closed.set()
        self.socket.close()
        self._workers.shutdown(wait=False, cancel_futures=True)
        self._whole.shutdown(wait=False, cancel_futures=True)
        self._big_lane.shutdown(wait=False, cancel_futures=True)
        if self.big is not None:
            self.big.close()
        if self.renderers is not None:
            self.renderers.close()
        self.makers.stop_all(closing=True)

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        if self._shutdown.is_set():
            self._stop.set()
        slots = asyncio.Semaphore(self.connections)
        clients: set[asyncio.Task] = set()

        async def accept():
            while True:
                # Waiting for a slot before accepting leaves further connections in the kernel's backlog.
                await slots.acquire()
                try:
                    conn, _ = await self._loop.sock_accept(self.socket)
                except OSError:  # out of file descriptors, say: the backlog waits, and accepting goes on
                    slots.release()
                    await asyncio.sleep(0.1)
                    continue
                except BaseException:
                    slots.release()
                    raise
                # The kernel would take megabytes of a large answer for a client that reads none of it.
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
                task = asyncio.create_task(self._connection(conn, slots))
                clients.add(task)
                task.add_done_callback(clients.discard)

        accepting = asyncio.create_task(accept())
        try:
            await self._stop.wait()
        finally:
            accepting.cancel()
            for task in list(clients):
                task.cancel()
            await asyncio.gather(accepting, *clients, return_exceptions=True)
            self._loop = None

    async def _connection(self, conn: socket.socket, slots: asyncio.Semaphore) -> None:
        writer = None
        try:
            reader, writer = await asyncio.open_connection(sock=conn, limit=READ_LIMIT)
            await self._exchange(reader, writer)
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass  # the client went away, or was too slow: nothing to tell it
        finally:
            slots.release()
            if writer is None:
                conn.close()
            elif not writer.transport.is_closing():  # closed already (the client, or the loop stopping): done
                writer.transport.abort()  # whatever is left unsent to a client that stopped reading

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        method = "GET"
        try:
            async with asyncio.timeout(self.timeout):  # the whole head, however slowly it trickles in
                head = await read_head(reader)
            if head is None:
                return
            method, target, version, headers = head
            if method not in ("GET", "HEAD"):
                if method in REFUSED_METHODS:
                    status, answer, body = _plain(HTTPStatus.METHOD_NOT_ALLOWED, "only GET and HEAD are served\n")
                    answer = {**answer, "Allow": "GET, HEAD", "Connection": "close"}
                else:
                    raise Refused(HTTPStatus.NOT_IMPLEMENTED, f"Unsupported method ({method!r})")
            elif not self._addressed_here(headers, version):
                status, answer, body = _plain(HTTPStatus.MISDIRECTED_REQUEST, "refused: this server answers only for "
                                              "the address it listens on (or localhost)\n")
            else:
                status, answer, body = await self._get(target, accepts_gzip(headers.get("Accept-Encoding", "")))
        except Refused as e:
            code = HTTPStatus(e.status)
            status, answer, body = _plain(code, f"{code.value} {e.message or code.phrase}\n")
            answer = {**answer, "Connection": "close"}
        await self._send(writer, status, answer, body if method != "HEAD" else b"")
        writer.close()
        async with asyncio.timeout(self.timeout):
            await writer.wait_closed()

    async def _get(self, target: str, gzip_ok: bool) -> tuple[int, dict[str, str], bytes]:
        if self.big is not None and self.big.serves(target):
            status, headers, body = await self._loop.run_in_executor(self._big_lane, self.big.answer, target, gzip_ok)
            return status, {**HEADERS, **headers}, body
        site = self.site
        if site.ready(target, gzip_ok):
            return site.get(target, accept_gzip=gzip_ok)
        # Rendering a listing or compressing a large file takes milliseconds to a second: a worker does it.
        # Keyed by the site too: a site swapped in (`self.site = ...`) never gets the answer of the one before.
        key = (site, site.resolve(target), gzip_ok)
        render = self._rendering.get(key)
        if render is None:
            render = asyncio.ensure_future(self._made(site, target, key[1], gzip_ok))
            self._rendering[key] = render
            render.add_done_callback(lambda _: self._rendering.pop(key, None))
        # Shielded: one waiter's deadline or going away cancels its wait, not the render the others wait for.
        return await asyncio.shield(render)

    async def _made(self, site: Site, target: str, rel: str, gzip_ok: bool) -> tuple[int, dict[str, str], bytes]:
        """The answer to a GET of a file not made yet: a kept file a render process makes (`render_pool`) is
        waited for and then read from disk; anything else is made, or read, by a thread."""
        pool = self.renderers
        if pool is not None and pool.serves(site, rel):
            await asyncio.wrap_future(pool.render(rel))  # kept now; or not (a cache that refuses writes): made here
        lane = self._whole if rel in WHOLE_FILES else self._workers
        return await self._loop.run_in_executor(lane, lambda: site.get(target, accept_gzip=gzip_ok))

    def _addressed_here(self, headers, version: str) -> bool:
        hosts = headers.get_all("Host") or []
        if not hosts:  # browsers always send Host; only an HTTP/1.0 client may leave it out
            return version == "HTTP/1.0"
        return len(hosts) == 1 and (self.hosts is None or hosts[0].strip().lower() in self.hosts)

    async def _send(self, writer: asyncio.StreamWriter, status: int, headers: dict[str, str], body: bytes) -> None:
        code = HTTPStatus(status)
        lines = [f"HTTP/1.0 {code.value} {code.phrase}", "Server: dumpgym", f"Date: {formatdate(usegmt=True)}",
                 *(f"{name}: {value}" for name, value in headers.items())]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        view = memoryview(body)
        for start in range(0, len(view), CHUNK):
            writer.write(view[start:start + CHUNK])
            async with asyncio.timeout(self.timeout):  # each chunk in its time: a client that stops reading goes
                await writer.drain()
        async with asyncio.timeout(self.timeout):
            await writer.drain()


def _hosts(bound: str, given: str, port: int) -> frozenset[str] | None:
    """The Host values a server bound to `bound` answers, with or without its port; None (any) on a wildcard."""
    if ipaddress.ip_address(bound.split("%")[0]).is_unspecified:
        return None
    names = {*LOOPBACK_HOSTS, _bracket(bound), _bracket(given.lower())}
    return frozenset(n for name in names for n in (name, f"{name}:{port}"))


def make_server(site: Site, host: str = "127.0.0.1", port: int = 8000, *, connections: int = CONNECTIONS,
                timeout: float = TIMEOUT) -> GymServer:
    """An HTTP server for `site`, bound but not yet serving (port 0 picks a free port)."""
    return GymServer((host, port), site, connections, timeout)


def url_of(server: GymServer) -> str:
    """The http:// URL a bound server answers on (its loopback address when bound to every address)."""
    host, port = server.server_address[:2]
    if ipaddress.ip_address(host.split("%")[0]).is_unspecified:
        host = "::1" if ":" in host else "127.0.0.1"
    return f"http://{_bracket(host)}:{port}/"


def exposed(server: GymServer) -> bool:
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


def _announce(server: GymServer, host: str, start: str = "") -> None:
    programs = server.site.programs
    print(f"dumpgym: the gym is at {url_of(server)}{start} ({programs} programs; Ctrl-C stops)", flush=True)
    if exposed(server):
        print(f"dumpgym: warning: listening on {printable(host)}, the gym's data (file paths and sources of your added "
              "programs) is visible on the network", file=sys.stderr, flush=True)


def serve(host: str = "127.0.0.1", port: int = 8000, open_browser: bool = False, corpus_dir=None,
          start: str = "", shown: tuple = (), later=None, big: BigModules | None = None) -> None:
    """Serve the gym (built-in corpus plus added programs; `shown`'s records, held in memory, in front) until interrupted, printing its URL (with `start`, the path of the page to open first).
    `later()`, when given, makes more records to show (and notes to say) while the gym is served: a thread
    calls it after the URL is printed and starts the gym again with them in front (`_show_later`). `big`: the
    dump's modules too big to make programs of, each shown streamed at `big/SLUG.html` (`serve/big.py`), their
    line indexes made by processes of their own (the first started by `open` before it calls this, `big.start`),
    read by a thread from the moment the render workers are forked.

    The port is bound before the gym is rendered (a few seconds): a busy port is said at once, and a
    browser that connects early waits in the listen backlog until the gym is there. Drill items that
    are not kept (after an add, or an upgrade) are made by a thread after the URL is printed, and the
    whole gym swapped in when they are (`Site.start`): the page says so meanwhile. On Linux, two render
    worker processes forked before any thread runs keep every file made from the corpus that no start
    has kept yet, from the URL on (`render_pool`), and exit when all are kept.
    """
    server = _bind(Site({}), host, port)
    try:
        seen = corpus_state(corpus_dir)  # before the start reads the folder: a change during it is seen after
        # The gym's objects (a million, all kept) made with Python's collector off, then out of its sight: its
        # collections would walk them all, again and again as they are made, and then under the first GETs (a
        # pause of a second each).
        gc.disable()
        try:
            links = big.links() if big is not None else ()
            server.site, rest = (Site.start(corpus_dir, shown=shown, big=links) if shown or links
                                 else Site.start(corpus_dir))
            # Forked now, before any thread runs: from here on they make the files a first start has not kept.
            server.renderers = RenderPool.fork(server.site, close=[server.socket])
            if big is not None:  # its first index is being made since `open` started it: read from here on
                server.big = big
                big.listen()
        finally:
            gc.freeze()
            gc.enable()
        _announce(server, host, start)
        generation = [0]  # bumped by each swap of the corpus: a stage of an older one is not swapped in
        if rest is not None:
            _finish_later(server, rest, lambda: generation[0] == 0, corpus_dir)
        showing = [tuple(shown)]  # the records in front: `later`'s join them when made
        _watch_corpus(server, corpus_dir, seen, generation, showing)
        if later is not None:
            _show_later(server, corpus_dir, later, generation, showing)
        if open_browser:
            webbrowser.open(url_of(server) + start)
        server.serve_forever()
    except KeyboardInterrupt:
        print("dumpgym: stopped", file=sys.stderr)
    finally:
        server.server_close()


def _finish_later(server: GymServer, rest: Callable[..., Site], current: Callable[[], bool] = lambda: True,
                  corpus_dir=None) -> None:
    """Make the rest of the gym and swap it in, stage by stage (one assignment: a request in flight keeps the
    site it began with), while `current()` (no newer corpus has been swapped in since); said on stderr when
    it starts and when it is done. The items are made by a process beside the server (`item_maker`), which
    a thread waits for, holding no lock, and reads back: the answers never wait on the making (a newer
    start stops it: `server.makers.stop_all()`)."""
    print("dumpgym: making the drill items that are not kept yet (the first start after an add or an upgrade); "
          "the page says so until they are ready", file=sys.stderr, flush=True)

    def swap(site: Site) -> None:
        with server.swapping:
            if current():
                server.site = site

    def before(slugs: list[str]) -> None:
        if maker is not None:
            maker.wait(slugs)
        if not current():
            raise Superseded

    def finish() -> None:
        nonlocal maker
        began = time.perf_counter()
        # Started by this thread, which waits for it: the kernel stops the maker should the thread end first.
        maker = server.makers.started(ItemMaker.start(corpus_dir))
        try:
            swap(rest(swap, before))
            # Said before the maker is stopped and waited for: it runs in the idle class (`item_maker.background`), and
            # on a busy machine its exit can take seconds after the items it kept are served.
            if current():
                print(f"dumpgym: every drill item is ready ({time.perf_counter() - began:.1f} s)", file=sys.stderr,
                      flush=True)
        except Superseded:
            return
        finally:
            server.makers.stop(maker)

    maker = None
    # A daemon: Ctrl-C does not wait for it, and a kept file is written whole or not at all (atomic writes).
    threading.Thread(target=finish, name="dumpgym-drills", daemon=True).start()


WATCH_INTERVAL = 1.0  # seconds between looks at the folder of added programs
START_TRIES = 3  # starts tried from one state of the folder that failed, before waiting for it to change


def corpus_state(corpus_dir=None) -> tuple:
    """What an add or a remove changes in the folder of added programs: its index and each program record it
    lists, by size and modification time (not the kept drill items beside them, which a start writes
    itself); `("busy",)` while an add or a remove holds the folder's lock, which is not waited for."""
    from dumpgym.errors import CorpusFolderError
    from dumpgym.corpus.user import read_index, user_corpus_dir

    folder = user_corpus_dir(corpus_dir)
    if not (folder / "index.json").exists():
        return ()
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return ()
    try:
        if fcntl is not None:
            try:  # the shared lock a reader takes (`corpus/user.py`'s `locked`), only if free: a watcher never waits
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return ("busy",)
        try:
            slugs = read_index(folder)
        except CorpusFolderError:
            slugs = []  # a damaged index: its own size and time say when it changes
        out = []
        for path in (folder / "index.json", *(folder / f"{slug}.json" for slug in slugs)):
            try:
                st = path.stat()
                out.append((path.name, st.st_mtime_ns, st.st_size))
            except OSError:
                out.append((path.name, None, None))
        return tuple(out)
    finally:
        os.close(fd)  # and its lock with it


def what_changed(before: tuple, after: tuple) -> str:
    """In words, what an add or a remove did between two `corpus_state`s: the programs added, removed and
    added again (replaced), by slug."""
    def records(state: tuple) -> dict[str, tuple]:
        return {name.removesuffix(".json"): rest for name, *rest in state[1:]} if state and state[0][0] == "index.json" \
            else {}
    old, new = records(before), records(after)
    said = [f"{what} {', '.join(f'`{slug}`' for slug in sorted(slugs))}" for what, slugs in (
        ("added", new.keys() - old.keys()), ("removed", old.keys() - new.keys()),
        ("replaced", {slug for slug in old.keys() & new.keys() if old[slug] != new[slug]})) if slugs]
    return (f"The added programs changed while the gym ran: {'; '.join(said)}." if said
            else "The added programs changed while the gym ran.")


def _show_later(server: GymServer, corpus_dir, later, generation: list[int], showing: list[tuple]) -> None:
    """Make `later`'s records in a thread, then start the gym again with them in front beside those shown
    (`showing[0]`) and swap it in, so the next reload of the page shows them; said on stderr, as is each
    note. A failure is said in one line and the gym before it goes on being served."""
    print("dumpgym: making the programs of the dump's other modules while the gym is served; the page shows them "
          "when reloaded after they are made", file=sys.stderr, flush=True)

    def make() -> None:
        began = time.perf_counter()
        try:
            records, notes = later()
            for line in notes:
                print(f"dumpgym: warning: {printable(line)}", file=sys.stderr, flush=True)
            if not records:
                return
            one = len(records) == 1
            news = (f"{len(records)} more of the dump's modules {'was made a program' if one else 'were made programs'} "
                    f"of the gym while it ran: "
                    f"{', '.join(f'`{r.slug}`' for r in records[:5])}{' and more' if len(records) > 5 else ''}.")
            shown = showing[0] + tuple(records)
            site, rest = Site.start(corpus_dir, news, shown=shown, big=server.big.links() if server.big else ())
        except Exception as e:  # a bug: the gym before stays
            print(f"dumpgym: warning: the dump's other modules could not be made programs "
                  f"({printable(f'{type(e).__name__}: {e}')}); the gym goes on without them", file=sys.stderr,
                  flush=True)
            return
        showing[0] = shown
        with server.swapping:
            generation[0] += 1
            mine = generation[0]
            server.site = site
        made = "module of the dump is a program" if len(records) == 1 else "modules of the dump are programs"
        print(f"dumpgym: {len(records)} more {made} of the gym "
              f"({time.perf_counter() - began:.1f} s); it now has {site.programs} programs: reload the page.",
              file=sys.stderr, flush=True)
        # Said first: the page shows the new gym from the swap on, and a maker below the server on the CPU can
        # take seconds to stop on a busy machine.
        server.makers.stop_all()  # an older start's items are not served now: its maker stops
        if rest is not None:
            _finish_later(server, rest, lambda mine=mine: generation[0] == mine, corpus_dir)

    # A daemon: Ctrl-C does not wait for it; nothing is written.
    threading.Thread(target=make, name="dumpgym-dump-records", daemon=True).start()


def _watch_corpus(server: GymServer, corpus_dir, seen: tuple, generation: list[int],
                  showing: list[tuple] = ((),)) -> None:
    """Look at the folder of added programs every `WATCH_INTERVAL` in a thread; when an add or a remove
    changed it, start the gym again from it (`Site.start`: kept items read, new ones made after) and swap
    it in, so the next reload of the page shows it; said on stderr. A start that fails is said in one line
    and the gym before it goes on being served. The thread ends once the server is closed (`server_close`)."""
    def watch() -> None:
        last, failed, tries = seen, None, 0
        while not server.closed.wait(WATCH_INTERVAL):  # a closed server's gym is served no more: nothing to start
            now = corpus_state(corpus_dir)
            if now == last or now == ("busy",) or (now == failed and tries >= START_TRIES):
                continue
            news = what_changed(last, now)
            try:
                site, rest = Site.start(corpus_dir, news, shown=showing[0],
                                        big=server.big.links() if server.big else ())
            except Exception as e:  # a record that cannot be read, say: the gym before stays
                # Tried again at the next looks (a file another process was replacing may read whole then), a few
                # times, and said once; then only once the folder changes again.
                tries = tries + 1 if now == failed else 1
                if tries == 1:
                    print(f"dumpgym: warning: the added programs changed, but the gym could not be started from "
                          f"them ({printable(f'{type(e).__name__}: {e}')}); serving the gym before", file=sys.stderr,
                          flush=True)
                failed = now
                continue
            last = now
            with server.swapping:
                generation[0] += 1
                mine = generation[0]
                server.site = site
            print(f"dumpgym: {news[:1].lower()}{news[1:]} The gym now has {site.programs} programs: reload the page.",
                  file=sys.stderr, flush=True)
            # Said first, as the page shows it from the swap on: the older maker can take seconds to stop.
            server.makers.stop_all()  # an older start's items are not served now: its maker stops
            if rest is not None:
                # `mine` bound now: the loop rebinds it at the next start, and this start's question
                # 'still the newest?' must keep asking about this start's own generation.
                _finish_later(server, rest, lambda mine=mine: generation[0] == mine, corpus_dir)

    # A daemon: Ctrl-C does not wait for it.
    threading.Thread(target=watch, name="dumpgym-watch", daemon=True).start()
