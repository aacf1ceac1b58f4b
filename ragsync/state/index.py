"""What the index is built from: ``chunks`` (each document's chunk list, one row per vector
point), ``raw_bodies`` (the body each document's content came from, for ``reindex``) and
``collections`` (the model each vector collection was built with), ``chunkers`` (the chunker
each source's chunks were made with), and the one transaction that commits a document with all
of it."""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from ragsync.models import DocumentStatus, StoredChunk
from ragsync.state.journal import journal_op
from ragsync.state.repository import Repository
from ragsync.state.rows import ChangeRow, DocumentRow, JournalOpRow
from ragsync.state.terms import VectorsOf


class Index(Repository):
    """Chunks, raw bodies and collections (``state.index``), and
    :meth:`commit_document`, the one write of a changed document."""

    def get_chunks(self, doc_key: str) -> list[StoredChunk]:
        """A document's chunks, in order."""
        rows = self.db.query(
            "select * from chunks where doc_key = ? order by chunk_index", [doc_key]
        )
        return [_stored_chunk(row) for row in rows]

    def list_chunks(self) -> list[tuple[str, StoredChunk]]:
        """Every chunk as ``(doc_key, chunk)``, by document, in order."""
        rows = self.db.query("select * from chunks order by doc_key, chunk_index")
        return [(row["doc_key"], _stored_chunk(row)) for row in rows]

    def get_raw_body(self, doc_key: str) -> dict[str, Any] | None:
        """The body a document's content came from (decompressed), with its URL, content
        type, hash and fetch time; None when not kept."""
        row = next(
            iter(self.db.query("select * from raw_bodies where doc_key = ?", [doc_key])), None
        )
        if row is not None:
            row["body"] = zlib.decompress(row["body"])
        return row

    def remove_raw_bodies(self, before: str) -> int:
        """Forget raw bodies fetched before ``before`` (the retention window); return how
        many."""
        with self.state.write():
            cursor = self.db.execute("delete from raw_bodies where fetched_at < ?", [before])
        return cursor.rowcount

    def get_collection_model(self, name: str) -> str | None:
        """The model the vector collection ``name`` was built with, if recorded."""
        sql = "select model_id from collections where name = ?"
        row = next(iter(self.db.query(sql, [name])), None)
        return row["model_id"] if row else None

    def model_for(self, name: str) -> str | None:
        """The model whose backend ``[embedder] backend = "auto"`` follows for collection
        ``name``: its own, else the one this state recorded last (a new collection of an
        existing index keeps the index's backend, and its cached vectors), else None."""
        own = self.get_collection_model(name)
        if own is not None:
            return own
        sql = "select model_id from collections order by created_at desc, name limit 1"
        row = next(iter(self.db.query(sql)), None)
        return row["model_id"] if row else None

    def put_collection(self, name: str, model_id: str, dimension: int, at: str) -> None:
        with self.state.write():
            self.db.table("collections").upsert(
                {"name": name, "model_id": model_id, "dimension": dimension, "created_at": at},
                pk="name",
            )

    def get_collection_sparse(self, name: str) -> str | None:
        """The sparse encoder whose vectors the collection ``name`` holds (None: dense only)."""
        sql = "select sparse_id from collections where name = ?"
        row = next(iter(self.db.query(sql, [name])), None)
        return row["sparse_id"] if row else None

    def put_collection_sparse(self, name: str, sparse_id: str | None) -> None:
        """Record that the collection holds ``sparse_id``'s vectors (None: none), and start
        its document frequencies afresh (they are counted from its chunks again)."""
        with self.state.write():
            self.db.execute(
                "update collections set sparse_id = ?, sparse_chunks = 0 where name = ?",
                [sparse_id, name],
            )
            self.db.execute("delete from sparse_terms where collection = ?", [name])

    def get_chunker(self, source_id: str) -> str | None:
        """The chunker id a source's chunks were made with, if recorded."""
        sql = "select chunker from chunkers where source_id = ?"
        row = next(iter(self.db.query(sql, [source_id])), None)
        return row["chunker"] if row else None

    def put_chunker(self, source_id: str, chunker: str, at: str) -> None:
        """Record that a source's chunks are (now all) made with ``chunker``."""
        with self.state.write():
            self.db.table("chunkers").upsert(
                {"source_id": source_id, "chunker": chunker, "recorded_at": at}, pk="source_id"
            )

    def has_chunks(self, source_id: str) -> bool:
        """Whether any document of the source holds chunks."""
        sql = "select 1 from documents where source_id = ? and chunk_count > 0 limit 1"
        return bool(list(self.db.query(sql, [source_id])))

    def commit_document(
        self,
        document: DocumentRow | dict[str, Any],
        chunks: Sequence[StoredChunk],
        ops: Sequence[JournalOpRow | dict[str, Any]],
        change: ChangeRow | dict[str, Any] | None,
        aliases: Sequence[Mapping[str, Any]] = (),
        events: Sequence[Mapping[str, Any]] = (),
        raw_body: Mapping[str, Any] | None = None,
        *,
        unless_hash: str | None = None,
        terms: tuple[str, VectorsOf] | None = None,
    ) -> bool:
        """Write a document's state, its chunk list, its change row and its journal entries;
        return whether it was written.

        All or nothing: a crash before the commit leaves the previous state intact, after it
        leaves operations in the journal that the next run replays. With ``unless_hash``,
        nothing is written when the stored document already holds that content (another
        worker committed the same change first: one change row, one event). ``change`` has
        no ``id`` yet (the DB numbers it); ``events`` are outbox rows. With ``terms``
        (``(collection, vectors_of)``), the chunks' sparse terms are counted in and out of the
        collection's document frequencies in the same transaction (:mod:`ragsync.state.terms`).
        """
        doc_key = document["doc_key"]
        with self.state.write():
            self.state.lock(f"document:{doc_key}")  # one commit of a page at a time
            if unless_hash is not None:
                row = self.db.execute(
                    "select content_hash, status from documents where doc_key = ?", [doc_key]
                ).fetchone()
                if (
                    row is not None
                    and row[0] == unless_hash
                    and row[1] != DocumentStatus.TOMBSTONED
                ):
                    return False
            ops = [*ops, *self._stale_point_deletes(doc_key, chunks, ops)]
            if terms is not None:
                self._count_terms(doc_key, chunks, *terms)
            self.state.put_rows("documents", [document], key=["doc_key"], on_conflict="update")
            self.db.execute("delete from chunks where doc_key = ?", [doc_key])
            self.state.put_rows(
                "chunks",
                (
                    {
                        "point_id": c.point_id,
                        "doc_key": doc_key,
                        "chunk_index": c.chunk_index,
                        "chunk_hash": c.chunk_hash,
                        "text": c.text,
                        "headings": json.dumps(list(c.headings), ensure_ascii=False),
                        "tokens": c.tokens,
                        "last_changed_at": c.last_changed_at,
                    }
                    for c in chunks
                ),
            )
            if ops:
                self.state.journal.add(ops)
            if change:
                self.state.put_rows("changes", [change])
            self.state.put_rows("outbox", events)  # the transactional outbox: with the change
            if raw_body is not None:  # the body this content came from, kept for `reindex`
                body = {**raw_body, "body": zlib.compress(raw_body["body"])}
                self.state.put_rows("raw_bodies", [body], key=["doc_key"], on_conflict="update")
            self.state.put_rows("aliases", aliases, key=["alias_key"], on_conflict="update")
            if document["status"] != DocumentStatus.TOMBSTONED:  # it serves its own page again
                self.db.execute("delete from aliases where alias_key = ?", [doc_key])
            self.db.execute("delete from fetch_attempts where doc_key = ?", [doc_key])
        return True

    def _count_terms(
        self, doc_key: str, chunks: Sequence[StoredChunk], collection: str, vectors_of: VectorsOf
    ) -> None:
        """Count the terms of the document's new chunks in and of its gone ones out."""
        sql = "select point_id, chunk_hash, text from chunks where doc_key = ?"
        old = {row[0]: (row[1], row[2]) for row in self.db.execute(sql, [doc_key]).fetchall()}
        new = {c.point_id: (c.chunk_hash, c.text) for c in chunks}
        added = [new[pid] for pid in new.keys() - old.keys()]
        removed = [old[pid] for pid in old.keys() - new.keys()]
        self.state.terms.count(collection, vectors_of, added, removed)

    def _stale_point_deletes(
        self,
        doc_key: str,
        chunks: Sequence[StoredChunk],
        ops: Sequence[JournalOpRow | dict[str, Any]],
    ) -> list[JournalOpRow]:
        """Deletes for stored points that neither stay nor are deleted by ``ops``.

        Empty unless another worker committed this page between this one's plan and commit
        (both planned against the same old chunks): its points must go too, or they would be
        left in the index with no chunk row behind them.
        """
        sql = "select point_id from chunks where doc_key = ?"
        stored = {row[0] for row in self.db.execute(sql, [doc_key]).fetchall()}
        gone = {op["point_id"] for op in ops if op["op"] == "delete"}
        stale = sorted(stored - {c.point_id for c in chunks} - gone)
        run_id, created_at = (
            (ops[0].get("run_id"), ops[0].get("created_at")) if ops else (None, None)
        )
        return [
            journal_op("delete", p, doc_key=doc_key, run_id=run_id, created_at=created_at)
            for p in stale
        ]


def _stored_chunk(row: Mapping[str, Any]) -> StoredChunk:
    return StoredChunk(
        point_id=row["point_id"],
        chunk_index=row["chunk_index"],
        chunk_hash=row["chunk_hash"],
        text=row["text"],
        headings=tuple(json.loads(row["headings"] or "[]")),
        tokens=row["tokens"] or 0,
        last_changed_at=row["last_changed_at"] or "",
    )
