"""The state DB's schema: named migrations, applied in order and once each
(:meth:`ragsync.state.StateDB.migrate`). Each takes a sqlite-utils ``Database`` or a
:class:`ragsync.state.postgres.PgDatabase`; never edit one that has shipped, add the next.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
            "record": str,  # JSON: API record fields, a published URL; or null
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


def _m010_crawl_links(db: Any) -> None:
    # A crawl source's graph: each page's outlinks as last read (a JSON list), so that a 304
    # reuses them and a no-change crawl costs one conditional request per page (README
    # "Discovery").
    db.table("crawl_links").create(
        # The validators of a page read for its links only (noindex: no record holds them).
        {
            "doc_key": str,
            "source_id": str,
            "links": str,
            "read_at": str,
            "etag": str,
            "last_modified": str,
        },
        pk="doc_key",
        not_null={"source_id", "links"},
    )
    db.table("crawl_links").create_index(["source_id"])


def _m011_content_index(db: Any) -> None:
    # Pages whose content another page of the source already holds are stored once (README
    # "Identity"): found by content hash.
    db.table("documents").create_index(["source_id", "content_hash"])


def _m012_chunkers(db: Any) -> None:
    # The chunker each source's chunks were made with (ragsync.chunk.chunker_id), so that a run
    # never mixes chunks of two chunkers (README "Plan and reindex"). No row: a source that has
    # chunks was chunked before ids were recorded, by the greedy packer.
    db.table("chunkers").create(
        {"source_id": str, "chunker": str, "recorded_at": str},
        pk="source_id",
        not_null={"chunker"},
    )


def _m013_sparse(db: Any) -> None:
    # The sparse encoder a collection holds vectors of (NULL: dense only; README
    # "Hybrid search"), and for stores without an IDF modifier (pgvector) each term's
    # document frequency over the collection's chunks, kept in the chunks' own transactions.
    collections = db.table("collections")
    collections.add_column("sparse_id", str)
    collections.add_column("sparse_chunks", int)
    db.table("sparse_terms").create(
        {"collection": str, "term": int, "df": int},
        pk=("collection", "term"),
        not_null={"df"},
    )


def _m014_check_times_index(db: Any) -> None:
    # `status` names each source's least recent check: read from the first entries of this
    # index, not from every document of the source (a state of a million documents).
    db.table("documents").create_index(["source_id", "last_checked_at"])


def _m015_work_by_source(db: Any) -> None:
    # A worker skips queueing a source whose pages are still queued (work.add_due): one
    # index entry to look at, not the queue.
    db.table("work").create_index(["source_id"])


def _m016_links_only(db: Any) -> None:
    # Why a crawled page without a record was read for its links only: "noindex", or
    # "not_text" (a file; README "Discovery"). NULL: noindex (the only reason before), so that
    # its 304 counts as what it is.
    db.table("crawl_links").add_column("skipped", str)


def _m017_attempt_lastmod(db: Any) -> None:
    # The listing's lastmod when a URL never indexed answered 404/410: one that moves since
    # brings its next check forward, as it does a known page's (README "Scheduling").
    db.table("fetch_attempts").add_column("lastmod", str)


def _m018_crawl_entries(db: Any) -> None:
    # A crawl entry's new target not confirmed yet: JSON {target, count, since} (README
    # "Discovery").
    db.table("crawl_links").add_column("pending", str)


def _m019_alias_validators(db: Any) -> None:
    # What a copy's URL served when it was last found a copy (README "Identity"): its
    # validators, and the content hash and title it served, so that its re-verification is a
    # conditional request while its holder still holds that content. NULL for moves.
    for column in ("etag", "last_modified", "content_hash", "title"):
        db.table("aliases").add_column(column, str)
    # A record whose content changes makes its copies due again (Aliases.unverify_copies).
    db.table("aliases").create_index(["doc_key"])


def _m020_refetch(db: Any) -> None:
    # When each page is next asked in full, whatever its validators say
    # (README "Validators that lie"). NULL (a page stored before): set at its next check.
    db.table("documents").add_column("refetch_at", str)
    # Per host: pages caught changing under the validators they had, since its validators were
    # last shown right (the last one's URL and time), and since when they are distrusted.
    hosts = db.table("hosts")
    hosts.add_column("validator_lies", int)
    hosts.add_column("validator_lie_url", str)
    hosts.add_column("validator_lie_at", str)
    hosts.add_column("validators_distrusted_at", str)


def _m021_held_changes(db: Any) -> None:
    # What a page served that is held back (README "Deletion safety", outage pages):
    # held_kind "outage" (an outage page) or "change" (a change waiting for confirmation),
    # held_hash its content hash (an outage page's: its shape), held_shape its shape, seen
    # held_count times since held_since.
    attempts = db.table("fetch_attempts")
    for column in ("held_kind", "held_hash", "held_since", "held_shape"):
        attempts.add_column(column, str)
    attempts.add_column("held_count", int)


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
    ("010_crawl_links", _m010_crawl_links),
    ("011_content_index", _m011_content_index),
    ("012_chunkers", _m012_chunkers),
    ("013_sparse", _m013_sparse),
    ("014_check_times_index", _m014_check_times_index),
    ("015_work_by_source", _m015_work_by_source),
    ("016_links_only", _m016_links_only),
    ("017_attempt_lastmod", _m017_attempt_lastmod),
    ("018_crawl_entries", _m018_crawl_entries),
    ("019_alias_validators", _m019_alias_validators),
    ("020_refetch", _m020_refetch),
    ("021_held_changes", _m021_held_changes),
)
