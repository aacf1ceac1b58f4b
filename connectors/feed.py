"""The ``feed`` source: RSS 2.0, RSS 1.0 (RDF) and Atom 1.0 through feedparser.

Entry links are candidates; entries newer than the checkpoint (the newest entry date and the
ids seen) come first. A feed holds only recent entries, so an entry dropping off it is never a
deletion: known pages are still revalidated by fetch, and only a 404/410 counts against them.
A feed that cannot be fetched or parsed makes the listing incomplete.

Relative entry links are resolved (RFC 3986 §5.1) against the innermost ``xml:base`` (XML Base),
then the response's ``Content-Location``, then the URL the feed was fetched from (after
redirects). HTTP itself no longer makes ``Content-Location`` a base URI (RFC 7231, appendix B),
but feed readers have always honoured it, feedparser among them. An entry whose link still
cannot be made an absolute http(s) URL is counted in a warning, never dropped silently.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urljoin

from ragsync.encoding import decode_xml, utf8_xml
from ragsync.models import Candidate, Checkpoint, Response
from ragsync.protocols import DiscoveryContext
from ragsync.urls import require_http_url

from .xmlsafety import refuse_entities

MAX_REMEMBERED_IDS = 1000


@dataclass(frozen=True)
class FeedOptions:
    url: str


def _entry_time(entry: dict) -> str | None:
    for key in ("updated_parsed", "published_parsed", "created_parsed"):
        value = entry.get(key)
        if value:
            return time.strftime("%Y-%m-%dT%H:%M:%SZ", value)
    return None


def _entry_link(entry: dict) -> str | None:
    link = entry.get("link")
    if link:
        return str(link)
    for item in entry.get("links", []):
        if item.get("rel", "alternate") == "alternate" and item.get("href"):
            return str(item["href"])
    return None


def parse_feed(
    body: bytes,
    *,
    url: str = "",
    content_location: str | None = None,
    content_type: str = "",
) -> dict:
    """``{"version", "entries": [{"id", "link", "updated"}], "unresolved": n}`` of an RSS or
    Atom document fetched from ``url``.

    Its text is read as XML is (``ragsync.encoding.decode_xml``: a byte-order mark, the
    ``Content-Type`` charset, the XML declaration, UTF-8, windows-1252) and handed to
    feedparser as UTF-8: feedparser's own reading tries Python's codec for the declared
    name and, when that fails (① in Shift_JIS, which Python's shift_jis lacks), reads the
    whole feed as windows-1252.

    Args:
        body: the document.
        url: where it was fetched from (after redirects): the base URI of last resort.
        content_location: the response's ``Content-Location``, if any (resolved against
            ``url``): the base URI before ``url``.
        content_type: the response's ``Content-Type`` (its charset is the document's).

    ``unresolved`` counts the entries left out because their link is missing or cannot be
    made an absolute http(s) URL.

    Example::

        >>> feed = parse_feed(
        ...     b'<rss version="2.0"><channel><item><link>a.html</link></item></channel></rss>',
        ...     url="https://example.org/blog/feed.xml",
        ... )
        >>> [e["link"] for e in feed["entries"]], feed["unresolved"]
        (['https://example.org/blog/a.html'], 0)

    Raises:
        ValueError: not a feed.
    """
    import feedparser

    body = utf8_xml(decode_xml(body, content_type).text)
    refuse_entities(body)
    base = urljoin(url, content_location) if content_location else url
    # feedparser applies xml:base only on top of an absolute base, passed as the response's
    # Content-Location; but it then also rewrites relative ids (an RSS guid "/posts/1" is an
    # opaque string), so the ids come from a parse without a base, entry for entry. Given
    # response headers, feedparser takes a body without a charset for ISO-8859-1 (RFC 3023's
    # default for text/*), so they say what the body now is: UTF-8.
    utf8 = {"content-type": "application/xml; charset=utf-8"}
    parsed = feedparser.parse(
        body, response_headers={**utf8, "content-location": base} if base else utf8
    )
    ids = (
        [entry.get("id") for entry in feedparser.parse(body, response_headers=utf8).entries]
        if base
        else []
    )
    if not parsed.get("version") and not parsed.get("entries"):
        problem = parsed.get("bozo_exception") or "no RSS or Atom root element"
        raise ValueError(f"not a feed: {problem}")
    entries, unresolved = [], 0
    with warnings.catch_warnings():  # feedparser warns about its updated→published fallback
        warnings.simplefilter("ignore", DeprecationWarning)
        for index, entry in enumerate(parsed.entries):
            link = _absolute(_entry_link(entry), base)
            if link is None:
                unresolved += 1
                continue
            entry_id = ids[index] if index < len(ids) else entry.get("id")
            entries.append(
                {"id": str(entry_id or link), "link": link, "updated": _entry_time(entry)}
            )
    return {
        "version": parsed.get("version") or "unknown",
        "entries": entries,
        "unresolved": unresolved,
    }


def parse_feed_response(response: Response) -> dict:
    """:func:`parse_feed` of a response: its body, final URL, ``Content-Location`` and
    ``Content-Type``."""
    return parse_feed(
        response.body,
        url=response.url,
        content_location=response.headers.get("content-location"),
        content_type=response.headers.get("content-type", ""),
    )


def _absolute(link: str | None, base: str) -> str | None:
    """``link`` resolved against ``base`` (feedparser leaves some relative), or None when it
    is not then an http(s) URL."""
    if not link:
        return None
    try:
        resolved = urljoin(base, link.strip()) if base else link.strip()
    except ValueError:  # "http://[broken"
        return None
    return resolved if resolved.startswith(("http://", "https://")) else None


class FeedSource:
    """Candidates from a feed's entries, newest first."""

    Options = FeedOptions
    listing = "recent"

    @classmethod
    def validate(cls, options: FeedOptions) -> None:
        require_http_url(options.url, "url")

    def __init__(self, options: FeedOptions):
        self.options = options

    def discover(self, ctx: DiscoveryContext) -> Iterator[Candidate | Checkpoint]:
        feed = ctx.get_parsed_response_or_warn(self.options.url, parse_feed_response, "feed")
        if feed is None:
            return
        if feed.get("unresolved"):
            ctx.warn(
                f"feed {self.options.url}: {feed['unresolved']} entries without a link that "
                "resolves to an http(s) URL (left out)"
            )
        checkpoint = ctx.checkpoint() or {}
        newest, known = checkpoint.get("newest"), set(checkpoint.get("ids", []))
        for entry in feed["entries"]:
            fresh = entry["id"] not in known or (
                entry["updated"] is not None and newest is not None and entry["updated"] > newest
            )
            yield Candidate(
                url=entry["link"], lastmod=entry["updated"], priority=1.0 if fresh else 0.0
            )
        dates = [e["updated"] for e in feed["entries"] if e["updated"]] + (
            [newest] if newest else []
        )
        ids = [e["id"] for e in feed["entries"]] + [
            i for i in checkpoint.get("ids", []) if i not in {e["id"] for e in feed["entries"]}
        ]
        yield Checkpoint({"newest": max(dates) if dates else None, "ids": ids[:MAX_REMEMBERED_IDS]})
