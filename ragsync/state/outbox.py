"""The ``outbox`` table: change events for webhook endpoints, written in the transaction of
the change they announce (README "Change log and events") and delivered in order per document."""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

from ragsync.state.repository import Repository


class Outbox(Repository):
    """Outbound events (``state.outbox``); :mod:`ragsync.events` delivers them."""

    def list_due(self, now: str, limit: int = 100) -> builtins.list[dict[str, Any]]:
        """Pending events due by ``now``, oldest first, each the oldest undelivered one of its
        document and endpoint (delivery keeps per-document order)."""
        sql = (
            "select * from outbox o where state = 'pending' and next_attempt_at <= ? "
            "and not exists (select 1 from outbox p where p.endpoint = o.endpoint and "
            "p.doc_key = o.doc_key and p.state = 'pending' and p.seq < o.seq) "
            "order by seq limit ?"
        )
        return list(self.db.query(sql, [now, limit]))

    def update(self, seq: int, fields: Mapping[str, Any]) -> None:
        with self.state.write():
            self.db.table("outbox").update(seq, fields)

    def list(self, state: str | None = None) -> builtins.list[dict[str, Any]]:
        """Every event, or those in ``state`` (``pending``, ``delivered``, ``dead``)."""
        if state is None:
            return list(self.db.query("select * from outbox order by seq"))
        return list(self.db.query("select * from outbox where state = ? order by seq", [state]))

    def replay(self, *, event_id: str | None = None, dead: bool = False, at: str) -> int:
        """Make dead (or named) events pending again; returns how many."""
        where, args = ("state = 'dead'", []) if dead else ("event_id = ?", [event_id])
        with self.state.write():
            cursor = self.db.execute(
                f"update outbox set state = 'pending', attempts = 0, next_attempt_at = ?, "
                f"last_error = null where {where}",
                [at, *args],
            )
        return cursor.rowcount
