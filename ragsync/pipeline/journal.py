"""The journal: vector-store operations written in a document's transaction, applied after.

A commit only writes rows; :func:`apply_journal` replays pending operations against the store,
in order, and marks them done — so a run killed between the two leaves operations the next run
applies, and applying twice is harmless (point ids are deterministic; README "Architecture").
"""

from __future__ import annotations

import logging
from collections import defaultdict
from itertools import groupby

from ragsync.errors import StoreError
from ragsync.models import Counters, StoreOp
from ragsync.pipeline.context import Engine
from ragsync.pipeline.vectors import vectors_for
from ragsync.protocols import VectorStore

log = logging.getLogger("ragsync")

JOURNAL_BATCH = 256


def check_collection_model(engine: Engine) -> None:
    """Never mix the vectors of two models in one collection.

    Raises:
        StoreError: the collection holds another model's vectors.
    """
    name = engine.config.store.collection
    recorded = engine.state.index.get_collection_model(name)
    if recorded is None:
        engine.state.index.put_collection(
            name, engine.model_id, engine.embedder.dimension, engine.now()
        )
    elif recorded != engine.model_id:
        raise StoreError(
            f"collection {name!r} holds vectors of model {recorded}, but the configured "
            f"model is {engine.model_id}: set [store] collection to a new name and run "
            "`ragsync reindex` (or `ragsync reindex --same-collection` to replace them)"
        )


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
    dimension_checked = False
    while True:
        ops = engine.state.journal.pending(JOURNAL_BATCH)
        if not ops:
            return applied
        store = engine.store
        if not dimension_checked:
            check_collection_model(engine)
            store.ensure_collection(engine.embedder.dimension)
            dimension_checked = True
        for kind, group in groupby(ops, key=lambda op: op.op):
            apply_ops(engine, kind, list(group), store, counters)
        engine.state.journal.remove([op.seq for op in ops])
        applied += len(ops)
        log.debug("applied %d journal operations", applied)


def apply_ops(
    engine: Engine, kind: str, ops: list[StoreOp], store: VectorStore, counters: Counters
) -> None:
    """Apply a run of operations of one kind to the store."""
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
        store.upsert([(op.point_id, vectors[op.text_hash or ""], op.payload or {}) for op in ops])
        counters.points_upserted += len(ops)
