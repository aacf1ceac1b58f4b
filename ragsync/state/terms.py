"""The ``sparse_terms`` table: each term's document frequency over a collection's chunks, for a
store that applies no IDF itself (pgvector; README "Hybrid search").

Counted in the transaction that changes a document's chunks
(:meth:`ragsync.state.index.Index.commit_document`), so the frequencies always describe the
chunks the state DB holds, which the journal brings the store to; ``collections.sparse_chunks``
holds the number of chunks counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

from ragsync.sparse import SparseVector
from ragsync.state.repository import Repository

# The sparse vectors of texts, by text hash: ``{hash: text}`` in, ``{hash: vector}`` out.
VectorsOf = Callable[[Mapping[str, str]], Mapping[str, SparseVector]]

REBUILD_BATCH = 2_000
UPSERT_ROWS = 300  # rows per statement (SQLite allows 999 parameters by default)


class Terms(Repository):
    """Document frequencies of sparse terms (``state.terms``)."""

    def frequencies(self, collection: str, terms: Sequence[int]) -> tuple[dict[int, int], int]:
        """``({term: document frequency}, chunks counted)`` over the collection."""
        sql = "select term, df from sparse_terms where collection = ? and term in ({marks})"
        found = {row["term"]: row["df"] for row in self.state.query_in(sql, terms, [collection])}
        sql = "select sparse_chunks from collections where name = ?"
        row = next(iter(self.db.query(sql, [collection])), None)
        return found, int(row["sparse_chunks"] or 0) if row else 0

    def count(
        self,
        collection: str,
        vectors_of: VectorsOf,
        added: Iterable[tuple[str, str]],
        removed: Iterable[tuple[str, str]] = (),
    ) -> None:
        """Count the terms of ``added`` chunks in and those of ``removed`` ones out (each a
        ``(text hash, text)``), within the caller's transaction (or one of its own)."""
        added, removed = list(added), list(removed)
        if not added and not removed:
            return
        with self.state.write():
            # The collection's row first, then its terms in order: one lock order for every
            # writer (on PostgreSQL, workers' commits and a rebuild would deadlock otherwise).
            self.db.execute(
                "update collections set sparse_chunks = coalesce(sparse_chunks, 0) + ? "
                "where name = ?",
                [len(added) - len(removed), collection],
            )
            vectors = vectors_of(dict(added + removed))
            delta: Counter[int] = Counter()
            for text_hash, _ in added:
                delta.update(vectors[text_hash].indices)
            for text_hash, _ in removed:
                delta.subtract(vectors[text_hash].indices)
            rows = [(term, df) for term, df in sorted(delta.items()) if df]
            for start in range(0, len(rows), UPSERT_ROWS):
                batch = rows[start : start + UPSERT_ROWS]
                self.db.execute(
                    "insert into sparse_terms (collection, term, df) values "
                    + ",".join(["(?, ?, ?)"] * len(batch))
                    + " on conflict (collection, term) do update "
                    "set df = sparse_terms.df + excluded.df",
                    [value for term, df in batch for value in (collection, term, df)],
                )

    def rebuild(self, collection: str, vectors_of: VectorsOf) -> int:
        """Count the collection's terms afresh from every stored chunk; return the chunks."""
        with self.state.write():
            # the row first: count()'s lock order
            self.db.execute("update collections set sparse_chunks = 0 where name = ?", [collection])
            self.db.execute("delete from sparse_terms where collection = ?", [collection])
            rows = self.db.execute("select chunk_hash, text from chunks").fetchall()
            for start in range(0, len(rows), REBUILD_BATCH):
                batch = [(row[0], row[1]) for row in rows[start : start + REBUILD_BATCH]]
                self.count(collection, vectors_of, batch)
        return len(rows)
