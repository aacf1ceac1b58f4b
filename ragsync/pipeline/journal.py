"""The journal: vector-store operations written in a document's transaction, applied after.

A commit only writes rows; :func:`apply_journal` replays pending operations against the store,
in order, and marks them done — so a run killed between the two leaves operations the next run
applies, and applying twice is harmless (point ids are deterministic; README "Architecture").
"""

from __future__ import annotations

import logging
from collections import defaultdict
from contextlib import AbstractContextManager, nullcontext
from itertools import groupby
from typing import TypeGuard

from ragsync.errors import StoreError
from ragsync.models import Counters, StoreOp
from ragsync.pipeline.context import Engine
from ragsync.pipeline.vectors import sparse_for, term_counting, vectors_for
from ragsync.protocols import SparseStore, VectorStore
from ragsync.sparse import SPARSE_ID

log = logging.getLogger("ragsync")

JOURNAL_BATCH = 256


def check_collection_model(engine: Engine) -> bool:
    """Never mix the vectors of two models in one collection; return whether the collection
    was new to the state DB (and is now recorded with this model).

    Raises:
        StoreError: the collection holds another model's vectors.
    """
    name = engine.config.store.collection
    recorded = engine.state.index.get_collection_model(name)
    if recorded is None:
        engine.state.index.put_collection(
            name, engine.model_id, engine.embedder.dimension, engine.now()
        )
        return True
    if recorded != engine.model_id:
        raise StoreError(
            f"collection {name!r} holds vectors of model {recorded}, but the configured "
            f"model is {engine.model_id}: set [store] collection to a new name and run "
            "`ragsync reindex` (or `ragsync reindex --same-collection` to replace them)"
        )
    return False


def supports_sparse(store: VectorStore) -> TypeGuard[SparseStore]:
    """Whether the store can hold sparse vectors (it says whether it applies IDF itself)."""
    return getattr(store, "sparse_idf", None) is not None


def prepare_collection(engine: Engine, counters: Counters | None = None) -> str | None:
    """Check the model, create the collection if need be, and return the sparse encoder whose
    vectors its points carry (None: dense only; README "Hybrid search").

    A collection ragsync creates gets sparse vectors when ``[store] sparse`` is on. One built
    without them stays dense-only (a store cannot always add them in place) until
    ``ragsync reindex --same-collection`` adds them; a warning says so once per engine.
    """
    name, store = engine.config.store.collection, engine.store
    if check_collection_model(engine):
        wanted = SPARSE_ID if engine.config.store.sparse and supports_sparse(store) else None
        record_sparse(engine, wanted, counters)
    sparse_id = engine.state.index.get_collection_sparse(name)
    if not supports_sparse(store):
        store.ensure_collection(engine.embedder.dimension)
        return None
    held = store.ensure_collection(engine.embedder.dimension, sparse=sparse_id is not None)
    if sparse_id is not None and not held:  # made outside this state DB, without them
        record_sparse(engine, None)
        sparse_id = None
    if sparse_id is None and engine.config.store.sparse and f"sparse:{name}" not in engine.warned:
        engine.warned.add(f"sparse:{name}")
        log.warning(
            "collection %r has no sparse vectors, so search is dense only: run `ragsync "
            "reindex --same-collection` to add them (no text is embedded again)",
            name,
        )
    return sparse_id


def record_sparse(engine: Engine, sparse_id: str | None, counters: Counters | None = None) -> None:
    """Record which sparse vectors the configured collection holds, and for a store without
    an IDF modifier count its document frequencies from the chunks the state holds (sparse
    vectors computed for that are counted in ``counters``)."""
    name = engine.config.store.collection
    engine.state.index.put_collection_sparse(name, sparse_id)
    counting = term_counting(engine, counters)
    if counting is not None:
        chunks = engine.state.terms.rebuild(*counting)
        log.info("counted the sparse terms of %d chunks for collection %r", chunks, name)


def apply_journal(engine: Engine, counters: Counters) -> int:
    """Apply every pending journal operation, in order; return how many were applied.

    Under workers (``engine.journal_lease``) one process at a time applies, holding the
    ``journal`` lease: two appliers could otherwise apply a page's upsert after its later
    delete. A worker that finds the lease held leaves its operations to the holder, which
    applies until the journal is empty, or to its own next try.
    """
    if engine.journal_lease is None:
        return apply_pending(engine, counters)
    if not engine.state.journal.count():
        return 0
    with engine.journal_lease("journal") as held:
        return apply_pending(engine, counters) if held else 0


def apply_pending(engine: Engine, counters: Counters) -> int:
    """Apply pending operations batch by batch until none is left; return how many."""
    applied = 0
    prepared = False
    sparse_id: str | None = None
    while True:
        ops = engine.state.journal.pending(JOURNAL_BATCH)
        if not ops:
            return applied
        store = engine.store
        if not prepared:
            sparse_id = prepare_collection(engine, counters)
            prepared = True
        with batch_writes(store):  # durable before the journal forgets the batch
            for kind, group in groupby(ops, key=lambda op: op.op):
                apply_ops(engine, kind, list(group), store, counters, sparse_id=sparse_id)
        engine.state.journal.remove([op.seq for op in ops])
        applied += len(ops)
        log.debug("applied %d journal operations", applied)


def batch_writes(store: VectorStore) -> AbstractContextManager[object]:
    """The store's ``writes()`` block when it has one (its operations made durable once, when
    the block ends), else a block that changes nothing (each operation is durable on return)."""
    writes = getattr(store, "writes", None)
    return writes() if writes is not None else nullcontext()


def apply_ops(
    engine: Engine,
    kind: str,
    ops: list[StoreOp],
    store: VectorStore,
    counters: Counters,
    *,
    sparse_id: str | None = None,
) -> None:
    """Apply a run of operations of one kind to the store (upserts with ``sparse_id``'s
    vectors beside the dense ones when given)."""
    if kind == "delete":
        store.delete([op.point_id for op in ops])
        counters.points_deleted += len(ops)
    elif kind == "set_payload":
        store.set_payload([(op.point_id, op.payload or {}) for op in ops])
        counters.payloads_updated += len(ops)
    else:
        vectors: dict[str, list[float]] = {}
        by_model = defaultdict(list)
        for op in ops:
            by_model[op.model_id or engine.model_id].append(op)
        for model_id, model_ops in by_model.items():
            hashes = [op.text_hash for op in model_ops if op.text_hash]
            vectors.update(vectors_for(engine, hashes, model_id, model_ops))
        points = [(op.point_id, vectors[op.text_hash or ""], op.payload or {}) for op in ops]
        if sparse_id is None:
            store.upsert(points)
        else:
            assert supports_sparse(store)
            sparse = sparse_for(engine, sparse_id, ops, counters)
            store.upsert(points, sparse=[sparse[op.text_hash or ""] for op in ops])
        counters.points_upserted += len(ops)
