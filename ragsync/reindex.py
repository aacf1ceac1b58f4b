"""`ragsync reindex`: re-extract, re-chunk and re-embed from what the state DB kept — no
network request. Only texts absent from the embedding cache are embedded."""

from __future__ import annotations

import logging

from ragsync.chunk import chunker_id
from ragsync.chunkdiff import diff_chunks
from ragsync.config import SourceConfig
from ragsync.errors import ExtractError
from ragsync.models import (
    Candidate,
    Counters,
    DocumentStatus,
    Extracted,
    Response,
    SourceOutcome,
    SyncResult,
)
from ragsync.pipeline.check import extract
from ragsync.pipeline.commit import commit_outcomes
from ragsync.pipeline.context import Engine
from ragsync.pipeline.journal import apply_journal, record_sparse, supports_sparse
from ragsync.pipeline.outcomes import Changed, Document, Page, stored_content
from ragsync.pipeline.runs import finish_run, start_run
from ragsync.pipeline.source import WINDOW_PAGES
from ragsync.repair import mend, survey
from ragsync.sparse import SPARSE_ID

log = logging.getLogger("ragsync")


def reindex(
    engine: Engine, sources: list[SourceConfig], *, owner: str, same_collection: bool
) -> SyncResult:
    """Reindex ``sources`` (the caller holds the run lock); see :meth:`Syncer.reindex`."""
    if same_collection:  # the new model's vectors replace the old ones in this collection
        engine.state.index.put_collection(
            engine.config.store.collection,
            engine.model_id,
            engine.embedder.dimension,
            engine.now(),
        )
    result = start_run(engine, owner=owner, kind="reindex")
    try:
        if same_collection:
            add_sparse(engine, result.counters)
        result.counters.journal_replayed = apply_journal(engine, result.counters)
        for source in sources:
            outcome = SourceOutcome()
            documents = [
                d
                for d in engine.state.documents.list(source.id)
                if d["status"] != DocumentStatus.TOMBSTONED
            ]
            for start in range(0, len(documents), WINDOW_PAGES):
                window = documents[start : start + WINDOW_PAGES]
                changed = [c for c in (reindexed(engine, d) for d in window) if c is not None]
                if changed:
                    commit_outcomes(engine, source, changed, outcome, result.run_id)
            result.sources[source.id] = outcome
            result.counters.add(outcome.counters)
            if outcome.ok:  # every chunk of the source is now the configured chunker's
                configured = chunker_id(engine.config.chunker.max_tokens)
                engine.state.index.put_chunker(source.id, configured, engine.now())
        fill(engine, result.counters)
        result.ok = all(o.ok for o in result.sources.values())
    finally:
        engine.release_store()
        finish_run(engine, result)
    return result


def add_sparse(engine: Engine, counters: Counters) -> None:
    """Give the collection sparse vectors if it was built without them (``[store] sparse``):
    in place where the store can add them (pgvector), else by dropping it for a rebuild from
    the caches (Qdrant cannot add a named vector); :func:`fill` then writes the points."""
    store = engine.store
    wanted = SPARSE_ID if engine.config.store.sparse and supports_sparse(store) else None
    name = engine.config.store.collection
    if wanted is None or engine.state.index.get_collection_sparse(name) == wanted:
        return
    assert supports_sparse(store)
    if not store.ensure_collection(engine.embedder.dimension, sparse=True):
        log.info("rebuilding collection %r with sparse vectors (no text is embedded again)", name)
        store.drop()
    record_sparse(engine, wanted, counters)


def fill(engine: Engine, counters: Counters) -> None:
    """Write every point the store lacks, or whose sparse vector is missing (a new or rebuilt
    collection), from the caches: ``verify --repair``'s mend, counted in the run report."""
    report, points = survey(engine, counters)
    report.orphans = []  # points the state does not explain are verify --repair's to delete
    if report.missing or report.sparse_drift or report.drift:
        mend(engine, report, points, counters)


def reindexed(engine: Engine, document: Document) -> Changed | None:
    """The change a document undergoes with today's extractor, chunker and model (None when
    nothing about it would change): from its retained raw body, or, once that left the
    retention window, from its stored Markdown."""
    body = engine.state.index.get_raw_body(document["doc_key"])
    extracted: Extracted | None = None
    if body is not None and document["extractor"] != "record":
        headers = {"content-type": body["content_type"] or ""}
        try:
            extracted = extract(engine, Response(body["url"], 200, headers, body["body"]))
        except ExtractError:
            extracted = None
    if extracted is None:
        extracted = stored_content(document)
    chunks = engine.chunk(extracted.markdown)
    _, diff = diff_chunks(
        document["doc_key"],
        engine.state.index.get_chunks(document["doc_key"]),
        chunks,
        model_id=engine.model_id,
        now="",
    )
    if not diff.changed and extracted.content_hash == document["content_hash"]:
        return None
    candidate = Candidate(url=document["canonical_url"], lastmod=document["lastmod_hint"])
    page = Page(document["doc_key"], document["canonical_url"], candidate, document)
    return Changed(
        page, extracted=extracted, chunks=tuple(chunks), raw_hash=document["raw_hash"] or ""
    )
