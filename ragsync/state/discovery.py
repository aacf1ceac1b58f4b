"""What listing a source leaves behind: ``discovery_cache`` (each sitemap's or feed's
validators and parsed entries, for conditional re-fetches), ``checkpoints`` (a source's
continuation, e.g. an API cursor) and ``poll_log`` (one row per API poll window)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ragsync.state.repository import Repository


class Discovery(Repository):
    """The discovery cache, checkpoints and poll log (``state.discovery``)."""

    def get_entry(self, url: str) -> dict[str, Any] | None:
        """The cached listing at ``url``: validators and parsed entries, or None."""
        return next(iter(self.db.query("select * from discovery_cache where url = ?", [url])), None)

    def put_entry(self, entry: Mapping[str, Any]) -> None:
        with self.state.write():
            self.db.table("discovery_cache").upsert(entry, pk="url")

    def get_checkpoint(self, source_id: str) -> Any:
        """A source's saved continuation (JSON value), or None."""
        sql = "select checkpoint from checkpoints where source_id = ?"
        row = next(iter(self.db.query(sql, [source_id])), None)
        return json.loads(row["checkpoint"]) if row and row["checkpoint"] else None

    def put_checkpoint(self, source_id: str, checkpoint: Any, at: str) -> None:
        """Persist a source's continuation; call only after its documents are committed."""
        with self.state.write():
            self.db.table("checkpoints").upsert(
                {"source_id": source_id, "checkpoint": json.dumps(checkpoint), "updated_at": at},
                pk="source_id",
            )

    def add_poll(self, entry: Mapping[str, Any]) -> int:
        """Log the start of a poll; return its id (for :meth:`update_poll`)."""
        with self.state.write():
            return int(self.db.table("poll_log").insert(entry, pk="id").last_pk or 0)

    def update_poll(self, poll_id: int, fields: Mapping[str, Any]) -> None:
        with self.state.write():
            self.db.table("poll_log").update(poll_id, fields)

    def list_polls(self, source_id: str) -> list[dict[str, Any]]:
        sql = "select * from poll_log where source_id = ? order by id"
        return list(self.db.query(sql, [source_id]))
