"""The chunker is recorded with the index: a run never mixes chunks of two chunkers (issue #21).

A run refuses, before any request, when a source's chunks were made by another chunker than the
configured one (another ``chunker.max_tokens``, or the greedy packer of a state from before
chunker ids were recorded); ``ragsync reindex`` re-chunks from the stored pages and records the
new chunker, after which runs go on.
"""

from __future__ import annotations

import pytest

from tests.support import make_config, sitemap_source


def chunkers(syncer):
    return {r["source_id"]: r["chunker"] for r in syncer.state.db.query("select * from chunkers")}


def test_a_changed_max_tokens_refuses_the_run_until_reindex(tmp_path, site, embedder):
    from ragsync.errors import StateError
    from ragsync.sync import Syncer

    source = [sitemap_source(site)]
    with Syncer(make_config(tmp_path, source), embedder=embedder) as syncer:
        assert syncer.run().ok
        assert chunkers(syncer) == {"docs": "cdc1;max=128"}
        points = {pid for pid, _, _ in syncer.store.points()}
        syncer.store.close()
    hits = len(site.hits)

    small = make_config(tmp_path, source, chunker={"max_tokens": 60})
    with Syncer(small, embedder=embedder) as syncer:
        with pytest.raises(StateError) as refused:
            syncer.run()
        message = str(refused.value)
        assert "'docs' (cdc1;max=128)" in message and "cdc1;max=60" in message
        assert "ragsync reindex" in message and "chunker.max_tokens back to 128" in message
        assert len(site.hits) == hits  # refused before any request
        assert {pid for pid, _, _ in syncer.store.points()} == points  # nothing written
        syncer.store.close()
        assert syncer.reindex().ok
        assert chunkers(syncer) == {"docs": "cdc1;max=60"}
        assert syncer.run().ok  # the index is all one chunker's again


def test_a_state_from_before_chunker_ids_is_the_greedy_packer_and_needs_a_reindex(
    tmp_path, site, embedder
):
    from ragsync.errors import StateError
    from ragsync.sync import Syncer

    config = make_config(tmp_path, [sitemap_source(site)])
    with Syncer(config, embedder=embedder) as syncer:
        assert syncer.run().ok
        with syncer.state.write():  # what an upgraded state holds: chunks, no chunker id
            syncer.state.db.execute("delete from chunkers")
    hits = len(site.hits)
    with Syncer(config, embedder=embedder) as syncer:
        with pytest.raises(StateError, match=r"'docs' \(greedy0;max=128\)"):
            syncer.run()
        assert chunkers(syncer) == {}  # the refusal records nothing
        with pytest.raises(StateError):
            syncer.plan()  # the plan takes the run's path, and says the same
        assert len(site.hits) == hits
        assert syncer.reindex().ok
        assert chunkers(syncer) == {"docs": "cdc1;max=128"}
        assert syncer.run().ok


def test_a_source_without_chunks_takes_the_configured_chunker(tmp_path, site, embedder):
    from ragsync.sync import Syncer

    with Syncer(make_config(tmp_path, [sitemap_source(site)]), embedder=embedder) as syncer:
        with syncer.state.write():  # an upgraded state that never indexed anything
            syncer.state.db.execute("delete from chunkers")
        assert syncer.run().ok
        assert chunkers(syncer) == {"docs": "cdc1;max=128"}
