"""The ``fetch_attempts`` table: pages whose last request failed, and what happens next."""

from __future__ import annotations

import builtins
import zlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ragsync.models import AttemptState
from ragsync.state.repository import Repository

HeldKind = Literal["outage", "change"]


@dataclass(frozen=True)
class Held:
    """What a page served that is held back, seen ``count`` times since ``since`` (README
    "Deletion safety", outage pages): ``kind`` "outage" (an outage page) or "change" (a change
    waiting for its confirmation); ``digest`` the content hash of what it served (an outage
    page's: its ``shape``), ``shape`` its :func:`ragsync.outage.shape`, when known."""

    kind: HeldKind
    digest: str
    count: int
    since: str
    shape: str | None = None

    @classmethod
    def of(cls, row: dict[str, Any] | None) -> Held | None:
        """The held part of a ``fetch_attempts`` row, if any."""
        if not row or not row.get("held_kind"):
            return None
        return cls(
            row["held_kind"],
            row["held_hash"],
            row["held_count"],
            row["held_since"],
            row.get("held_shape"),
        )


class Attempts(Repository):
    """Failed fetches by record key (``state.attempts``); a page's row goes when it answers
    (see :meth:`ragsync.state.documents.Documents.mark_checked`) or is committed."""

    def get(self, doc_key: str) -> dict[str, Any] | None:
        sql = "select * from fetch_attempts where doc_key = ?"
        return next(iter(self.db.query(sql, [doc_key])), None)

    def add(
        self,
        doc_key: str,
        url: str,
        *,
        source_id: str,
        status: int | None,
        error: str,
        at: str,
        state: str,
        next_retry_at: str | None = None,
        body: bytes | None = None,
        lastmod: str | None = None,
        held: Held | None = None,
    ) -> None:
        """Count one more failed attempt at a page; its last good content is untouched.

        ``state`` is an :class:`~ragsync.models.AttemptState`: ``retrying`` (due again at
        ``next_retry_at``), ``dead`` (retries exhausted), ``attention`` (401/403: a person must
        act), ``refused`` (the page cannot be indexed as served) or ``missing`` (404/410 before
        the page was ever indexed). ``body`` is kept compressed, for diagnosis; ``lastmod`` is
        the listing's for the page at this attempt (None keeps the one stored: targeted work
        has none); ``held``, what the page served that is held back (an outage page, a change
        waiting for confirmation).
        """
        with self.state.write():
            row = self.get(doc_key)
            self.db.table("fetch_attempts").upsert(
                {
                    "doc_key": doc_key,
                    "url": url,
                    "source_id": source_id,
                    "attempts": (row["attempts"] if row else 0) + 1,
                    "last_status": status,
                    "last_error": error,
                    "state": state,
                    "first_failed_at": row["first_failed_at"] if row else at,
                    "last_attempt_at": at,
                    "next_retry_at": next_retry_at,
                    "body": zlib.compress(body) if body else None,
                    "lastmod": lastmod if lastmod is not None else (row or {}).get("lastmod"),
                    "held_kind": held.kind if held else None,
                    "held_hash": held.digest if held else None,
                    "held_count": held.count if held else None,
                    "held_since": held.since if held else None,
                    "held_shape": held.shape if held else None,
                },
                pk="doc_key",
            )

    def clear(self, doc_keys: Sequence[str]) -> None:
        """Forget the failed attempts of pages that answered. Callers pass every such page (a
        tombstone that 404s again, each window's links-only pages): the few with a row are
        found by a read, so that the rest take no write lock."""
        sql = "select doc_key from fetch_attempts where doc_key in ({marks})"
        failed = [row["doc_key"] for row in self.state.query_in(sql, doc_keys)] if doc_keys else []
        self._delete(failed)

    def _delete(self, doc_keys: Sequence[str]) -> None:
        if doc_keys:
            self.state.execute_in("delete from fetch_attempts where doc_key in ({marks})", doc_keys)

    def drop_missing(self, source_id: str, listed: Collection[str]) -> int:
        """Forget the URLs of ``source_id`` that answered 404/410 before they were ever
        indexed and that a complete listing (its record keys: ``listed``) no longer has: a
        broken link since fixed or removed. Returns how many went."""
        sql = "select doc_key from fetch_attempts where source_id = ? and state = ?"
        rows = self.db.query(sql, [source_id, AttemptState.MISSING])
        gone = [row["doc_key"] for row in rows if row["doc_key"] not in listed]
        self._delete(gone)  # rows just read: no second look
        return len(gone)

    def list(self, source_id: str | None = None) -> builtins.list[dict[str, Any]]:
        if source_id is None:
            return list(self.db.query("select * from fetch_attempts order by doc_key"))
        sql = "select * from fetch_attempts where source_id = ? order by doc_key"
        return list(self.db.query(sql, [source_id]))

    def held_back(self, source_id: str, now: str) -> set[str]:
        """Pages a normal run must not request: retry not yet due, dead letter, attention."""
        return set(self.retry_gates(source_id, now)[0])

    def retry_gates(
        self, source_id: str, now: str
    ) -> tuple[dict[str, str], set[str], dict[str, str | None]]:
        """``(held back, retry due, not due)`` among the pages of ``source_id`` that failed:
        the pages a normal run must not request (retry not yet due, dead letter, attention)
        with their attempt's state, those whose retry time has come (due whatever their
        revisit time), and the URLs never indexed that answered 404/410 and are not to be
        asked again yet, with the listing's lastmod when they answered (one that moved since
        makes them due; None: none known, so none can move)."""
        held: dict[str, str] = {}  # by its attempt's state
        due: set[str] = set()
        later: dict[str, str | None] = {}
        sql = (
            "select doc_key, state, next_retry_at, lastmod from fetch_attempts where source_id = ?"
        )
        for row in self.db.query(sql, [source_id]):
            if row["state"] in (AttemptState.DEAD, AttemptState.ATTENTION) or (
                row["state"] == AttemptState.RETRYING and (row["next_retry_at"] or "") > now
            ):
                held[row["doc_key"]] = row["state"]
            elif row["state"] == AttemptState.RETRYING:
                due.add(row["doc_key"])
            elif row["state"] == AttemptState.MISSING and (row["next_retry_at"] or "") > now:
                later[row["doc_key"]] = row["lastmod"]
        return held, due, later

    def held(self, source_id: str) -> builtins.list[tuple[str, str, Held]]:
        """``(doc key, url, held)`` of each record of ``source_id`` with content of its own (not
        tombstoned) held back by what it served: the evidence, across windows and runs, that
        pages of one host arrive at one text (README "Deletion safety", outage pages). A URL
        never indexed is no evidence: it had nothing of its own to lose."""
        sql = (
            "select a.doc_key, a.url, a.held_kind, a.held_hash, a.held_count, a.held_since, "
            "a.held_shape from fetch_attempts a join documents d on d.doc_key = a.doc_key "
            "where a.source_id = ? and a.held_kind is not null and d.status != 'tombstoned'"
        )
        rows = self.db.query(sql, [source_id])
        return [(row["doc_key"], row["url"], held) for row in rows if (held := Held.of(row))]
