"""The ``feed`` source: RSS 2.0, RSS 1.0 (RDF) and Atom 1.0 through feedparser.

Entry links are candidates; entries newer than the checkpoint (the newest entry date and the
ids seen) come first. A feed holds only recent entries, so an entry dropping off it is never a
deletion: known pages are still revalidated by fetch, and only a 404/410 counts against them.
A feed that cannot be fetched or parsed makes the listing incomplete.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

from ragsync.models import Candidate, Checkpoint
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


def parse_feed(body: bytes) -> dict:
    """``{"version", "entries": [{"id", "link", "updated"}]}`` of an RSS or Atom document.

    Raises:
        ValueError: not a feed.
    """
    import feedparser

    refuse_entities(body)
    parsed = feedparser.parse(body)
    if not parsed.get("version") and not parsed.get("entries"):
        problem = parsed.get("bozo_exception") or "no RSS or Atom root element"
        raise ValueError(f"not a feed: {problem}")
    entries = []
    with warnings.catch_warnings():  # feedparser warns about its updated→published fallback
        warnings.simplefilter("ignore", DeprecationWarning)
        for entry in parsed.entries:
            link = _entry_link(entry)
            if not link or not link.startswith(("http://", "https://")):
                continue
            entries.append(
                {"id": str(entry.get("id") or link), "link": link, "updated": _entry_time(entry)}
            )
    return {"version": parsed.get("version") or "unknown", "entries": entries}


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
        feed = ctx.get_parsed_or_warn(self.options.url, parse_feed, "feed")
        if feed is None:
            return
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
