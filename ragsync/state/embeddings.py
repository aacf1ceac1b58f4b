"""The ``embedding_cache`` table: vectors by text hash and model, so that a text is embedded
once per model whatever page it appears in."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence

from ragsync.sparse import SparseVector
from ragsync.state.repository import Repository


class Embeddings(Repository):
    """The embedding cache (``state.embeddings``); it only ever grows. Sparse vectors are
    cached beside the dense ones, under their encoder's id (:data:`ragsync.sparse.SPARSE_ID`)
    in ``model_id``."""

    def missing(self, text_hashes: Iterable[str], model_id: str) -> set[str]:
        """The hashes among ``text_hashes`` with no cached vector for ``model_id``."""
        wanted = set(text_hashes)
        sql = "select text_hash from embedding_cache where model_id = ? and text_hash in ({marks})"
        present = {row["text_hash"] for row in self.state.query_in(sql, sorted(wanted), [model_id])}
        return wanted - present

    def put(self, model_id: str, vectors: Mapping[str, Sequence[float]], at: str) -> None:
        """Cache vectors by text hash (one transaction)."""
        self._put(model_id, {h: (len(v), array("f", v).tobytes()) for h, v in vectors.items()}, at)

    def get_many(self, text_hashes: Iterable[str], model_id: str) -> dict[str, list[float]]:
        """The cached vectors among ``text_hashes`` for ``model_id``, by text hash."""
        found = self._get(text_hashes, model_id)
        return {text_hash: array("f", blob).tolist() for text_hash, blob in found.items()}

    def put_sparse(self, sparse_id: str, vectors: Mapping[str, SparseVector], at: str) -> None:
        """Cache sparse vectors by text hash (one transaction); ``dim`` holds their length."""
        blobs = {h: (len(v.indices), v.to_bytes()) for h, v in vectors.items()}
        self._put(sparse_id, blobs, at)

    def get_sparse(self, text_hashes: Iterable[str], sparse_id: str) -> dict[str, SparseVector]:
        """The cached sparse vectors among ``text_hashes``, by text hash."""
        found = self._get(text_hashes, sparse_id)
        return {text_hash: SparseVector.from_bytes(blob) for text_hash, blob in found.items()}

    def _put(self, model_id: str, blobs: Mapping[str, tuple[int, bytes]], at: str) -> None:
        rows = [
            {"text_hash": h, "model_id": model_id, "dim": dim, "vector": blob, "created_at": at}
            for h, (dim, blob) in blobs.items()
        ]
        self.state.put_rows(
            "embedding_cache", rows, key=["text_hash", "model_id"], on_conflict="update"
        )

    def _get(self, text_hashes: Iterable[str], model_id: str) -> dict[str, bytes]:
        sql = (
            "select text_hash, vector from embedding_cache where model_id = ? "
            "and text_hash in ({marks})"
        )
        rows = self.state.query_in(sql, sorted(set(text_hashes)), [model_id])
        return {row["text_hash"]: row["vector"] for row in rows}
