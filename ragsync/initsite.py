"""`ragsync init --url URL`: probe a site for the best way to list its pages, and write a
ragsync.toml with one source for it.

The probes, in order (the first that answers wins):

1. robots.txt ``Sitemap:`` lines on the site's own host (RFC 9309 §2.2.4 leaves them to the
   sitemaps protocol) — a sitemap that answers 200;
2. ``sitemap.xml`` in the start URL's directory, then at the root of the host;
3. a ``<link rel="alternate">`` RSS or Atom feed on the start page;
4. otherwise ``kind = "crawl"`` from the start URL.

Every request goes through ragsync's own :class:`~ragsync.fetch.Fetcher`, scoped to the start
URL's host (README "Security"): a redirect or a ``Sitemap:`` line to another host is not
followed, and the start page is not requested when robots.txt disallows it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from html.parser import HTMLParser
from importlib.resources import files
from urllib.parse import urljoin, urlsplit

import httpx
from protego import Protego

from ragsync.config import FetchConfig
from ragsync.encoding import decode_html
from ragsync.errors import FetchError
from ragsync.fetch import Fetcher, OutOfScope
from ragsync.models import Response
from ragsync.robots import decode_robots, parse_robots, product_token, robots_target
from ragsync.scope import Scope, origin
from ragsync.urls import split_url, start_directory, with_slash

FEED_TYPES = frozenset({"application/rss+xml", "application/atom+xml"})
SITEMAP_MARKS = (b"<urlset", b"<sitemapindex")
SOURCE_ID = "docs"
EXAMPLE_INCLUDE = ("https://docs.example.org/*",)


@dataclass(frozen=True)
class SiteChoice:
    """What the probes found: the source to write and why.

    Attributes:
        kind: ``sitemap``, ``feed`` or ``crawl``.
        url: the sitemap (or robots.txt listing several), the feed, or the crawl's start URL.
        reason: one line for people: what was found where.
        include: URL globs keeping the source to the start URL's directory (a sitemap or feed
            of the whole host, when the start URL is below its root).
        widen: URL globs that would let a crawl follow the start page's links outside its
            directory (written commented out).
    """

    kind: str
    url: str
    reason: str
    include: tuple[str, ...] = ()
    widen: tuple[str, ...] = ()


class FeedLinks(HTMLParser):
    """The ``href`` of every ``<link rel="alternate">`` with an RSS or Atom type."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "link":
            return
        values = {name: (value or "") for name, value in attrs}
        rels = values.get("rel", "").lower().split()
        kind = values.get("type", "").split(";")[0].strip().lower()
        if "alternate" in rels and kind in FEED_TYPES and values.get("href", "").strip():
            self.found.append(values["href"].strip())


def feed_links(html: str, base: str) -> list[str]:
    """The RSS and Atom feeds an HTML page links to, absolute (against ``base``).

    >>> feed_links('<link rel="alternate" type="application/atom+xml" href="/feed.xml">'
    ...            '<link rel="alternate" type="text/html" href="/fr/">', "https://x.org/a/")
    ['https://x.org/feed.xml']
    """
    parser = FeedLinks()
    parser.feed(html)
    parser.close()
    return [urljoin(base, href) for href in parser.found]


class SiteProbe:
    """Probes one site (see the module docstring).

    Args:
        url: the start URL, an absolute http(s) URL.
        fetch: the ``[fetch]`` table (User-Agent, timeouts, body cap).
        transport: an httpx transport (tests); default ragsync's own.

    Raises:
        ValueError: ``url`` is not an absolute http(s) URL with a host.
    """

    def __init__(
        self,
        url: str,
        *,
        fetch: FetchConfig | None = None,
        transport: httpx.BaseTransport | None = None,
    ):
        own = origin(url)  # None: not an absolute http(s) URL with a host
        if own is None or not own[0]:
            raise ValueError(f"not an absolute http(s) URL: {url!r}")
        self.url = url
        self.root = start_directory(split_url(url).origin + "/")
        self.config = fetch or FetchConfig()
        # The start URL's host is this source's own: a local development site is allowed.
        self.scope = Scope(SOURCE_ID, frozenset({own}))
        self.fetcher = Fetcher(self.config, transport=transport)
        self.notes: list[str] = []  # probes that failed, for the reason line
        self.rules: Protego | None = None  # the site's robots.txt, once read
        self.start: tuple[Response | None, str] | None = None  # start_page's answer

    def close(self) -> None:
        self.fetcher.close()

    def get(self, url: str) -> Response | None:
        """GET ``url`` in scope; None (and a note) on any failure or a status other than 200."""
        try:
            response = self.fetcher.get(url, scope=self.scope)
        except OutOfScope as exc:
            self.notes.append(f"{url} redirects to another host: {exc.target}")
            return None
        except FetchError as exc:
            self.notes.append(str(exc) if url in str(exc) else f"{url}: {exc}")
            return None
        if response.status != 200:
            self.notes.append(f"{url}: HTTP {response.status}")
            return None
        return response

    def choose(self) -> SiteChoice:
        """The source to write (never raises for a site that answers badly: the fallback is a
        crawl from the start URL)."""
        robots = self.get(self.root + "robots.txt")
        if robots is not None:
            text = decode_robots(robots.body)
            self.rules = parse_robots(text, product_token(self.config.user_agent))
            choice = self.from_robots(robots.url, list(self.rules.sitemaps))
            if choice is not None:
                return choice
        directory = start_directory(self.url)
        for candidate in dict.fromkeys([directory + "sitemap.xml", self.root + "sitemap.xml"]):
            sitemap = self.get(candidate)
            if sitemap is not None and any(mark in sitemap.body[:4096] for mark in SITEMAP_MARKS):
                return self.limited(
                    SiteChoice("sitemap", candidate, f"found a sitemap at {candidate}"),
                    covers=start_directory(candidate),
                )
            if sitemap is not None:
                self.notes.append(f"{candidate}: not a sitemap")
        if not self.allowed():
            reason = "no sitemap, and robots.txt disallows the start page (not requested)"
            return SiteChoice("crawl", self.url, reason)
        page, moved = self.start_page()
        if page is not None:
            text = decode_html(page.body, page.headers.get("content-type", "")).text
            links = feed_links(text, page.url)
            for feed in [link for link in links if self.scope.refuse(link) is None]:
                if self.get(feed) is not None:
                    reason = f"no sitemap; the start page links to the feed {feed}"
                    return self.limited(SiteChoice("feed", feed, reason), covers=self.root)
        tried = "; ".join(self.notes[-3:])
        if page is None and self.notes[-1].startswith(f"{self.url} redirects to another host"):
            tried = f"{self.notes[-1]}: give --url that URL"
        reason = f"{moved}no sitemap or feed found ({tried})"
        elsewhere = self.links_outside(page) if page is not None else []
        widen = (self.root + "*",) if elsewhere else ()
        if elsewhere:
            # A crawl stays under its start page's directory (README "Discovery"): say what
            # that leaves out, and where `include` would widen it.
            reason += (
                f"; the crawl stays under {start_directory(self.url)}: {len(elsewhere)} links "
                f"of the start page lead elsewhere on the site, such as {elsewhere[0]} "
                f"(include = {json.dumps(list(widen))} follows them)"
            )
        return SiteChoice("crawl", self.url, reason, widen=widen)

    def allowed(self) -> bool:
        """Whether robots.txt (when the site has one) lets ragsync ask the start URL."""
        agent = product_token(self.config.user_agent)
        return self.rules is None or self.rules.can_fetch(robots_target(self.url), agent)

    def start_page(self) -> tuple[Response | None, str]:
        """The start page (asked once), and a note for the reason line when the start URL is a
        directory asked without its slash: a permanent redirect to itself plus "/" makes the
        target the start URL. A crawl stays under the start URL's directory and a sitemap is
        kept to it, and the directory of "/book" is "/", the whole site."""
        if self.start is None:
            page, moved = self.get(self.url), ""
            if page is not None and self.is_directory(page):
                moved = f"{self.url} redirects permanently to {page.url}; "
                self.url = page.url
            self.start = page, moved
        return self.start

    def is_directory(self, page: Response) -> bool:
        """Whether the start URL answered only permanent redirects to itself with a slash
        after its path."""
        permanent = all(status in (301, 308) for status, _ in page.redirects)
        return bool(page.redirects) and permanent and page.url == with_slash(self.url)

    def links_outside(self, page: Response) -> list[str]:
        """The start page's links to this host outside its directory: a crawl from it does not
        follow them."""
        from ragsync.links import page_links

        found = page_links(page.body, page.headers.get("content-type", ""), page.url, page.headers)
        directory = start_directory(self.url)
        return [
            url
            for url in found.links
            if self.scope.refuse(url) is None and not url.startswith(directory)
        ]

    def from_robots(self, robots_url: str, sitemaps: list[str]) -> SiteChoice | None:
        """A sitemap source from robots.txt's ``Sitemap:`` lines on this host that answer."""
        listed = [urljoin(robots_url, url) for url in sitemaps]
        own = [url for url in listed if self.scope.refuse(url) is None]
        if len(listed) > len(own):
            self.notes.append(f"robots.txt names {len(listed) - len(own)} sitemap(s) elsewhere")
        answering = [url for url in own if self.get(url) is not None]
        if not answering:
            return None
        if len(answering) == 1:
            reason = f"robots.txt names the sitemap {answering[0]}"
            return self.limited(SiteChoice("sitemap", answering[0], reason), covers=self.root)
        # The sitemap connector reads every Sitemap: line of a robots.txt URL itself.
        reason = f"robots.txt names {len(answering)} sitemaps; the source reads them all from it"
        return self.limited(SiteChoice("sitemap", robots_url, reason), covers=self.root)

    def limited(self, choice: SiteChoice, *, covers: str) -> SiteChoice:
        """``choice`` kept to the start URL's directory when its listing covers more. A start
        URL whose directory the listing covers exactly but that is not the directory itself
        ("/book" beside a sitemap of the whole host) is asked: it may be a directory asked
        without its slash (:meth:`start_page`)."""
        moved, path = "", urlsplit(self.url).path
        maybe_directory = path and not path.endswith("/")
        if start_directory(self.url) == covers and maybe_directory and self.allowed():
            moved = self.start_page()[1]
        directory = start_directory(self.url)
        if directory == covers or not directory.startswith(covers):
            return choice
        reason = f"{moved}{choice.reason}, kept to {directory}*"
        return SiteChoice(choice.kind, choice.url, reason, (directory + "*",))


def probe_site(
    url: str, *, fetch: FetchConfig | None = None, transport: httpx.BaseTransport | None = None
) -> SiteChoice:
    """Probe the site at ``url`` (see the module docstring) and say what source to write.

    Raises:
        ValueError: ``url`` is not an absolute http(s) URL with a host.
    """
    probe = SiteProbe(url, fetch=fetch, transport=transport)
    try:
        return probe.choose()
    finally:
        probe.close()


def site_config(choice: SiteChoice) -> str:
    """The text of a ragsync.toml: the starter's commented tables, then one source for
    ``choice`` (TOML strings written as JSON strings, which TOML reads the same)."""
    starter = files("ragsync").joinpath("starter.toml").read_text(encoding="utf-8")
    head = starter[: starter.index("\n[[sources]]") + 1]
    lines = [
        "[[sources]]",
        f'id = "{SOURCE_ID}"                           # stable: part of every record key',
        f"kind = {json.dumps(choice.kind)}",
        f"url = {json.dumps(choice.url)}",
        "# " + "".join(c for c in " ".join(choice.reason.split()) if c.isprintable()),
    ]
    if choice.include:
        lines.append(f"include = {json.dumps(list(choice.include))}")
    else:
        lines.append(f"# include = {json.dumps(list(choice.widen or EXAMPLE_INCLUDE))}")
    lines.append('# exclude = ["*/print.html"]')
    if choice.kind == "crawl":
        lines += ["# max_depth = 50", "# max_pages = 50000"]
    lines += [
        '# every = "1h"                        # how often the listing is read',
        "# missing_confirmations = 2           # 404/410 observations before a tombstone …",
        '# missing_grace = "1h"                # … spanning at least this long',
    ]
    return head + "\n".join(lines) + "\n"
