"""The ``crawl`` source: a site without a sitemap, listed by following its links from start pages.

The connector lists only the start pages (``url`` and/or ``urls``); the engine does the crawl
(:mod:`ragsync.pipeline.crawl`): breadth first, each page's ``<a href>`` outlinks read when it is
fetched and stored in the state DB, reused when the page answers 304. A link is followed when
it lies in the source's scope — its hosts (those of the start pages, plus ``allowed_hosts``),
under the directory of a start page (or its ``include`` patterns, when it has some), not
excluded — and is not ``rel=nofollow``; robots.txt applies to every page as to any source.

A crawl that ran to its end is a complete listing (a page no longer reachable is verified and
pruned by the missing-page rule); one cut by ``max_depth`` or ``max_pages``, or by a page that
failed, is incomplete (README "Deletion safety").
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ragsync.errors import ConfigError
from ragsync.models import Candidate
from ragsync.protocols import CRAWL_MAX_DEPTH, CRAWL_MAX_PAGES, DiscoveryContext
from ragsync.tables import bounded
from ragsync.urls import require_http_url


@dataclass(frozen=True)
class CrawlOptions:
    url: str | None = None  # the start page …
    urls: tuple[str, ...] = ()  # … and/or several
    max_depth: int = bounded(CRAWL_MAX_DEPTH, ge=0)  # link hops (mdBook's chain needs 16+)
    max_pages: int = bounded(CRAWL_MAX_PAGES, ge=1)  # pages in one crawl


class CrawlSource:
    """Start pages for the engine's crawl (see the module docstring)."""

    Options = CrawlOptions
    listing = "complete"

    @classmethod
    def validate(cls, options: CrawlOptions) -> None:
        if not options.url and not options.urls:
            raise ConfigError('give the start page: `url = "..."` or `urls = [...]`', key="url")
        if options.url:
            require_http_url(options.url, "url")
        for i, url in enumerate(options.urls):
            require_http_url(url, f"urls[{i}]")

    def __init__(self, options: CrawlOptions):
        self.options = options

    @property
    def start_urls(self) -> tuple[str, ...]:
        """The start pages, in the order given (``url`` first)."""
        first = (self.options.url,) if self.options.url else ()
        return first + tuple(u for u in self.options.urls if u != self.options.url)

    @property
    def max_depth(self) -> int:
        return self.options.max_depth

    @property
    def max_pages(self) -> int:
        return self.options.max_pages

    def discover(self, ctx: DiscoveryContext) -> Iterator[Candidate]:
        """The start pages; the rest of the listing is their links (followed by the engine)."""
        for url in self.start_urls:
            yield Candidate(url=url)
