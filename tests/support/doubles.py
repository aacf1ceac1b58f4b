"""Stand-ins injected into a Syncer: a counting wrapper around the real embedder, a clock."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from ragsync.embed import SentenceTransformerEmbedder


class CountingEmbedder:
    """The real embedder, counting every text it is asked to embed."""

    def __init__(self, inner: SentenceTransformerEmbedder):
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.max_input_tokens = inner.max_input_tokens
        self.tokens_add_up = inner.tokens_add_up
        self.texts: list[str] = []
        self.warmed = 0  # calls of warm(): a run loads the model ahead when pages are new

    def warm(self) -> None:
        self.warmed += 1
        self.inner.warm()

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return self.inner.embed(texts)


class Clock:
    """An injected clock for a Syncer: time passes only when a test says so."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)
