"""The ``pgvector`` vector store: one PostgreSQL table per collection, through psycopg 3.

One PostgreSQL can then hold ragsync's vectors beside everything else a team keeps there. The
table mirrors a Qdrant collection: ``id uuid`` (the deterministic point id), ``embedding
vector(dim)``, ``payload jsonb`` (the same LangChain-compatible payload) and generated
``doc_key``/``url``/``source`` columns with B-tree indexes; an HNSW index serves cosine search.
Writes are by id (``INSERT … ON CONFLICT (id) DO UPDATE``, ``DELETE … WHERE id = ANY``), so
replaying the journal stays idempotent. A server that restarts, stops or cannot be reached is a
:class:`~ragsync.errors.ResourceError` naming it (the run ends; the next one replays the
journal); any other database error is a :class:`~ragsync.errors.StoreError`.

Example ``ragsync.toml``::

    [store]
    kind = "pgvector"
    url = "postgresql://ragsync:${PGPASSWORD}@db.internal:5432/rag"
    collection = "docs"     # the table name
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from ragsync.config import StoreConfig, resolve_env_url
from ragsync.errors import StoreError
from ragsync.models import Hit
from ragsync.resources import postgres_resource_error
from ragsync.sparse import SPARSE_DIM, SPARSE_NAME, SparseVector
from ragsync.state.postgres import server_name

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_SPARSE_TEXT = re.compile(r"(\d+):([^,}]+)")


def _vector(values: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


def _sparsevec(vector: SparseVector | None) -> str | None:
    """pgvector's text form of a sparse vector (1-based indices), None for an empty one."""
    if not vector:
        return None
    pairs = ",".join(
        f"{i + 1}:{float(v)!r}" for i, v in zip(vector.indices, vector.values, strict=True)
    )
    return f"{{{pairs}}}/{SPARSE_DIM}"


def _sparse_from_text(text: str) -> SparseVector:
    pairs = [(int(i) - 1, float(v)) for i, v in _SPARSE_TEXT.findall(text.split("/")[0])]
    return SparseVector(tuple(i for i, _ in pairs), tuple(v for _, v in pairs))


class PgVectorStore:
    """A pgvector table of LangChain-compatible points.

    Args:
        collection: the table name (lower-case letters, digits, underscores).
        url: a ``postgresql://`` connection URL (password already resolved).
        batch_size: points per write statement batch.
    """

    def __init__(self, collection: str, *, url: str, batch_size: int = 256):
        if not _NAME.match(collection):
            raise StoreError(
                f"pgvector: collection {collection!r} must be a plain table name "
                "(lower-case letters, digits and underscores)"
            )
        self.collection = collection
        self.url = url
        self.batch_size = max(1, batch_size)
        self._conn: Any = None

    @classmethod
    def from_config(cls, config: StoreConfig) -> PgVectorStore:
        if not config.url:
            from ragsync.errors import ConfigError

            raise ConfigError('kind = "pgvector" needs a postgresql:// URL', key="store.url")
        url = resolve_env_url(config.url, key="store.url")  # a password percent-encoded
        assert url is not None
        return cls(config.collection, url=url, batch_size=config.batch_size)

    @property
    def where(self) -> str:
        """The server, as an error names it."""
        return f"{server_name(self.url)} (the pgvector store)"

    @property
    def conn(self) -> Any:
        if self._conn is None:
            import psycopg

            try:
                self._conn = psycopg.connect(self.url, autocommit=True)
            except psycopg.OperationalError as exc:
                found = postgres_resource_error(exc, self.where, connecting=True)
                raise found or StoreError(f"pgvector: cannot connect: {exc}") from exc
        return self._conn

    def _error(self, exc: Exception) -> Exception:
        """A database error as raised: a server gone away, else the store's refusal."""
        found = postgres_resource_error(exc, self.where)
        return found or StoreError(f"pgvector {self.collection}: {exc}")

    def _sql(self, statement: str, params: Sequence[Any] | None = None) -> Any:
        import psycopg

        try:
            return self.conn.execute(statement, params)
        except psycopg.Error as exc:
            raise self._error(exc) from exc

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def exists(self) -> bool:
        row = self._sql("select to_regclass(%s)", [self.collection]).fetchone()
        return row[0] is not None

    # No IDF modifier here: queries carry each term's IDF, from the document frequencies the
    # state DB keeps for this collection (README "Hybrid search").
    sparse_idf = False

    def _has_sparse(self) -> bool:
        row = self._sql(
            "select 1 from pg_attribute where attrelid = %s::regclass and attname = %s "
            "and not attisdropped",
            [self.collection, SPARSE_NAME],
        ).fetchone()
        return row is not None

    def ensure_collection(self, dimension: int, *, sparse: bool = False) -> bool:
        """Create the table unless it exists, and add the sparse column when ``sparse`` (in
        place: an existing table gains it); return whether the table has it."""
        if self.exists():
            row = self._sql(
                "select atttypmod from pg_attribute "
                "where attrelid = %s::regclass and attname = 'embedding'",
                [self.collection],
            ).fetchone()
            if row and row[0] != dimension:
                raise StoreError(
                    f"pgvector table {self.collection!r} holds {row[0]}-d vectors, the model "
                    f"makes {dimension}-d: use another collection for another model"
                )
            if sparse and not self._has_sparse():
                self._sql(
                    f"alter table {self.collection} add column if not exists "
                    f"{SPARSE_NAME} sparsevec({SPARSE_DIM})"
                )
            return self._has_sparse()
        import psycopg

        table = self.collection
        lexical = f", {SPARSE_NAME} sparsevec({SPARSE_DIM})" if sparse else ""
        try:
            self._create(table, dimension, lexical)
        except psycopg.Error as exc:  # the transaction's own begin or commit
            raise self._error(exc) from exc
        return sparse

    def _create(self, table: str, dimension: int, lexical: str) -> None:
        """The table and its indexes, in one transaction."""
        with self.conn.transaction():
            self._sql("create extension if not exists vector")
            self._sql(
                f"create table if not exists {table} ("
                " id uuid primary key,"
                f" embedding vector({int(dimension)}) not null,"
                " payload jsonb not null,"
                " doc_key text generated always as (payload->'metadata'->>'doc_key') stored,"
                " url text generated always as (payload->'metadata'->>'url') stored,"
                " source text generated always as (payload->'metadata'->>'source') stored"
                f"{lexical})"
            )
            for column in ("doc_key", "url", "source"):
                self._sql(f"create index if not exists {table}_{column} on {table} ({column})")
            self._sql(
                f"create index if not exists {table}_embedding on {table} "
                "using hnsw (embedding vector_cosine_ops)"
            )

    def drop(self) -> None:
        """Drop the table (a rebuild follows)."""
        self._sql(f"drop table if exists {self.collection}")

    def _many(self, statement: str, rows: list[Sequence[Any]]) -> None:
        import psycopg

        for start in range(0, len(rows), self.batch_size):
            try:  # one transaction per batch: one commit (and WAL flush), not one per row
                with self.conn.transaction(), self.conn.cursor() as cursor:
                    cursor.executemany(statement, rows[start : start + self.batch_size])
            except psycopg.Error as exc:
                raise self._error(exc) from exc

    def upsert(
        self,
        points: Sequence[tuple[str, Sequence[float], dict]],
        *,
        sparse: Sequence[SparseVector] | None = None,
    ) -> None:
        """Write points by id; ``sparse`` (aligned with ``points``) adds each one's sparse
        vector."""
        rows: list[Sequence[Any]] = [
            (pid, _vector(vector), json.dumps(payload)) for pid, vector, payload in points
        ]
        if sparse is None:
            self._many(
                f"insert into {self.collection} (id, embedding, payload) "
                "values (%s, %s::vector, %s::jsonb) on conflict (id) do update "
                "set embedding = excluded.embedding, payload = excluded.payload",
                rows,
            )
            return
        self._many(
            f"insert into {self.collection} (id, embedding, payload, {SPARSE_NAME}) "
            "values (%s, %s::vector, %s::jsonb, %s::sparsevec) on conflict (id) do update "
            "set embedding = excluded.embedding, payload = excluded.payload, "
            f"{SPARSE_NAME} = excluded.{SPARSE_NAME}",
            [(*row, _sparsevec(lexical)) for row, lexical in zip(rows, sparse, strict=True)],
        )

    def set_payload(self, items: Sequence[tuple[str, dict]]) -> None:
        """Overwrite payloads of existing points; a point that is gone is skipped."""
        self._many(
            f"update {self.collection} set payload = %s::jsonb where id = %s",
            [(json.dumps(payload), pid) for pid, payload in items],
        )

    def delete(self, point_ids: Sequence[str]) -> None:
        ids = list(point_ids)
        for start in range(0, len(ids), self.batch_size):
            self._sql(
                f"delete from {self.collection} where id = any(%s::uuid[])",
                [ids[start : start + self.batch_size]],
            )

    def search(self, vector: Sequence[float], k: int, source: str | None = None) -> list[Hit]:
        if not self.exists():
            return []
        query = _vector(vector)
        where = "where source = %s" if source else ""
        params: list[Any] = [query, *([source] if source else []), query]
        # ordered by the distance operator itself, so the HNSW index serves the query
        rows = self._sql(
            f"select id, payload, 1 - (embedding <=> %s::vector) from {self.collection} "
            f"{where} order by embedding <=> %s::vector limit {int(k)}",
            params,
        ).fetchall()
        return [Hit.from_payload(pid, score, payload) for pid, payload, score in rows]

    def search_sparse(self, vector: SparseVector, k: int, source: str | None = None) -> list[Hit]:
        """The ``k`` rows whose sparse vectors have the largest inner product with ``vector``
        (weighted by IDF already: BM25). A sequential scan: no index orders by it."""
        query = _sparsevec(vector)
        if not self.exists() or query is None or not self._has_sparse():
            return []
        where = "and source = %s" if source else ""
        params: list[Any] = [query, *([source] if source else []), query]
        rows = self._sql(
            f"select id, payload, -({SPARSE_NAME} <#> %s::sparsevec) from {self.collection} "
            f"where {SPARSE_NAME} is not null {where} "
            f"order by {SPARSE_NAME} <#> %s::sparsevec limit {int(k)}",
            params,
        ).fetchall()
        return [Hit.from_payload(pid, score, payload) for pid, payload, score in rows if score > 0]

    def sparse_points(self) -> Iterator[tuple[str, SparseVector | None]]:
        """Every row's id and sparse vector (None: it has none), in id order."""
        if self.exists() and self._has_sparse():
            for pid, text in self._pages(f"{SPARSE_NAME}::text"):
                yield str(pid), None if text is None else _sparse_from_text(text)

    def points(self, *, with_vectors: bool = False) -> Iterator[tuple[str, dict, Any]]:
        """Every point as ``(id, payload, vector or None)``, in id order, a page at a time."""
        for pid, payload, vector in self._pages(
            "payload", "embedding::text" if with_vectors else "null"
        ):
            yield str(pid), payload, json.loads(vector) if vector else None

    def _pages(self, *columns: str) -> Iterator[tuple[Any, ...]]:
        """``(id, *columns)`` of every row, in id order, :attr:`batch_size` rows a query."""
        if not self.exists():
            return
        last = None
        while True:
            after = "where id > %s" if last else ""
            rows = self._sql(
                f"select id, {', '.join(columns)} from {self.collection} {after} "
                f"order by id limit {self.batch_size}",
                [last] if last else None,
            ).fetchall()
            yield from rows
            if len(rows) < self.batch_size:
                return
            last = rows[-1][0]

    def count(self, source: str | None = None) -> int:
        if not self.exists():
            return 0
        if source:
            sql = f"select count(*) from {self.collection} where source = %s"
            return int(self._sql(sql, [source]).fetchone()[0])
        return int(self._sql(f"select count(*) from {self.collection}").fetchone()[0])
