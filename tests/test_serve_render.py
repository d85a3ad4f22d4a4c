"""The server's first-request renders: one render per file however many ask for it at once, a ready file
never waiting behind one, and rendered files kept on disk (`kept_files.py`) exactly as a fresh render makes them."""
from __future__ import annotations

import http.client
import threading

from dumpgym import serve, site


def _request(srv, path: str, gzip: bool = False, timeout: float = 10) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(*srv.server_address[:2], timeout=timeout)
    try:
        conn.request("GET", path, headers={"Accept-Encoding": "gzip" if gzip else "identity"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _serving(gym: serve.Site):
    srv = serve.make_server(gym, "127.0.0.1", 0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    return srv, thread


def _stop(srv, thread) -> None:
    srv.shutdown()
    srv.server_close()
    thread.join(timeout=10)


class _CountingSite(serve.Site):
    """A site that counts the requests the loop has seen (`ready`) and the renders it ran (`get` off the loop)."""

    def __init__(self, files):
        super().__init__(files)
        self.asked: dict[str, int] = {}
        self.rendered: dict[str, int] = {}
        self.seen = threading.Condition()

    def ready(self, target, accept_gzip=False):
        with self.seen:
            self.asked[target] = self.asked.get(target, 0) + 1
            self.seen.notify_all()
        return super().ready(target, accept_gzip)

    def get(self, target, accept_gzip=False):
        if threading.current_thread() is not threading.main_thread():
            with self.seen:
                self.rendered[target] = self.rendered.get(target, 0) + 1
        return super().get(target, accept_gzip)


def test_fifty_first_requests_of_one_file_render_it_once_and_hold_no_other_file():
    release, made = threading.Event(), []

    def slow() -> bytes:
        made.append("slow")
        release.wait(60)
        return b'{"slow": true}'

    files = site.SiteFiles({"slow.json": slow, "other.json": lambda: b'{"other": true}'})
    gym = _CountingSite(files)
    srv, thread = _serving(gym)
    answers: list[tuple[int, bytes]] = []
    waiting = [threading.Thread(target=lambda: answers.append(_request(srv, "/slow.json", timeout=60)))
               for _ in range(50)]
    try:
        for t in waiting:
            t.start()
        with gym.seen:  # every one of the 50 has reached the server and waits for the render
            assert gym.seen.wait_for(lambda: gym.asked.get("/slow.json", 0) == 50, timeout=60)
        # Before: each of the 50 took a worker (blocked on the file's lock) and this waited behind them all.
        assert _request(srv, "/other.json") == (200, b'{"other": true}')
        assert not answers
    finally:
        release.set()
        for t in waiting:
            t.join(60)
        _stop(srv, thread)
    assert answers == [(200, b'{"slow": true}')] * 50
    assert made == ["slow"] and gym.rendered["/slow.json"] == 1


def test_a_made_file_is_ready_under_any_of_its_names_and_a_small_one_needs_no_compressing():
    files = site.SiteFiles({"index.html": lambda: b"<!doctype html>" + b"x" * 2000, "a.json": lambda: b"{}"})
    gym = serve.Site(files)
    assert not gym.ready("/") and not gym.ready("/index.html")
    gym.get("/index.html")
    assert gym.ready("/") and gym.ready("/index.html?x=1") and not gym.ready("/", accept_gzip=True)
    gym.get("/", accept_gzip=True)
    assert gym.ready("/index.html", accept_gzip=True)
    gym.get("/a.json")
    assert gym.ready("/a.json", accept_gzip=True)  # under 1 KB: served as it is, nothing to compress
