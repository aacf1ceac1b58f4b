"""The ``embedding_cache`` table: vectors by text hash and model, so that a text is embedded
once per model whatever page it appears in."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence

from ragsync.state.repository import Repository


class Embeddings(Repository):
    """The embedding cache (``state.embeddings``); it only ever grows."""

    def missing(self, text_hashes: Iterable[str], model_id: str) -> set[str]:
        """The hashes among ``text_hashes`` with no cached vector for ``model_id``."""
        wanted = set(text_hashes)
        sql = "select text_hash from embedding_cache where model_id = ? and text_hash in ({marks})"
        present = {row["text_hash"] for row in self.state.query_in(sql, sorted(wanted), [model_id])}
        return wanted - present

    def put(self, model_id: str, vectors: Mapping[str, Sequence[float]], at: str) -> None:
        """Cache vectors by text hash (one transaction)."""
        rows = [
            {
                "text_hash": text_hash,
                "model_id": model_id,
                "dim": len(vector),
                "vector": array("f", vector).tobytes(),
                "created_at": at,
            }
            for text_hash, vector in vectors.items()
        ]
        with self.state.write():
            self.db.table("embedding_cache").insert_all(
                rows, pk=("text_hash", "model_id"), replace=True
            )

    def get_many(self, text_hashes: Iterable[str], model_id: str) -> dict[str, list[float]]:
        """The cached vectors among ``text_hashes`` for ``model_id``, by text hash."""
        sql = (
            "select text_hash, vector from embedding_cache where model_id = ? "
            "and text_hash in ({marks})"
        )
        rows = self.state.query_in(sql, sorted(set(text_hashes)), [model_id])
        return {row["text_hash"]: array("f", row["vector"]).tolist() for row in rows}
