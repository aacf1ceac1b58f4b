"""The sitemap connector: index recursion, gzip children, hostile XML refused."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from ragsync.config import FetchConfig
from ragsync.connectors.sitemap import (
    SitemapDocument,
    SitemapOptions,
    SitemapSource,
    gunzip_bounded,
    parse_sitemap,
)
from ragsync.fetch import Fetcher
from ragsync.testing import DevSite

URLSET = b"""<?xml version="1.0"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc> https://x.org/a </loc><lastmod>2026-01-02</lastmod></url>
  <url><loc>https://x.org/b</loc></url>
</urlset>"""


def test_parse_urlset_keeps_lastmod_as_hint():
    assert parse_sitemap(URLSET) == SitemapDocument(
        pages=(("https://x.org/a", "2026-01-02"), ("https://x.org/b", None))
    )


def test_parse_gzip_and_index():
    assert len(parse_sitemap(gzip.compress(URLSET)).pages) == 2
    index = (
        b'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<sitemap><loc>https://x.org/s1.xml.gz</loc></sitemap></sitemapindex>"
    )
    assert parse_sitemap(index) == SitemapDocument(children=("https://x.org/s1.xml.gz",))


def test_entity_expansion_is_refused():
    bomb = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>&lol3;</loc></url></urlset>"""
    with pytest.raises(ValueError, match="hostile XML refused"):
        parse_sitemap(bomb)
    with pytest.raises(ValueError, match="hostile XML refused"):
        parse_sitemap(gzip.compress(bomb))


def test_external_entities_are_refused(tmp_path: Path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    xxe = (
        f'<?xml version="1.0"?><!DOCTYPE u [<!entity x SYSTEM "file://{secret}">]>'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        "<url><loc>https://x.org/&x;</loc></url></urlset>"
    ).encode()
    with pytest.raises(ValueError, match="hostile XML refused"):
        parse_sitemap(xxe)


def test_the_parser_itself_never_expands_entities():
    # Belt and braces: even past the refusal, lxml is configured not to resolve entities.
    from ragsync.connectors.sitemap import parse_xml_sitemap

    doc = b'<!DOCTYPE u [<!ENTITY x "expanded">]><urlset><url><loc>a&x;</loc></url></urlset>'
    assert "expanded" not in str(parse_xml_sitemap(doc))


def test_gzip_bomb_is_refused():
    with pytest.raises(ValueError, match="decompressed"):
        gunzip_bounded(gzip.compress(b"\0" * 2_000_000), limit=1_000_000)


def test_a_truncated_sitemap_keeps_the_entries_before_the_cut():
    cut = URLSET[: URLSET.index(b"https://x.org/b")]
    document = parse_sitemap(cut)
    assert document.pages == (("https://x.org/a", "2026-01-02"),)
    assert document.partial and "XML breaks off after 1 complete entries" in document.partial
    stray = URLSET.replace(b"https://x.org/b", b"https://x.org/b?x=1&y=2")  # an unescaped &
    assert parse_sitemap(stray).pages == (("https://x.org/a", "2026-01-02"),)
    assert parse_sitemap(stray).partial
    assert parse_sitemap(URLSET + b"<junk/>").partial  # after the root closed: still suspect


def test_gzip_that_is_invalid_or_truncated_is_refused():
    with pytest.raises(ValueError, match="invalid gzip"):
        gunzip_bounded(b"\x1f\x8b\x08\x00 this is no deflate stream")
    with pytest.raises(ValueError, match="invalid gzip: truncated"):
        gunzip_bounded(gzip.compress(URLSET)[:-12])
    with pytest.raises(ValueError, match="invalid gzip"):
        parse_sitemap(b"\x1f\x8b garbage")
    assert gunzip_bounded(gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"  # members


@pytest.mark.parametrize("bad", [b"not xml", b"<html><body>hi</body></html>"])
def test_not_a_sitemap(bad):
    with pytest.raises(ValueError):
        parse_sitemap(bad)


def discover(url, **site_kwargs):
    """Run the connector through a real DiscoveryContext; return (candidates, outcome)."""
    from ragsync.discovery import DiscoveryContext
    from ragsync.models import SourceOutcome
    from ragsync.politeness import HostGate, PoliteFetcher
    from ragsync.state import StateDB

    fetcher = Fetcher(FetchConfig(timeout=2))
    polite = PoliteFetcher(
        fetcher, HostGate(per_host_concurrency=2, min_delay=0, max_wait=1), default_pause=1
    )
    state, outcome = StateDB(":memory:"), SourceOutcome()
    ctx = DiscoveryContext(polite, state, "docs", Path("."), outcome, lambda: "now")
    try:
        found = list(SitemapSource(SitemapOptions(url)).discover(ctx))
        again = list(SitemapSource(SitemapOptions(url)).discover(ctx))
    finally:
        fetcher.close()
    assert again == found
    return found, outcome


def test_discovers_through_an_index_of_gzip_children_and_revalidates_them():
    site = DevSite({f"/p{i}": (f"P{i}", f"<p>{i}</p>") for i in range(5)}, sitemap_index=True)
    base = site.start()
    try:
        found, outcome = discover(base + "/sitemap.xml")
    finally:
        site.stop()
    assert sorted(c.url for c in found) == [f"{base}/p{i}" for i in range(5)]
    assert all(c.lastmod for c in found) and outcome.errors == []
    assert {h.path for h in site.hits} == {"/sitemap.xml", "/sitemap-1.xml.gz", "/sitemap-2.xml.gz"}
    # The second discovery: three conditional requests, three 304s, nothing parsed.
    assert [h.status for h in site.hits[3:]] == [304, 304, 304]
    assert outcome.counters.discovery_parsed == 3
    assert outcome.counters.discovery_not_modified == 3


def test_sitemaps_listed_in_robots_txt():
    site = DevSite({"/a": ("A", "<p>a</p>")}, robots=None)
    base = site.start()
    site.robots = f"User-agent: *\nAllow: /\nSitemap: {base}/sitemap.xml\n"
    try:
        found, outcome = discover(base + "/robots.txt")
    finally:
        site.stop()
    assert [c.url for c in found] == [base + "/a"] and outcome.errors == []


def test_text_sitemap():
    document = parse_sitemap(b"https://x.org/a\n\n  https://x.org/b  \nnot a url\n")
    assert document == SitemapDocument(pages=(("https://x.org/a", None), ("https://x.org/b", None)))


def test_unreachable_sitemap_is_a_warning_not_a_crash():
    found, outcome = discover("http://127.0.0.1:9/sitemap.xml")
    assert found == [] and "127.0.0.1:9/sitemap.xml" in outcome.errors[0]


def test_a_sitemap_is_read_in_the_charset_its_response_names():
    """RFC 7303 §3: the ``Content-Type`` charset names the encoding of a sitemap that has no
    byte-order mark; over HTTP, the parser never sees it, so the connector passes it on."""
    site = DevSite(robots=None)
    base = site.start()
    urls = [f"{base}/北京/{name}.html" for name in ("天气", "镕")]
    xml = "".join(f"<url><loc>{url}</loc></url>" for url in urls)
    body = f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{xml}</urlset>'
    site.fault = lambda path, headers: (
        (200, {"Content-Type": "application/xml; charset=gb2312"}, body.encode("gb18030"))
        if path == "/sitemap.xml"
        else None
    )
    try:
        found, outcome = discover(base + "/sitemap.xml")
    finally:
        site.stop()
    assert [c.url for c in found] == urls and outcome.errors == []


def test_a_sitemap_its_encoding_does_not_decode_is_listed_but_incomplete():
    """A URL read from bytes its encoding cannot decode may be misread: the listing is no
    evidence that a page is gone (README "Deletion safety")."""
    site = DevSite(robots=None)
    base = site.start()
    body = (
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>{base}/a</loc>'
        f"</url><url><loc>{base}/caf\xe9</loc></url></urlset>"
    ).encode("latin-1")  # no declaration, no charset: UTF-8, which é in Latin-1 is not
    site.fault = lambda path, headers: (
        (200, {"Content-Type": "application/xml"}, body) if path == "/sitemap.xml" else None
    )
    try:
        found, outcome = discover(base + "/sitemap.xml")
    finally:
        site.stop()
    assert [c.url for c in found] == [f"{base}/a", f"{base}/café"]
    doubt = "the text is in doubt: its bytes are not UTF-8 (read as windows-1252)"
    assert set(outcome.errors) == {f"sitemap {base}/sitemap.xml: {doubt}"}
