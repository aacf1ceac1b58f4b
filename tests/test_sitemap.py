"""The sitemap connector: index recursion, gzip children, hostile XML refused."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from connectors.sitemap import SitemapOptions, SitemapSource, gunzip_bounded, parse_sitemap
from ragsync.config import FetchConfig
from ragsync.devsite import DevSite
from ragsync.fetch import Fetcher

URLSET = b"""<?xml version="1.0"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc> https://x.org/a </loc><lastmod>2026-01-02</lastmod></url>
  <url><loc>https://x.org/b</loc></url>
</urlset>"""


def test_parse_urlset_keeps_lastmod_as_hint():
    pages, children = parse_sitemap(URLSET)
    assert pages == [("https://x.org/a", "2026-01-02"), ("https://x.org/b", None)]
    assert children == []


def test_parse_gzip_and_index():
    pages, _ = parse_sitemap(gzip.compress(URLSET))
    assert len(pages) == 2
    index = (
        b'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<sitemap><loc>https://x.org/s1.xml.gz</loc></sitemap></sitemapindex>"
    )
    assert parse_sitemap(index) == ([], ["https://x.org/s1.xml.gz"])


def test_entity_expansion_is_refused():
    bomb = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>&lol3;</loc></url></urlset>"""
    pages, _ = parse_sitemap(bomb)
    assert all("lollol" not in url for url, _ in pages)


def test_external_entities_are_not_read(tmp_path: Path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    xxe = (
        f'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY x SYSTEM "file://{secret}">]>'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        "<url><loc>https://x.org/&x;</loc></url></urlset>"
    ).encode()
    pages, _ = parse_sitemap(xxe)
    assert all("TOP-SECRET" not in url for url, _ in pages)


def test_gzip_bomb_is_refused():
    with pytest.raises(ValueError, match="decompressed"):
        gunzip_bounded(gzip.compress(b"\0" * 2_000_000), limit=1_000_000)


@pytest.mark.parametrize("bad", [b"not xml", b"<html><body>hi</body></html>"])
def test_not_a_sitemap(bad):
    with pytest.raises(ValueError):
        parse_sitemap(bad)


class Ctx:
    def __init__(self, fetcher):
        self.fetcher = fetcher
        self.base_dir = Path(".")
        self.warnings: list[str] = []

    def get(self, url):
        return self.fetcher.get(url)

    def warn(self, message):
        self.warnings.append(message)


def test_discovers_through_an_index_of_gzip_children():
    site = DevSite({f"/p{i}": (f"P{i}", f"<p>{i}</p>") for i in range(5)}, sitemap_index=True)
    base = site.start()
    fetcher = Fetcher(FetchConfig())
    try:
        ctx = Ctx(fetcher)
        found = list(SitemapSource(SitemapOptions(base + "/sitemap.xml")).discover(ctx))
    finally:
        fetcher.close()
        site.stop()
    assert sorted(c.url for c in found) == [f"{base}/p{i}" for i in range(5)]
    assert all(c.lastmod for c in found) and ctx.warnings == []
    assert {h.path for h in site.hits} == {"/sitemap.xml", "/sitemap-1.xml.gz", "/sitemap-2.xml.gz"}


def test_unreachable_sitemap_is_a_warning_not_a_crash():
    fetcher = Fetcher(FetchConfig(timeout=2))
    try:
        ctx = Ctx(fetcher)
        found = list(SitemapSource(SitemapOptions("http://127.0.0.1:9/sitemap.xml")).discover(ctx))
    finally:
        fetcher.close()
    assert found == [] and "127.0.0.1:9/sitemap.xml" in ctx.warnings[0]
