"""A crawl that meets links to files that are not text pages (README "Discovery").

Real documentation links its pages to machine-readable views and assets: the Node.js API docs
link every page to a "View as JSON" file, books link images and archives. Such a link, never
indexed, is skipped (counter ``not_text``), not a failure: it must not fail every run nor leave
the crawl incomplete. A page that was indexed, a page whose links the crawl holds, and a start
page still fail when they answer with a file, so nothing they hold or lead to is lost.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from ragsync.models import DocumentStatus
from ragsync.sync import Syncer
from ragsync.testing import FastEmbedder, stop_server
from ragsync.testing.site import serve_loopback
from tests.support import make_config, sentences

PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)


def html(title: str, links: str = "", head: str = "") -> tuple[str, bytes]:
    body = f"<html><head><title>{title}</title>{head}</head><body><h1>{title}</h1>"
    return "text/html", f"{body}<p>{sentences(title)}</p><p>{links}</p></body></html>".encode()


class FileSite:
    """Paths served with their own content type and a strong ETag (a 304 to a match); every
    request recorded as ``(path, status, conditional)``."""

    def __init__(self, pages: dict[str, tuple[str, bytes]]):
        self.pages = pages
        self.broken: set[str] = set()  # paths answering 500
        self.hits: list[tuple[str, int, bool]] = []
        self.server = serve_loopback(self.handle, "GET")
        host, port = self.server.server_address[:2]
        self.base_url = f"http://{host!s}:{port}"

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path.split("?", 1)[0]
        kind, body = self.pages.get(path, ("text/plain", b""))
        status, headers = 404, {"Content-Type": "text/plain"}
        if path in self.broken:
            status, body = 500, b"busy"
        elif path in self.pages:
            etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
            status, headers = 200, {"Content-Type": kind, "ETag": etag}
            if handler.headers.get("If-None-Match") == etag:
                status, body = 304, b""
        self.hits.append((path, status, bool(handler.headers.get("If-None-Match"))))
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def since(self, start: int) -> dict[str, tuple[int, bool]]:
        return {path: (status, cond) for path, status, cond in self.hits[start:]}


def docs() -> dict[str, tuple[str, bytes]]:
    return {
        "/docs/": html(
            "Docs",
            '<a href="fs.html">fs</a> <a href="fs.json">View as JSON</a> '
            '<a href="logo.png">logo</a> <a href="all.html">All</a>',
        ),
        "/docs/fs.html": html("File system", '<a href="./">Home</a> <a href="fs.json">JSON</a>'),
        "/docs/fs.json": ("application/json", b'{"modules": [{"name": "fs"}]}'),
        "/docs/logo.png": ("image/png", PNG),
        # A hub that says noindex: read for its links only; appendix.html is linked only here.
        "/docs/all.html": html(
            "All", '<a href="appendix.html">Appendix</a>', '<meta name="robots" content="noindex">'
        ),
        "/docs/appendix.html": html("Appendix"),
    }


INDEXED = {"/docs/", "/docs/fs.html", "/docs/appendix.html"}


@pytest.fixture
def site() -> Iterator[FileSite]:
    served = FileSite(docs())
    yield served
    stop_server(served.server)


@pytest.fixture
def crawl(tmp_path: Path, site: FileSite) -> Iterator[Any]:
    made: list[Syncer] = []

    def build(start: str = "/docs/", **extra: Any) -> Syncer:
        source = {"id": "docs", "kind": "crawl", "url": site.base_url + start, **extra}
        fetch = {"retry_base": "0.2s", "retry_cap": "0.2s"}
        syncer = Syncer(make_config(tmp_path, [source], fetch=fetch), embedder=FastEmbedder())
        made.append(syncer)
        return syncer

    yield build
    for syncer in made:
        syncer.close()


def active(syncer: Syncer, site: FileSite) -> set[str]:
    return {
        d["canonical_url"].removeprefix(site.base_url)
        for d in syncer.state.documents.list("docs")
        if d["status"] == DocumentStatus.ACTIVE
    }


def test_links_to_files_are_skipped_complete_and_revalidated_with_304s(site, crawl):
    syncer = crawl()

    first = syncer.run()

    assert first.ok, first.to_dict()
    assert first.sources["docs"].incomplete == []
    assert first.counters.not_text == 2 and first.counters.fetch_errors == 0
    assert active(syncer, site) == INDEXED
    assert {"/docs/fs.json", "/docs/logo.png"} <= set(site.since(0))

    before = len(site.hits)
    second = syncer.run()

    assert second.ok and second.sources["docs"].incomplete == [], second.to_dict()
    # The files have no record: their validators are kept with their (no) links, as a
    # noindex page's are, so a run that finds nothing changed sends only conditional requests.
    hits = {path: hit for path, hit in site.since(before).items() if path != "/robots.txt"}
    assert hits["/docs/fs.json"] == hits["/docs/logo.png"] == (304, True)
    assert all(hit == (304, True) for hit in hits.values()), hits
    assert second.counters.not_text == 2 and second.counters.noindex == 1
    assert second.counters.fetch_errors == 0 and second.counters.chunks_embedded == 0

    # The file changes: still skipped, read again.
    site.pages["/docs/fs.json"] = ("application/json", b'{"modules": []}')
    third = syncer.run()
    assert third.ok and third.counters.not_text == 2 and third.counters.fetch_errors == 0


def test_a_page_that_turns_into_a_file_fails_and_keeps_what_it_held(site, crawl):
    syncer = crawl()
    assert syncer.run().ok
    # An indexed page and the noindex hub (its links lead to the appendix) now answer files.
    site.pages["/docs/fs.html"] = ("application/json", b"{}")
    site.pages["/docs/all.html"] = ("application/octet-stream", b"\x00\x01")

    result = syncer.run()

    assert not result.ok and result.counters.fetch_errors == 2
    assert result.counters.not_text == 2  # fs.json and logo.png, as before
    reasons = " ".join(result.sources["docs"].incomplete)
    assert "/docs/fs.html" in reasons and "/docs/all.html" in reasons
    assert "not a text page" in reasons
    # Nothing is lost: fs.html keeps its content, the appendix stays reachable.
    assert active(syncer, site) == INDEXED
    assert syncer.search("File system", k=3, mode="sparse")


def test_a_start_page_that_is_a_file_fails(site, crawl):
    syncer = crawl("/docs/fs.json")

    result = syncer.run()

    assert not result.ok and result.counters.fetch_errors == 1
    assert result.counters.not_text == 0
    assert any("fs.json" in reason for reason in result.sources["docs"].incomplete)


def test_a_file_that_failed_once_is_not_asked_again_once_it_answers(site, crawl):
    syncer = crawl(every="1h")
    site.broken.add("/docs/fs.json")
    first = syncer.run()
    assert first.counters.fetch_errors == 1 and first.counters.not_text == 1
    key = f"docs:{site.base_url}/docs/fs.json"
    assert syncer.state.attempts.get(key)["state"] == "retrying"

    site.broken.clear()
    time.sleep(0.5)  # its retry is due; the source is not
    retried = syncer.run()
    assert retried.counters.not_text == 1 and retried.counters.fetch_errors == 0
    assert syncer.state.attempts.get(key) is None  # it answered: no failure stands

    before = len(site.hits)
    assert syncer.run().counters.requests_sent == 0  # nothing due
    assert site.hits[before:] == []


def test_a_linked_archive_larger_than_max_body_bytes_is_skipped_unread(site, tmp_path):
    site.pages["/docs/dist.tar.gz"] = ("application/gzip", bytes(50_000))
    kind, body = site.pages["/docs/"]
    site.pages["/docs/"] = (kind, body.replace(b"</body>", b'<a href="dist.tar.gz">get</a></body>'))
    source = {"id": "docs", "kind": "crawl", "url": site.base_url + "/docs/"}
    config = make_config(tmp_path, [source], fetch={"max_body_bytes": 10_000})
    with Syncer(config, embedder=FastEmbedder()) as syncer:
        result = syncer.run()
    assert result.ok and result.sources["docs"].incomplete == [], result.to_dict()
    assert result.counters.not_text == 3 and result.counters.fetch_errors == 0
