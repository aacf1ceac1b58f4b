"""Moves: a page that redirects permanently (or declares ``rel=canonical``) belongs to its
target record — once the move is confirmed.

A move is confirmed by the missing-page rule (``missing_confirmations`` observations spanning
``missing_grace``); until then the page is :class:`~ragsync.pipeline.outcomes.Moving`: its
record keeps its content and points, and only the evidence is recorded. A URL with no indexed
content moves at once. A confirmed move gives the target the content (re-chunked under its own
key: vectors come from the cache); the old record is retired after the commit and kept as an
alias, so a renamed page moves instead of staying indexed twice (README "Deletion safety").
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import cast

from ragsync.clock import epoch, iso
from ragsync.config import SourceConfig
from ragsync.identity import canonical_record_key
from ragsync.models import Counters, DocumentStatus
from ragsync.pipeline.context import Engine
from ragsync.pipeline.outcomes import (
    Changed,
    Document,
    Duplicate,
    MovedOnly,
    Moving,
    NotModified,
    Origin,
    Outcome,
    Unchanged,
    stored_content,
)
from ragsync.pipeline.records import tombstone, with_evidence
from ragsync.policy import missing_step

log = logging.getLogger("ragsync")


def resolve_moves(
    engine: Engine, source: SourceConfig, outcomes: Sequence[Outcome], moment: float
) -> list[Outcome]:
    """The outcomes with every move resolved: unconfirmed moves become ``Moving``, confirmed
    ones are re-keyed to their target record (``Changed``, ``Unchanged`` or ``MovedOnly``)."""
    taken = {o.page.doc_key for o in outcomes if not o.moved_to}
    resolved: list[Outcome] = []
    for outcome in outcomes:
        if isinstance(outcome, Changed | NotModified) and outcome.moved_to:
            outcome = _resolve(engine, source, outcome, taken, moment)
        resolved.append(outcome)
    return resolved


def _resolve(
    engine: Engine,
    source: SourceConfig,
    outcome: Changed | NotModified,
    taken: set[str],
    moment: float,
) -> Outcome:
    page, exchange, moved_to = outcome.page, outcome.exchange, outcome.moved_to
    assert moved_to is not None
    old = page.document
    target_key = canonical_record_key(source.id, moved_to)
    if old is not None and old["status"] != DocumentStatus.TOMBSTONED:
        count, since, confirmed = missing_step(
            old["missing_count"] or 0,
            epoch(old["missing_since"]),
            moment,
            confirmations=source.missing_confirmations,
            grace=source.missing_grace,
        )
        if not confirmed:
            return Moving(page, exchange, moved_to=moved_to, step=(count, since))
    origin: Document | Origin = old or Origin(doc_key=page.doc_key, canonical_url=page.url)
    if engine.claim_page is not None and not engine.claim_page(source.id, target_key):
        # Another worker holds the target's page: it commits the content; this one only
        # retires the old record (README "Scaling out").
        moved = dataclasses.replace(page, doc_key=target_key, url=moved_to)
        return MovedOnly(moved, exchange, moved_from=origin)
    target = engine.state.documents.get(target_key)
    moved = dataclasses.replace(page, doc_key=target_key, url=moved_to, document=target)
    if target_key in taken:  # the target is handled by its own page in this batch
        return MovedOnly(moved, exchange, moved_from=origin)
    taken.add(target_key)
    if isinstance(outcome, NotModified) and page.validators_of == target_key:
        # The target's own ETag was sent: its 304 says the target is unchanged, and the
        # old URL still leads there (the alias stands; the target counts as checked).
        return NotModified(moved, exchange, moved_from=origin)
    extracted = outcome.extracted if isinstance(outcome, Changed) else None
    if extracted is None and old is not None and old["markdown"]:
        extracted = stored_content(old)
    if extracted is None:
        return MovedOnly(moved, exchange, moved_from=origin)
    raw_hash = outcome.raw_hash if isinstance(outcome, Changed) else ""
    if (
        target
        and target["status"] != DocumentStatus.TOMBSTONED
        and target["content_hash"] == extracted.content_hash
    ):
        return Unchanged(moved, exchange, raw_hash=raw_hash, moved_from=origin)
    chunks = outcome.chunks if isinstance(outcome, Changed) and outcome.chunks else ()
    return Changed(
        moved,
        exchange,
        extracted=extracted,
        chunks=chunks or tuple(engine.chunk(extracted.markdown)),
        raw_hash=raw_hash,
        moved_from=origin,
    )


def record_moving(
    engine: Engine, source: SourceConfig, moving: Moving, *, now: str, counters: Counters
) -> None:
    """Evidence of a permanent move not yet confirmed: the record keeps its content and points
    (suspected missing from its URL) until the move is confirmed."""
    page = moving.page
    assert page.document is not None
    count, since = moving.step
    reason = f"redirects permanently to {moving.moved_to}"
    status = moving.exchange.status
    evidence = with_evidence(page.document, at=now, status=status, reason=reason)
    engine.state.documents.mark_missing(
        page.doc_key, count=count, since=iso(since), evidence=evidence, at=now
    )
    counters.moves_suspected += 1
    log.info(
        "%s: %s (move %d/%d, content kept)", page.url, reason, count, source.missing_confirmations
    )


def retire_moved(
    engine: Engine,
    source: SourceConfig,
    outcome: Outcome,
    *,
    now: str,
    run_id: str,
    counters: Counters,
) -> None:
    """Tombstone the record a page moved away from (or whose content another record holds:
    a :class:`Duplicate`) and remember it as an alias."""
    old = outcome.moved_from
    assert old is not None
    page = outcome.page
    alias = {
        "alias_key": old["doc_key"],
        "doc_key": page.doc_key,
        "url": old["canonical_url"],
        "at": now,
        "verified_at": now,
        **copy_served(outcome),
    }
    if old.get("status") == DocumentStatus.TOMBSTONED:  # confirmed again, or a late move
        engine.state.aliases.put(alias)
        return
    duplicate = isinstance(outcome, Duplicate)
    counters.records_moved += not duplicate  # a duplicate has its own counter
    if "status" not in old:  # a URL never indexed under its own key
        engine.state.aliases.put(alias)
        return
    old = cast(Document, old)  # an indexed record: not a bare Origin
    reason = f"same content as {page.url}" if duplicate else f"moved to {page.url}"
    evidence = with_evidence(old, at=now, status=outcome.exchange.status, reason=reason)
    tombstone(
        engine,
        source,
        old,
        reason=reason,
        evidence=evidence,
        now=now,
        run_id=run_id,
        counters=counters,
        aliases=[alias],
    )


def copy_served(outcome: Outcome) -> dict[str, str | None]:
    """What a copy's URL served, for its next re-verification to ask conditionally: its
    validators (those sent, when a 304 repeats none) and the content and title it served;
    nothing for a move (README "Identity")."""
    response = outcome.exchange.response
    if not isinstance(outcome, Duplicate) or outcome.served is None or response is None:
        return dict.fromkeys(("etag", "last_modified", "content_hash", "title"))
    etag: str | None = None
    modified: str | None = None
    if response.status == 304:  # the validators sent: the copy's own record's, or its alias's
        old = cast(Document, outcome.moved_from or {})
        etag, modified = outcome.page.validators or (old.get("etag"), old.get("last_modified"))
    return {
        "etag": response.etag or etag,
        "last_modified": response.last_modified or modified,
        "content_hash": outcome.served[0],
        "title": outcome.served[1],
    }
