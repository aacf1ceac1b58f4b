"""A missing page is not a deleted page (README "Deletion safety"): suspected, then tombstoned,
restorable."""

from __future__ import annotations

import json

import pytest

from ragsync.sync import Syncer
from ragsync.testing import DevSite
from tests.support import Clock, example_pages, make_config

GONE = "/guide/page-1"


@pytest.fixture
def world(tmp_path, embedder):
    site = DevSite(example_pages(3))
    site.start()
    clock = Clock()
    made = []

    def syncer(**source):
        config = make_config(
            tmp_path / f"s{len(made)}",
            [{"id": "docs", "kind": "sitemap", "url": site.base_url + "/sitemap.xml", **source}],
        )
        made.append(Syncer(config, embedder=embedder, clock=clock))
        return made[-1]

    yield site, clock, syncer
    for s in made:
        s.close()
    site.stop()


def points_of(syncer, path, site):
    try:
        return {
            pid
            for pid, p, _ in syncer.store.points()
            if p["metadata"]["url"] == site.base_url + path
        }
    finally:
        syncer.store.close()


def doc(syncer, site, path):
    return syncer.state.documents.get(f"docs:{site.base_url}{path}")


def test_a_404_once_then_200_is_never_removed(world):
    site, clock, make = world
    syncer = make()
    syncer.run()
    before = points_of(syncer, GONE, site)
    body = site.pages[GONE]
    site.remove_page(GONE)
    clock.advance(hours=2)
    result = syncer.run()
    assert result.ok and result.counters.responses_404 == 1
    assert doc(syncer, site, GONE)["status"] == "suspected_missing"
    assert points_of(syncer, GONE, site) == before  # still retrievable
    hits = syncer.search("Tuning throttling", k=12)
    assert any(h.url.endswith(GONE) for h in hits)

    site.pages[GONE] = body  # back, unchanged
    clock.advance(hours=2)
    result = syncer.run()
    assert doc(syncer, site, GONE)["status"] == "active"
    assert doc(syncer, site, GONE)["missing_count"] == 0
    assert points_of(syncer, GONE, site) == before
    assert result.counters.chunks_embedded == 0 and result.counters.tombstones_created == 0


def test_tombstone_needs_confirmations_and_grace_then_a_200_restores(world, embedder):
    site, clock, make = world
    syncer = make(missing_confirmations=2, missing_grace="1h")
    syncer.run()
    before = points_of(syncer, GONE, site)
    body = site.pages[GONE]
    site.remove_page(GONE, status=410)

    syncer.run()  # 1st observation
    clock.advance(minutes=10)
    syncer.run()  # 2nd observation, but only 10 minutes in: still suspected
    assert doc(syncer, site, GONE)["status"] == "suspected_missing"
    assert points_of(syncer, GONE, site) == before

    clock.advance(hours=1)
    result = syncer.run()  # 3rd observation, 70 minutes after the first
    assert result.counters.tombstones_created == 1
    assert result.counters.points_deleted == len(before)
    tomb = doc(syncer, site, GONE)
    assert tomb["status"] == "tombstoned" and tomb["tombstone_reason"] == "HTTP 410"
    assert tomb["canonical_url"] == site.base_url + GONE and tomb["tombstoned_at"]
    evidence = json.loads(tomb["missing_evidence"])
    assert [e["status"] for e in evidence] == [410, 410, 410]
    assert points_of(syncer, GONE, site) == set()
    assert syncer.state.index.get_chunks(tomb["doc_key"]) == []
    assert syncer.state.runs.list_changes()[-1]["change_type"] == "removed"

    site.pages[GONE] = body  # the page comes back: restored, from the cache
    embedder.texts.clear()
    clock.advance(hours=1)
    result = syncer.run()
    assert doc(syncer, site, GONE)["status"] == "active"
    assert points_of(syncer, GONE, site) == before
    assert embedder.texts == []
    assert syncer.state.runs.list_changes()[-1]["change_type"] == "restored"


def test_pages_that_leave_the_sitemap_are_pruned_per_policy(world):
    site, clock, make = world
    pruning = make(missing_confirmations=2, missing_grace="30m")
    keeping = make(missing_confirmations=2, missing_grace="30m", prune_unlisted=False)
    for syncer in (pruning, keeping):
        syncer.run()
    site.pages[GONE].status = 200
    listed = site.listed
    site.listed = lambda: [p for p in listed() if p != GONE]  # still served, no longer listed
    for _ in range(3):
        clock.advance(minutes=20)
        for syncer in (pruning, keeping):
            syncer.run()
    assert doc(pruning, site, GONE)["status"] == "tombstoned"
    assert doc(pruning, site, GONE)["tombstone_reason"] == "no longer listed by the source"
    assert points_of(pruning, GONE, site) == set()
    assert doc(keeping, site, GONE)["status"] == "active"
    assert points_of(keeping, GONE, site)


def test_a_tombstoned_page_whose_retry_answers_404_is_not_asked_again(world):
    """A tombstone checked during a maintenance window gets a retry; the retry's 404 confirms
    the tombstone and ends the retries (before, the page was requested on every run)."""
    site, clock, make = world
    syncer = make(missing_confirmations=1, missing_grace="0s", every="1h")
    syncer.run()
    listed = site.listed
    site.listed = lambda: [*listed(), GONE]  # still linked: checked on every listing
    site.remove_page(GONE)
    clock.advance(hours=2)
    assert syncer.run().counters.tombstones_created == 1
    key = doc(syncer, site, GONE)["doc_key"]

    site.redirect(GONE, "/maintenance", status=302)  # a maintenance window: retried
    clock.advance(hours=2)
    assert syncer.run().counters.temporary_redirects == 1
    assert syncer.state.attempts.get(key)["state"] == "retrying"

    site.remove_page(GONE)  # back: the retry (due before the source is) answers 404
    clock.advance(minutes=30)
    retried = syncer.run()
    assert retried.counters.responses_404 == 1 and retried.ok
    assert doc(syncer, site, GONE)["status"] == "tombstoned"
    assert syncer.state.attempts.get(key) is None

    asked = len(site.requests_to(GONE))
    clock.advance(minutes=10)  # nothing due
    assert syncer.run().counters.requests_sent == 0
    assert len(site.requests_to(GONE)) == asked
