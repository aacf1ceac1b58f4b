"""The ``crawl_links`` table: each crawled page's outlinks as last read, by record key.

A page answering 304 keeps the links stored here, so a crawl that finds nothing changed
reads its graph from the state DB instead of re-parsing pages (README "Discovery").
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ragsync.state.repository import Repository

LinksRow = tuple[str, Sequence[str], tuple[str | None, str | None], str | None]
"""``(doc key, outlinks, (etag, last_modified), skipped)``: ``skipped`` says why a page that
has no record was read for its links only (``noindex``, ``not_text``), else None."""
LinksOnly = tuple[str | None, str | None, str]
"""``(etag, last_modified, skipped)`` of a page read for its links only."""


class CrawlLinks(Repository):
    """Outlinks by record key (``state.crawl_links``)."""

    def put(self, source_id: str, links: Sequence[LinksRow], at: str) -> None:
        """Store ``[(doc key, outlinks, (etag, last_modified), skipped)]`` read at ``at``, in
        one transaction (replacing what each page had). The validators are those of a page that
        has no record to hold them (read for its links only), else ``(None, None)``."""
        if not links:
            return
        with self.state.write():
            for doc_key, urls, (etag, last_modified), skipped in links:
                row = {
                    "doc_key": doc_key,
                    "source_id": source_id,
                    "links": json.dumps(list(urls)),
                    "read_at": at,
                    "etag": etag,
                    "last_modified": last_modified,
                    "skipped": skipped,
                }
                self.db.table("crawl_links").upsert(row, pk="doc_key")

    def links(self, doc_keys: Sequence[str]) -> dict[str, list[str]]:
        """The stored outlinks of those of ``doc_keys`` that have some."""
        sql = "select doc_key, links from crawl_links where doc_key in ({marks})"
        return {
            row["doc_key"]: json.loads(row["links"]) for row in self.state.query_in(sql, doc_keys)
        }

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
