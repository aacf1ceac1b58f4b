"""The ``crawl_links`` table: each crawled page's outlinks as last read, by record key.

A page answering 304 keeps the links stored here, so a crawl that finds nothing changed
reads its graph from the state DB instead of re-parsing pages (README "Discovery").
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ragsync.state.repository import Repository

LinksRow = tuple[str, Sequence[str], tuple[str | None, str | None]]
"""``(doc key, outlinks, (etag, last_modified))``."""


class CrawlLinks(Repository):
    """Outlinks by record key (``state.crawl_links``)."""

    def put(self, source_id: str, links: Sequence[LinksRow], at: str) -> None:
        """Store ``[(doc key, outlinks, (etag, last_modified))]`` read at ``at``, in one
        transaction (replacing what each page had). The validators are those of a page that
        has no record to hold them (it says noindex), else ``(None, None)``."""
        if not links:
            return
        with self.state.write():
            for doc_key, urls, (etag, last_modified) in links:
                row = {
                    "doc_key": doc_key,
                    "source_id": source_id,
                    "links": json.dumps(list(urls)),
                    "read_at": at,
                    "etag": etag,
                    "last_modified": last_modified,
                }
                self.db.table("crawl_links").upsert(row, pk="doc_key")

    def links(self, doc_keys: Sequence[str]) -> dict[str, list[str]]:
        """The stored outlinks of those of ``doc_keys`` that have some."""
        sql = "select doc_key, links from crawl_links where doc_key in ({marks})"
        return {
            row["doc_key"]: json.loads(row["links"]) for row in self.state.query_in(sql, doc_keys)
        }

    def validators(self, doc_keys: Sequence[str]) -> dict[str, tuple[str | None, str | None]]:
        """``{doc key: (etag, last_modified)}`` of those of ``doc_keys`` stored with some."""
        sql = (
            "select doc_key, etag, last_modified from crawl_links where doc_key in ({marks}) "
            "and (etag is not null or last_modified is not null)"
        )
        return {
            row["doc_key"]: (row["etag"], row["last_modified"])
            for row in self.state.query_in(sql, doc_keys)
        }

    def forget(self, doc_keys: Sequence[str]) -> None:
        """Drop the stored outlinks of pages proven gone (tombstoned)."""
        self.state.execute_in("delete from crawl_links where doc_key in ({marks})", doc_keys)
