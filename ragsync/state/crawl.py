"""The ``crawl_links`` table: each crawled page's outlinks as last read, by record key.

A page answering 304 keeps the links stored here, so a crawl that finds nothing changed
reads its graph from the state DB instead of re-parsing pages (README "Discovery").
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

from ragsync.state.repository import Repository

LinksRow = tuple[str, Sequence[str], tuple[str | None, str | None], str | None]
"""``(doc key, outlinks, (etag, last_modified), skipped)``: ``skipped`` says why a page that
has no record was read for its links only (``noindex``, ``not_text``), or that is a crawl's
entry (``entry``: a start page that redirects temporarily), else None."""
LinksOnly = tuple[str | None, str | None, str]
"""``(etag, last_modified, skipped)`` of a page read for its links only."""
EntryRow = tuple[list[str], str | None, dict[str, Any] | None]
"""``(outlinks, skipped, pending)`` of a stored page (see :meth:`CrawlLinks.rows`)."""


class CrawlLinks(Repository):
    """Outlinks by record key (``state.crawl_links``)."""

    def put(self, source_id: str, links: Sequence[LinksRow], at: str) -> None:
        """Store ``[(doc key, outlinks, (etag, last_modified), skipped)]`` read at ``at``, in
        one transaction (replacing what each page had). The validators are those of a page that
        has no record to hold them (read for its links only), else ``(None, None)``."""
        rows = [
            {
                "doc_key": doc_key,
                "source_id": source_id,
                "links": json.dumps(list(urls)),
                "read_at": at,
                "etag": etag,
                "last_modified": last_modified,
                "skipped": skipped,
                "pending": None,
            }
            for doc_key, urls, (etag, last_modified), skipped in links
        ]
        self.state.put_rows("crawl_links", rows, key=["doc_key"], on_conflict="update")

    def links(self, doc_keys: Sequence[str]) -> dict[str, list[str]]:
        """The stored outlinks of those of ``doc_keys`` that have some."""
        sql = "select doc_key, links from crawl_links where doc_key in ({marks})"
        return {
            row["doc_key"]: json.loads(row["links"]) for row in self.state.query_in(sql, doc_keys)
        }

    def rows(self, doc_keys: Collection[str]) -> dict[str, EntryRow]:
        """``{doc key: (outlinks, skipped, pending)}`` of those of ``doc_keys`` stored: a
        crawl's start pages (``pending``: a new target of an entry not confirmed yet, as
        :meth:`set_pending` stored it, else None)."""
        sql = "select doc_key, links, skipped, pending from crawl_links where doc_key in ({marks})"
        return {
            row["doc_key"]: (
                json.loads(row["links"]),
                row["skipped"],
                json.loads(row["pending"]) if row["pending"] else None,
            )
            for row in self.state.query_in(sql, sorted(doc_keys))
        }

    def set_pending(self, doc_key: str, pending: dict[str, Any]) -> None:
        """Keep what an entry's new target has been seen as so far (its links stand)."""
        with self.state.write():
            self.db.execute(
                "update crawl_links set pending = ? where doc_key = ?",
                [json.dumps(pending), doc_key],
            )

    def validators(self, doc_keys: Sequence[str]) -> dict[str, LinksOnly]:
        """``{doc key: (etag, last_modified, skipped)}`` of those of ``doc_keys`` stored with
        validators (pages read for their links only)."""
        sql = (
            "select doc_key, etag, last_modified, skipped from crawl_links "
            "where doc_key in ({marks}) and (etag is not null or last_modified is not null)"
        )
        return {
            row["doc_key"]: (row["etag"], row["last_modified"], row["skipped"] or "noindex")
            for row in self.state.query_in(sql, doc_keys)
        }

    def forget(self, doc_keys: Sequence[str]) -> None:
        """Drop the stored outlinks of pages proven gone (tombstoned)."""
        self.state.execute_in("delete from crawl_links where doc_key in ({marks})", doc_keys)
