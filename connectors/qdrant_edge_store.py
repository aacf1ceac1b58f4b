"""The ``qdrant_edge`` vector store: Qdrant's engine in-process (``qdrant-edge-py``), on disk.

An embedded alternative to qdrant-client's local mode for large single-machine indexes: at
100,000 points eval/bench_stores.py measured 16,000 upserts/s against local mode's 665, a
0.2 s reopen against 12.7 s, and 670 MB against 3 GB. One shard folder per collection under
``[store] path``; the vector size is kept beside it in ``ragsync-collection.json``. Points are
the same LangChain-compatible payloads, written by id, so journal replay stays idempotent.
Like local mode, one process at a time opens a shard.

Example ``ragsync.toml``::

    [store]
    kind = "qdrant_edge"
    path = ".ragsync/edge"
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

from ragsync.config import StoreConfig
from ragsync.embedded import open_waiting
from ragsync.errors import StoreError
from ragsync.models import Hit
from ragsync.registry import EDGE_META
from ragsync.sparse import SPARSE_NAME, SparseVector, with_sparse

META = EDGE_META  # `[store] kind = "auto"` looks for it (README "Vector stores")


class QdrantEdgeStore:
    """A qdrant-edge shard of LangChain-compatible points.

    Args:
        collection: the shard's folder name under ``path``.
        path: the folder holding one shard folder per collection.
        batch_size: points per update operation.
    """

    def __init__(
        self, collection: str, *, path: str, batch_size: int = 256, open_wait: float = 0.0
    ):
        self.collection = collection
        self.root = Path(path)
        self.folder = self.root / collection
        self.batch_size = max(1, batch_size)
        self.open_wait = open_wait
        self._shard: Any = None
        self._deferred = 0  # open writes() blocks: their operations are flushed at the end

    @classmethod
    def from_config(cls, config: StoreConfig) -> QdrantEdgeStore:
        return cls(
            config.collection,
            path=config.path,
            batch_size=config.batch_size,
            open_wait=config.open_wait,
        )

    @property
    def exclusive_folder(self) -> Path:
        """One process at a time opens the shard (README "Vector stores")."""
        return self.folder

    def exists(self) -> bool:
        return (self.folder / META).is_file()

    @property
    def shard(self) -> Any:
        if self._shard is None:
            from qdrant_edge import EdgeShard

            try:
                self._shard = open_waiting(
                    lambda: EdgeShard.load(str(self.folder / "shard")),
                    held=lambda exc: "WouldBlock" in str(exc),  # its WAL's lock
                    folder=self.root,
                    wait=self.open_wait,
                    what=f"qdrant_edge {self.folder}",
                )
            except Exception as exc:  # the binding raises plain exceptions with the reason
                held = " (open in another process)" if "WouldBlock" in str(exc) else ""
                raise StoreError(
                    f"qdrant_edge {self.folder}: cannot open the shard{held}: {exc}"
                ) from exc
        return self._shard

    @contextmanager
    def writes(self) -> Iterator[None]:
        """Operations inside the block are flushed to disk once, when it ends (each flush is an
        fsync: a journal batch of 13 small runs took 13, 0.1–0.3 s of a one-page sync)."""
        self._deferred += 1
        try:
            yield
        finally:
            self._deferred -= 1
            if not self._deferred and self._shard is not None:
                self._shard.flush()

    def _written(self) -> None:
        """Make the operations just applied durable, unless a :meth:`writes` block will."""
        if not self._deferred:
            self.shard.flush()

    def close(self) -> None:
        if self._shard is not None:
            shard, self._shard = self._shard, None
            try:
                shard.flush()
            finally:  # closed even when the flush fails: its files are let go with the hold
                shard.close()

    # The shard applies BM25's IDF itself (Qdrant's IDF modifier): queries carry plain terms.
    sparse_idf = True

    def ensure_collection(self, dimension: int, *, sparse: bool = False) -> bool:
        """Create the shard (with the named sparse vector when ``sparse``) unless it exists;
        return whether it holds sparse vectors (a shard cannot gain a named vector later:
        ``ragsync reindex --same-collection`` rebuilds it, :meth:`drop`)."""
        from qdrant_edge import (
            Distance,
            EdgeConfig,
            EdgeShard,
            EdgeSparseVectorParams,
            EdgeVectorParams,
            Modifier,
        )

        if self.exists():
            meta = json.loads((self.folder / META).read_text())
            if meta["dimension"] != dimension:
                raise StoreError(
                    f"qdrant_edge collection {self.collection!r} holds {meta['dimension']}-d "
                    f"vectors, the model makes {dimension}-d: use another collection for "
                    "another model"
                )
            return bool(meta.get("sparse"))
        (self.folder / "shard").mkdir(parents=True, exist_ok=True)
        lexical = {SPARSE_NAME: EdgeSparseVectorParams(modifier=Modifier.Idf)} if sparse else None
        config = EdgeConfig(
            vectors={"": EdgeVectorParams(size=dimension, distance=Distance.Cosine)},
            sparse_vectors=lexical,
        )
        self._shard = EdgeShard.create(str(self.folder / "shard"), config)
        self._shard.flush()
        (self.folder / META).write_text(json.dumps({"dimension": dimension, "sparse": sparse}))
        return sparse

    def drop(self) -> None:
        """Delete the shard folder (a rebuild follows)."""
        import shutil

        if self._shard is not None:
            self._shard.close()
            self._shard = None
        if self.folder.exists():
            (self.folder / META).unlink(missing_ok=True)  # first: a half-deleted shard is gone
            # The folder stays: it holds the lock of the process dropping it, and another
            # process must not take a new one meanwhile (README "Vector stores").
            shutil.rmtree(self.folder / "shard", ignore_errors=True)

    def upsert(
        self,
        points: Sequence[tuple[str, Sequence[float], dict]],
        *,
        sparse: Sequence[SparseVector] | None = None,
    ) -> None:
        """Write points by id; ``sparse`` (aligned with ``points``) adds each one's sparse
        vector (an empty one is left out)."""
        from qdrant_edge import Point, UpdateOperation
        from qdrant_edge import SparseVector as EdgeSparse

        def sparse_of(lexical: SparseVector) -> Any:
            return EdgeSparse(list(lexical.indices), list(lexical.values))

        made = list(with_sparse(points, sparse, sparse_of))
        for start in range(0, len(made), self.batch_size):
            batch = [
                Point(pid, vector, payload)
                for pid, vector, payload in made[start : start + self.batch_size]
            ]
            self.shard.update(UpdateOperation.upsert_points(batch))
        self._written()

    def set_payload(self, items: Sequence[tuple[str, dict]]) -> None:
        """Overwrite payloads of existing points; a point that is gone is skipped."""
        from qdrant_edge import UpdateOperation

        ids = [pid for pid, _ in items]
        existing = {str(r.id) for r in self.shard.retrieve(ids, False, False)}
        for pid, payload in items:
            if pid in existing:
                self.shard.update(UpdateOperation.overwrite_payload([pid], payload))
        self._written()

    def delete(self, point_ids: Sequence[str]) -> None:
        from qdrant_edge import UpdateOperation

        ids: list[int | UUID | str] = list(point_ids)
        for start in range(0, len(ids), self.batch_size):
            self.shard.update(UpdateOperation.delete_points(ids[start : start + self.batch_size]))
        self._written()

    @staticmethod
    def _source_filter(source: str | None) -> Any:
        from qdrant_edge import FieldCondition, Filter, MatchValue

        if not source:
            return None
        return Filter(must=[FieldCondition("metadata.source", match=MatchValue(source))])

    def search(self, vector: Sequence[float], k: int, source: str | None = None) -> list[Hit]:
        from qdrant_edge import Query, QueryRequest

        if not self.exists():
            return []
        request = QueryRequest(
            limit=k,
            query=Query.Nearest([float(x) for x in vector]),
            with_payload=True,
            filter=self._source_filter(source),
        )
        return [Hit.from_payload(p.id, p.score, p.payload or {}) for p in self.shard.query(request)]

    def search_sparse(self, vector: SparseVector, k: int, source: str | None = None) -> list[Hit]:
        """The ``k`` points whose sparse vectors score highest against ``vector`` (BM25)."""
        from qdrant_edge import Query, QueryRequest
        from qdrant_edge import SparseVector as EdgeSparse

        if not self.exists() or not vector:
            return []
        request = QueryRequest(
            limit=k,
            query=Query.Nearest(
                EdgeSparse(list(vector.indices), list(vector.values)), using=SPARSE_NAME
            ),
            with_payload=True,
            filter=self._source_filter(source),
        )
        return [Hit.from_payload(p.id, p.score, p.payload or {}) for p in self.shard.query(request)]

    def points(self, *, with_vectors: bool = False) -> Iterator[tuple[str, dict, Any]]:
        """Every point as ``(id, payload, vector or None)``, a page at a time."""
        for pid, payload, vectors in self._scroll(with_payload=True, with_vector=with_vectors):
            yield pid, payload, vectors.get("") if isinstance(vectors, dict) else vectors

    def sparse_points(self) -> Iterator[tuple[str, SparseVector | None]]:
        """Every point's id and sparse vector (None: it has none)."""
        for pid, _, vectors in self._scroll(with_payload=False, with_vector=[SPARSE_NAME]):
            yield pid, SparseVector.of((vectors or {}).get(SPARSE_NAME))

    def _scroll(self, *, with_payload: bool, with_vector: Any) -> Iterator[tuple[str, dict, Any]]:
        from qdrant_edge import ScrollRequest

        if not self.exists():
            return
        offset = None
        while True:
            records, offset = self.shard.scroll(
                ScrollRequest(
                    offset=offset,
                    limit=self.batch_size,
                    with_payload=with_payload,
                    with_vector=with_vector,
                )
            )
            for record in records:
                yield str(record.id), record.payload or {}, record.vector
            if offset is None:
                return

    def count(self, source: str | None = None) -> int:
        from qdrant_edge import CountRequest

        if not self.exists():
            return 0
        return int(self.shard.count(CountRequest(exact=True, filter=self._source_filter(source))))
