"""The state DB: the source of truth. SQLite through sqlite-utils (WAL mode) by default, or
PostgreSQL (:mod:`ragsync.pgstate`) when many workers share it.

Every other store (the vector index) is a projection of this one, written only through the
``journal`` table: a document's new state, its chunk list, its change-log row and the vector-store
operations it implies are committed in one transaction (:meth:`StateDB.commit_document`); the
operations are applied afterwards and deleted once done, so a crash at any instant is repaired by
replaying what is left in the journal.

All SQL lives in this module and runs unchanged on both backends (``?`` placeholders, standard
SQL); the PostgreSQL backend provides the few sqlite-utils calls used here.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from ragsync.clock import iso
from ragsync.config import StateConfig, resolve_env
from ragsync.errors import StateError
from ragsync.models import StoredChunk, StoreOp

Migration = Callable[[Any], None]  # a sqlite-utils Database or a PgDatabase


def _m001_initial(db: Any) -> None:
    db.table("documents").create(
        {
            "doc_key": str,
            "source_id": str,
            "canonical_url": str,
            "title": str,
            "etag": str,
            "last_modified": str,
            "raw_hash": str,
            "content_hash": str,
            "markdown": str,
            "extractor": str,
            "status": str,
            "lastmod_hint": str,
            "chunk_count": int,
            "first_seen_at": str,
            "last_checked_at": str,
            "last_changed_at": str,
            "next_check_at": str,
        },
        pk="doc_key",
        not_null={"source_id", "canonical_url", "status", "first_seen_at"},
    )
    db.table("documents").create_index(["source_id", "status"])
    db.table("fetch_attempts").create(
        {
            "doc_key": str,
            "url": str,
            "attempts": int,
            "last_status": int,
            "last_error": str,
            "first_failed_at": str,
            "last_attempt_at": str,
            "next_retry_at": str,
        },
        pk="doc_key",
    )
    db.table("chunks").create(
        {
            "point_id": str,
            "doc_key": str,
            "chunk_index": int,
            "chunk_hash": str,
            "text": str,
            "headings": str,
            "tokens": int,
            "last_changed_at": str,
        },
        pk="point_id",
        not_null={"doc_key", "chunk_hash", "text"},
    )
    db.table("chunks").create_index(["doc_key", "chunk_index"])
    db.table("embedding_cache").create(
        {"text_hash": str, "model_id": str, "dim": int, "vector": bytes, "created_at": str},
        pk=("text_hash", "model_id"),
    )
    db.table("journal").create(
        {
            "seq": int,
            "run_id": str,
            "doc_key": str,
            "op": str,
            "point_id": str,
            "payload": str,
            "text_hash": str,
            "model_id": str,
            "created_at": str,
        },
        pk="seq",
        not_null={"op", "point_id"},
    )
    db.table("runs").create(
        {
            "run_id": str,
            "started_at": str,
            "finished_at": str,
            "ok": int,
            "status": str,
            "counters": str,
            "sources": str,
        },
        pk="run_id",
    )
    db.table("changes").create(
        {
            "id": int,
            "run_id": str,
            "doc_key": str,
            "source_id": str,
            "url": str,
            "change_type": str,
            "old_hash": str,
            "new_hash": str,
            "diff": str,
            "chunks_added": int,
            "chunks_removed": int,
            "chunks_kept": int,
            "magnitude": float,
            "at": str,
        },
        pk="id",
    )
    db.table("changes").create_index(["at"])
    db.table("aliases").create(
        {"alias_key": str, "doc_key": str, "url": str, "at": str}, pk="alias_key"
    )


def _m002_failures_and_deletion(db: Any) -> None:
    documents = db.table("documents")
    documents.add_column("missing_count", int)
    documents.add_column("missing_since", str)
    documents.add_column("missing_evidence", str)  # JSON list of {at, reason}
    documents.add_column("tombstoned_at", str)
    documents.add_column("tombstone_reason", str)
    attempts = db.table("fetch_attempts")
    attempts.add_column("source_id", str)
    attempts.add_column("state", str)  # retrying | dead | attention | refused | missing
    attempts.add_column("body", bytes)  # zlib-compressed raw body kept for diagnosis
    db.table("hosts").create(
        {"host": str, "paused_until": float, "reason": str, "updated_at": str}, pk="host"
    )


def _m003_discovery(db: Any) -> None:
    db.table("discovery_cache").create(
        {
            "url": str,
            "source_id": str,
            "etag": str,
            "last_modified": str,
            "parsed": str,
            "fetched_at": str,
        },
        pk="url",
    )
    db.table("checkpoints").create(
        {"source_id": str, "checkpoint": str, "updated_at": str}, pk="source_id"
    )
    db.table("poll_log").create(
        {
            "id": int,
            "source_id": str,
            "run_id": str,
            "window_start": str,
            "window_end": str,
            "started_at": str,
            "finished_at": str,
            "outcome": str,
            "pages": int,
            "records": int,
            "truncated": int,
            "error": str,
        },
        pk="id",
    )
    db.table("poll_log").create_index(["source_id", "window_start"])


def _m004_outbox(db: Any) -> None:
    db.table("outbox").create(
        {
            "seq": int,
            "event_id": str,
            "endpoint": str,
            "doc_key": str,
            "type": str,
            "payload": str,
            "state": str,
            "attempts": int,
            "next_attempt_at": str,
            "last_error": str,
            "created_at": str,
            "delivered_at": str,
        },
        pk="seq",
        not_null={"event_id", "endpoint", "payload", "state"},
    )
    db.table("outbox").create_index(["state", "next_attempt_at"])
    db.table("outbox").create_index(["event_id", "endpoint"], unique=True)


def _m005_bodies_and_collections(db: Any) -> None:
    db.table("raw_bodies").create(
        {
            "doc_key": str,
            "url": str,
            "content_type": str,
            "body": bytes,
            "raw_hash": str,
            "fetched_at": str,
        },
        pk="doc_key",
    )
    db.table("raw_bodies").create_index(["fetched_at"])
    db.table("collections").create(
        {"name": str, "model_id": str, "dimension": int, "created_at": str}, pk="name"
    )


def _m006_targeted_queue(db: Any) -> None:
    db.table("queue").create(
        {
            "id": int,
            "source_id": str,
            "url": str,
            "record_id": str,
            "reason": str,
            "delivery_id": str,
            "enqueued_at": str,
        },
        pk="id",
    )
    db.table("deliveries").create(
        {"delivery_id": str, "source_id": str, "received_at": str}, pk="delivery_id"
    )


def _m007_schedule(db: Any) -> None:
    db.table("documents").add_column("check_interval", float)
    db.table("documents").create_index(["source_id", "next_check_at"])
    db.table("schedule").create(
        {"source_id": str, "last_run_at": str, "next_run_at": str}, pk="source_id"
    )


def _m008_workers(db: Any) -> None:
    # Politeness shared by every worker: the next start a host allows, its robots Crawl-delay,
    # and one row per request in flight (leased, so a killed worker frees its slots).
    db.table("hosts").add_column("next_start", float)
    db.table("hosts").add_column("crawl_delay", float)
    db.table("host_slots").create(
        {"host": str, "slot": int, "owner": str, "lease_until": float}, pk=("host", "slot")
    )
    # Named leases: a source's listing, the journal applier, the targeted queue.
    db.table("leases").create({"name": str, "owner": str, "lease_until": float}, pk="name")
    # Pages due for a check, claimed by workers with a lease (expired leases are reclaimed).
    db.table("work").create(
        {
            "doc_key": str,
            "source_id": str,
            "position": int,
            "url": str,
            "lastmod": str,
            "record": str,  # JSON of an API record's id/content/title/deleted, else null
            "unlisted": int,
            "owner": str,
            "lease_until": float,
            "enqueued_at": str,
        },
        pk="doc_key",
        not_null={"source_id", "url"},
    )
    db.table("work").create_index(["position"])


def _m009_run_lock_and_listings(db: Any) -> None:
    # Who holds a lease (the run lock tells a dead local process from a live one), and whose
    # run a `runs` row is (so that a run whose holder is gone is closed as "interrupted").
    db.table("leases").add_column("host", str)
    db.table("leases").add_column("pid", int)
    db.table("leases").add_column("started_at", str)
    db.table("runs").add_column("owner", str)
    # How each source's last listing ended: complete, or why not (README "Deletion safety").
    db.table("schedule").add_column("listing_complete", int)
    db.table("schedule").add_column("listing_reasons", str)
    # When an alias was last confirmed by a request to its URL (re-verified at max_interval).
    db.table("aliases").add_column("verified_at", str)


MIGRATIONS: tuple[tuple[str, Migration], ...] = (
    ("001_initial", _m001_initial),
    ("002_failures_and_deletion", _m002_failures_and_deletion),
    ("003_discovery", _m003_discovery),
    ("004_outbox", _m004_outbox),
    ("005_bodies_and_collections", _m005_bodies_and_collections),
    ("006_targeted_queue", _m006_targeted_queue),
    ("007_schedule", _m007_schedule),
    ("008_workers", _m008_workers),
    ("009_run_lock_and_listings", _m009_run_lock_and_listings),
)


class StateDB:
    """The ragsync state DB: a SQLite file at ``target`` (``":memory:"`` for tests), or a
    PostgreSQL database when ``target`` is a ``postgresql://`` URL.

    Raises:
        StateError: the DB cannot be opened, or was written by a newer ragsync.
    """

    def __init__(self, target: str | Path, *, pool_size: int = 4, connect_timeout: float = 15.0):
        self.path = str(target)
        self.postgres = self.path.startswith(("postgresql://", "postgres://"))
        self._write_lock = threading.RLock()
        self.db: Any
        if self.postgres:
            from ragsync.pgstate import PgDatabase, redact

            self.path = redact(self.path)  # what messages show
            self.db = PgDatabase(str(target), pool_size=pool_size, connect_timeout=connect_timeout)
            self.migrate()
            return
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            self.db = Database(conn)
            if self.path != ":memory:":
                self.db.enable_wal()
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.migrate()
        except sqlite3.DatabaseError as exc:
            raise StateError(f"{self.path}: cannot open the state DB: {exc}") from exc

    @classmethod
    def from_config(cls, config: StateConfig) -> StateDB:
        """The state DB a ``[state]`` table names (``url`` wins over ``path``)."""
        if config.url:
            return cls(resolve_env(config.url, key="state.url") or "", pool_size=config.pool_size)
        return cls(config.path)

    def close(self) -> None:
        self.db.close()

    @contextlib.contextmanager
    def write(self) -> Iterator[None]:
        """A write transaction; nested use is a savepoint.

        On SQLite it takes the write lock up front (BEGIN IMMEDIATE): a deferred transaction
        that reads, then writes, fails at once with "database is locked" when another
        connection (the `serve` receiver, a second process) wrote in between; an immediate one
        waits for the lock instead. On PostgreSQL it pins one pooled connection to the thread.
        """
        if self.postgres:
            with self.db.transaction():
                yield
            return
        # One connection serves every thread of the process: one writer at a time, so that a
        # transaction open in one thread is never mistaken by another for its own.
        with self._write_lock:
            if self.db.conn.in_transaction:
                with self.db.atomic():
                    yield
                return
            self.db.conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self.db.conn.rollback()
                raise
            else:
                self.db.conn.execute("COMMIT")

    def copy_to(self, path: str | Path) -> StateDB:
        """A SQLite copy of this state at ``path`` (the throwaway state of a dry run)."""
        copy = StateDB(path)
        if not self.postgres:
            self.db.conn.backup(copy.db.conn)
            return copy
        with copy.write():
            for name in self.db.table_names():
                if name != "_migrations" and copy.db.table(name).exists():
                    rows = self.db.table(name).rows
                    copy.db.execute(f"delete from [{name}]")
                    copy.db.table(name).insert_all(rows)
        return copy

    # -- schema -----------------------------------------------------------------------------

    def migrate(self) -> list[str]:
        """Apply the named migrations not applied yet, in order, in one transaction that other
        processes starting at the same moment wait for; return their names."""
        table = self.db.table("_migrations")
        with self.write():
            self._lock("ragsync-migrations")
            if not table.exists():
                table.create({"name": str, "applied_at": str}, pk="name")
            done = {row["name"] for row in table.rows}
            known = {name for name, _ in MIGRATIONS}
            if done - known:
                raise StateError(
                    f"{self.path}: written by a newer ragsync (unknown migrations: "
                    f"{', '.join(sorted(done - known))})"
                )
            applied = []
            for name, migration in MIGRATIONS:
                if name not in done:
                    migration(self.db)
                    table.insert({"name": name, "applied_at": iso(time.time())})
                    applied.append(name)
        return applied

    # -- documents --------------------------------------------------------------------------

    def document(self, doc_key: str) -> dict[str, Any] | None:
        rows = list(self.db.query("select * from documents where doc_key = ?", [doc_key]))
        return rows[0] if rows else None

    def documents_by_key(self, doc_keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The documents among ``doc_keys`` that exist, by key (one query per 500 keys)."""
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(doc_keys), 500):
            part = list(doc_keys[start : start + 500])
            sql = f"select * from documents where doc_key in ({', '.join('?' * len(part))})"
            found.update((row["doc_key"], row) for row in self.db.query(sql, part))
        return found

    def documents(self, source_id: str | None = None) -> list[dict[str, Any]]:
        if source_id is None:
            return list(self.db.query("select * from documents order by doc_key"))
        sql = "select * from documents where source_id = ? order by doc_key"
        return list(self.db.query(sql, [source_id]))

    def source_next_run(self, source_id: str) -> str | None:
        sql = "select next_run_at from schedule where source_id = ?"
        row = self.db.execute(sql, [source_id]).fetchone()
        return row[0] if row else None

    def record_source_run(
        self,
        source_id: str,
        last_run_at: str,
        next_run_at: str,
        *,
        incomplete: Sequence[str] = (),
    ) -> None:
        """A source's listing was read: when, when it is due next, and whether it was
        complete (``incomplete`` lists why not)."""
        with self.write():
            self.db.table("schedule").upsert(
                {
                    "source_id": source_id,
                    "last_run_at": last_run_at,
                    "next_run_at": next_run_at,
                    "listing_complete": int(not incomplete),
                    "listing_reasons": json.dumps(list(incomplete)) if incomplete else None,
                },
                pk="source_id",
            )

    def listing(self, source_id: str) -> dict[str, Any] | None:
        """``{"at", "complete", "reasons"}`` of the source's last listing, or None."""
        sql = (
            "select last_run_at, listing_complete, listing_reasons from schedule "
            "where source_id = ?"
        )
        row = next(iter(self.db.query(sql, [source_id])), None)
        if row is None or row["listing_complete"] is None:
            return None
        return {
            "at": row["last_run_at"],
            "complete": bool(row["listing_complete"]),
            "reasons": json.loads(row["listing_reasons"] or "[]"),
        }

    def due_info(self, source_id: str) -> dict[str, tuple[str | None, str | None]]:
        """``{doc_key: (next_check_at, lastmod_hint)}`` for one source."""
        sql = "select doc_key, next_check_at, lastmod_hint from documents where source_id = ?"
        return {
            r["doc_key"]: (r["next_check_at"], r["lastmod_hint"])
            for r in self.db.query(sql, [source_id])
        }

    def due_documents(self, source_id: str, now: str) -> list[tuple[str, str]]:
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

    def oldest_due(self, now: str, source_id: str | None = None) -> str | None:
        """The earliest revisit time already passed (the lag of the schedule), if any."""
        sql = (
            "select min(next_check_at) from documents where status != 'tombstoned' and "
            "next_check_at <= ?" + (" and source_id = ?" if source_id else "")
        )
        args = [now, source_id] if source_id else [now]
        return self.db.execute(sql, args).fetchone()[0]

    def next_due(self) -> str | None:
        """The earliest time anything is due: a source, a page check or a retry."""
        sql = (
            "select min(t) from (select min(next_run_at) as t from schedule "
            "union all select min(next_check_at) from documents where status != 'tombstoned' "
            "union all select min(next_retry_at) from fetch_attempts where state = 'retrying')"
        )
        return self.db.execute(sql).fetchone()[0]

    def mark_checked(self, marks: Sequence[tuple[str, str, dict[str, Any]]]) -> None:
        """Revalidations that found no change (304 or same hash), one transaction for all:
        ``(doc_key, checked_at, fields)``, where only timestamps, validators and the revisit
        schedule move (``None`` values are left alone).

        Each page answered, so any missing evidence and failed attempts against it are cleared.
        """
        with self.write():
            for doc_key, checked_at, validators in marks:
                fields: dict[str, Any] = {"last_checked_at": checked_at, "status": "active"}
                fields.update({k: v for k, v in validators.items() if v is not None})
                fields.update(missing_count=0, missing_since=None, missing_evidence=None)
                assignments = ", ".join(f'"{name}" = ?' for name in fields)
                self.db.execute(
                    f"update documents set {assignments} where doc_key = ?",
                    [*fields.values(), doc_key],
                )
                self.db.execute("delete from fetch_attempts where doc_key = ?", [doc_key])

    def attempt(self, doc_key: str) -> dict[str, Any] | None:
        sql = "select * from fetch_attempts where doc_key = ?"
        return next(iter(self.db.query(sql, [doc_key])), None)

    def record_failure(
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
    ) -> None:
        """Record a failed attempt; the last good content is untouched.

        ``state`` is ``retrying`` (due again at ``next_retry_at``), ``dead`` (retries exhausted),
        ``attention`` (401/403: a person must act), ``refused`` (the page cannot be indexed as
        served) or ``missing`` (404/410 before the page was ever indexed).
        """
        with self.write():
            row = self.attempt(doc_key)
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
                },
                pk="doc_key",
            )

    def fetch_attempts(self, source_id: str | None = None) -> list[dict[str, Any]]:
        if source_id is None:
            return list(self.db.query("select * from fetch_attempts order by doc_key"))
        sql = "select * from fetch_attempts where source_id = ? order by doc_key"
        return list(self.db.query(sql, [source_id]))

    def held_back(self, source_id: str, now: str) -> set[str]:
        """Pages a normal run must not request: retry not yet due, dead letter, attention."""
        return self.retry_gates(source_id, now)[0]

    def retry_gates(self, source_id: str, now: str) -> tuple[set[str], set[str]]:
        """``(held back, retry due)`` among the pages of ``source_id`` that failed: the pages a
        normal run must not request (retry not yet due, dead letter, attention), and those
        whose retry time has come (due whatever their revisit time)."""
        held: set[str] = set()
        due: set[str] = set()
        sql = "select doc_key, state, next_retry_at from fetch_attempts where source_id = ?"
        for row in self.db.query(sql, [source_id]):
            if row["state"] in ("dead", "attention"):
                held.add(row["doc_key"])
            elif row["state"] == "retrying":
                (due if (row["next_retry_at"] or "") <= now else held).add(row["doc_key"])
        return held, due

    def record_missing(
        self, doc_key: str, *, count: int, since: str, evidence: list[dict[str, Any]], at: str
    ) -> None:
        """Missing evidence against an indexed page: it stays retrievable (suspected_missing)."""
        with self.write():
            self.db.table("documents").update(
                doc_key,
                {
                    "status": "suspected_missing",
                    "missing_count": count,
                    "missing_since": since,
                    "missing_evidence": json.dumps(evidence),
                    "last_checked_at": at,
                },
            )
            self.db.execute("delete from fetch_attempts where doc_key = ?", [doc_key])

    # -- discovery ----------------------------------------------------------------------------

    def discovery_entry(self, url: str) -> dict[str, Any] | None:
        return next(iter(self.db.query("select * from discovery_cache where url = ?", [url])), None)

    def put_discovery_entry(self, entry: dict[str, Any]) -> None:
        with self.write():
            self.db.table("discovery_cache").upsert(entry, pk="url")

    def checkpoint(self, source_id: str) -> Any:
        sql = "select checkpoint from checkpoints where source_id = ?"
        row = next(iter(self.db.query(sql, [source_id])), None)
        return json.loads(row["checkpoint"]) if row and row["checkpoint"] else None

    def save_checkpoint(self, source_id: str, checkpoint: Any, at: str) -> None:
        """Persist a source's continuation; call only after its documents are committed."""
        with self.write():
            self.db.table("checkpoints").upsert(
                {"source_id": source_id, "checkpoint": json.dumps(checkpoint), "updated_at": at},
                pk="source_id",
            )

    def log_poll(self, entry: dict[str, Any]) -> int:
        with self.write():
            return int(self.db.table("poll_log").insert(entry, pk="id").last_pk or 0)

    def update_poll(self, poll_id: int, fields: dict[str, Any]) -> None:
        with self.write():
            self.db.table("poll_log").update(poll_id, fields)

    def polls(self, source_id: str) -> list[dict[str, Any]]:
        sql = "select * from poll_log where source_id = ? order by id"
        return list(self.db.query(sql, [source_id]))

    # -- targeted work (webhooks, resync) ----------------------------------------------------

    def enqueue_targets(
        self,
        source_id: str,
        urls: Sequence[str],
        *,
        reason: str,
        at: str,
        delivery_id: str | None = None,
        record_ids: Sequence[str] = (),
    ) -> int | None:
        """Durably queue targeted re-syncs; None when ``delivery_id`` was seen before."""
        with self.write():
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

    def queued(self, limit: int = 1000) -> list[dict[str, Any]]:
        return list(self.db.query("select * from queue order by id limit ?", [limit]))

    def dequeue(self, ids: Sequence[int]) -> None:
        with self.write():
            for start in range(0, len(ids), 500):
                batch = list(ids[start : start + 500])
                marks = ",".join("?" * len(batch))
                self.db.execute(f"delete from queue where id in ({marks})", batch)

    def queue_depth(self) -> int:
        return self.db.execute("select count(*) from queue").fetchone()[0]

    # -- raw bodies and collections ---------------------------------------------------------

    def raw_body(self, doc_key: str) -> dict[str, Any] | None:
        row = next(
            iter(self.db.query("select * from raw_bodies where doc_key = ?", [doc_key])), None
        )
        if row is not None:
            row["body"] = zlib.decompress(row["body"])
        return row

    def prune_raw_bodies(self, before: str) -> int:
        """Forget raw bodies fetched before ``before`` (the retention window)."""
        with self.write():
            cursor = self.db.execute("delete from raw_bodies where fetched_at < ?", [before])
        return cursor.rowcount

    def collection_model(self, name: str) -> str | None:
        sql = "select model_id from collections where name = ?"
        row = next(iter(self.db.query(sql, [name])), None)
        return row["model_id"] if row else None

    def record_collection(self, name: str, model_id: str, dimension: int, at: str) -> None:
        with self.write():
            self.db.table("collections").upsert(
                {"name": name, "model_id": model_id, "dimension": dimension, "created_at": at},
                pk="name",
            )

    # -- outbound events --------------------------------------------------------------------

    def due_events(self, now: str, limit: int = 100) -> list[dict[str, Any]]:
        """Pending events due by ``now``, oldest first, each the oldest undelivered one of its
        document and endpoint (delivery keeps per-document order)."""
        sql = (
            "select * from outbox o where state = 'pending' and next_attempt_at <= ? "
            "and not exists (select 1 from outbox p where p.endpoint = o.endpoint and "
            "p.doc_key = o.doc_key and p.state = 'pending' and p.seq < o.seq) "
            "order by seq limit ?"
        )
        return list(self.db.query(sql, [now, limit]))

    def update_event(self, seq: int, fields: dict[str, Any]) -> None:
        with self.write():
            self.db.table("outbox").update(seq, fields)

    def events(self, state: str | None = None) -> list[dict[str, Any]]:
        if state is None:
            return list(self.db.query("select * from outbox order by seq"))
        return list(self.db.query("select * from outbox where state = ? order by seq", [state]))

    def replay_events(self, *, event_id: str | None = None, dead: bool = False, at: str) -> int:
        """Make dead (or named) events pending again; returns how many."""
        where, args = ("state = 'dead'", []) if dead else ("event_id = ?", [event_id])
        with self.write():
            cursor = self.db.execute(
                f"update outbox set state = 'pending', attempts = 0, next_attempt_at = ?, "
                f"last_error = null where {where}",
                [at, *args],
            )
        return cursor.rowcount

    # -- hosts ------------------------------------------------------------------------------

    def host_pauses(self) -> dict[str, float]:
        """``{host: Unix time before which no request may go}`` for pauses still running."""
        sql = "select host, paused_until from hosts where paused_until is not null"
        return {row["host"]: row["paused_until"] for row in self.db.query(sql)}

    def pause_host(self, host: str, until: float, reason: str, at: str) -> None:
        with self.write():
            self.db.table("hosts").upsert(
                {"host": host, "paused_until": until, "reason": reason, "updated_at": at},
                pk="host",
            )

    def pause_host_at_least(self, host: str, until: float, reason: str, at: str) -> float:
        """Pause ``host`` until ``until`` unless a longer pause runs; return the pause's end."""
        with self.write():
            self.db.execute(
                "insert into hosts (host, paused_until, reason, updated_at) values (?, ?, ?, ?) "
                "on conflict (host) do update set paused_until = case when "
                "coalesce(hosts.paused_until, 0) >= excluded.paused_until then hosts.paused_until "
                "else excluded.paused_until end, reason = excluded.reason, "
                "updated_at = excluded.updated_at",
                [host, until, reason, at],
            )
            return self.paused_until(host)

    def paused_until(self, host: str) -> float:
        row = self.db.execute("select paused_until from hosts where host = ?", [host]).fetchone()
        return float(row[0] or 0.0) if row else 0.0

    def set_crawl_delay(self, host: str, seconds: float) -> None:
        with self.write():
            self.db.execute(
                "insert into hosts (host, crawl_delay) values (?, ?) "
                "on conflict (host) do update set crawl_delay = excluded.crawl_delay",
                [host, seconds],
            )

    def take_host_slot(
        self,
        host: str,
        owner: str,
        *,
        limit: int,
        min_delay: float,
        clock: Callable[[], float],
        lease: float,
    ) -> tuple[int, float, float, float] | None:
        """One request slot of ``host`` for ``owner``: ``(slot, start, paused_until, now)``,
        or None while ``limit`` unexpired slots are taken. ``clock`` is read once the host's row
        is locked, so time spent waiting for the lock does not eat into the delay.

        ``start`` is the time the request may start: the host's next free start time, which
        moves on by its delay (``min_delay``, or its robots Crawl-delay when longer). The caller
        checks ``paused_until`` against what it is willing to wait and gives the slot back.
        """
        with self.write():
            self.db.execute(
                "insert into hosts (host) values (?) on conflict (host) do nothing", [host]
            )
            paused, next_start, crawl_delay = self.db.execute(
                "select paused_until, next_start, crawl_delay from hosts where host = ?"
                + self._for_update,
                [host],
            ).fetchone()
            now = clock()
            taken = {
                row[0]
                for row in self.db.execute(
                    "select slot from host_slots where host = ? and lease_until >= ?", [host, now]
                ).fetchall()
            }
            free = [slot for slot in range(limit) if slot not in taken]
            if not free:
                return None
            start = max(now, paused or 0.0, next_start or 0.0)
            delay = max(min_delay, crawl_delay or 0.0)
            self.db.execute("update hosts set next_start = ? where host = ?", [start + delay, host])
            self.db.execute(
                "insert into host_slots (host, slot, owner, lease_until) values (?, ?, ?, ?) "
                "on conflict (host, slot) do update set owner = excluded.owner, "
                "lease_until = excluded.lease_until",
                [host, free[0], owner, now + lease],
            )
            return free[0], start, float(paused or 0.0), now

    def give_host_slot(self, host: str, slot: int, owner: str) -> None:
        with self.write():
            self.db.execute(
                "delete from host_slots where host = ? and slot = ? and owner = ?",
                [host, slot, owner],
            )

    # -- workers: named leases and claimed work -------------------------------------------

    @property
    def _for_update(self) -> str:
        """Row locks on PostgreSQL; SQLite's write transaction already excludes everyone."""
        return " for update" if self.postgres else ""

    def _lock(self, name: str) -> None:
        """Within a write transaction: exclude other writers of ``name`` until it ends
        (an advisory lock on PostgreSQL; SQLite's write lock already excludes every writer)."""
        if self.postgres:
            self.db.lock(name)

    def take_lease(self, name: str, owner: str, *, now: float, until: float) -> bool:
        """Hold lease ``name`` until ``until``, unless another owner holds it past ``now``."""
        with self.write():
            cursor = self.db.execute(
                "insert into leases (name, owner, lease_until) values (?, ?, ?) "
                "on conflict (name) do update set owner = excluded.owner, "
                "lease_until = excluded.lease_until "
                "where leases.lease_until < ? or leases.owner = excluded.owner",
                [name, owner, until, now],
            )
        return cursor.rowcount == 1

    def take_run_lock(
        self,
        name: str,
        owner: str,
        *,
        exclusive: bool,
        now: float,
        until: float,
        host: str,
        pid: int,
    ) -> list[dict[str, Any]]:
        """Take the run lock (README "Run lock"): lease ``run`` (``exclusive``) or
        ``worker:<owner>`` (shared). Returns the live holders in the way, empty when taken.

        Holders whose lease ran out, or whose process on this host is gone, are released, and
        the run rows of every holder that is gone are closed as "interrupted".
        """
        with self.write():
            self._lock("ragsync-run-lock")
            rows = list(
                self.db.query(
                    "select name, owner, host, pid, started_at, lease_until from leases "
                    "where (name = 'run' or name like 'worker:%') and owner != ?",
                    [owner],
                )
            )
            gone = [row for row in rows if row["lease_until"] < now or _holder_dead(row, host)]
            for row in gone:
                self.db.execute(
                    "delete from leases where name = ? and owner = ?", [row["name"], row["owner"]]
                )
            live = [row for row in rows if row not in gone]
            blocking = live if exclusive else [row for row in live if row["name"] == "run"]
            if blocking:
                return [
                    {k: row[k] for k in ("name", "owner", "host", "pid", "started_at")}
                    for row in blocking
                ]
            self.db.execute(
                "insert into leases (name, owner, lease_until, host, pid, started_at) "
                "values (?, ?, ?, ?, ?, ?) on conflict (name) do update set "
                "owner = excluded.owner, lease_until = excluded.lease_until, "
                "host = excluded.host, pid = excluded.pid, started_at = excluded.started_at",
                [name, owner, until, host, pid, iso(time.time())],
            )
            self.close_orphan_runs(now)
        return []

    def drop_leases(self) -> None:
        """Forget every lease (a dry run's private copy of a state another process holds)."""
        with self.write():
            self.db.execute("delete from leases")

    def renew_lease(self, name: str, owner: str, until: float) -> None:
        with self.write():
            self.db.execute(
                "update leases set lease_until = ? where name = ? and owner = ?",
                [until, name, owner],
            )

    def close_orphan_runs(self, now: float) -> int:
        """Close as "interrupted" the running runs whose owner holds no live lease (a killed
        `run` or worker); returns how many."""
        with self.write():
            cursor = self.db.execute(
                "update runs set status = 'interrupted', ok = 0, finished_at = ? "
                "where status = 'running' and (owner is null or owner not in "
                "(select owner from leases where lease_until >= ?))",
                [iso(time.time()), now],
            )
        return cursor.rowcount

    def release_lease(self, name: str, owner: str) -> None:
        with self.write():
            self.db.execute("delete from leases where name = ? and owner = ?", [name, owner])

    def live_leases(self, now: float) -> dict[str, str]:
        """``{lease name: owner}`` of the leases not expired at ``now``."""
        sql = "select name, owner from leases where lease_until >= ?"
        return {row["name"]: row["owner"] for row in self.db.query(sql, [now])}

    def renew_leases(self, owner: str, until: float) -> None:
        """Extend every lease and claim ``owner`` holds (its heartbeat)."""
        with self.write():
            self.db.execute("update leases set lease_until = ? where owner = ?", [until, owner])
            self.db.execute("update work set lease_until = ? where owner = ?", [until, owner])

    def release_claims(self, owner: str) -> None:
        """Hand back everything ``owner`` holds: leases, claimed pages, host slots."""
        with self.write():
            self.db.execute("delete from leases where owner = ?", [owner])
            self.db.execute(
                "update work set owner = null, lease_until = null where owner = ?", [owner]
            )
            self.db.execute("delete from host_slots where owner = ?", [owner])

    def add_work(self, source_id: str, items: Sequence[dict[str, Any]], at: str) -> None:
        """Queue pages for any worker to check, in the given order; a page already queued
        keeps its place (and its claim). Each item: ``doc_key``, ``url``, ``lastmod``,
        ``record``, ``unlisted``."""
        if not items:
            return
        with self.write():
            first = self.db.execute("select coalesce(max(position), 0) from work").fetchone()[0]
            rows = [
                {**item, "source_id": source_id, "position": first + n, "enqueued_at": at}
                for n, item in enumerate(items, 1)
            ]
            self.db.table("work").insert_all(rows, pk="doc_key", ignore=True)

    def add_due_work(self, source_id: str, now: str, at: str) -> int:
        """Queue the pages of ``source_id`` whose revisit or retry time has come (not held
        back, not queued already) in one statement, so a page a worker commits at the same
        moment is either still queued or no longer due; return how many were queued."""
        with self.write():
            cursor = self.db.execute(
                "insert into work (doc_key, source_id, position, url, unlisted, enqueued_at) "
                "select d.doc_key, d.source_id, 0, d.canonical_url, 0, ? from documents d "
                "where d.source_id = ? and d.status != 'tombstoned' and d.extractor != 'record' "
                "and (d.next_check_at <= ? or exists (select 1 from fetch_attempts r where "
                "r.doc_key = d.doc_key and r.state = 'retrying' and r.next_retry_at <= ?)) "
                "and not exists (select 1 from work w where w.doc_key = d.doc_key) "
                "and not exists (select 1 from fetch_attempts f where f.doc_key = d.doc_key "
                "and (f.state in ('dead', 'attention') or "
                "(f.state = 'retrying' and f.next_retry_at > ?))) "
                "on conflict (doc_key) do nothing",
                [at, source_id, now, now, now],
            )
            queued = cursor.rowcount
            cursor = self.db.execute(  # pages that failed before they were ever indexed
                "insert into work (doc_key, source_id, position, url, unlisted, enqueued_at) "
                "select f.doc_key, f.source_id, 0, f.url, 0, ? from fetch_attempts f "
                "where f.source_id = ? and f.state = 'retrying' and f.next_retry_at <= ? "
                "and f.doc_key not like ? "
                "and not exists (select 1 from documents d where d.doc_key = f.doc_key) "
                "and not exists (select 1 from work w where w.doc_key = f.doc_key) "
                "on conflict (doc_key) do nothing",
                [at, source_id, now, f"{source_id}:id:%"],
            )
        return queued + cursor.rowcount

    def claim_work(
        self, owner: str, *, now: float, until: float, limit: int
    ) -> list[dict[str, Any]]:
        """Claim up to ``limit`` queued pages nobody holds (or whose claim expired), in queue
        order. Concurrent claimers never get the same page (SKIP LOCKED on PostgreSQL)."""
        with self.write():
            rows = self.db.query(
                "update work set owner = ?, lease_until = ? where doc_key in (select doc_key "
                "from work where lease_until is null or lease_until < ? order by position "
                "limit ?" + (" for update skip locked" if self.postgres else "") + ") "
                "returning doc_key, source_id, position, url, lastmod, record, unlisted",
                [owner, until, now, limit],
            )
            rows = list(rows)
        return sorted(rows, key=lambda row: row["position"])

    def claim_page(
        self, doc_key: str, source_id: str, owner: str, *, now: float, until: float, at: str
    ) -> bool:
        """Claim one page for ``owner`` whether or not it is queued (the target of a move):
        False when another worker holds it. The claim ends with :meth:`finish_work`."""
        with self.write():
            cursor = self.db.execute(
                "insert into work (doc_key, source_id, position, url, unlisted, owner, "
                "lease_until, enqueued_at) values (?, ?, 0, ?, 0, ?, ?, ?) "
                "on conflict (doc_key) do update set owner = excluded.owner, "
                "lease_until = excluded.lease_until "
                "where work.owner is null or work.lease_until < ? or work.owner = excluded.owner",
                [doc_key, source_id, doc_key.split(":", 1)[1], owner, until, at, now],
            )
        return cursor.rowcount == 1

    def finish_work(self, owner: str, doc_keys: Sequence[str]) -> None:
        """Drop checked pages from the queue (only those ``owner`` still holds)."""
        with self.write():
            for start in range(0, len(doc_keys), 500):
                batch = list(doc_keys[start : start + 500])
                marks = ",".join("?" * len(batch))
                self.db.execute(
                    f"delete from work where owner = ? and doc_key in ({marks})", [owner, *batch]
                )

    def work_depth(self) -> int:
        return self.db.execute("select count(*) from work").fetchone()[0]

    # -- chunks and the embedding cache ----------------------------------------------------

    def chunks(self, doc_key: str) -> list[StoredChunk]:
        rows = self.db.query(
            "select * from chunks where doc_key = ? order by chunk_index", [doc_key]
        )
        return [_stored_chunk(row) for row in rows]

    def all_chunks(self) -> list[tuple[str, StoredChunk]]:
        rows = self.db.query("select * from chunks order by doc_key, chunk_index")
        return [(row["doc_key"], _stored_chunk(row)) for row in rows]

    def missing_vectors(self, text_hashes: Iterable[str], model_id: str) -> set[str]:
        """The hashes among ``text_hashes`` with no cached vector for ``model_id``."""
        wanted = set(text_hashes)
        present: set[str] = set()
        hashes = sorted(wanted)
        for start in range(0, len(hashes), 500):
            batch = hashes[start : start + 500]
            marks = ",".join("?" * len(batch))
            sql = (
                f"select text_hash from embedding_cache where model_id = ? "
                f"and text_hash in ({marks})"
            )
            present.update(row["text_hash"] for row in self.db.query(sql, [model_id, *batch]))
        return wanted - present

    def put_vectors(self, model_id: str, vectors: Mapping[str, Sequence[float]], at: str) -> None:
        """Cache vectors by text hash (one transaction; the cache only ever grows)."""
        rows = [
            {
                "text_hash": text_hash,
                "model_id": model_id,
                "dim": len(vector),
                "vector": array("f", vector).tobytes(),
                "created_at": at,
            }
            for text_hash, vector in vectors.items()
        ]
        with self.write():
            self.db.table("embedding_cache").insert_all(
                rows, pk=("text_hash", "model_id"), replace=True
            )

    def vectors(self, text_hashes: Iterable[str], model_id: str) -> dict[str, list[float]]:
        result: dict[str, list[float]] = {}
        hashes = sorted(set(text_hashes))
        for start in range(0, len(hashes), 500):
            batch = hashes[start : start + 500]
            marks = ",".join("?" * len(batch))
            sql = (
                f"select text_hash, vector from embedding_cache where model_id = ? "
                f"and text_hash in ({marks})"
            )
            for row in self.db.query(sql, [model_id, *batch]):
                result[row["text_hash"]] = array("f", row["vector"]).tolist()
        return result

    # -- the one transaction per document --------------------------------------------------

    def commit_document(
        self,
        document: dict[str, Any],
        chunks: Sequence[StoredChunk],
        ops: Sequence[dict[str, Any]],
        change: dict[str, Any] | None,
        aliases: Sequence[dict[str, Any]] = (),
        events: Sequence[dict[str, Any]] = (),
        raw_body: dict[str, Any] | None = None,
        *,
        unless_hash: str | None = None,
    ) -> bool:
        """Write a document's state, its chunk list, its change row and its journal entries;
        return whether it was written.

        All or nothing: a crash before the commit leaves the previous state intact, after it
        leaves operations in the journal that the next run replays. With ``unless_hash``,
        nothing is written when the stored document already holds that content (another
        worker committed the same change first: one change row, one event).
        """
        doc_key = document["doc_key"]
        with self.write():
            self._lock(f"document:{doc_key}")  # one commit of a page at a time
            if unless_hash is not None:
                row = self.db.execute(
                    "select content_hash, status from documents where doc_key = ?", [doc_key]
                ).fetchone()
                if row is not None and row[0] == unless_hash and row[1] != "tombstoned":
                    return False
            ops = [*ops, *self._stale_point_deletes(doc_key, chunks, ops)]
            self.db.table("documents").upsert(document, pk="doc_key")
            self.db.execute("delete from chunks where doc_key = ?", [doc_key])
            self.db.table("chunks").insert_all(
                (
                    {
                        "point_id": c.point_id,
                        "doc_key": doc_key,
                        "chunk_index": c.chunk_index,
                        "chunk_hash": c.chunk_hash,
                        "text": c.text,
                        "headings": json.dumps(list(c.headings), ensure_ascii=False),
                        "tokens": c.tokens,
                        "last_changed_at": c.last_changed_at,
                    }
                    for c in chunks
                ),
                pk="point_id",
            )
            if ops:
                self.enqueue(ops)
            if change:
                self.db.table("changes").insert(change, pk="id")
            if events:  # the transactional outbox: events exist iff the change does
                self.db.table("outbox").insert_all(events, pk="seq")
            if raw_body is not None:  # the body this content came from, kept for `reindex`
                body = {**raw_body, "body": zlib.compress(raw_body["body"])}
                self.db.table("raw_bodies").upsert(body, pk="doc_key")
            for alias in aliases:
                self.db.table("aliases").upsert(alias, pk="alias_key")
            if document["status"] != "tombstoned":  # it serves its own page again
                self.db.execute("delete from aliases where alias_key = ?", [doc_key])
            self.db.execute("delete from fetch_attempts where doc_key = ?", [doc_key])
        return True

    def _stale_point_deletes(
        self, doc_key: str, chunks: Sequence[StoredChunk], ops: Sequence[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Deletes for stored points that neither stay nor are deleted by ``ops``.

        Empty unless another worker committed this page between this one's plan and commit
        (both planned against the same old chunks): its points must go too, or they would be
        left in the index with no chunk row behind them.
        """
        sql = "select point_id from chunks where doc_key = ?"
        stored = {row[0] for row in self.db.execute(sql, [doc_key]).fetchall()}
        gone = {op["point_id"] for op in ops if op["op"] == "delete"}
        stale = sorted(stored - {c.point_id for c in chunks} - gone)
        base = {k: ops[0].get(k) for k in ("run_id", "created_at")} if ops else {}
        return [{**base, "doc_key": doc_key, "op": "delete", "point_id": p} for p in stale]

    # -- the journal ------------------------------------------------------------------------

    def pending_ops(self, limit: int = 256) -> list[StoreOp]:
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

    def add_alias(self, alias: dict[str, Any]) -> None:
        with self.write():
            self.db.table("aliases").upsert(alias, pk="alias_key")

    def aliases(self, source_id: str) -> dict[str, str]:
        """``{alias record key: target record key}`` for one source."""
        sql = "select alias_key, doc_key from aliases where alias_key like ?"
        return {r["alias_key"]: r["doc_key"] for r in self.db.query(sql, [f"{source_id}:%"])}

    def alias_checks(self, source_id: str) -> dict[str, tuple[str, str]]:
        """``{alias record key: (target record key, verified_at)}`` for one source; an alias
        never re-verified counts from when it was made."""
        sql = "select alias_key, doc_key, at, verified_at from aliases where alias_key like ?"
        return {
            r["alias_key"]: (r["doc_key"], r["verified_at"] or r["at"] or "")
            for r in self.db.query(sql, [f"{source_id}:%"])
        }

    def verify_aliases(self, alias_keys: Sequence[str], at: str) -> None:
        """The aliases' URLs were requested again at ``at`` (re-verified)."""
        with self.write():
            for start in range(0, len(alias_keys), 500):
                batch = list(alias_keys[start : start + 500])
                marks = ",".join("?" * len(batch))
                self.db.execute(
                    f"update aliases set verified_at = ? where alias_key in ({marks})",
                    [at, *batch],
                )

    def enqueue(self, ops: Sequence[dict[str, Any]]) -> None:
        """Add vector-store operations to the journal (one transaction)."""
        with self.write():
            self.db.table("journal").insert_all(
                ({**op, "payload": _json_or_none(op.get("payload"))} for op in ops), pk="seq"
            )

    def pending_count(self) -> int:
        return self.db.execute("select count(*) from journal").fetchone()[0]

    def mark_done(self, seqs: Sequence[int]) -> None:
        with self.write():
            for start in range(0, len(seqs), 500):
                batch = list(seqs[start : start + 500])
                marks = ",".join("?" * len(batch))
                self.db.execute(f"delete from journal where seq in ({marks})", batch)

    # -- runs -------------------------------------------------------------------------------

    def start_run(self, run_id: str, started_at: str, *, owner: str | None = None) -> None:
        """Record a run as running; ``owner`` is the run-lock holder (see
        :meth:`close_orphan_runs`)."""
        with self.write():
            self.db.table("runs").insert(
                {"run_id": run_id, "started_at": started_at, "status": "running", "owner": owner},
                pk="run_id",
            )

    def running_runs(self, now: float, host: str) -> list[dict[str, Any]]:
        """Runs recorded as running, each with ``alive``: whether its holder still holds
        the run lock (a dead one is closed as "interrupted" by the next run)."""
        holders = {
            row["owner"]: row
            for row in self.db.query(
                "select owner, host, pid from leases where lease_until >= ?", [now]
            )
        }
        found = []
        for row in self.db.query(
            "select run_id, started_at, owner from runs where status = 'running' "
            "order by started_at"
        ):
            holder = holders.get(row["owner"])
            found.append({**row, "alive": holder is not None and not _holder_dead(holder, host)})
        return found

    def interrupted_runs(self, limit: int = 5) -> list[dict[str, Any]]:
        """The latest runs closed as "interrupted" (their process died mid-run)."""
        sql = (
            "select run_id, started_at, finished_at, owner from runs "
            "where status = 'interrupted' order by started_at desc limit ?"
        )
        return list(self.db.query(sql, [limit]))

    def finish_run(
        self, run_id: str, *, finished_at: str, ok: bool, counters: dict, sources: dict
    ) -> None:
        with self.write():
            self.db.table("runs").update(
                run_id,
                {
                    "finished_at": finished_at,
                    "ok": int(ok),
                    "status": "ok" if ok else "failed",
                    "counters": json.dumps(counters),
                    "sources": json.dumps(sources),
                },
            )

    def status_counts(self) -> dict[str, dict[str, int]]:
        """``{source_id: {document status: count}}``."""
        counts: dict[str, dict[str, int]] = {}
        sql = "select source_id, status, count(*) as n from documents group by source_id, status"
        for row in self.db.query(sql):
            counts.setdefault(row["source_id"], {})[row["status"]] = row["n"]
        return counts

    def oldest_check(self, source_id: str) -> str | None:
        sql = (
            "select min(last_checked_at) from documents where source_id = ? "
            "and status != 'tombstoned'"
        )
        return self.db.execute(sql, [source_id]).fetchone()[0]

    def last_run(self) -> dict[str, Any] | None:
        sql = "select * from runs where finished_at is not null order by started_at desc limit 1"
        return next(iter(self.db.query(sql)), None)

    def changes(self, since: str | None = None) -> list[dict[str, Any]]:
        if since is None:
            return list(self.db.query("select * from changes order by id"))
        return list(self.db.query("select * from changes where at >= ? order by id", [since]))


def _stored_chunk(row: dict[str, Any]) -> StoredChunk:
    return StoredChunk(
        point_id=row["point_id"],
        chunk_index=row["chunk_index"],
        chunk_hash=row["chunk_hash"],
        text=row["text"],
        headings=tuple(json.loads(row["headings"] or "[]")),
        tokens=row["tokens"] or 0,
        last_changed_at=row["last_changed_at"] or "",
    )


def _json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _holder_dead(lease: Mapping[str, Any], host: str) -> bool:
    """Whether a lease's holder was a process on ``host`` that no longer exists (its lease may
    not have run out yet: a process on another machine can only be waited out)."""
    if lease["host"] != host or not lease["pid"]:
        return False
    try:
        os.kill(lease["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # it exists, under another user
        return False
    return False
