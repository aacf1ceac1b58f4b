"""End to end: a real site on 127.0.0.1, real SQLite, real Qdrant local mode, real MiniLM."""

from __future__ import annotations

import copy
import threading
import time

from ragsync.sync import Syncer
from tests.support import CountingEmbedder, make_config, page, sentences, sitemap_source


def snapshot(syncer: Syncer) -> dict[str, dict]:
    """Every point in the store: ``{point_id: payload}``."""
    try:
        return {pid: payload for pid, payload, _ in syncer.store.points()}
    finally:
        syncer.store.close()


def state_point_ids(syncer: Syncer) -> set[str]:
    return {chunk.point_id for _, chunk in syncer.state.index.list_chunks()}


def test_first_run_indexes_every_allowed_page_and_never_requests_disallowed(site, make_syncer):
    syncer = make_syncer(site)
    result = syncer.run()

    assert result.ok, result.to_dict()
    allowed = [p for p in site.pages if not p.startswith("/private")]
    assert result.counters.documents_created == len(allowed)
    assert result.counters.robots_disallowed == 1
    assert site.requests_to("/private/secret") == []
    index = snapshot(syncer)
    assert {p["metadata"]["url"] for p in index.values()} == {site.base_url + p for p in allowed}
    assert set(index) == state_point_ids(syncer)
    assert result.counters.points_upserted == len(index)
    payload = next(iter(index.values()))
    assert set(payload) == {"page_content", "metadata"}
    assert set(payload["metadata"]) == {
        "url",
        "source",
        "title",
        "headings",
        "chunk_index",
        "chunk_hash",
        "doc_key",
        "model",
        "last_changed_at",
    }


def test_second_run_with_nothing_changed_is_a_no_op(site, make_syncer, embedder):
    syncer = make_syncer(site)
    syncer.run()
    before = snapshot(syncer)
    embedder.texts.clear()
    hits_before = len(site.hits)

    result = syncer.run()

    page_requests = [h for h in site.hits[hits_before:] if h.path.startswith("/guide/")]
    assert page_requests and all(h.conditional and h.status == 304 for h in page_requests)
    assert result.counters.responses_304 == len(page_requests)
    assert result.counters.chunks_embedded == 0 and embedder.texts == []
    assert result.counters.points_upserted == 0 and result.counters.points_deleted == 0
    assert result.counters.payloads_updated == 0
    assert snapshot(syncer) == before


def test_no_validators_and_noisy_html_is_still_a_no_op(make_syncer, embedder):
    from ragsync.testing import DevSite
    from tests.support import example_pages

    site = DevSite(example_pages(), validators=False, noise=True)
    site.start()
    try:
        syncer = make_syncer(site)
        syncer.run()
        before = snapshot(syncer)
        raw_hashes = {d["doc_key"]: d["raw_hash"] for d in syncer.state.documents.list()}
        embedder.texts.clear()

        result = syncer.run()

        # The HTML differed on every request (noise), so the raw-body shortcut missed ...
        after = {d["doc_key"]: d["raw_hash"] for d in syncer.state.documents.list()}
        assert all(raw_hashes[key] != after[key] for key in after)
        assert result.counters.conditional_requests_sent == 0
        # ... but the extracted-content hash caught it: no downstream work at all.
        assert result.counters.responses_200_unchanged == len(after)
        assert result.counters.responses_200_changed == 0
        assert embedder.texts == []
        assert result.counters.points_upserted == 0
        assert snapshot(syncer) == before
    finally:
        site.stop()


def test_editing_one_paragraph_reembeds_only_changed_chunks(site, make_syncer, embedder):
    syncer = make_syncer(site)
    syncer.run()
    before = snapshot(syncer)
    title = "Guide 1: replication"
    edited_para = "Replication is now asynchronous by default, and lag is shown on the dashboard."
    site.set_page(
        "/guide/page-1",
        *page(
            title,
            {
                "About replication": [sentences("replication")],
                "Tuning throttling": [edited_para],
                "Limits of encryption": [sentences("encryption", 2)],
            },
            intro="This guide (number 1) covers replication, throttling and encryption in "
            "depth for operators.",
        ),
    )
    embedder.texts.clear()

    result = syncer.run()

    assert result.counters.responses_200_changed == 1
    assert len(embedder.texts) == 1 and edited_para in embedder.texts[0]
    assert result.counters.points_upserted == 1 and result.counters.points_deleted == 1
    after = snapshot(syncer)
    url = site.base_url + "/guide/page-1"
    kept_before = {
        pid
        for pid, p in before.items()
        if p["metadata"]["url"] == url and "Tuning throttling" not in p["metadata"]["headings"]
    }
    kept_after = {
        pid
        for pid, p in after.items()
        if p["metadata"]["url"] == url and "Tuning throttling" not in p["metadata"]["headings"]
    }
    assert kept_before == kept_after and len(kept_after) == 3
    others = {pid: p for pid, p in before.items() if p["metadata"]["url"] != url}
    assert {pid: after[pid] for pid in others} == others
    change = syncer.state.runs.list_changes()[-1]
    assert change["change_type"] == "updated" and change["chunks_added"] == 1
    assert edited_para in change["diff"]


def test_moving_a_section_to_another_page_embeds_only_that_section(site, make_syncer, embedder):
    syncer = make_syncer(site)
    syncer.run()
    moved = {"Tuning throttling": [sentences("throttling", 4)]}
    site.set_page(
        "/guide/page-1",
        *page(
            "Guide 1: replication",
            {
                "About replication": [sentences("replication")],
                "Limits of encryption": [sentences("encryption", 2)],
            },
            intro="This guide (number 1) covers replication, throttling and encryption in depth "
            "for operators.",
        ),
    )
    site.set_page(
        "/guide/page-3",
        *page(
            "Guide 3: encryption",
            {
                "About encryption": [sentences("encryption")],
                "Tuning sharding": [sentences("sharding", 4)],
                "Limits of caching": [sentences("caching", 2)],
                **moved,
            },
            intro="This guide (number 3) covers encryption, sharding and caching in depth for "
            "operators.",
        ),
    )
    embedder.texts.clear()

    result = syncer.run()

    assert result.counters.responses_200_changed == 2
    # Under its new page title the section is a new text; every other chunk is unchanged.
    assert embedder.texts == [
        f"Guide 3: encryption > Tuning throttling\n\n{sentences('throttling', 4)}"
    ]
    assert result.counters.chunks_embedded == 1 and result.counters.chunks_reused == 0
    index = snapshot(syncer)
    throttling = [p for p in index.values() if "Tuning throttling" in p["metadata"]["headings"]]
    urls = sorted(p["metadata"]["url"] for p in throttling)
    assert urls == [site.base_url + "/guide/page-3"]
    assert set(index) == state_point_ids(syncer)


def test_journal_left_by_a_crash_is_replayed_first(site, make_syncer):
    syncer = make_syncer(site)
    syncer.run()
    index = snapshot(syncer)
    # Simulate a crash between commit and apply: points gone from the store, ops pending.
    pending = []
    for doc_key, chunk in syncer.state.index.list_chunks():
        pending.append(
            {
                "op": "upsert",
                "point_id": chunk.point_id,
                "doc_key": doc_key,
                "payload": copy.deepcopy(index[chunk.point_id]),
                "text_hash": chunk.chunk_hash,
                "model_id": syncer.model_id,
            }
        )
    syncer.store.delete(list(index))
    syncer.store.close()
    syncer.state.journal.add(pending)

    result = syncer.run()

    assert result.counters.journal_replayed == len(index)
    assert snapshot(syncer) == index
    assert syncer.state.journal.count() == 0


class SlowToLoad(CountingEmbedder):
    """An embedder whose load ahead (``warm``) takes 2 s and whose ``embed`` notes whether
    that load had ended."""

    def __init__(self, inner):
        super().__init__(inner)
        self.loaded = threading.Event()
        self.embedded_while_loading = 0

    def warm(self) -> None:
        super().warm()
        time.sleep(2)
        self.loaded.set()

    def embed(self, texts):
        if not self.loaded.is_set():
            self.embedded_while_loading += 1
        return super().embed(texts)


def test_the_model_is_used_only_once_its_load_ahead_has_ended(site, tmp_path, real_embedder):
    """A fetch thread starts loading the model ahead; the main thread embedded while that load
    still ran, so both imported numpy at once, which numpy does not survive (a `run --watch`
    test failed with "cannot import name '__cpu_features__'" about one run in two)."""
    embedder = SlowToLoad(real_embedder)
    with Syncer(make_config(tmp_path, [sitemap_source(site)]), embedder=embedder) as syncer:
        assert syncer.run().ok
    assert embedder.warmed == 1 and embedder.texts
    assert embedder.embedded_while_loading == 0
