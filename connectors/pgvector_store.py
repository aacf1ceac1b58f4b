"""The ``pgvector`` vector store: one PostgreSQL table per collection, through psycopg 3.

One PostgreSQL can then hold ragsync's vectors beside everything else a team keeps there. The
table mirrors a Qdrant collection: ``id uuid`` (the deterministic point id), ``embedding
vector(dim)``, ``payload jsonb`` (the same LangChain-compatible payload) and generated
``doc_key``/``url``/``source`` columns with B-tree indexes; an HNSW index serves cosine search.
Writes are by id (``INSERT … ON CONFLICT (id) DO UPDATE``, ``DELETE … WHERE id = ANY``), so
replaying the journal stays idempotent.

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

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _vector(values: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


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
    def conn(self) -> Any:
        if self._conn is None:
            import psycopg

            try:
                self._conn = psycopg.connect(self.url, autocommit=True)
            except psycopg.OperationalError as exc:
                raise StoreError(f"pgvector: cannot connect: {exc}") from exc
        return self._conn

    def _sql(self, statement: str, params: Sequence[Any] | None = None) -> Any:
        import psycopg

        try:
            return self.conn.execute(statement, params)
        except psycopg.Error as exc:
            raise StoreError(f"pgvector {self.collection}: {exc}") from exc

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def exists(self) -> bool:
        row = self._sql("select to_regclass(%s)", [self.collection]).fetchone()
        return row[0] is not None

    def ensure_collection(self, dimension: int) -> None:
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
            return
        table = self.collection
        with self.conn.transaction():
            self._sql("create extension if not exists vector")
            self._sql(
                f"create table if not exists {table} ("
                " id uuid primary key,"
                f" embedding vector({int(dimension)}) not null,"
                " payload jsonb not null,"
                " doc_key text generated always as (payload->'metadata'->>'doc_key') stored,"
                " url text generated always as (payload->'metadata'->>'url') stored,"
                " source text generated always as (payload->'metadata'->>'source') stored)"
            )
            for column in ("doc_key", "url", "source"):
                self._sql(f"create index if not exists {table}_{column} on {table} ({column})")
            self._sql(
                f"create index if not exists {table}_embedding on {table} "
                "using hnsw (embedding vector_cosine_ops)"
            )

    def _many(self, statement: str, rows: list[Sequence[Any]]) -> None:
        import psycopg

        for start in range(0, len(rows), self.batch_size):
            try:  # one transaction per batch: one commit (and WAL flush), not one per row
                with self.conn.transaction(), self.conn.cursor() as cursor:
                    cursor.executemany(statement, rows[start : start + self.batch_size])
            except psycopg.Error as exc:
                raise StoreError(f"pgvector {self.collection}: {exc}") from exc

    def upsert(self, points: Sequence[tuple[str, Sequence[float], dict]]) -> None:
        self._many(
            f"insert into {self.collection} (id, embedding, payload) "
            "values (%s, %s::vector, %s::jsonb) on conflict (id) do update "
            "set embedding = excluded.embedding, payload = excluded.payload",
            [(pid, _vector(vector), json.dumps(payload)) for pid, vector, payload in points],
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

    def points(self, *, with_vectors: bool = False) -> Iterator[tuple[str, dict, Any]]:
        """Every point as ``(id, payload, vector or None)``, in id order, a page at a time."""
        if not self.exists():
            return
        column = "embedding::text" if with_vectors else "null"
        last = None
        while True:
            after = "where id > %s" if last else ""
            rows = self._sql(
                f"select id, payload, {column} from {self.collection} {after} "
                f"order by id limit {self.batch_size}",
                [last] if last else None,
            ).fetchall()
            for pid, payload, vector in rows:
                yield str(pid), payload, json.loads(vector) if vector else None
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
