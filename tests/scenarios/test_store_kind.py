"""The embedded default store: Qdrant Edge for a new index, local mode kept where it already
holds one, and the move between them with nothing embedded again (README "Vector stores")."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ragsync.config import StoreConfig, config_from_mapping
from ragsync.connectors.qdrant_edge_store import QdrantEdgeStore
from ragsync.registry import store_kind
from ragsync.sync import Syncer
from tests.support import sitemap_source, state_table

QUERY = "how does throttling behave under load?"


def config(tmp_path: Path, site: Any, **store: Any):
    data: dict[str, Any] = {
        "state": state_table(tmp_path),
        "sources": [{"every": "0s", **sitemap_source(site)}],
    }
    if store:
        data["store"] = store
    return config_from_mapping(data, base_dir=tmp_path)


def top(syncer: Syncer) -> list[tuple[str, str]]:
    return [(hit.url, hit.text) for hit in syncer.search(QUERY, k=5, mode="dense")]


def test_auto_resolves_by_what_the_folder_holds(tmp_path):
    def kind(**fields: Any) -> str:
        return store_kind(StoreConfig(**{"path": str(tmp_path / "q"), **fields}))

    assert StoreConfig().kind == "auto"
    assert kind() == "qdrant_edge"  # nothing there yet
    assert kind(url="http://qdrant.internal:6333") == "qdrant"  # a server
    assert kind(kind="pgvector") == "pgvector"  # a named kind is never second-guessed
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "meta.json").write_text("{}")  # a folder local mode made
    assert kind() == "qdrant"
    (tmp_path / "q" / "ragsync").mkdir()
    (tmp_path / "q" / "ragsync" / "ragsync-collection.json").write_text("{}")  # moved to Edge
    assert kind() == "qdrant_edge"
    assert kind(collection="other") == "qdrant"


def test_a_new_index_is_kept_in_qdrant_edge(tmp_path, site, embedder):
    with Syncer(config(tmp_path, site), embedder=embedder) as syncer:
        assert syncer.run().ok
        assert top(syncer)
    folder = tmp_path / ".ragsync" / "qdrant"
    assert (folder / "ragsync" / "ragsync-collection.json").is_file()
    assert not (folder / "meta.json").exists()  # no local-mode store was made


def test_an_existing_local_mode_index_stays_where_it_is_and_moves_with_reindex(
    tmp_path, site, embedder, caplog
):
    local = config(tmp_path, site, kind="qdrant")  # what a config without `kind` meant before
    with Syncer(local, embedder=embedder) as syncer:
        assert syncer.run().ok
        before = top(syncer)

    unnamed = config(tmp_path, site)
    assert store_kind(unnamed.store) == "qdrant"
    with caplog.at_level(logging.WARNING, logger="ragsync"):
        for _ in range(2):
            with Syncer(unnamed, embedder=embedder) as syncer:
                result = syncer.run()
                assert result.ok and result.counters.points_deleted == 0
                assert result.counters.chunks_embedded == 0
                assert top(syncer) == before  # nothing lost, nothing re-embedded
    warnings = [r.getMessage() for r in caplog.records if "local-mode folder" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert 'kind = "qdrant_edge"' in warnings[0] and "ragsync reindex" in warnings[0]

    moved = config(tmp_path, site, kind="qdrant_edge", path=".ragsync/edge")
    with Syncer(moved, embedder=embedder) as syncer:
        result = syncer.reindex()
        assert result.ok and result.counters.chunks_embedded == 0
        assert result.counters.points_upserted > 0
        report = syncer.verify()
        assert report.clean, report.to_dict()
        assert top(syncer) == before

    after = config(tmp_path, site, path=".ragsync/edge")  # `kind` removed again: still Edge
    assert store_kind(after.store) == "qdrant_edge"
    with Syncer(after, embedder=embedder) as syncer:
        assert syncer.run().counters.chunks_embedded == 0
        assert top(syncer) == before


def test_the_config_reference_accepts_auto_and_names_it_among_the_kinds(tmp_path, site):
    with pytest.raises(Exception) as caught:
        config(tmp_path, site, kind="qdrant-edge")
    assert "auto" in str(caught.value) and "qdrant_edge" in str(caught.value)


class Recording:
    """A store that records its writes and its ``writes()`` blocks (the journal still pending
    when each block ends), passing everything to the real store."""

    def __init__(self, inner: Any, pending: Any):
        self.inner = inner
        self.pending = pending  # () -> journal operations not yet forgotten
        self.calls: list[tuple[str, int]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def upsert(self, points: Any, **kw: Any) -> None:
        self.calls.append(("upsert", len(points)))
        self.inner.upsert(points, **kw)

    def delete(self, ids: Any) -> None:
        self.calls.append(("delete", len(ids)))
        self.inner.delete(ids)

    @contextmanager
    def writes(self) -> Iterator[None]:
        with self.inner.writes():
            self.calls.append(("begin", self.pending()))
            yield
            self.calls.append(("end", self.pending()))


def test_the_journal_makes_each_batch_durable_once_before_forgetting_it(tmp_path, site, embedder):
    """Qdrant Edge flushes (an fsync) once per journal batch, not once per run of operations of
    one kind: an edit of two pages applies four runs (deletes and upserts) in one block, and
    the journal still holds them when the block ends."""
    cfg = config(tmp_path, site, kind="qdrant_edge")
    with Syncer(cfg, embedder=embedder) as syncer:
        assert syncer.run().ok
        for path in [p for p in site.pages if p.startswith("/guide/")][:2]:
            page = site.pages[path]
            site.set_page(path, page.title, page.body.replace("</p>", " Now edited.</p>", 1))
        store = Recording(QdrantEdgeStore.from_config(cfg.store), syncer.engine.state.journal.count)
        with Syncer(cfg, embedder=embedder, store=store) as edited:
            assert edited.run().ok
    writes = [name for name, _ in store.calls if name in ("upsert", "delete")]
    assert len(writes) >= 4  # several runs of one kind each...
    assert store.calls[0][0] == "begin" and store.calls[-1][0] == "end"  # ...in one block
    assert [name for name, _ in store.calls].count("begin") == 1
    assert store.calls[-1][1] > 0  # durable before the journal forgot the batch
