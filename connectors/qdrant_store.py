"""The ``qdrant`` vector store: embedded local mode by default, a server or cluster with ``url``.

Points are written only by id (deterministic uuid5), never by filter: in local mode a filter
scans every payload. The collection is opened lazily and closed promptly, because only one
client may hold a local store folder at a time.

With a server, the collection is created with the configured shard number, replication factor
and write consistency factor and keyword payload indexes; writes go in batches of
``batch_size`` and are retried on transient errors (transport failures, 429, 5xx) with
full-jitter backoff. Every write is idempotent (points by id), so a retry is always safe.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

from ragsync.config import StoreConfig, resolve_env, resolve_env_url
from ragsync.embedded import open_waiting
from ragsync.errors import StoreError
from ragsync.models import Hit
from ragsync.policy import retry_delay
from ragsync.sparse import SPARSE_NAME, SparseVector, with_sparse

INDEXED_FIELDS = ("metadata.doc_key", "metadata.url", "metadata.source")
BATCH = 256
T = TypeVar("T")
log = logging.getLogger(__name__)


class QdrantStore:
    """A Qdrant collection of LangChain-compatible points (``page_content`` + ``metadata``).

    Args:
        collection: collection name.
        path: local-mode folder (used when ``url`` is None).
        url: Qdrant server URL.
        api_key: Qdrant API key (already resolved from the environment).
        shard_number, replication_factor, write_consistency_factor: collection parameters
            for a server or cluster (None: the server's defaults).
        batch_size: points per write request.
        timeout: seconds per request to a server.
        retry_attempts: tries per write on transient errors.
        retry_base: the backoff's base in seconds (full jitter, doubling, capped at 30 s).
    """

    def __init__(
        self,
        collection: str,
        *,
        path: str | None = None,
        url: str | None = None,
        api_key: str | None = None,
        shard_number: int | None = None,
        replication_factor: int | None = None,
        write_consistency_factor: int | None = None,
        batch_size: int = BATCH,
        timeout: float = 30.0,
        retry_attempts: int = 5,
        retry_base: float = 0.5,
        open_wait: float = 0.0,
    ):
        self.collection = collection
        self.open_wait = open_wait
        self.path = path
        self.url = url
        self.api_key = api_key
        self.shard_number = shard_number
        self.replication_factor = replication_factor
        self.write_consistency_factor = write_consistency_factor
        self.batch_size = max(1, batch_size)
        self.timeout = timeout
        self.retry_attempts = max(1, retry_attempts)
        self.retry_base = retry_base
        self._client: Any = None

    @classmethod
    def from_config(cls, config: StoreConfig) -> QdrantStore:
        """The store the ``[store]`` table describes (``${VAR}`` in its URL and API key resolved
        from the environment)."""
        api_key = resolve_env(config.api_key, key="store.api_key")
        return cls(
            config.collection,
            path=config.path,
            url=resolve_env_url(config.url, key="store.url"),
            api_key=api_key,
            shard_number=config.shard_number,
            replication_factor=config.replication_factor,
            write_consistency_factor=config.write_consistency_factor,
            batch_size=config.batch_size,
            timeout=config.timeout,
            retry_attempts=config.retry_attempts,
            open_wait=config.open_wait,
        )

    @property
    def client(self) -> Any:
        if self._client is None:
            from qdrant_client import QdrantClient

            try:
                if self.url:
                    self._client = QdrantClient(
                        url=self.url,
                        api_key=self.api_key,
                        timeout=int(self.timeout),
                        check_compatibility=False,  # no version request on every open
                    )
                else:
                    assert self.path is not None
                    if self.path != ":memory:":
                        Path(self.path).mkdir(parents=True, exist_ok=True)
                    local = self.path
                    self._client = open_waiting(
                        lambda: QdrantClient(path=local),
                        held=lambda exc: "already accessed" in str(exc),  # its folder lock
                        folder=Path(local),
                        wait=self.open_wait if local != ":memory:" else 0.0,
                        what=f"qdrant store {local}",
                    )
            except RuntimeError as exc:  # local mode: folder held by another process
                if self.url:
                    raise StoreError(f"qdrant server {self.url}: {exc}") from exc
                if "already accessed" not in str(exc):
                    raise StoreError(f"qdrant store {self.path}: {exc}") from exc
                raise StoreError(
                    f"qdrant store {self.path}: already opened by another process (another "
                    "`ragsync run`, `serve` or an app using QdrantClient(path=...)). Local mode "
                    f"allows one process at a time (waited {self.open_wait:.0f} s, [store] "
                    "open_wait): wait for it to finish, or point [store] url at a Qdrant server."
                ) from exc
        return self._client

    @property
    def exclusive_folder(self) -> Path | None:
        """Local mode: one process at a time opens the folder (README "Vector stores")."""
        return None if self.url or self.path in (None, ":memory:") else Path(self.path)

    def _retry(self, what: str, call: Callable[[], T]) -> T:
        """``call()``, retried on transient server errors (writes by id are idempotent)."""
        from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

        for attempt in range(1, self.retry_attempts + 1):
            try:
                return call()
            except UnexpectedResponse as exc:
                code = exc.status_code
                transient = code is not None and (code == 429 or code >= 500)
                if not transient or attempt == self.retry_attempts:
                    raise StoreError(f"qdrant {self.url or self.path}: {what}: {exc}") from exc
                problem = f"HTTP {code}"
            except ResponseHandlingException as exc:
                if attempt == self.retry_attempts:
                    raise StoreError(f"qdrant {self.url or self.path}: {what}: {exc}") from exc
                problem = str(exc)
            wait = retry_delay(attempt, base=self.retry_base, cap=30.0, draw=random.random())
            log.warning("qdrant %s failed (%s); retry %d in %.1f s", what, problem, attempt, wait)
            time.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def exists(self) -> bool:
        return bool(self.client.collection_exists(self.collection))

    # The store applies BM25's IDF itself (Qdrant's IDF modifier): queries carry plain terms.
    sparse_idf = True

    def ensure_collection(self, dimension: int, *, sparse: bool = False) -> bool:
        """Create the collection (with the named sparse vector when ``sparse``) unless it
        exists; return whether it holds sparse vectors. Qdrant cannot add a named vector to an
        existing collection: ``ragsync reindex --same-collection`` rebuilds it (:meth:`drop`)."""
        from qdrant_client import models

        if self.exists():
            params = self.client.get_collection(self.collection).config.params
            size = params.vectors.size
            if size != dimension:
                raise StoreError(
                    f"collection {self.collection!r} holds {size}-d vectors, the model makes "
                    f"{dimension}-d: use another collection for another model"
                )
            return SPARSE_NAME in (params.sparse_vectors or {})
        idf = models.SparseVectorParams(modifier=models.Modifier.IDF)
        self._retry(
            "create collection",
            lambda: self.client.create_collection(
                self.collection,
                vectors_config=models.VectorParams(size=dimension, distance=models.Distance.COSINE),
                sparse_vectors_config={SPARSE_NAME: idf} if sparse else None,
                shard_number=self.shard_number,
                replication_factor=self.replication_factor,
                write_consistency_factor=self.write_consistency_factor,
            ),
        )
        if self.url:  # payload indexes have no effect in local mode (it only warns)
            for name in INDEXED_FIELDS:
                self._retry(
                    "create payload index",
                    partial(
                        self.client.create_payload_index,
                        self.collection,
                        name,
                        field_schema=models.PayloadSchemaType.KEYWORD,
                    ),
                )
        return sparse

    def drop(self) -> None:
        """Delete the collection (a rebuild follows)."""
        if self.exists():
            self._retry("delete collection", lambda: self.client.delete_collection(self.collection))

    def upsert(
        self,
        points: Sequence[tuple[str, Sequence[float], dict]],
        *,
        sparse: Sequence[SparseVector] | None = None,
    ) -> None:
        """Write points by id; ``sparse`` (aligned with ``points``) adds each one's sparse
        vector (an empty one is left out)."""
        from qdrant_client import models

        def sparse_of(lexical: SparseVector) -> Any:
            return models.SparseVector(indices=list(lexical.indices), values=list(lexical.values))

        made = list(with_sparse(points, sparse, sparse_of))
        for start in range(0, len(made), self.batch_size):
            batch = [
                models.PointStruct(id=pid, vector=vector, payload=payload)
                for pid, vector, payload in made[start : start + self.batch_size]
            ]
            self._retry(
                "upsert",
                partial(self.client.upsert, self.collection, points=batch, wait=True),
            )

    def set_payload(self, items: Sequence[tuple[str, dict]]) -> None:
        """Overwrite payloads of existing points. A point that is gone (deleted behind
        ragsync's back) is skipped, so replaying the journal never fails on it; `verify`
        reports it missing and `--repair` writes it again."""
        ids = [pid for pid, _ in items]
        found = self._retry(
            "retrieve", lambda: self.client.retrieve(self.collection, ids, with_payload=False)
        )
        existing = {str(r.id) for r in found}
        for pid, payload in items:
            if pid in existing:
                self._retry(
                    "set payload",
                    partial(
                        self.client.overwrite_payload,
                        self.collection,
                        payload=payload,
                        points=[pid],
                    ),
                )

    def delete(self, point_ids: Sequence[str]) -> None:
        from qdrant_client import models

        for start in range(0, len(point_ids), self.batch_size):
            ids: list[int | str | UUID] = list(point_ids[start : start + self.batch_size])
            self._retry(
                "delete",
                partial(
                    self.client.delete,
                    self.collection,
                    points_selector=models.PointIdsList(points=ids),
                    wait=True,
                ),
            )

    def search(self, vector: Sequence[float], k: int, source: str | None = None) -> list[Hit]:

        if not self.exists():
            return []
        found = self.client.query_points(
            self.collection,
            query=list(vector),
            limit=k,
            query_filter=_source_filter(source),
            with_payload=True,
        ).points
        return [Hit.from_payload(p.id, p.score, p.payload or {}) for p in found]

    def search_sparse(self, vector: SparseVector, k: int, source: str | None = None) -> list[Hit]:
        """The ``k`` points whose sparse vectors score highest against ``vector`` (BM25)."""
        from qdrant_client import models

        if not self.exists() or not vector:
            return []
        found = self.client.query_points(
            self.collection,
            query=models.SparseVector(indices=list(vector.indices), values=list(vector.values)),
            using=SPARSE_NAME,
            limit=k,
            query_filter=_source_filter(source),
            with_payload=True,
        ).points
        return [Hit.from_payload(p.id, p.score, p.payload or {}) for p in found]

    def points(self, *, with_vectors: bool = False) -> Iterator[tuple[str, dict, Any]]:
        """Every point as ``(id, payload, vector or None)``."""
        for pid, payload, vectors in self._scroll(with_payload=True, with_vectors=with_vectors):
            yield pid, payload, vectors.get("") if isinstance(vectors, dict) else vectors

    def sparse_points(self) -> Iterator[tuple[str, SparseVector | None]]:
        """Every point's id and sparse vector (None: it has none)."""
        for pid, _, vectors in self._scroll(with_payload=False, with_vectors=[SPARSE_NAME]):
            yield pid, SparseVector.of((vectors or {}).get(SPARSE_NAME))

    def _scroll(self, *, with_payload: bool, with_vectors: Any) -> Iterator[tuple[str, dict, Any]]:
        if not self.exists():
            return
        offset = None
        while True:
            records, offset = self.client.scroll(
                self.collection,
                limit=self.batch_size,
                offset=offset,
                with_payload=with_payload,
                with_vectors=with_vectors,
            )
            for record in records:
                yield str(record.id), record.payload or {}, record.vector
            if offset is None:
                return

    def count(self, source: str | None = None) -> int:
        """Points in the collection (of one source when ``source`` is given)."""

        if not self.exists():
            return 0
        found = self.client.count(self.collection, count_filter=_source_filter(source), exact=True)
        return int(found.count)


def _source_filter(source: str | None) -> Any:
    """Points of one source (``metadata.source``), or None for all."""
    from qdrant_client import models

    if not source:
        return None
    condition = models.FieldCondition(key="metadata.source", match=models.MatchValue(value=source))
    return models.Filter(must=[condition])
