"""The outlinks of an HTML page and what its robots directives allow: what a ``crawl`` source
follows (README "Discovery").

Parsed with the standard library's :class:`html.parser.HTMLParser`, not lxml: links are read on
the fetch threads, where libxml2 must not run (README "Extraction"), and a tokenizer is all a
list of ``href`` values needs.

Example::

    >>> found = page_links(
    ...     b'<base href="/book/"><a href="ch1.html#intro">1</a> <a rel="nofollow" href="/x">x</a>'
    ...     b'<a href="mailto:a@b.c">mail</a> <a href="https://other.example/">other</a>',
    ...     "text/html",
    ...     "https://docs.example.org/book/index.html",
    ... )
    >>> found.links
    ('https://docs.example.org/book/ch1.html', 'https://other.example/')
    >>> found.noindex, found.nofollow, found.truncated
    (False, False, False)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

from ragsync.encoding import decode_html
from ragsync.urls import clean_url

MAX_LINKS = 10_000  # outlinks kept per page; a page with more is cut and named (the crawl is
# then incomplete): a hostile page must not fill the state DB
NOINDEX = "the page asks not to be indexed (robots noindex)"  # its outcome's reason


@dataclass(frozen=True)
class PageLinks:
    """What a page says for a crawl.

    Attributes:
        links: its followable outlinks, absolute, fragment dropped, de-duplicated, in page
            order (http(s) only; ``rel=nofollow`` links left out; none when the page says
            ``nofollow``).
        noindex: the page asks not to be indexed (``<meta name="robots" content="noindex">``,
            ``none``, or an ``X-Robots-Tag`` header saying so).
        nofollow: the page asks that none of its links be followed.
        truncated: the page had more than :data:`MAX_LINKS` links; the rest were dropped.
    """

    links: tuple[str, ...] = ()
    noindex: bool = False
    nofollow: bool = False
    truncated: bool = False


def robots_directives(value: str, agent: str = "ragsync") -> set[str]:
    """The directives of a robots meta ``content`` or an ``X-Robots-Tag`` value that apply to
    ``agent``: comma-separated, case-insensitive; an ``agent: …`` prefix limits a header
    value to that agent (``googlebot: noindex`` is not ragsync's).

        >>> sorted(robots_directives("NoIndex, nofollow"))
        ['nofollow', 'noindex']
        >>> robots_directives("googlebot: noindex"), robots_directives("ragsync: none")
        (set(), {'none'})
    """
    head, colon, rest = value.partition(":")
    if colon and head.strip() and " " not in head.strip() and "," not in head:
        if head.strip().lower() != agent:
            return set()
        value = rest
    return {token.strip().lower() for token in value.split(",") if token.strip()}


class _Reader(HTMLParser):
    """Collects ``<a>``/``<area>`` hrefs, the first ``<base href>`` and robots meta tags."""

    def __init__(self, agent: str) -> None:
        super().__init__(convert_charrefs=True)
        self.agent = agent
        self.hrefs: list[str] = []
        self.base: str | None = None
        self.directives: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag in ("a", "area") and values.get("href"):
            if "nofollow" not in values.get("rel", "").lower().split():
                self.hrefs.append(values["href"])
        elif tag == "base" and self.base is None and values.get("href"):
            self.base = values["href"]
        elif tag == "meta" and values.get("name", "").strip().lower() in ("robots", self.agent):
            self.directives |= robots_directives(values.get("content", ""), self.agent)


def page_links(
    body: bytes,
    content_type: str,
    url: str,
    headers: Mapping[str, str] | None = None,
    *,
    agent: str = "ragsync",
) -> PageLinks:
    """The outlinks of the HTML page ``body`` fetched from ``url`` (its final URL), resolved
    against its ``<base href>`` and then ``url``; and its robots directives (meta tags named
    ``robots`` or ``agent``, and ``X-Robots-Tag`` headers).

    Args:
        body: the response body.
        content_type: its ``Content-Type``, whose charset takes part in finding the page's
            encoding as browsers find it (``ragsync.encoding.decode_html``).
        url: the URL that answered.
        headers: the response headers (lowercase names), for ``X-Robots-Tag``.
        agent: ragsync's robots product token.

    Returns:
        The page's links; never raises on malformed HTML.
    """
    directives: set[str] = set()
    for name, value in (headers or {}).items():
        if name.lower() == "x-robots-tag":
            directives |= robots_directives(value, agent)
    reader = _Reader(agent)
    try:
        reader.feed(decode_html(body, content_type).text)
        reader.close()
    except AssertionError:  # html.parser's rare internal asserts on broken markup
        pass
    directives |= reader.directives
    noindex = bool(directives & {"noindex", "none"})
    nofollow = bool(directives & {"nofollow", "none"})
    if nofollow:
        return PageLinks(noindex=noindex, nofollow=True)
    base = url
    if reader.base:
        base = resolve(url, reader.base) or url
    links: dict[str, None] = {}
    truncated = False
    for href in reader.hrefs:
        link = resolve(base, href)
        if link is None or link in links:
            continue
        if len(links) >= MAX_LINKS:
            truncated = True
            break
        links[link] = None
    return PageLinks(tuple(links), noindex=noindex, truncated=truncated)


def resolve(base: str, href: str) -> str | None:
    """``href`` made absolute against ``base``, fragment dropped; None unless http(s).

    >>> resolve("https://a.example/b/c.html", " ../d.html#top ")
    'https://a.example/d.html'
    >>> resolve("https://a.example/", "javascript:void(0)") is None
    True
    """
    try:
        link = urljoin(base, clean_url(href)).partition("#")[0]
        scheme = urlsplit(link).scheme.lower()
    except ValueError:
        return None
    return link if scheme in ("http", "https") else None
