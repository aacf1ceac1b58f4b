"""Parts that let `ragsync plan` run the real sync path while writing nothing real.

The plan runs :meth:`ragsync.sync.Syncer.run` against a throwaway copy of the state DB, a vector
store that keeps nothing and an embedder that only counts (texts and model tokens) — so what it
reports is what the next `run` does, by construction, without loading the model.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ragsync.embed import Embedder
from ragsync.models import Hit


class CountingEmbedder:
    """Counts what would be embedded; returns zero vectors; never loads the model."""

    def __init__(self, real: Embedder):
        self.real = real
        self.texts = 0
        self.tokens = 0

    @property
    def model_id(self) -> str:
        return self.real.model_id

    @property
    def dimension(self) -> int:
        return self.real.dimension

    @property
    def max_input_tokens(self) -> int:
        return self.real.max_input_tokens

    def count_tokens(self, text: str) -> int:
        return self.real.count_tokens(text)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        self.tokens += sum(self.real.count_tokens(text) for text in texts)
        return [[0.0] * self.real.dimension for _ in texts]


class NullStore:
    """A vector store that accepts every operation and keeps nothing."""

    def ensure_collection(self, dimension: int) -> None:
        pass

    def upsert(self, points: Sequence[tuple[str, Sequence[float], dict]]) -> None:
        pass

    def set_payload(self, items: Sequence[tuple[str, dict]]) -> None:
        pass

    def delete(self, point_ids: Sequence[str]) -> None:
        pass

    def search(self, vector: Sequence[float], k: int, source: str | None = None) -> list[Hit]:
        return []

    def points(self, *, with_vectors: bool = False) -> Iterator[tuple[str, dict, Any]]:
        return iter(())

    def count(self, source: str | None = None) -> int:
        return 0

    def close(self) -> None:
        pass
