"""The ``documents`` table: one row per record key, its indexed state and revisit schedule."""

from __future__ import annotations

import builtins
import json
from collections.abc import Sequence
from typing import Any, cast

from ragsync.models import DocumentStatus
from ragsync.state.repository import Repository
from ragsync.state.rows import DocumentRow


class Documents(Repository):
    """Documents by record key (``state.documents``). The row as a whole is written by
    :meth:`ragsync.state.index.Index.commit_document`; this repository reads it and moves the
    fields a check changes without new content."""

    def get(self, doc_key: str) -> DocumentRow | None:
        rows = list(self.db.query("select * from documents where doc_key = ?", [doc_key]))
        return cast(DocumentRow, rows[0]) if rows else None

    def get_many(self, doc_keys: Sequence[str]) -> dict[str, DocumentRow]:
        """The documents among ``doc_keys`` that exist, by key."""
        sql = "select * from documents where doc_key in ({marks})"
        return {
            row["doc_key"]: cast(DocumentRow, row) for row in self.state.query_in(sql, doc_keys)
        }

    def in_force(self, source_id: str) -> dict[str, str]:
        """``{record key: canonical URL}`` of the source's records not tombstoned."""
        sql = "select doc_key, canonical_url from documents where source_id = ? and status != ?"
        rows = self.db.query(sql, [source_id, DocumentStatus.TOMBSTONED])
        return {row["doc_key"]: row["canonical_url"] for row in rows}

    def suspected_of(self, doc_keys: Sequence[str]) -> set[str]:
        """Those of ``doc_keys`` whose pages are suspected missing."""
        sql = "select doc_key from documents where status = ? and doc_key in ({marks})"
        rows = self.state.query_in(sql, doc_keys, [DocumentStatus.SUSPECTED_MISSING])
        return {row["doc_key"] for row in rows}

    def chunk_counts(self, doc_keys: Sequence[str]) -> dict[str, int]:
        """The number of chunks of each document among ``doc_keys`` that exists."""
        sql = "select doc_key, chunk_count from documents where doc_key in ({marks})"
        rows = self.state.query_in(sql, doc_keys)
        return {row["doc_key"]: row["chunk_count"] or 0 for row in rows}

    def list(self, source_id: str | None = None) -> builtins.list[DocumentRow]:
        if source_id is None:
            rows = self.db.query("select * from documents order by doc_key")
        else:
            sql = "select * from documents where source_id = ? order by doc_key"
            rows = self.db.query(sql, [source_id])
        return [cast(DocumentRow, row) for row in rows]

    def holding(
        self, source_id: str, content_hashes: Sequence[str], checked_since: str
    ) -> builtins.list[DocumentRow]:
        """The active documents of the source holding any of ``content_hashes``, last checked
        at or after ``checked_since``; the shortest URL first."""
        # The content hash finds them (the source's content index); the check time is only
        # a filter, kept out of reach of the (source, last check) index, whose range would
        # span every page checked so far in a run.
        sql = (
            "select * from documents where source_id = ? and status = ? "
            "and coalesce(last_checked_at, '') >= ? and content_hash in ({marks})"
        )
        args = [source_id, DocumentStatus.ACTIVE, checked_since]
        rows = [cast(DocumentRow, r) for r in self.state.query_in(sql, content_hashes, args)]
        return sorted(rows, key=lambda r: (len(r["canonical_url"]), r["canonical_url"]))

    def due_hints(self, source_id: str) -> dict[str, tuple[str | None, str | None]]:
        """``{doc_key: (next_check_at, lastmod_hint)}`` for one source."""
        sql = "select doc_key, next_check_at, lastmod_hint from documents where source_id = ?"
        return {
            r["doc_key"]: (r["next_check_at"], r["lastmod_hint"])
            for r in self.db.query(sql, [source_id])
        }

    def list_due(self, source_id: str, now: str) -> builtins.list[tuple[str, str]]:
        """``[(doc_key, url)]`` of pages whose revisit time has come, or whose retry has
        (a page that failed, known or not yet indexed); records that carry their own content
        are refreshed by their API, not by a fetch."""
        sql = (
            "select doc_key, canonical_url as url from documents where source_id = ? and "
            "status != 'tombstoned' and extractor != 'record' and next_check_at <= ? "
            "union select doc_key, url from fetch_attempts where source_id = ? and "
            "state = 'retrying' and next_retry_at <= ? and doc_key not like ?"
        )
        args = [source_id, now, source_id, now, f"{source_id}:id:%"]
        return sorted((r["doc_key"], r["url"]) for r in self.db.query(sql, args))

    def oldest_due(self, now: str, source_id: str) -> str | None:
        """The earliest revisit time of a source already passed (the lag of its schedule), if
        any: the first entries of the (source, next check) index."""
        sql = (
            "select min(next_check_at) from documents where source_id = ? and "
            "next_check_at <= ? and status != 'tombstoned'"
        )
        return self.db.execute(sql, [source_id, now]).fetchone()[0]

    def oldest_check(self, source_id: str) -> str | None:
        """The least recent check of a source's documents still indexed: the first entries of
        the (source, last check) index, not every document of the source."""
        sql = (
            "select last_checked_at from documents where source_id = ? "
            "and last_checked_at is not null and status != 'tombstoned' "
            "order by last_checked_at limit 1"
        )
        row = self.db.execute(sql, [source_id]).fetchone()
        return row[0] if row else None

    def list_suspected(self, source_id: str) -> builtins.list[dict[str, Any]]:
        """A source's pages with missing evidence not yet confirmed (``suspected_missing``):
        ``url``, ``missing_count``, ``missing_since``, ``missing_evidence`` (JSON) and
        ``next_check_at``, first suspected first."""
        sql = (
            "select canonical_url as url, missing_count, missing_since, missing_evidence, "
            "next_check_at from documents where source_id = ? and status = ? "
            "order by missing_since, doc_key"
        )
        return list(self.db.query(sql, [source_id, DocumentStatus.SUSPECTED_MISSING]))

    def count_by_status(self) -> dict[str, dict[str, int]]:
        """``{source_id: {document status: count}}``."""
        counts: dict[str, dict[str, int]] = {}
        sql = "select source_id, status, count(*) as n from documents group by source_id, status"
        for row in self.db.query(sql):
            counts.setdefault(row["source_id"], {})[row["status"]] = row["n"]
        return counts

    def mark_checked(self, marks: Sequence[tuple[str, str, dict[str, Any]]]) -> None:
        """Revalidations that found no change (304 or same hash), one transaction for all:
        ``(doc_key, checked_at, fields)``, where only timestamps, validators and the revisit
        schedule move (``None`` values are left alone).

        Each page answered, so any missing evidence and failed attempts against it are cleared.
        """
        with self.state.write():
            for doc_key, checked_at, validators in marks:
                fields: dict[str, Any] = {
                    "last_checked_at": checked_at,
                    "status": DocumentStatus.ACTIVE,
                }
                fields.update({k: v for k, v in validators.items() if v is not None})
                fields.update(missing_count=0, missing_since=None, missing_evidence=None)
                assignments = ", ".join(f'"{name}" = ?' for name in fields)
                self.db.execute(
                    f"update documents set {assignments} where doc_key = ?",
                    [*fields.values(), doc_key],
                )
                self.db.execute("delete from fetch_attempts where doc_key = ?", [doc_key])

    def mark_missing(
        self, doc_key: str, *, count: int, since: str, evidence: Sequence[Any], at: str
    ) -> None:
        """Missing evidence against an indexed page: it stays retrievable (suspected_missing)."""
        with self.state.write():
            self.db.table("documents").update(
                doc_key,
                {
                    "status": DocumentStatus.SUSPECTED_MISSING,
                    "missing_count": count,
                    "missing_since": since,
                    "missing_evidence": json.dumps(evidence),
                    "last_checked_at": at,
                },
            )
            self.db.execute("delete from fetch_attempts where doc_key = ?", [doc_key])
