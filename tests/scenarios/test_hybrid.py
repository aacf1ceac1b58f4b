"""Hybrid retrieval kept in sync (issue #19): a sparse vector per chunk beside the dense one,
written through the journal, checked by verify, added by reindex; dense, sparse and hybrid
search. Runs against each store (Qdrant local mode here; pgvector and qdrant_edge in the
Makefile's store passes)."""

from __future__ import annotations

import dataclasses

import pytest

from ragsync.connectors.pgvector_store import PgVectorStore
from ragsync.retrieval import CANDIDATES, RRF_K, NoSparseVectors
from ragsync.sparse import SPARSE_ID, dimension, encode
from ragsync.sync import Syncer
from ragsync.testing import DevSite
from tests.support import example_pages, make_config, page, sentences, sitemap_source

TERMS_PAGE = page(
    "Environment variables",
    {
        "Where files go": [
            "Set CARGO_TARGET_DIR to move build output, and pass --locked so the lock file "
            "is never rewritten. " + sentences("output", 2)
        ],
        "Network": [
            "The net.git-fetch-with-cli key makes fetches use the git executable. "
            + sentences("network", 2)
        ],
    },
)


def sparse_site() -> DevSite:
    site = DevSite({**example_pages(3), "/guide/env": TERMS_PAGE})
    site.start()
    return site


def store_sparse(syncer: Syncer) -> dict:
    return dict(syncer.store.sparse_points())  # type: ignore[attr-defined]


def test_each_chunk_gets_its_sparse_vector_once_and_a_no_change_run_computes_none(
    tmp_path, embedder
):
    site = sparse_site()
    try:
        config = make_config(tmp_path, [sitemap_source(site)])
        with Syncer(config, embedder=embedder) as syncer:
            first = syncer.run()
            assert first.ok and first.counters.chunks_embedded > 0
            assert first.counters.sparse_computed == first.counters.chunks_embedded
            stored = store_sparse(syncer)
            expected = {c.point_id: encode(c.text) for _, c in syncer.state.index.list_chunks()}
            assert set(stored) == set(expected)
            for pid, vector in expected.items():
                assert stored[pid].indices == vector.indices
            second = syncer.run()
            assert second.counters.chunks_embedded == second.counters.sparse_computed == 0
            assert second.counters.responses_304 > 0

            # an edit: only the new chunk's sparse vector is computed
            edited = site.pages["/guide/page-1"]
            site.set_page("/guide/page-1", edited.title, edited.body.replace("operators", "admins"))
            third = syncer.run()
            assert third.counters.chunks_embedded == 1 and third.counters.sparse_computed == 1
            assert syncer.verify().clean
    finally:
        site.stop()


def test_sparse_search_finds_exact_terms_and_hybrid_carries_both_scores(tmp_path, embedder):
    site = sparse_site()
    try:
        config = make_config(tmp_path, [sitemap_source(site)])
        with Syncer(config, embedder=embedder) as syncer:
            assert syncer.run().ok
            for query in ("CARGO_TARGET_DIR", "--locked", "net.git-fetch-with-cli"):
                hits = syncer.search(query, k=3, mode="sparse")
                assert hits[0].url.endswith("/guide/env"), (query, hits)
                assert hits[0].sparse_score and hits[0].sparse_score > 0
                assert hits[0].dense_score is None
            # Markdown escapes (CARGO\_TARGET\_DIR) are read through: the whole term is kept
            env = syncer.search("CARGO_TARGET_DIR", k=1, mode="sparse")[0]
            assert "CARGO\\_TARGET" in env.text
            assert dimension("cargo_target_dir") in store_sparse(syncer)[env.point_id].indices
            # the parts of a compound match too: "target dir" finds CARGO_TARGET_DIR
            assert syncer.search("target dir", k=1, mode="sparse")[0].url.endswith("/guide/env")
            assert syncer.search("the of and", k=3, mode="sparse") == []  # only stop words

            dense = syncer.search("how is throttling tuned?", k=3, mode="dense")
            assert dense[0].dense_score == dense[0].score and dense[0].sparse_score is None
            hybrid = syncer.search("CARGO_TARGET_DIR build output", k=3, mode="hybrid")
            assert hybrid[0].url.endswith("/guide/env")
            top = hybrid[0]
            assert top.dense_score is not None and top.sparse_score is not None
            both = 1 + config.search.sparse_weight  # in both rankings: each adds its weight
            # … plus its page's coverage (at most page_weight)
            most = both / (RRF_K + 1) + config.search.page_weight
            assert both / (RRF_K + CANDIDATES) <= top.score <= most + 1e-6
            assert [h.score for h in hybrid] == sorted((h.score for h in hybrid), reverse=True)
            default = syncer.search("CARGO_TARGET_DIR build output", k=3)  # [search] mode
            assert [h.point_id for h in default] == [h.point_id for h in hybrid]
    finally:
        site.stop()


def test_verify_finds_a_point_without_its_sparse_vector_and_repair_restores_it(tmp_path, embedder):
    site = sparse_site()
    try:
        config = make_config(tmp_path, [sitemap_source(site)])
        with Syncer(config, embedder=embedder) as syncer:
            assert syncer.run().ok
            pid, payload, vector = next(syncer.store.points(with_vectors=True))
            connector = syncer.store.inner  # the connector behind the engine's store guard
            if isinstance(connector, PgVectorStore):  # an upsert there keeps the column
                table = connector.collection
                connector.conn.execute(f"update {table} set bm25 = null where id = %s", [pid])
            else:
                syncer.store.upsert([(pid, vector, payload)])  # the same point, dense only
            syncer.engine.release_store()
            report = syncer.verify()
            assert report.sparse_drift == [pid] and not report.clean
            assert not report.missing and not report.drift
            repaired = syncer.verify(repair=True)
            assert repaired.repaired
            assert syncer.verify().clean
            assert store_sparse(syncer)[pid] is not None
    finally:
        site.stop()


def test_a_collection_built_without_sparse_vectors_gets_them_from_reindex_without_embedding(
    tmp_path, embedder, caplog
):
    site = sparse_site()
    try:
        dense_only = make_config(tmp_path, [sitemap_source(site)])
        dense_only = dataclasses.replace(
            dense_only, store=dataclasses.replace(dense_only.store, sparse=False)
        )
        with Syncer(dense_only, embedder=embedder) as syncer:
            first = syncer.run()
            assert first.ok and first.counters.sparse_computed == 0
            with pytest.raises(NoSparseVectors, match="reindex --same-collection"):
                syncer.search("--locked", mode="sparse")
        config = make_config(tmp_path, [sitemap_source(site)])  # sparse on: the default
        with Syncer(config, embedder=embedder) as syncer:
            caplog.set_level("WARNING", logger="ragsync")
            edited = site.pages["/guide/page-1"]
            site.set_page("/guide/page-1", edited.title, edited.body.replace("operators", "admins"))
            assert syncer.run().counters.sparse_computed == 0  # still dense only, and said so
            assert "has no sparse vectors" in caplog.text
            hybrid = syncer.search("CARGO_TARGET_DIR", k=2)  # falls back to dense
            assert hybrid and hybrid[0].sparse_score is None
            embedded = len(embedder.texts)
            result = syncer.reindex(same_collection=True)
            assert result.ok and result.counters.chunks_embedded == 0
            assert len(embedder.texts) == embedded  # no text embedded again
            points = syncer.store.count()
            assert result.counters.sparse_computed == points
            collection = syncer.config.store.collection
            assert syncer.state.index.get_collection_sparse(collection) == SPARSE_ID
            assert syncer.verify().clean
            assert all(v is not None for v in store_sparse(syncer).values())
            assert syncer.search("--locked", k=1, mode="sparse")[0].url.endswith("/guide/env")
            again = syncer.run()
            assert again.counters.sparse_computed == 0 and again.counters.chunks_embedded == 0
    finally:
        site.stop()


def test_reindex_into_a_new_collection_fills_it_from_the_caches(tmp_path, embedder):
    site = sparse_site()
    try:
        config = make_config(tmp_path, [sitemap_source(site)])
        with Syncer(config, embedder=embedder) as syncer:
            assert syncer.run().ok
            points = syncer.store.count()
        moved = dataclasses.replace(
            config, store=dataclasses.replace(config.store, collection="second")
        )
        with Syncer(moved, embedder=embedder) as syncer:
            result = syncer.reindex()
            assert result.ok and result.counters.chunks_embedded == 0
            assert result.counters.sparse_computed == 0  # from the cache too
            assert syncer.store.count() == points == result.counters.points_upserted
            assert syncer.verify().clean
            assert syncer.search("--locked", k=1, mode="sparse")[0].url.endswith("/guide/env")
    finally:
        site.stop()
