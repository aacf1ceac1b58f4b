"""The ``sitemap`` source: sitemaps.org 0.9 XML sitemaps and sitemap indexes (recursively, to a
depth bound), gzip children (with a decompressed-size limit), text sitemaps (one URL per line),
and the ``Sitemap:`` lines of a robots.txt when ``url`` points at one.

Each sitemap file is revalidated conditionally: an unchanged one (304) costs no parsing.
``<lastmod>`` orders work (newest first) but is never proof of change.

The listing is complete only when every document of it was read whole. A document that cannot
be fetched or parsed, an XML document that breaks off (its complete entries are still listed), a
document whose text is in doubt (its encoding cannot decode it; its entries are still listed),
an index nested deeper than :data:`MAX_DEPTH` or more documents than ``max_sitemaps`` make it
incomplete (``ctx.incomplete``), and then no page counts as "no longer listed". Within one
listing a document is read once per canonical URL, and a document whose content equals one
already read is not expanded again (an index listing itself under many query strings).
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from protego import Protego

from ragsync.encoding import decode_xml, utf8_xml
from ragsync.errors import ConfigError
from ragsync.models import Candidate, Response
from ragsync.protocols import DiscoveryContext
from ragsync.robots import decode_robots
from ragsync.urls import canonical_url, require_http_url

from .xmlsafety import refuse_entities

MAX_DEPTH = 3
MAX_DECOMPRESSED = 50 * 1024 * 1024  # sitemaps.org: 50 MB uncompressed per file
_NS = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
_GZIP_MAGIC = b"\x1f\x8b"
# Hostile XML: no entity expansion, no DTD, no network, no huge trees.
_SAFE_XML = {"resolve_entities": False, "no_network": True, "load_dtd": False, "huge_tree": False}


@dataclass(frozen=True)
class SitemapOptions:
    url: str
    max_sitemaps: int = 1000  # sitemap documents read per listing (a bound on hostile indexes)


@dataclass(frozen=True)
class SitemapDocument:
    """One parsed sitemap file.

    ``pages`` are ``(page_url, lastmod)``; ``children`` the child sitemaps of an index;
    ``partial`` says why the XML ended before its root element closed (the entries complete
    before the cut are kept) or why its text is in doubt, None for a whole document.
    """

    pages: tuple[tuple[str, str | None], ...] = ()
    children: tuple[str, ...] = ()
    partial: str | None = None


def gunzip_bounded(body: bytes, limit: int = MAX_DECOMPRESSED) -> bytes:
    """Decompress gzip ``body`` (every member of a multi-member file).

    Raises:
        ValueError: output over ``limit`` bytes (a decompression bomb), or ``body`` is not
            valid gzip (corrupt, or truncated before a member's end).
    """
    out = bytearray()
    rest = body
    while True:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            # limit + 1 - len(out) >= 1: a max_length of 0 would mean "no limit".
            out += inflater.decompress(rest, limit + 1 - len(out))
        except zlib.error as exc:
            raise ValueError(f"invalid gzip: {exc}") from exc
        if len(out) > limit or inflater.unconsumed_tail:
            raise ValueError(f"gzip content over {limit} bytes when decompressed")
        if not inflater.eof:
            raise ValueError(f"invalid gzip: truncated after {len(out)} decompressed bytes")
        rest = inflater.unused_data
        if rest[:2] != _GZIP_MAGIC:
            return bytes(out)


def parse_text_sitemap(text: str) -> list[tuple[str, str | None]]:
    """Pages of a text sitemap: one absolute http(s) URL per line (sitemaps.org §"Text file")."""
    return [
        (line.strip(), None)
        for line in text.splitlines()
        if line.strip().startswith(("http://", "https://"))
    ]


def parse_sitemap(body: bytes, content_type: str = "") -> SitemapDocument:
    """One sitemap document (XML, gzip-compressed XML, or a text sitemap) served with
    ``content_type``.

    Its text is read as XML is (``ragsync.encoding.decode_xml``: a byte-order mark, the
    ``Content-Type`` charset, the XML declaration, UTF-8, windows-1252), then parsed as
    UTF-8, so that a sitemap in Shift_JIS, GB18030 or UTF-16 lists the URLs a browser would
    read in it. A text in doubt (bytes its encoding cannot decode, a declaration that lies
    or names an unknown encoding) is listed but ``partial``: a URL in it may be misread,
    so it is no evidence that a page is gone. XML is read incrementally: when it breaks off
    (a truncated file, a stray ``&``), the ``<url>`` (or index ``<sitemap>``) elements
    complete before the error are kept and the result says why it is ``partial``.

    Example::

        >>> parse_sitemap(b"https://x.org/a\\n").pages
        (('https://x.org/a', None),)

    Raises:
        ValueError: not a sitemap (or hostile XML, or invalid gzip, or a gzip bomb).
    """
    if body[:2] == _GZIP_MAGIC:
        body = gunzip_bounded(body)
    decoded = decode_xml(body, content_type)
    doubt = f"the text is in doubt: {decoded.doubt}" if decoded.doubt else None
    if not decoded.text.lstrip(" \t\r\n").startswith("<"):
        pages = parse_text_sitemap(decoded.text)
        if not pages:
            raise ValueError("neither an XML sitemap nor a text sitemap of http(s) URLs")
        return SitemapDocument(pages=tuple(pages), partial=doubt)
    xml = utf8_xml(decoded.text)
    refuse_entities(xml)
    document = parse_xml_sitemap(xml)
    if doubt is None:
        return document
    partial = f"{doubt}; {document.partial}" if document.partial else doubt
    return SitemapDocument(document.pages, document.children, partial=partial)


def _child_text(element: Any, name: str) -> str | None:
    child = element.find(f"{_NS}{name}")
    if child is None:
        child = element.find(name)
    if child is None or not child.text or not child.text.strip():
        return None
    return str(child.text.strip())


_PIECE = 65536  # bytes fed to the XML parser at a time
_FINE_PIECE = 64  # … within the piece where the XML broke off, read again


class _BrokenOff(Exception):
    """The XML broke off in the piece fed from byte ``at``."""

    def __init__(self, at: int, error: Exception):
        self.at, self.error = at, error
        super().__init__(str(error))


def _xml_events(xml: bytes, *, fine_from: int | None = None) -> Iterator[tuple[str, Any]]:
    """``(event, element)`` of ``xml`` fed to a pull parser a piece at a time (``_FINE_PIECE``
    bytes from ``fine_from`` on). Only the events of pieces that parsed are yielded: after an
    error libxml2 closes the open elements itself, so an entry cut short would read as whole.

    Raises:
        _BrokenOff: the XML is not well-formed; its ``at`` is where the failing piece began.
    """
    from lxml import etree  # here: a run that reads no sitemap does not load lxml

    parser = etree.XMLPullParser(events=("start", "end"), **_SAFE_XML)
    at = 0
    try:
        while at < len(xml):
            if fine_from is None:
                end = at + _PIECE
            elif at < fine_from:
                end = min(at + _PIECE, fine_from)
            else:
                end = at + _FINE_PIECE
            parser.feed(xml[at:end])
            yield from parser.read_events()
            at = end
        parser.close()
    except etree.XMLSyntaxError as exc:
        raise _BrokenOff(at, exc) from exc
    yield from parser.read_events()


def parse_xml_sitemap(xml: bytes) -> SitemapDocument:
    """A ``<urlset>`` or ``<sitemapindex>``, entry by entry (see :func:`parse_sitemap`).

    When the XML breaks off, the piece where it did is read again in small pieces, so that
    the entries complete before the break are kept (and nothing after it)."""
    try:
        return _read_xml_sitemap(xml)
    except _BrokenOff as broken:
        return _read_xml_sitemap(xml, fine_from=broken.at)


def _read_xml_sitemap(xml: bytes, *, fine_from: int | None = None) -> SitemapDocument:
    """:func:`parse_xml_sitemap` with one reading (``fine_from``: see :func:`_xml_events`);
    without ``fine_from``, a break is raised (:class:`_BrokenOff`) to be read again."""
    from lxml import etree

    pages: list[tuple[str, str | None]] = []
    children: list[str] = []
    root = None
    kind = ""
    try:
        for event, element in _xml_events(xml, fine_from=fine_from):
            if root is None:
                root = element
                kind = etree.QName(root).localname
                if kind not in ("urlset", "sitemapindex"):
                    raise ValueError(f"not a sitemap: root element <{kind}>")
                continue
            if event != "end" or element.getparent() is not root:
                continue
            loc = _child_text(element, "loc")
            name = etree.QName(element).localname
            if loc and (kind, name) == ("urlset", "url"):
                pages.append((loc, _child_text(element, "lastmod")))
            elif loc and (kind, name) == ("sitemapindex", "sitemap"):
                children.append(loc)
            element.clear()  # a 50 MB sitemap is read in constant memory
            while element.getprevious() is not None:
                del root[0]
    except _BrokenOff as broken:
        if fine_from is None:
            raise
        if root is None:
            raise ValueError(f"invalid sitemap XML: {broken.error}") from broken.error
        kept = len(pages) + len(children)
        return SitemapDocument(
            tuple(pages),
            tuple(children),
            partial=f"XML breaks off after {kept} complete entries (kept): {broken.error}",
        )
    if root is None:
        raise ValueError("empty sitemap document")
    return SitemapDocument(tuple(pages), tuple(children))


def _parse_for_cache(response: Response) -> dict:
    document = parse_sitemap(response.body, response.headers.get("content-type", ""))
    return {
        "pages": [list(page) for page in document.pages],
        "children": list(document.children),
        "partial": document.partial,
    }


def _robots_sitemaps(body: bytes) -> list[str]:
    return list(Protego.parse(decode_robots(body)).sitemaps)


class SitemapSource:
    """Candidates from a sitemap (or sitemap index, recursively up to depth 3)."""

    Options = SitemapOptions

    @classmethod
    def validate(cls, options: SitemapOptions) -> None:
        require_http_url(options.url, "url")
        if options.max_sitemaps < 1:
            raise ConfigError("must be at least 1", key="max_sitemaps")

    def __init__(self, options: SitemapOptions):
        self.options = options

    def discover(self, ctx: DiscoveryContext) -> Iterator[Candidate]:
        roots = [self.options.url]
        if urlsplit(self.options.url).path == "/robots.txt":
            roots = ctx.get_parsed_or_warn(self.options.url, _robots_sitemaps, "robots.txt")
            if roots is None:
                return
            if not roots:
                ctx.incomplete(f"robots.txt {self.options.url}: lists no Sitemap")
        yield from _Walk(ctx, self.options.max_sitemaps).run(roots)


@dataclass(frozen=True)
class _Queued:
    url: str
    depth: int
    parent: str | None
    index_paths: tuple[str, ...]  # scheme://host/path of the indexes above it


def _path_of(url: str) -> str:
    parts = urlsplit(canonical_url(url))
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


class _Walk:
    """One listing, breadth first (so a document is read at its shallowest depth).

    Each canonical URL is read once, each distinct content expanded once, at most ``cap``
    documents are read, and an index below an index at the same path (``/sitemap.xml`` listing
    ``/sitemap.xml?v=1`` … as indexes of their own) is not expanded: that is a self-reference
    whose tree has no end. What is left unread makes the listing incomplete, with one reason
    per kind of skip (the first URL and a count), however many documents it concerns.
    """

    def __init__(self, ctx: DiscoveryContext, cap: int):
        self.ctx = ctx
        self.cap = cap
        self.read = 0
        self.seen_urls: set[str] = set()
        self.seen_contents: set[str] = set()
        self.queue: deque[_Queued] = deque()
        self.skipped: dict[str, tuple[str, int]] = {}  # kind → (first reason, count)

    def run(self, roots: list[str]) -> Iterator[Candidate]:
        try:
            for root in roots:
                self._enqueue(_Queued(root, 0, None, ()))
            while self.queue:
                yield from self._read(self.queue.popleft())
        finally:
            for first, count in self.skipped.values():
                more = f" ({count - 1} more like it in this listing)" if count > 1 else ""
                self.ctx.incomplete(first + more)

    def _read(self, item: _Queued) -> Iterator[Candidate]:
        if self.read >= self.cap:
            for unread in (item, *self.queue):
                self._skip(
                    "cap",
                    f"sitemap {unread.url}: not read: max_sitemaps={self.cap}"
                    " documents already read",
                )
            self.queue.clear()
            return
        self.read += 1
        parsed = self.ctx.get_parsed_response_or_warn(item.url, _parse_for_cache, "sitemap")
        if parsed is None:
            return
        digest = hashlib.sha256(json.dumps(parsed, sort_keys=True).encode()).hexdigest()
        if digest in self.seen_contents:
            return  # the same document under another URL: listed already
        self.seen_contents.add(digest)
        if parsed.get("partial"):
            self.ctx.incomplete(f"sitemap {item.url}: {parsed['partial']}")
        for page_url, lastmod in parsed["pages"]:
            yield Candidate(url=page_url, lastmod=lastmod)
        if not parsed["children"]:
            return
        path = _path_of(item.url)
        if path in item.index_paths:
            self._skip(
                "loop",
                f"sitemap {item.url}: not expanded: a sitemap index below an"
                f" index at the same path (listed by {item.parent})",
            )
            return
        for child in parsed["children"]:
            self._enqueue(_Queued(child, item.depth + 1, item.url, (*item.index_paths, path)))

    def _enqueue(self, item: _Queued) -> None:
        try:
            key = canonical_url(item.url)
        except ValueError as exc:
            listed_by = f" (listed by {item.parent})" if item.parent else ""
            self.ctx.incomplete(f"sitemap {item.url!r}: not read: {exc}{listed_by}")
            return
        if key in self.seen_urls:
            return
        if item.depth > MAX_DEPTH:
            self._skip(
                "depth",
                f"sitemap {item.url}: not read: nested deeper than {MAX_DEPTH}"
                f" levels (listed by {item.parent})",
            )
            return
        self.seen_urls.add(key)
        self.queue.append(item)

    def _skip(self, kind: str, reason: str) -> None:
        first, count = self.skipped.get(kind, (reason, 0))
        self.skipped[kind] = (first, count + 1)


__all__ = ["SitemapDocument", "SitemapSource", "gunzip_bounded", "parse_sitemap"]
