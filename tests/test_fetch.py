"""Conditional fetch and robots.txt, against httpx.MockTransport (same contract as the network)."""

from __future__ import annotations

import gzip

import httpx
import pytest

from ragsync.config import FetchConfig
from ragsync.errors import FetchError
from ragsync.fetch import Fetcher
from ragsync.policy import classify
from ragsync.robots import RobotsPolicy
from tests.support.rawserver import RawServer, read_request


def fetcher_for(handler, **config):
    return Fetcher(FetchConfig(**config), transport=httpx.MockTransport(handler))


def test_validators_are_sent_back():
    seen = {}

    def handler(request):
        seen.update(request.headers)
        return httpx.Response(304)

    response = fetcher_for(handler).get(
        "https://x.org/a", etag='"v1"', last_modified="Wed, 01 Jan 2026 00:00:00 GMT"
    )
    assert response.status == 304
    assert seen["if-none-match"] == '"v1"'
    assert seen["if-modified-since"] == "Wed, 01 Jan 2026 00:00:00 GMT"
    assert seen["user-agent"].startswith("ragsync/")


def test_unconditional_without_validators():
    seen = {}

    def handler(request):
        seen.update(request.headers)
        return httpx.Response(200, text="<p>x</p>", headers={"ETag": '"v2"'})

    response = fetcher_for(handler).get("https://x.org/a")
    assert "if-none-match" not in seen and "if-modified-since" not in seen
    assert response.etag == '"v2"'


def test_oversized_and_bomb_bodies_end_the_page():
    big = fetcher_for(lambda r: httpx.Response(200, content=b"x" * 5000), max_body_bytes=1000)
    with pytest.raises(FetchError, match="max_body_bytes") as info:
        big.get("https://x.org/big")
    assert not info.value.transient
    bomb = gzip.compress(b"\0" * 200_000)
    gz = fetcher_for(
        lambda r: httpx.Response(200, content=bomb, headers={"Content-Encoding": "gzip"}),
        max_body_bytes=10_000,
    )
    with pytest.raises(FetchError, match="max_body_bytes"):
        gz.get("https://x.org/bomb")


def test_redirect_loop_is_terminal_and_names_the_url():
    loop = fetcher_for(lambda r: httpx.Response(301, headers={"Location": str(r.url)}))
    with pytest.raises(FetchError, match="https://x.org/loop") as info:
        loop.get("https://x.org/loop")
    assert not info.value.transient and "redirect" in info.value.reason


def test_network_errors_are_transient():
    def handler(request):
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(FetchError) as info:
        fetcher_for(handler).get("https://x.org/down")
    assert info.value.transient


@pytest.mark.parametrize(
    ("status", "ctype", "body", "verdict"),
    [
        (304, "", b"", "not_modified"),
        (200, "text/html", b"<p>x</p>", "content"),
        (200, "", b"<p>x</p>", "content"),
        (200, "text/plain", b"x", "content"),
        (200, "image/png", b"\x89PNG", "refused"),
        (200, "text/html", b"   ", "refused"),
        (404, "text/html", b"", "missing"),
        (410, "text/html", b"", "missing"),
        (429, "", b"", "rate_limited"),
        (401, "", b"", "needs_attention"),
        (403, "", b"", "needs_attention"),
        (503, "", b"", "retry"),
        (418, "", b"", "refused"),
    ],
)
def test_classify(status, ctype, body, verdict):
    assert classify(status, ctype, body)[0] == verdict


@pytest.mark.parametrize(
    ("robots_status", "robots_body", "allowed", "disallowed"),
    [
        (200, "User-agent: *\nDisallow: /private\n", ["/a"], ["/private/x"]),
        (200, "User-agent: ragsync\nDisallow: /\n\nUser-agent: *\nAllow: /\n", [], ["/a"]),
        (404, "", ["/a", "/private/x"], []),
        (503, "", [], ["/a"]),  # RFC 9309 §2.3.1.4: unreachable → complete disallow
    ],
)
def test_robots(robots_status, robots_body, allowed, disallowed):
    calls = []

    def handler(request):
        calls.append(request.url.path)
        return httpx.Response(robots_status, text=robots_body)

    fetcher = fetcher_for(handler)

    def get_text(url):
        response = fetcher.get(url)
        if response.status != 200:
            raise FetchError.for_status(url, response.status)
        return response.body.decode()

    robots = RobotsPolicy(get_text, "ragsync/0.1.0")
    for path in allowed:
        assert robots.allowed("https://x.org" + path)
    for path in disallowed:
        assert not robots.allowed("https://x.org" + path)
    assert calls == ["/robots.txt"]  # fetched once per host


def test_validators_with_obs_text_go_back_byte_for_byte():
    """RFC 9110 §8.8.3 / §5.5: an ETag may hold bytes 0x80-0xFF; the conditional request must
    carry exactly those bytes (it used to die with UnicodeEncodeError on every later run)."""
    etag = b'"\xe9t\xe9"'  # "été" in latin-1: not UTF-8
    last_modified = b"Wed, 01 Jan 2026 00:00:00 GMT"
    seen: list[bytes] = []

    def origin(conn):
        while head := read_request(conn):
            seen.append(head)
            if b"\r\nIf-None-Match: " + etag + b"\r\n" in head:
                conn.sendall(b"HTTP/1.1 304 Not Modified\r\nETag: " + etag + b"\r\n\r\n")
            else:
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nETag: "
                    + etag
                    + b"\r\nLast-Modified: "
                    + last_modified
                    + b"\r\nContent-Length: 8\r\n\r\n"
                    + b"<p>x</p>"
                )

    server = RawServer(origin)
    fetcher = Fetcher(FetchConfig(timeout=5))
    try:
        first = fetcher.get(server.url + "/a")
        assert first.status == 200 and first.etag == '"\xe9t\xe9"'
        again = fetcher.get(server.url + "/a", etag=first.etag, last_modified=first.last_modified)
    finally:
        fetcher.close()
        server.stop()
    assert again.status == 304
    assert b"\r\nIf-None-Match: " + etag + b"\r\n" in seen[1]
    assert b"\r\nIf-Modified-Since: " + last_modified + b"\r\n" in seen[1]


@pytest.mark.parametrize(
    ("stored", "sent"),
    [
        ('"v1"', b'"v1"'),
        ('"\xe9t\xe9"', b'"\xe9t\xe9"'),  # latin-1 text of the raw bytes
        ('"\u20ac"', '"\u20ac"'.encode()),  # stored by an older ragsync from UTF-8: its bytes
    ],
)
def test_stored_validators_are_sent_as_their_bytes(stored, sent):
    seen = {}

    def handler(request):
        seen["etag"] = dict(request.headers.raw)[b"If-None-Match"]
        return httpx.Response(304)

    fetcher_for(handler).get("https://x.org/a", etag=stored)
    assert seen["etag"] == sent
