"""`ragsync plan`: the run's own code path, writing nothing (issue #6)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support import page, sentences, sitemap_source


def test_plan_reports_exactly_what_the_next_run_does(site, make_syncer, embedder):
    syncer = make_syncer(site)
    syncer.run()
    site.set_page(
        "/guide/page-1",
        *page(
            "Guide 1: replication",
            {
                "About replication": [sentences("replication")],
                "Tuning throttling": ["A brand new paragraph about throttling budgets."],
                "Limits of encryption": [sentences("encryption", 2)],
                "New section": ["Something else entirely, added today."],
            },
            intro="This guide (number 1) covers replication, throttling and encryption in depth "
            "for operators.",
        ),
    )
    site.remove_page("/guide/page-3", status=410)
    state_before = syncer.state.db.execute("select count(*) from documents").fetchone()[0]
    changes_before = len(syncer.state.runs.list_changes())
    points_before = {pid for pid, _, _ in syncer.store.points()}
    syncer.store.close()
    embedder.texts.clear()

    plan = syncer.plan()

    assert embedder.texts == []  # the plan embeds nothing ...
    assert plan["embedding"]["texts"] == 2 and plan["embedding"]["tokens"] > 10
    assert [d["change"] for d in plan["documents"]] == ["updated"]
    # ... and writes nothing: state, change log and index are untouched.
    assert syncer.state.db.execute("select count(*) from documents").fetchone()[0] == state_before
    assert len(syncer.state.runs.list_changes()) == changes_before
    assert {pid for pid, _, _ in syncer.store.points()} == points_before
    syncer.store.close()

    result = syncer.run()
    assert result.counters.as_dict() == plan["counters"]
    assert len(embedder.texts) == plan["embedding"]["texts"]


def test_plan_cli_json(tmp_path, site):
    config = tmp_path / "ragsync.toml"
    config.write_text(
        f'[[sources]]\nid = "docs"\nkind = "sitemap"\nurl = "{site.base_url}/sitemap.xml"\n'
    )
    proc = subprocess.run(
        [sys.executable, "-m", "ragsync", "plan", "--json", "-c", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(proc.stdout)
    assert report["embedding"]["texts"] == 16
    assert sorted(d["change"] for d in report["documents"]) == ["created"] * 4
    assert not (tmp_path / ".ragsync" / "qdrant").exists()  # no vector store was written
    human = subprocess.run(
        [sys.executable, "-m", "ragsync", "plan", "-c", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "would embed 16 new texts" in human


def test_reindex_after_a_chunker_change_needs_no_network_and_embeds_only_new_texts(
    tmp_path, site, embedder
):
    from ragsync.chunk import count_tiktoken
    from ragsync.sync import Syncer
    from tests.support import make_config

    source = [sitemap_source(site)]
    with Syncer(make_config(tmp_path, source), embedder=embedder) as syncer:
        syncer.run()
        original = {pid for pid, _, _ in syncer.store.points()}
        syncer.store.close()
    hits = len(site.hits)

    small = make_config(tmp_path, source, chunker={"max_tokens": 40})
    with Syncer(small, embedder=embedder) as syncer:
        embedder.texts.clear()
        result = syncer.reindex()
        assert len(site.hits) == hits  # no HTTP request at all
        assert result.ok and result.counters.documents_updated == 4
        chunks = [c for _, c in syncer.state.index.list_chunks()]
        assert all(count_tiktoken(c.text) <= 40 for c in chunks)
        assert len(chunks) > len(original)
        assert len(embedder.texts) == result.counters.chunks_embedded > 0
        assert set(embedder.texts) <= {c.text for c in chunks}
        assert syncer.verify().clean

    with Syncer(make_config(tmp_path, source), embedder=embedder) as syncer:
        embedder.texts.clear()
        back = syncer.reindex()  # back to 160 tokens: every text is in the cache
        assert embedder.texts == [] and back.counters.chunks_embedded == 0
        assert {pid for pid, _, _ in syncer.store.points()} == original
        syncer.store.close()
        assert syncer.reindex().counters.documents_updated == 0  # nothing left to do
    assert len(site.hits) == hits


class OtherModel:
    """The real model under another model id: what a model upgrade looks like to ragsync."""

    def __init__(self, inner):
        self.inner = inner
        self.model_id = inner.model_id + "-v2"
        self.dimension = inner.dimension
        self.max_input_tokens = inner.max_input_tokens

    def count_tokens(self, text):
        return self.inner.count_tokens(text)

    def embed(self, texts):
        return self.inner.embed(texts)


def test_a_model_change_never_mixes_two_models_in_one_collection(tmp_path, site, embedder):
    from ragsync.errors import StoreError
    from ragsync.sync import Syncer
    from tests.support import make_config

    source = [sitemap_source(site)]
    with Syncer(make_config(tmp_path, source), embedder=embedder) as syncer:
        syncer.run()
    site.set_page("/guide/page-0", "Guide 0", "<h1>Guide 0</h1><p>" + sentences("x") + "</p>")
    new_model = OtherModel(embedder)
    with Syncer(make_config(tmp_path, source), embedder=new_model) as syncer:
        try:
            syncer.run()
        except StoreError as exc:
            assert "ragsync reindex" in str(exc)
        else:
            raise AssertionError("a second model was written into the collection")
    renamed = make_config(
        tmp_path, source, store={"path": str(tmp_path / "qdrant"), "collection": "test-v2"}
    )
    with Syncer(renamed, embedder=new_model) as syncer:
        result = syncer.reindex()
        assert result.ok
        models = {p["metadata"]["model"] for _, p, _ in syncer.store.points()}
        syncer.store.close()
        assert models == {new_model.model_id}
        assert syncer.verify().clean
