"""Rows of the state DB as typed dicts: what the repositories take and return."""

from __future__ import annotations

from typing import Any, TypedDict


class DocumentRow(TypedDict):
    """A ``documents`` row: one record (a page or an API record) and its indexed state.

    ``status`` holds a :class:`ragsync.models.DocumentStatus` value.
    """

    doc_key: str
    source_id: str
    canonical_url: str
    title: str | None
    etag: str | None
    last_modified: str | None
    raw_hash: str | None
    content_hash: str | None
    markdown: str | None
    extractor: str | None
    status: str
    lastmod_hint: str | None
    chunk_count: int | None
    first_seen_at: str
    last_checked_at: str | None
    last_changed_at: str | None
    next_check_at: str | None
    check_interval: float | None
    refetch_at: str | None  # when the page is next asked in full, whatever its validators say
    missing_count: int | None
    missing_since: str | None
    missing_evidence: str | None  # JSON list of {at, status, reason}
    tombstoned_at: str | None
    tombstone_reason: str | None


class ChangeRow(TypedDict):
    """A ``changes`` row: one entry of the append-only change log (``id`` set by the DB).

    ``change_type`` is ``created``, ``updated``, ``removed`` or ``restored``.
    """

    id: int
    run_id: str
    doc_key: str
    source_id: str
    url: str
    change_type: str
    old_hash: str | None
    new_hash: str | None
    diff: str | None
    chunks_added: int
    chunks_removed: int
    chunks_kept: int
    magnitude: float
    at: str


class JournalOpRow(TypedDict):
    """A ``journal`` row as written (``seq`` is set by the DB): one idempotent vector-store
    operation. Build it with :func:`ragsync.state.journal.journal_op`."""

    run_id: str | None
    doc_key: str | None
    op: str  # upsert | delete | set_payload (ragsync.models.OpKind)
    point_id: str
    payload: dict[str, Any] | None  # stored as JSON
    text_hash: str | None
    model_id: str | None
    created_at: str | None
