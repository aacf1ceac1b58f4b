"""`ragsync plan`: the run's own code path, writing nothing (issue #6)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import page, sentences


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
    changes_before = len(syncer.state.changes())
    points_before = {pid for pid, _, _ in syncer.store.points()}
    syncer.store.close()
    embedder.texts.clear()

    plan = syncer.plan()

    assert embedder.texts == []  # the plan embeds nothing ...
    assert plan["embedding"]["texts"] == 2 and plan["embedding"]["tokens"] > 10
    assert [d["change"] for d in plan["documents"]] == ["updated"]
    # ... and writes nothing: state, change log and index are untouched.
    assert syncer.state.db.execute("select count(*) from documents").fetchone()[0] == state_before
    assert len(syncer.state.changes()) == changes_before
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
