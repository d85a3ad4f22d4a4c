"""The request head of `dumpgym serve`: read from an asyncio stream, parsed, and refused as `http.server` would.

`serve/server.py` answers; this module reads what was asked: the request line and up to 100 headers, each
line at most 64 KB (longer is 414 or 431), the version checked (400, 505), HTTP/0.9's bare `GET /`
taken; and `Accept-Encoding`, weighed.
"""
from __future__ import annotations

import asyncio
import http.client
import io
from http import HTTPStatus

READ_LIMIT = 65536  # a longer request line is 414, a longer header line 431 (http.server's limits)
MAX_HEADERS = 100


class Refused(Exception):
    """A request the server answers with an error status and closes (http.server's answers, ours in plain text)."""

    def __init__(self, status: HTTPStatus, message: str | None = None):
        super().__init__(message)
        self.status, self.message = status, message


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether an Accept-Encoding value admits gzip: named (or `x-gzip`) with q above 0, or else `*` with q above 0."""
    weights: dict[str, float] = {}
    for part in accept_encoding.split(","):
        coding, *params = (p.strip() for p in part.split(";"))
        weight = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        if coding:
            weights[coding.lower()] = weight
    for coding in ("gzip", "x-gzip", "*"):
        if coding in weights:
            return weights[coding] > 0  # NaN is not
    return False


def request_line(line: bytes) -> tuple[str, str, str]:
    """(method, target, version) of a request line, refused as http.server refuses it; version "HTTP/0.9" if absent."""
    text = line.decode("iso-8859-1").rstrip("\r\n")
    words = text.split()
    if len(words) >= 3:
        version = words[-1]
        number = version[5:].split(".") if version.startswith("HTTP/") else []
        if len(number) != 2 or not all(n.isdigit() and len(n) <= 10 for n in number):
            raise Refused(HTTPStatus.BAD_REQUEST, f"Bad request version ({version!r})")
        if (int(number[0]), int(number[1])) >= (2, 0):
            raise Refused(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, f"Invalid HTTP version ({version[5:]})")
    if not 2 <= len(words) <= 3:
        raise Refused(HTTPStatus.BAD_REQUEST, f"Bad request syntax ({text!r})")
    if len(words) == 2 and words[0] != "GET":
        raise Refused(HTTPStatus.BAD_REQUEST, f"Bad HTTP/0.9 request type ({words[0]!r})")
    target = words[1]
    if target.startswith("//"):
        target = "/" + target.lstrip("/")
    return words[0], target, words[2] if len(words) == 3 else "HTTP/0.9"


async def _line(reader: asyncio.StreamReader, too_long: HTTPStatus, message: str) -> bytes:
    """One line of the request head (with its newline); what came before the end if the client stopped sending."""
    try:
        return await reader.readuntil(b"\n")
    except asyncio.LimitOverrunError:
        raise Refused(too_long, message) from None
    except asyncio.IncompleteReadError as e:
        return e.partial


async def read_head(reader: asyncio.StreamReader):
    """(method, target, version, headers) of one request head, or None when the client sent nothing."""
    first = await _line(reader, HTTPStatus.REQUEST_URI_TOO_LONG, None)
    if not first.split():
        return None
    method, target, version = request_line(first)
    lines = []
    while True:
        line = await _line(reader, HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Line too long")
        if line in (b"\r\n", b"\n", b""):
            break
        lines.append(line)
        if len(lines) > MAX_HEADERS:
            raise Refused(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Too many headers")
    return method, target, version, http.client.parse_headers(io.BytesIO(b"".join(lines) + b"\r\n"))
