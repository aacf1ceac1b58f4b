"""The ``crawl_links`` table: each crawled page's outlinks as last read, by record key.

A page answering 304 keeps the links stored here, so a crawl that finds nothing changed
reads its graph from the state DB instead of re-parsing pages (README "Discovery").
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ragsync.state.repository import Repository


class CrawlLinks(Repository):
    """Outlinks by record key (``state.crawl_links``)."""

    def put(self, source_id: str, links: Sequence[tuple[str, Sequence[str]]], at: str) -> None:
        """Store ``[(doc key, outlinks)]`` read at ``at``, in one transaction (replacing what
        each page had)."""
        if not links:
            return
        with self.state.write():
            for doc_key, urls in links:
                row = {
                    "doc_key": doc_key,
                    "source_id": source_id,
                    "links": json.dumps(list(urls)),
                    "read_at": at,
                }
                self.db.table("crawl_links").upsert(row, pk="doc_key")

    def links(self, doc_keys: Sequence[str]) -> dict[str, list[str]]:
        """The stored outlinks of those of ``doc_keys`` that have some."""
        sql = "select doc_key, links from crawl_links where doc_key in ({marks})"
        return {
            row["doc_key"]: json.loads(row["links"]) for row in self.state.query_in(sql, doc_keys)
        }

    def forget(self, doc_keys: Sequence[str]) -> None:
        """Drop the stored outlinks of pages proven gone (tombstoned)."""
        self.state.execute_in("delete from crawl_links where doc_key in ({marks})", doc_keys)
