"""The ``sitemap`` source: a sitemap or sitemap index (sitemaps.org 0.9), gzip children allowed.

``<lastmod>`` is kept as a priority hint only; it is never proof of change.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from lxml import etree

from ragsync.errors import ConfigError, FetchError
from ragsync.models import Candidate
from ragsync.protocols import DiscoveryContext

MAX_DEPTH = 3
MAX_DECOMPRESSED = 50 * 1024 * 1024  # sitemaps.org: 50 MB uncompressed per file
_NS = "{http://www.sitemaps.org/schemas/sitemap/0.9}"


@dataclass(frozen=True)
class SitemapOptions:
    url: str


def _parser() -> etree.XMLParser:
    # Hostile XML: no entity expansion, no DTD, no network, no huge trees.
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)


def gunzip_bounded(body: bytes, limit: int = MAX_DECOMPRESSED) -> bytes:
    """Decompress gzip ``body``, refusing output over ``limit`` bytes (a decompression bomb)."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = inflater.decompress(body, limit + 1)
    if len(out) > limit or inflater.unconsumed_tail:
        raise ValueError(f"gzip content over {limit} bytes when decompressed")
    return out


def parse_sitemap(xml: bytes) -> tuple[list[tuple[str, str | None]], list[str]]:
    """``([(page_url, lastmod), ...], [child_sitemap_url, ...])`` of one sitemap document.

    Raises:
        ValueError: not a sitemap (or hostile XML).
    """
    if xml[:2] == b"\x1f\x8b":
        xml = gunzip_bounded(xml)
    try:
        root = etree.fromstring(xml, parser=_parser())
    except etree.XMLSyntaxError as exc:
        raise ValueError(f"invalid sitemap XML: {exc}") from exc
    if root is None:
        raise ValueError("empty sitemap document")
    tag = etree.QName(root).localname
    if tag == "sitemapindex":
        children = [loc.text.strip() for loc in root.iter(f"{_NS}loc", "loc") if loc.text]
        return [], children
    if tag != "urlset":
        raise ValueError(f"not a sitemap: root element <{tag}>")
    pages = []
    for url in root.iter(f"{_NS}url", "url"):
        loc = url.find(f"{_NS}loc")
        if loc is None:
            loc = url.find("loc")
        lastmod = url.find(f"{_NS}lastmod")
        if lastmod is None:
            lastmod = url.find("lastmod")
        if loc is not None and loc.text and loc.text.strip():
            pages.append(
                (
                    loc.text.strip(),
                    lastmod.text.strip() if lastmod is not None and lastmod.text else None,
                )
            )
    return pages, []


class SitemapSource:
    """Candidates from a sitemap (or sitemap index, recursively up to depth 3)."""

    Options = SitemapOptions

    @classmethod
    def validate(cls, options: SitemapOptions) -> None:
        if not options.url.startswith(("http://", "https://")):
            raise ConfigError(f"must be an http(s) URL, got {options.url!r}", key="url")

    def __init__(self, options: SitemapOptions):
        self.options = options

    def discover(self, ctx: DiscoveryContext) -> Iterator[Candidate]:
        seen: set[str] = set()
        yield from self._walk(ctx, self.options.url, 0, seen)

    def _walk(
        self, ctx: DiscoveryContext, url: str, depth: int, seen: set[str]
    ) -> Iterator[Candidate]:
        if url in seen:
            return
        seen.add(url)
        try:
            response = ctx.get(url)
        except FetchError as exc:
            ctx.warn(f"sitemap {url}: {exc.reason}")
            return
        if response.status != 200:
            ctx.warn(f"sitemap {url}: HTTP {response.status}")
            return
        try:
            pages, children = parse_sitemap(response.body)
        except ValueError as exc:
            ctx.warn(f"sitemap {url}: {exc}")
            return
        for page_url, lastmod in pages:
            yield Candidate(url=page_url, lastmod=lastmod)
        for child in children:
            if depth + 1 > MAX_DEPTH:
                ctx.warn(f"sitemap {child}: index nesting deeper than {MAX_DEPTH}, skipped")
                continue
            yield from self._walk(ctx, child, depth + 1, seen)


__all__ = ["SitemapSource", "gunzip_bounded", "parse_sitemap"]
