"""The ``sitemap`` source: sitemaps.org 0.9 XML sitemaps and sitemap indexes (recursively, to a
depth bound), gzip children (with a decompressed-size limit), text sitemaps (one URL per line),
and the ``Sitemap:`` lines of a robots.txt when ``url`` points at one.

Each sitemap file is revalidated conditionally: an unchanged one (304) costs no parsing.
``<lastmod>`` orders work (newest first) but is never proof of change.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from lxml import etree
from protego import Protego

from connectors.xmlsafety import refuse_entities
from ragsync.models import Candidate
from ragsync.protocols import DiscoveryContext
from ragsync.urls import require_http_url

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


def parse_text_sitemap(text: bytes) -> list[tuple[str, str | None]]:
    """Pages of a text sitemap: one absolute http(s) URL per line (sitemaps.org §"Text file")."""
    lines = text.decode("utf-8", errors="replace").splitlines()
    return [
        (line.strip(), None) for line in lines if line.strip().startswith(("http://", "https://"))
    ]


def parse_sitemap(xml: bytes) -> tuple[list[tuple[str, str | None]], list[str]]:
    """``([(page_url, lastmod), ...], [child_sitemap_url, ...])`` of one sitemap document
    (XML, gzip-compressed XML, or a text sitemap).

    Raises:
        ValueError: not a sitemap (or hostile XML, or a gzip bomb).
    """
    if xml[:2] == b"\x1f\x8b":
        xml = gunzip_bounded(xml)
    refuse_entities(xml)
    if not xml.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<"):
        pages = parse_text_sitemap(xml)
        if not pages:
            raise ValueError("neither an XML sitemap nor a text sitemap of http(s) URLs")
        return pages, []
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


def _parse_for_cache(body: bytes) -> dict:
    pages, children = parse_sitemap(body)
    return {"pages": pages, "children": children}


def _robots_sitemaps(body: bytes) -> list[str]:
    return list(Protego.parse(body.decode("utf-8", errors="replace")).sitemaps)


class SitemapSource:
    """Candidates from a sitemap (or sitemap index, recursively up to depth 3)."""

    Options = SitemapOptions

    @classmethod
    def validate(cls, options: SitemapOptions) -> None:
        require_http_url(options.url, "url")

    def __init__(self, options: SitemapOptions):
        self.options = options

    def discover(self, ctx: DiscoveryContext) -> Iterator[Candidate]:
        seen: set[str] = set()
        roots = [self.options.url]
        if urlsplit(self.options.url).path == "/robots.txt":
            roots = ctx.get_parsed_or_warn(self.options.url, _robots_sitemaps, "robots.txt")
            if roots is None:
                return
            if not roots:
                ctx.warn(f"robots.txt {self.options.url}: lists no Sitemap")
        for root in roots:
            yield from self._walk(ctx, root, 0, seen)

    def _walk(
        self, ctx: DiscoveryContext, url: str, depth: int, seen: set[str]
    ) -> Iterator[Candidate]:
        if url in seen:
            return
        seen.add(url)
        parsed = ctx.get_parsed_or_warn(url, _parse_for_cache, "sitemap")
        if parsed is None:
            return
        pages, children = parsed["pages"], parsed["children"]
        for page_url, lastmod in pages:
            yield Candidate(url=page_url, lastmod=lastmod)
        for child in children:
            if depth + 1 > MAX_DEPTH:
                ctx.warn(f"sitemap {child}: index nesting deeper than {MAX_DEPTH}, skipped")
                continue
            yield from self._walk(ctx, child, depth + 1, seen)


__all__ = ["SitemapSource", "gunzip_bounded", "parse_sitemap"]
