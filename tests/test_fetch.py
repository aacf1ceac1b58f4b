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
