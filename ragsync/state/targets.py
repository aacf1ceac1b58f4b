"""The targeted queue: ``queue`` (URLs and record ids to re-sync now, from webhooks and
``resync``) and ``deliveries`` (webhook deliveries already received, so a retry adds nothing)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

from ragsync.state.repository import Repository


class Targets(Repository):
    """The targeted queue (``state.targets``): durable until a run has handled each entry."""

    def add(
        self,
        source_id: str,
        urls: Sequence[str],
        *,
        reason: str,
        at: str,
        delivery_id: str | None = None,
        record_ids: Sequence[str] = (),
    ) -> int | None:
        """Queue targeted re-syncs; return how many, or None when ``delivery_id`` was seen
        before (nothing is queued twice for one delivery)."""
        with self.state.write():
            if delivery_id is not None:
                sql = "select 1 from deliveries where delivery_id = ?"
                if self.db.execute(sql, [f"{source_id}:{delivery_id}"]).fetchone():
                    return None
                self.db.table("deliveries").insert(
                    {
                        "delivery_id": f"{source_id}:{delivery_id}",
                        "source_id": source_id,
                        "received_at": at,
                    },
                    pk="delivery_id",
                )
            rows = [
                {
                    "source_id": source_id,
                    "url": url,
                    "record_id": None,
                    "reason": reason,
                    "delivery_id": delivery_id,
                    "enqueued_at": at,
                }
                for url in urls
            ]
            rows += [
                {
                    "source_id": source_id,
                    "url": None,
                    "record_id": rid,
                    "reason": reason,
                    "delivery_id": delivery_id,
                    "enqueued_at": at,
                }
                for rid in record_ids
            ]
            if rows:
                self.db.table("queue").insert_all(rows, pk="id")
        return len(rows)

    def list(self, limit: int = 1000) -> builtins.list[dict[str, Any]]:
        """The oldest ``limit`` entries, in the order they were queued."""
        return list(self.db.query("select * from queue order by id limit ?", [limit]))

    def remove(self, ids: Sequence[int]) -> None:
        """Drop handled entries."""
        self.state.execute_in("delete from queue where id in ({marks})", ids)

    def count(self) -> int:
        return self.db.execute("select count(*) from queue").fetchone()[0]
