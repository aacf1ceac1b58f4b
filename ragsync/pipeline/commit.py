"""Commit a window of checked pages: moves resolved, new texts embedded, one transaction per
changed document and one for every page found unchanged, then the journal applied."""

from __future__ import annotations

import logging
from collections.abc import Sequence, Set
from typing import Any

from ragsync.chunkdiff import diff_chunks
from ragsync.clock import iso
from ragsync.config import SourceConfig
from ragsync.models import ChunkDiff, Counters, DocumentStatus, SourceOutcome, StoredChunk
from ragsync.pipeline.context import Engine
from ragsync.pipeline.duplicates import store_once
from ragsync.pipeline.failures import record_failure
from ragsync.pipeline.journal import apply_journal
from ragsync.pipeline.moves import record_moving, resolve_moves, retire_moved
from ragsync.pipeline.outages import Watch
from ragsync.pipeline.outcomes import (
    Changed,
    Deleted,
    Failed,
    Missing,
    Moving,
    NotModified,
    Outcome,
    Skipped,
    Unchanged,
)
from ragsync.pipeline.records import (
    commit_changed,
    record_deleted,
    record_missing,
    revisit,
    validators,
)
from ragsync.pipeline.vectors import embed_missing

log = logging.getLogger("ragsync")

ChunkDiffs = dict[str, tuple[list[StoredChunk], ChunkDiff]]


def chunk_diffs(engine: Engine, changed: Sequence[Changed], now: str) -> ChunkDiffs:
    """``{doc key: (stored chunks, diff)}``: each changed page's chunks against its stored ones."""
    diffs: ChunkDiffs = {}
    for outcome in changed:
        page, extracted = outcome.page, outcome.extracted
        assert extracted is not None
        document = page.document
        payload_moved = document is not None and (
            document["title"] != extracted.title or document["canonical_url"] != page.url
        )
        diffs[page.doc_key] = diff_chunks(
            page.doc_key,
            engine.state.index.get_chunks(page.doc_key) if document else [],
            list(outcome.chunks),
            model_id=engine.model_id,
            now=now,
            document_payload_changed=payload_moved,
        )
    return diffs


def commit_outcomes(
    engine: Engine,
    source: SourceConfig,
    outcomes: Sequence[Outcome],
    report: SourceOutcome,
    run_id: str,
    *,
    checked_since: str = "",
    fresh: Set[str] = frozenset(),
    watch: Watch | None = None,
) -> list[Outcome]:
    """Commit a window of outcomes and apply the journal; returns them with moves resolved
    and duplicates found. ``report`` is the source's part of the run report (counters,
    errors); records checked since ``checked_since`` (the pass's start) may hold a page of the
    window, and those of ``fresh`` (created or restored earlier in the pass) yield it to a
    record indexed before (:func:`ragsync.pipeline.duplicates.store_once`); ``watch`` holds a
    record turning into a copy until that is confirmed (:meth:`Watch.hold`)."""
    counters = report.counters
    moment = engine.clock()
    now = iso(moment)
    resolved = resolve_moves(engine, source, outcomes, moment.timestamp())
    resolved = store_once(
        engine, source, resolved, checked_since=checked_since, fresh=fresh, watch=watch
    )
    diffs = chunk_diffs(engine, [o for o in resolved if isinstance(o, Changed)], now)
    embed_missing(
        engine, {c.chunk_hash: c.text for _, diff in diffs.values() for c in diff.add}, counters
    )
    checked: list[tuple[str, str, dict[str, Any]]] = []
    for item in resolved:
        item.count(counters)
        if isinstance(item, Skipped):
            continue
        commit_one(engine, source, item, diffs, checked, now=now, run_id=run_id, report=report)
        if item.moved_from is not None:
            retire_moved(engine, source, item, now=now, run_id=run_id, counters=counters)
    engine.state.documents.mark_checked(checked)  # one transaction for every page found unchanged
    log.debug("committed %d pages; applying the journal", len(resolved))
    apply_journal(engine, counters)
    return resolved


def commit_one(
    engine: Engine,
    source: SourceConfig,
    item: Outcome,
    diffs: ChunkDiffs,
    checked: list[tuple[str, str, dict[str, Any]]],
    *,
    now: str,
    run_id: str,
    report: SourceOutcome,
) -> None:
    """Write one outcome (an unchanged page is added to ``checked``, written with the rest)."""
    counters: Counters = report.counters
    page = item.page
    if isinstance(item, Deleted):
        record_deleted(engine, source, item, now=now, run_id=run_id, counters=counters)
    elif (
        page.prunable
        and item.moved_from is None  # an unlisted URL that redirects has moved
        and isinstance(item, NotModified | Unchanged | Changed)
    ):
        if isinstance(item, Changed):  # served and edited: fresh until it is pruned
            commit_changed(
                engine,
                source,
                item,
                diffs[page.doc_key],
                now=now,
                run_id=run_id,
                counters=counters,
            )
        reason = "no longer listed by the source"
        record_missing(engine, source, item, reason, now=now, run_id=run_id, counters=counters)
    elif isinstance(item, Missing):
        if page.document is None or page.document["status"] == DocumentStatus.TOMBSTONED:
            # An alias asked again that is gone (a copy removed from the site) stood for its
            # target: it is a broken link now, not a confirmed copy.
            engine.state.aliases.forget(page.doc_key)
        record_missing(engine, source, item, item.reason, now=now, run_id=run_id, counters=counters)
    elif isinstance(item, Moving):
        record_moving(engine, source, item, now=now, counters=counters)
    elif isinstance(item, NotModified) and page.copy_of is not None:
        # A copy unchanged while its holder changed: no record holds what it serves now.
        log.info("%s: unchanged (304), but its holder changed: asked in full next run", page.url)
        engine.state.aliases.unverify(page.doc_key)
    elif isinstance(item, NotModified | Unchanged):
        fields = {
            "lastmod_hint": page.candidate.lastmod,
            **revisit(engine, source, page, changed=False, fetched=isinstance(item, Unchanged)),
        }
        if isinstance(item, Unchanged):  # a 200 with the same content: new validators
            fields.update(validators(item))
        checked.append((page.doc_key, now, fields))
    elif isinstance(item, Changed):
        commit_changed(
            engine, source, item, diffs[page.doc_key], now=now, run_id=run_id, counters=counters
        )
    elif isinstance(item, Failed):
        record_failure(engine, source, item, now=now, report=report)
