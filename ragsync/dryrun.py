"""`ragsync plan`, the dry run: the real sync path, writing nothing real.

The dry run is a pass (:func:`ragsync.pipeline.runs.run_pass`) against a throwaway copy of the
state DB, a vector store that keeps nothing and an embedder that only counts (texts and model
tokens) — so what it reports is what the next `run` does, by construction, without loading the
model.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ragsync.config import SourceConfig
from ragsync.embed import Embedder
from ragsync.models import Change, Hit
from ragsync.pipeline.context import Engine
from ragsync.pipeline.runs import run_pass
from ragsync.runlock import RunLock


def dry_run(
    engine: Engine,
    sources: list[SourceConfig],
    *,
    revalidate_all: bool = False,
    refetch: bool = False,
) -> dict[str, Any]:
    """What a pass would do now; see :meth:`ragsync.sync.Syncer.plan`."""
    counting = CountingEmbedder(engine.embedder)
    with tempfile.TemporaryDirectory(prefix="ragsync-plan-") as folder:
        copy = engine.state.copy_to(Path(folder) / "state.db")
        copy.leases.remove_all()  # the copy is this dry run's alone, whoever holds the real one
        dry = Engine(
            dataclasses.replace(engine.config, events=()),
            copy,
            embedder=counting,
            store=NullStore(getattr(engine.store, "sparse_idf", None)),
            transport=engine.transport,
            clock=engine.clock,
        )
        try:
            lock = RunLock(copy)
            with lock.held(wait=False):
                result = run_pass(
                    dry,
                    sources,
                    owner=lock.owner,
                    revalidate_all=revalidate_all,
                    refetch=refetch,
                )
            documents = [
                {
                    "url": change.url,
                    "doc_key": change.doc_key,
                    "change": change.change_type,
                    "chunks_added": change.chunks_added,
                    "chunks_removed": change.chunks_removed,
                    "chunks_kept": change.chunks_kept,
                }
                for change in map(Change.from_row, copy.runs.list_changes())
                if change.run_id == result.run_id
            ]
        finally:
            dry.close()
    report = result.to_dict()
    return {
        "ok": report["ok"],
        "counters": report["counters"],
        "sources": report["sources"],
        "embedding": {"texts": counting.texts, "tokens": counting.tokens},
        "documents": documents,
    }


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

    @property
    def tokens_add_up(self) -> bool:
        return bool(getattr(self.real, "tokens_add_up", False))

    def count_tokens(self, text: str) -> int:
        return self.real.count_tokens(text)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        self.tokens += sum(self.real.count_tokens(text) for text in texts)
        return [[0.0] * self.real.dimension for _ in texts]


class NullStore:
    """A vector store that accepts every operation and keeps nothing; it holds sparse vectors
    when the real store can (``sparse_idf`` copied, None: it cannot), so that the plan counts
    the sparse vectors the run would compute."""

    def __init__(self, sparse_idf: bool | None = None):
        self.sparse_idf = sparse_idf

    def ensure_collection(self, dimension: int, *, sparse: bool = False) -> bool:
        return sparse

    def upsert(self, points: Sequence[tuple[str, Sequence[float], dict]], **sparse: Any) -> None:
        pass

    def set_payload(self, items: Sequence[tuple[str, dict]]) -> None:
        pass

    def delete(self, point_ids: Sequence[str]) -> None:
        pass

    def drop(self) -> None:
        pass

    def search(self, vector: Sequence[float], k: int, source: str | None = None) -> list[Hit]:
        return []

    def search_sparse(self, vector: Any, k: int, source: str | None = None) -> list[Hit]:
        return []

    def points(self, *, with_vectors: bool = False) -> Iterator[tuple[str, dict, Any]]:
        return iter(())

    def sparse_points(self) -> Iterator[tuple[str, Any]]:
        return iter(())

    def count(self, source: str | None = None) -> int:
        return 0

    def close(self) -> None:
        pass
