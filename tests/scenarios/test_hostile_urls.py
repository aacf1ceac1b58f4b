"""Hostile URLs end to end (issue #17): credentials, IPv6 literals, control characters and
backslashes, robots.txt matched against the URL as published, a byte-order mark, relative feed
links. A server on 127.0.0.2 stands for an internal service: it must see no request at all."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.sax.saxutils import escape

import pytest

from ragsync.config import config_from_mapping
from ragsync.errors import ConfigError
from ragsync.testing import DevSite
from tests.support import page, sentences

HTML = {"Content-Type": "text/html; charset=utf-8"}
XML = {"Content-Type": "application/xml"}
UPDATED = "<updated>2026-11-03T10:00:00Z</updated>"


class Recorder(BaseHTTPRequestHandler):
    """Answers 200 to everything and records each request line."""

    protocol_version = "HTTP/1.1"
    seen: list[str]

    def do_GET(self) -> None:
        self.seen.append(self.path)
        body = page("Internal", {"Secret": [sentences("iam role credentials token")]})[1].encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def serve(address: tuple[str, int], family: int = socket.AF_INET):
    seen: list[str] = []
    handler = type("Handler", (Recorder,), {"seen": seen})
    server_class = type("Server", (ThreadingHTTPServer,), {"address_family": family})
    server = server_class(address, handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


@pytest.fixture
def internal():
    """A server on 127.0.0.2: (its base URL, the paths it was asked for)."""
    server, seen = serve(("127.0.0.2", 0))
    yield f"http://127.0.0.2:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def sitemap(urls: list[str]) -> bytes:
    locs = "".join(f"<url><loc>{escape(url)}</loc></url>" for url in urls)
    return (
        f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>'
    ).encode()


def docs_site(**kwargs) -> DevSite:
    site = DevSite(
        {p: page(f"Doc {p}", {"Body": [sentences(f"doc {p}")]}) for p in ("/docs/a", "/docs/b")},
        **kwargs,
    )
    site.start()
    return site


def listing(site: DevSite, urls: list[str]) -> None:
    site.fault = lambda path, headers: (200, XML, sitemap(urls)) if path == "/hostile.xml" else None


def indexed(syncer) -> list[str]:
    return sorted(d["canonical_url"] for d in syncer.state.documents.list())


def test_a_url_with_credentials_is_refused_and_the_password_never_shown(
    make_syncer, internal, caplog
):
    base, seen = internal
    site = docs_site()
    listing(
        site,
        [
            f"{site.base_url.replace('//', '//bob:s3cret@')}/docs/a",
            f"http://bob:s3cret@{base.removeprefix('http://')}/latest/meta-data/",
            f"{site.base_url}/docs/b",
        ],
    )
    try:
        syncer = make_syncer(site, "/hostile.xml")
        result = syncer.run()
        assert indexed(syncer) == [f"{site.base_url}/docs/b"]
        errors = result.sources["docs"].errors
        assert sum("credentials refused" in e for e in errors) == 2
        assert not any("s3cret" in e or "bob" in e for e in errors)
        assert "s3cret" not in caplog.text
        assert [h.path for h in site.page_hits() if h.path.startswith("/docs")] == ["/docs/b"]
        assert seen == []
    finally:
        site.stop()


def test_a_configured_url_with_credentials_is_a_config_error(tmp_path):
    source = {"id": "docs", "kind": "sitemap", "url": "https://bob:s3cret@example.org/sitemap.xml"}
    with pytest.raises(ConfigError, match="credentials") as caught:
        config_from_mapping({"sources": [source]}, base_dir=tmp_path)
    assert "s3cret" not in str(caught.value)


def test_a_backslash_is_a_slash_so_the_host_is_the_listed_one(make_syncer, internal):
    # Read by RFC 3986 (urlsplit), "127.0.0.1:PORT\" is userinfo and the host is 127.0.0.2; a
    # browser, and the URL Standard, read the backslash as "/" and stay on 127.0.0.1.
    base, seen = internal
    site = docs_site()
    authority = site.base_url.removeprefix("http://")
    listing(
        site,
        [
            f"http://{authority}\\@{base.removeprefix('http://')}/latest/meta-data/",
            f"http:\\\\{authority}\\docs\\a",
            f"\t {site.base_url}/do\tcs/\nb \n",  # tabs and newlines go, ends are trimmed
        ],
    )
    try:
        syncer = make_syncer(site, "/hostile.xml")
        syncer.run()
        assert seen == []
        assert f"{site.base_url}/docs/a" in indexed(syncer)
        assert f"{site.base_url}/docs/b" in indexed(syncer)
        assert not any("127.0.0.2" in url for url in indexed(syncer))
    finally:
        site.stop()


def test_an_ipv6_literal_host_is_synced(make_syncer, internal):
    server, _ = serve(("::1", 0), socket.AF_INET6)
    v6 = f"http://[::1]:{server.server_address[1]}"
    body = sitemap([f"{v6}/docs/a", f"http://[0:0::1]:{server.server_address[1]}/docs/a"])

    class V6Site(DevSite):  # make_syncer wants a DevSite: only its base_url is used
        @property
        def base_url(self) -> str:
            return v6

    handler = server.RequestHandlerClass

    def do_get(self) -> None:
        if self.path == "/sitemap.xml":
            self.send_response(200)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.path == "/robots.txt":
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            Recorder.do_GET(self)

    handler.do_GET = do_get
    try:
        syncer = make_syncer(V6Site(), "/sitemap.xml")
        result = syncer.run()
        assert result.counters.documents_created == 1
        assert indexed(syncer) == [f"{v6}/docs/a"]
        assert internal[1] == []
    finally:
        server.shutdown()
        server.server_close()


def test_robots_txt_is_matched_against_the_url_as_published(make_syncer):
    site = docs_site(robots="User-agent: *\nDisallow: /\nAllow: /search?q=rag&page=2\n")
    listed = f"{site.base_url}/search?q=rag&page=2"
    doc = page("Search", {"Body": [sentences("search results")]})[1].encode()
    searched: list[str] = []

    def fault(path, headers):
        if path == "/hostile.xml":
            return 200, XML, sitemap([listed, f"{site.base_url}/docs/a"])
        if path.startswith("/search"):
            searched.append(path)
            return 200, HTML, doc
        return None

    site.fault = fault
    try:
        syncer = make_syncer(site, "/hostile.xml")
        syncer.run()
        # The canonical form sorts the query (page=2&q=rag), which the Allow line does not match.
        assert indexed(syncer) == [f"{site.base_url}/search?page=2&q=rag"]
        assert searched == ["/search?q=rag&page=2"]  # requested as published
        assert not [h for h in site.page_hits() if h.path.startswith("/docs")]
    finally:
        site.stop()


def test_a_robots_txt_with_a_byte_order_mark_is_obeyed(make_syncer):
    site = docs_site(robots="\ufeffUser-agent: *\nDisallow: /docs/a\n")
    listing(site, [f"{site.base_url}/docs/a", f"{site.base_url}/docs/b"])
    try:
        syncer = make_syncer(site, "/hostile.xml")
        syncer.run()
        assert indexed(syncer) == [f"{site.base_url}/docs/b"]
        assert [h.path for h in site.page_hits() if h.path.startswith("/docs")] == ["/docs/b"]
    finally:
        site.stop()


def test_relative_feed_links_resolve_against_xml_base_and_content_location(make_syncer, internal):
    base, seen = internal
    site = docs_site()
    entries = "".join(
        f"<entry><id>{i}</id><title>{i}</title>{UPDATED}<link href={href!r}/></entry>"
        for i, href in enumerate(["a", "/docs/b", "javascript:x"])
    )
    feed = (
        '<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom" xml:base="../">'
        f"<title>t</title><id>urn:f</id>{UPDATED}{entries}</feed>"
    ).encode()
    # Content-Location /docs/feeds/all.atom: xml:base "../" is /docs/, so "a" is /docs/a.
    site.fault = lambda path, headers: (
        (
            200,
            {"Content-Type": "application/atom+xml", "Content-Location": "/docs/feeds/all.atom"},
            feed,
        )
        if path == "/feed.atom"
        else None
    )
    try:
        syncer = make_syncer(site, "/feed.atom", kind="feed")
        result = syncer.run()
        assert indexed(syncer) == [f"{site.base_url}/docs/a", f"{site.base_url}/docs/b"]
        assert any("1 entries without a link" in e for e in result.sources["docs"].errors)
        assert seen == []
    finally:
        site.stop()
