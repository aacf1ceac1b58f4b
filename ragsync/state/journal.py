"""The ``journal`` table: vector-store operations committed, not yet applied (README
"Journal"). Each is idempotent, so replaying what is left after a crash is always safe."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ragsync.models import OpKind, StoreOp
from ragsync.state.repository import Repository
from ragsync.state.rows import JournalOpRow


def journal_op(
    op: OpKind,
    point_id: str,
    *,
    doc_key: str | None,
    run_id: str | None = None,
    created_at: str | None = None,
    payload: dict[str, Any] | None = None,
    text_hash: str | None = None,
    model_id: str | None = None,
) -> JournalOpRow:
    """One journal row: ``upsert`` (``payload``, and the ``text_hash`` / ``model_id`` whose
    cached vector it needs), ``set_payload`` (``payload``) or ``delete`` of ``point_id``.

    Example::

        >>> row = journal_op("delete", "p1", doc_key="docs:https://x.org/a", run_id="r1")
        >>> row["op"], row["point_id"], row["payload"]
        ('delete', 'p1', None)
    """
    return {
        "run_id": run_id,
        "doc_key": doc_key,
        "op": op,
        "point_id": point_id,
        "payload": payload,
        "text_hash": text_hash,
        "model_id": model_id,
        "created_at": created_at,
    }


class Journal(Repository):
    """The journal (``state.journal``): added in the same transaction as the state change
    behind it, removed once applied to the vector store."""

    def add(self, ops: Sequence[JournalOpRow | dict[str, Any]]) -> None:
        """Add vector-store operations to the journal (one transaction)."""
        self.state.put_rows(
            "journal", ({**op, "payload": _json_or_none(op.get("payload"))} for op in ops)
        )

    def pending(self, limit: int = 256) -> list[StoreOp]:
        """The oldest ``limit`` operations not applied yet, in the order they were added."""
        rows = self.db.query("select * from journal order by seq limit ?", [limit])
        return [
            StoreOp(
                seq=row["seq"],
                op=row["op"],
                point_id=row["point_id"],
                payload=json.loads(row["payload"]) if row["payload"] else None,
                text_hash=row["text_hash"],
                model_id=row["model_id"],
            )
            for row in rows
        ]

    def remove(self, seqs: Sequence[int]) -> None:
        """Forget applied operations."""
        self.state.execute_in("delete from journal where seq in ({marks})", seqs)

    def count(self) -> int:
        """How many operations wait to be applied."""
        return self.db.execute("select count(*) from journal").fetchone()[0]


def _json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)
