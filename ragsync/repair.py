"""`ragsync verify [--repair]`: the vector store checked against the state DB, and made to
match it through the journal (vectors from the cache; only texts it lacks are embedded). Both
vectors are checked: a point's sparse vector too, when its collection holds them."""

from __future__ import annotations

from typing import Any

from ragsync.chunkdiff import chunk_payload
from ragsync.models import Counters
from ragsync.pipeline.context import Engine
from ragsync.pipeline.journal import apply_journal, supports_sparse
from ragsync.pipeline.vectors import sparse_vectors
from ragsync.state import journal_op
from ragsync.verify import VerifyReport, compare, sparse_drift

Expected = tuple[dict[str, dict], dict[str, tuple[str, str]]]


def expected_points(engine: Engine) -> Expected:
    """``({point_id: payload}, {point_id: (doc_key, chunk_hash)})`` from the state DB."""
    documents = {d["doc_key"]: d for d in engine.state.documents.list()}
    payloads, origin = {}, {}
    for doc_key, chunk in engine.state.index.list_chunks():
        payloads[chunk.point_id] = chunk_payload(
            chunk, document=documents[doc_key], model_id=engine.model_id
        )
        origin[chunk.point_id] = (doc_key, chunk.chunk_hash)
    return payloads, origin


def verify(engine: Engine, *, repair: bool) -> VerifyReport:
    """Compare (and with ``repair``, first replay the journal, then mend the drift)."""
    try:
        pending = engine.state.journal.count()
        if repair and pending:
            apply_journal(engine, Counters())
        report, points = survey(engine)
        report.pending_journal = engine.state.journal.count() if repair else pending
        if repair and not report.clean:
            mend(engine, report, points)
            report.repaired = True
        return report
    finally:
        engine.release_store()


def survey(engine: Engine, counters: Counters | None = None) -> tuple[VerifyReport, Expected]:
    """The store against the state DB, both vectors (the journal not counted), and the points
    the state expects; sparse vectors a text lacked are computed and counted in ``counters``."""
    expected, origin = expected_points(engine)
    actual = {pid: payload for pid, payload, _ in engine.store.points()}
    report = compare(expected, actual)
    report.sparse_drift = check_sparse(engine, expected, origin, counters)
    return report, (expected, origin)


def check_sparse(
    engine: Engine,
    expected: dict[str, dict],
    origin: dict[str, tuple[str, str]],
    counters: Counters | None = None,
) -> list[str]:
    """Points whose sparse vector is missing or wrong, when the collection holds them (the
    vectors a text lacks are computed, cached and counted in ``counters``)."""
    store = engine.store
    sparse_id = engine.state.index.get_collection_sparse(engine.config.store.collection)
    if sparse_id is None or not supports_sparse(store):
        return []
    texts = {origin[pid][1]: payload["page_content"] for pid, payload in expected.items()}
    vectors = sparse_vectors(engine, sparse_id, texts, counters)
    wanted = {pid: vectors[origin[pid][1]] for pid in expected}
    return sparse_drift(wanted, dict(store.sparse_points()))


def mend(
    engine: Engine, report: VerifyReport, points: Expected, counters: Counters | None = None
) -> None:
    """Write the missing points, rewrite drifted payloads and delete orphans, all through the
    journal, then apply it."""
    expected, origin = points
    base: dict[str, Any] = {"run_id": "verify", "created_at": engine.now()}
    ops = []
    for pid in sorted({*report.missing, *report.sparse_drift}):
        doc_key, text_hash = origin[pid]
        payload = expected[pid]
        ops.append(
            journal_op(
                "upsert",
                pid,
                doc_key=doc_key,
                payload=payload,
                text_hash=text_hash,
                model_id=engine.model_id,
                **base,
            )
        )
    for pid in report.drift:
        doc_key = origin[pid][0]
        ops.append(journal_op("set_payload", pid, doc_key=doc_key, payload=expected[pid], **base))
    ops.extend(journal_op("delete", pid, doc_key=None, **base) for pid in report.orphans)
    engine.state.journal.add(ops)
    apply_journal(engine, counters or Counters())
