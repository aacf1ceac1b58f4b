"""Vectors: embed only texts the cache lacks, and look up the vectors operations need."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from ragsync.models import Counters, StoreOp
from ragsync.pipeline.context import Engine
from ragsync.sparse import SparseVector, encode
from ragsync.state.terms import VectorsOf

EMBED_CALL_BATCHES = 16  # embedder.batch_size batches per embed call (and per cache flush)


def embed_missing(engine: Engine, texts: dict[str, str], counters: Counters) -> None:
    """Embed the texts (``{text hash: text}``) whose vectors the cache lacks for this model;
    cache them as they come."""
    if not texts:
        return
    # Sorted by length so that the model's batches carry little padding.
    missing = sorted(
        engine.state.embeddings.missing(texts, engine.model_id), key=lambda h: (len(texts[h]), h)
    )
    counters.chunks_reused += len(texts) - len(missing)
    # Cached every few model batches, so a killed run keeps the embedding work it did.
    step = engine.config.embedder.batch_size * EMBED_CALL_BATCHES
    for start in range(0, len(missing), step):
        batch = missing[start : start + step]
        vectors = engine.embed([texts[h] for h in batch])
        engine.state.embeddings.put(
            engine.model_id, dict(zip(batch, vectors, strict=True)), engine.now()
        )
        counters.chunks_embedded += len(batch)
        engine.progress.embedded(start + len(batch), len(missing))


def vectors_for(
    engine: Engine, hashes: list[str], model_id: str, ops: list[StoreOp]
) -> dict[str, list[float]]:
    """Cached vectors; a text the cache lacks (it was cleared) is embedded again."""
    vectors = engine.state.embeddings.get_many(hashes, model_id)
    lacking = {
        op.text_hash: (op.payload or {}).get("page_content", "")
        for op in ops
        if op.text_hash and op.text_hash not in vectors
    }
    if lacking and model_id == engine.model_id:
        fresh = engine.embed(list(lacking.values()))
        new = dict(zip(lacking, fresh, strict=True))
        engine.state.embeddings.put(model_id, new, engine.now())
        vectors.update(new)
    return vectors


def sparse_vectors(
    engine: Engine, sparse_id: str, texts: Mapping[str, str], counters: Counters | None = None
) -> dict[str, SparseVector]:
    """The sparse vectors of ``texts`` (``{text hash: text}``): cached, or encoded and cached
    for a text never encoded before — so an unchanged chunk's vector is computed once."""
    vectors = engine.state.embeddings.get_sparse(texts, sparse_id)
    fresh = {h: encode(text) for h, text in texts.items() if h not in vectors}
    if fresh:
        engine.state.embeddings.put_sparse(sparse_id, fresh, engine.now())
        vectors.update(fresh)
        if counters is not None:
            counters.sparse_computed += len(fresh)
    return vectors


def sparse_for(
    engine: Engine, sparse_id: str, ops: list[StoreOp], counters: Counters
) -> dict[str, SparseVector]:
    """The sparse vectors of the upserts' texts (:func:`sparse_vectors`)."""
    texts = {op.text_hash: (op.payload or {}).get("page_content", "") for op in ops if op.text_hash}
    return sparse_vectors(engine, sparse_id, texts, counters)


def term_counting(engine: Engine, counters: Counters | None = None) -> tuple[str, VectorsOf] | None:
    """What a commit needs to keep document frequencies (``(collection, vectors_of)``): only
    for a store that applies no IDF itself, once its collection holds sparse vectors."""
    name = engine.config.store.collection
    if getattr(engine.store, "sparse_idf", None) is not False:  # True: the store has IDF
        return None
    sparse_id = engine.state.index.get_collection_sparse(name)
    if sparse_id is None:
        return None
    return name, partial(sparse_vectors, engine, sparse_id, counters=counters)
