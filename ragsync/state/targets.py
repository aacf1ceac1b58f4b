"""The targeted queue: ``queue`` (URLs and record ids to re-sync now, from webhooks and
``resync``) and ``deliveries`` (webhook deliveries already received, by delivery id and, for
GitHub deliveries, by body digest, so a retry or a replay adds nothing)."""

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
        body_digest: str | None = None,
        record_ids: Sequence[str] = (),
    ) -> int | None:
        """Queue targeted re-syncs; return how many.

        A webhook delivery is remembered by ``delivery_id`` and, when given, by ``body_digest``
        (the SHA-256 hex of a GitHub delivery's body: GitHub's signature covers the body, not
        its delivery id, so a replay may come with any id). When either was seen before for
        this source, nothing is queued and None is returned.
        """
        keys = [f"{source_id}:{delivery_id}"] if delivery_id is not None else []
        if body_digest is not None:
            keys.append(f"{source_id}:sha256:{body_digest}")
        with self.state.write():
            if keys:
                # PostgreSQL: two copies of one delivery at once must not both pass the check.
                self.state.lock("ragsync-deliveries")
                sql = "select 1 from deliveries where delivery_id in ({marks})"
                if next(self.state.query_in(sql, keys), None) is not None:
                    return None
                self.db.table("deliveries").insert_all(
                    [
                        {"delivery_id": key, "source_id": source_id, "received_at": at}
                        for key in keys
                    ],
                    pk="delivery_id",
                )
            recorded = delivery_id or (f"sha256:{body_digest}" if body_digest else None)
            rows = [
                {
                    "source_id": source_id,
                    "url": url,
                    "record_id": None,
                    "reason": reason,
                    "delivery_id": recorded,
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
                    "delivery_id": recorded,
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
