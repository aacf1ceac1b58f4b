"""Writing a record's life to the state DB: a change, a tombstone, evidence of absence.

Each write is one transaction (:meth:`ragsync.state.index.Index.commit_document`): the record, its
chunks, the journal operations for its points, its change row and its outbound events commit
together or not at all (README "Architecture").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from ragsync.chunkdiff import chunk_payload, magnitude, markdown_diff
from ragsync.clock import epoch, iso
from ragsync.config import SourceConfig
from ragsync.events import outbox_rows
from ragsync.models import AttemptState, ChunkDiff, Counters, DocumentStatus, StoredChunk
from ragsync.pipeline.context import Engine
from ragsync.pipeline.outcomes import Changed, Document, Outcome, Page
from ragsync.pipeline.vectors import term_counting
from ragsync.policy import missing_step
from ragsync.schedule import next_interval, refetch_at
from ragsync.state import journal_op

log = logging.getLogger("ragsync")


def with_evidence(
    document: Document, *, at: str, status: int | None, reason: str
) -> list[dict[str, Any]]:
    """The document's evidence of absence (404s, unconfirmed moves, unlisted checks) with one
    more observation; the last 20 are kept."""
    evidence = json.loads(document["missing_evidence"] or "[]")
    return [*evidence, {"at": at, "status": status, "reason": reason}][-20:]


def revisit(
    engine: Engine, source: SourceConfig, page: Page, *, changed: bool, fetched: bool = False
) -> dict[str, Any]:
    """When to check this page again: sooner after a change, later after none; and when to ask
    it in full, whatever its validators say: within one ``refetch_interval`` of its last full
    answer (``fetched``: this check's), at its own point (:func:`ragsync.schedule.refetch_at`).
    Its next check comes no later than that (README "Validators that lie")."""
    previous = page.document["check_interval"] if page.document else None
    interval = revisit_interval(engine, source, previous, changed=changed)
    moment = engine.clock()
    due, now = iso(moment + timedelta(seconds=interval)), iso(moment)
    # A record stored before refetch times were kept gets one from this check on.
    refetch = page.document.get("refetch_at") if page.document and not fetched else None
    refetch = refetch or iso(
        refetch_at(page.doc_key, moment.timestamp(), interval=source.refetch_interval)
    )
    return {
        "check_interval": interval,
        "next_check_at": min(due, max(refetch, now)),
        "refetch_at": refetch,
    }


def revisit_interval(
    engine: Engine, source: SourceConfig, previous: float | None, *, changed: bool
) -> float:
    """Seconds until the next check of a page whose last interval was ``previous`` (None: its
    first), within the source's ``min_interval``/``max_interval`` (README "Scheduling")."""
    longest = source.max_interval
    shortest = min(source.every if source.min_interval is None else source.min_interval, longest)
    return next_interval(
        previous,
        changed=changed,
        initial=min(max(source.every, shortest), longest),
        min_interval=shortest,
        max_interval=longest,
        draw=engine.random.random(),
    )


def validators(outcome: Outcome) -> dict[str, str | None]:
    """The validators a 200 brought, to send with the next conditional request."""
    response = outcome.exchange.response
    if response is None:
        return {}
    return {
        "etag": response.etag,
        "last_modified": response.last_modified,
        "raw_hash": getattr(outcome, "raw_hash", "") or None,
    }


def commit_changed(
    engine: Engine,
    source: SourceConfig,
    outcome: Changed,
    chunk_diff: tuple[list[StoredChunk], ChunkDiff],
    *,
    now: str,
    run_id: str,
    counters: Counters,
) -> None:
    """One transaction: the new content, its chunks, the journal operations that bring the
    store in line (delete removed points, upsert added ones, rewrite moved payloads), the
    change row and its events."""
    page, extracted, response = outcome.page, outcome.extracted, outcome.exchange.response
    before = page.document
    assert extracted is not None
    stored, diff = chunk_diff
    document = {
        "doc_key": page.doc_key,
        "source_id": source.id,
        "canonical_url": page.url,
        "title": extracted.title,
        "etag": response.etag if response else None,
        "last_modified": response.last_modified if response else None,
        "raw_hash": outcome.raw_hash,
        "content_hash": extracted.content_hash,
        "markdown": extracted.markdown,
        "extractor": extracted.extractor,
        "status": DocumentStatus.ACTIVE,
        "lastmod_hint": page.candidate.lastmod,
        "chunk_count": len(stored),
        "first_seen_at": before["first_seen_at"] if before else now,
        "last_checked_at": now,
        "last_changed_at": now,
        "missing_count": 0,
        "missing_since": None,
        "missing_evidence": None,
        "tombstoned_at": None,
        "tombstone_reason": None,
        **revisit(engine, source, page, changed=True, fetched=outcome.exchange.requested),
    }
    model_id = engine.model_id
    base: dict[str, Any] = {"run_id": run_id, "doc_key": page.doc_key, "created_at": now}
    ops = [journal_op("delete", chunk.point_id, **base) for chunk in diff.remove]
    for chunk in diff.add:
        payload = chunk_payload(chunk, document=document, model_id=model_id)
        ops.append(
            journal_op(
                "upsert",
                chunk.point_id,
                payload=payload,
                text_hash=chunk.chunk_hash,
                model_id=model_id,
                **base,
            )
        )
    for chunk in diff.repayload:
        payload = chunk_payload(chunk, document=document, model_id=model_id)
        ops.append(journal_op("set_payload", chunk.point_id, payload=payload, **base))
    if before is None:
        change_type = "created"
    elif before["status"] == DocumentStatus.TOMBSTONED:
        change_type = "restored"
    else:
        change_type = "updated"
    change = {
        "run_id": run_id,
        "doc_key": page.doc_key,
        "source_id": source.id,
        "url": page.url,
        "change_type": change_type,
        "old_hash": before["content_hash"] if before else None,
        "new_hash": extracted.content_hash,
        "diff": markdown_diff(before and before["markdown"] or "", extracted.markdown, page.url),
        "chunks_added": len(diff.add),
        "chunks_removed": len(diff.remove),
        "chunks_kept": len(diff.keep),
        "magnitude": magnitude(diff),
        "at": now,
    }
    events = outbox_rows(change, engine.config.events, now)
    raw_body = None
    if response is not None and response.status == 200:
        raw_body = {
            "doc_key": page.doc_key,
            "url": response.url,
            "content_type": response.headers.get("content-type", ""),
            "body": response.body,
            "raw_hash": outcome.raw_hash,
            "fetched_at": now,
        }
    # Committed concurrently by another worker (the target of a move it was checking)?
    # Then its change row and events stand, and this one is not written twice.
    fresh = before is None or before["content_hash"] != extracted.content_hash
    committed = engine.state.index.commit_document(
        document,
        stored,
        ops,
        change,
        events=events,
        raw_body=raw_body,
        unless_hash=extracted.content_hash if fresh else None,
        terms=term_counting(engine, counters),
    )
    if committed:
        counters.chunks_folded += diff.folded
    if committed and before is None:
        counters.documents_created += 1
    elif committed:
        counters.documents_updated += 1
        held = (before["content_hash"], before["title"]) if before else None
        if held != (extracted.content_hash, extracted.title):
            engine.state.aliases.unverify_copies(
                page.doc_key, extracted.content_hash, extracted.title
            )


def tombstone(
    engine: Engine,
    source: SourceConfig,
    document: Document,
    *,
    reason: str,
    evidence: list[dict[str, Any]],
    now: str,
    run_id: str,
    counters: Counters,
    aliases: Sequence[dict[str, Any]] = (),
) -> None:
    """One transaction: the record becomes a tombstone (identity, URL, time, reason, evidence
    kept), its chunks go, and the journal deletes its points."""
    doc_key, url = document["doc_key"], document["canonical_url"]
    old = engine.state.index.get_chunks(doc_key)
    tombstoned = {
        **document,
        "status": DocumentStatus.TOMBSTONED,
        "tombstoned_at": now,
        "tombstone_reason": reason,
        "missing_evidence": json.dumps(evidence),
        "chunk_count": 0,
        "last_checked_at": now,
    }
    ops = [
        journal_op("delete", chunk.point_id, run_id=run_id, doc_key=doc_key, created_at=now)
        for chunk in old
    ]
    change = {
        "run_id": run_id,
        "doc_key": doc_key,
        "source_id": source.id,
        "url": url,
        "change_type": "removed",
        "old_hash": document["content_hash"],
        "new_hash": None,
        "diff": markdown_diff(document["markdown"] or "", "", url),
        "chunks_added": 0,
        "chunks_removed": len(old),
        "chunks_kept": 0,
        "magnitude": 1.0 if old else 0.0,
        "at": now,
    }
    events = outbox_rows(change, engine.config.events, now)
    engine.state.index.commit_document(
        tombstoned, [], ops, change, aliases, events, terms=term_counting(engine, counters)
    )
    counters.tombstones_created += 1


def record_missing(
    engine: Engine,
    source: SourceConfig,
    outcome: Outcome,
    reason: str,
    *,
    now: str,
    run_id: str,
    counters: Counters,
) -> None:
    """Evidence of absence (README "Deletion safety"): suspected first, tombstoned only when
    the missing-page rule confirms it."""
    page = outcome.page
    document = page.document
    status = outcome.exchange.status
    if document is None:
        # Never indexed (a broken link, a listed URL that is gone): asked again on the revisit
        # schedule of a page found unchanged, not on every run (README "Scheduling").
        before = engine.state.attempts.get(page.doc_key)
        waited = None
        if before and before["state"] == AttemptState.MISSING:
            retry_at, asked_at = epoch(before["next_retry_at"]), epoch(before["last_attempt_at"])
            if retry_at is not None and asked_at is not None:
                waited = retry_at - asked_at
        interval = revisit_interval(engine, source, waited, changed=False)
        engine.state.attempts.add(
            page.doc_key,
            page.url,
            source_id=source.id,
            status=status,
            error=reason,
            at=now,
            state=AttemptState.MISSING,
            next_retry_at=iso(engine.clock() + timedelta(seconds=interval)),
            lastmod=page.candidate.lastmod,
        )
        return
    if document["status"] == DocumentStatus.TOMBSTONED:
        # Gone as recorded: a retry it had (a failure while it was checked) ends here, or
        # the page would be asked again on every run.
        engine.state.attempts.clear([page.doc_key])
        return
    count, since, confirmed = missing_step(
        document["missing_count"] or 0,
        epoch(document["missing_since"]),
        engine.clock().timestamp(),
        confirmations=source.missing_confirmations,
        grace=source.missing_grace,
    )
    evidence = with_evidence(document, at=now, status=status, reason=reason)
    since_iso = iso(since)
    if not confirmed:
        log.info(
            "%s: %s (suspected missing %d/%d, content kept)",
            page.url,
            reason,
            count,
            source.missing_confirmations,
        )
        engine.state.documents.mark_missing(
            page.doc_key, count=count, since=since_iso, evidence=evidence, at=now
        )
        return
    document = {**document, "missing_count": count, "missing_since": since_iso}
    tombstone(
        engine,
        source,
        document,
        reason=reason,
        evidence=evidence,
        now=now,
        run_id=run_id,
        counters=counters,
    )
    log.info("%s: tombstoned after %d observations (%s)", page.url, count, reason)


def record_deleted(
    engine: Engine,
    source: SourceConfig,
    outcome: Outcome,
    *,
    now: str,
    run_id: str,
    counters: Counters,
) -> None:
    """An authoritative deletion signal (an API's deleted flag): tombstone at once."""
    document = outcome.page.document
    if document is None or document["status"] == DocumentStatus.TOMBSTONED:
        return
    reason = "deleted by the source"
    evidence = [{"at": now, "status": None, "reason": reason}]
    tombstone(
        engine,
        source,
        document,
        reason=reason,
        evidence=evidence,
        now=now,
        run_id=run_id,
        counters=counters,
    )
