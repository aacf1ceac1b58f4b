"""`ragsync verify [--repair]` and `ragsync status` (issue #4)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

from ragsync.testing import DevSite
from tests.support import page, sentences


def test_verify_detects_and_repairs_drift_behind_ragsyncs_back(site, make_syncer, embedder):
    syncer = make_syncer(site)
    syncer.run()
    assert syncer.verify().clean
    points = {pid: p for pid, p, _ in syncer.store.points()}
    victim, drifted = sorted(points)[:2]
    intruder = str(uuid.uuid4())
    syncer.store.delete([victim])  # a point deleted behind ragsync's back
    syncer.store.upsert([(intruder, [0.1] * 384, {"page_content": "spam", "metadata": {}})])
    syncer.store.set_payload([(drifted, {"page_content": "tampered", "metadata": {}})])
    syncer.store.close()
    # ... and a journal entry left unfinished by a crash
    doc_key, chunk = syncer.state.index.list_chunks()[-1]
    syncer.state.journal.add(
        [
            {
                "op": "set_payload",
                "point_id": chunk.point_id,
                "doc_key": doc_key,
                "payload": points[chunk.point_id],
            }
        ]
    )

    report = syncer.verify()
    assert (report.missing, report.orphans, report.drift) == ([victim], [intruder], [drifted])
    assert report.pending_journal == 1 and not report.clean

    embedder.texts.clear()
    repaired = syncer.verify(repair=True)
    assert repaired.repaired and embedder.texts == []  # vectors came from the cache
    assert syncer.verify().clean
    assert {pid: p for pid, p, _ in syncer.store.points()} == points
    syncer.store.close()


def test_verify_repair_embeds_only_what_the_cache_lacks(site, make_syncer, embedder):
    syncer = make_syncer(site)
    syncer.run()
    pid = sorted(pid for pid, _, _ in syncer.store.points())[0]
    syncer.store.delete([pid])
    syncer.store.close()
    with syncer.state.write():
        syncer.state.db.execute("delete from embedding_cache")
    embedder.texts.clear()
    assert syncer.verify(repair=True).repaired
    assert len(embedder.texts) == 1
    assert syncer.verify().clean


def test_status_lists_what_fails_since_when_and_why(tmp_path, embedder):
    site = DevSite(
        {
            "/ok": page("OK", {"S": [sentences("fine")]}),
            "/locked": page("Locked", {"S": [sentences("locked")]}),
            "/flaky": page("Flaky", {"S": [sentences("flaky")]}),
            "/gone": page("Gone", {"S": [sentences("gone")]}),  # listed, never indexed: 404
        }
    )
    site.start()
    try:
        config = tmp_path / "ragsync.toml"
        config.write_text(
            f'[[sources]]\nid = "docs"\nkind = "sitemap"\nurl = "{site.base_url}/sitemap.xml"\n'
            "[fetch]\nretry_attempts = 1\n"
        )
        site.fault = lambda path, headers: {
            "/locked": (403, {}, b"no"),
            "/flaky": (502, {}, b"bad gateway"),
            "/gone": (404, {}, b"not found"),
        }.get(path)
        run = subprocess.run(
            [sys.executable, "-m", "ragsync", "run", "-c", str(config)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 1
        out = subprocess.run(
            [sys.executable, "-m", "ragsync", "status", "--json", "-c", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        status = json.loads(out.stdout)
        docs = status["sources"]["docs"]
        assert docs["documents"]["active"] == 1
        assert docs["failing"] == {"attention": 1, "dead": 1, "missing": 1}
        [gone] = docs["missing"]  # named: a broken link or a listed URL that is gone
        assert gone["url"].endswith("/gone") and gone["last_status"] == 404
        [dead] = docs["dead_letter"]
        assert dead["url"].endswith("/flaky") and dead["last_status"] == 502
        assert dead["reason"] == "HTTP 502" and dead["since"]
        assert docs["needs_attention"][0]["url"].endswith("/locked")
        assert status["last_run"]["ok"] is False
        assert docs["points_in_store"] == status["points_in_store"] > 0
        assert docs["lag_seconds"] == 0.0
        human = subprocess.run(
            [sys.executable, "-m", "ragsync", "status", "-c", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        assert "dead letter (1)" in human and "needs attention (1)" in human
        assert "HTTP 502" in human and "/flaky" in human
        assert "not found, never indexed (1)" in human and "/gone: HTTP 404" in human

        site.pages.pop("/gone")  # the broken link is gone from the listing: no longer named
        subprocess.run(
            [sys.executable, "-m", "ragsync", "run", "--all", "-c", str(config)],
            capture_output=True,
            timeout=120,
        )
        out = subprocess.run(
            [sys.executable, "-m", "ragsync", "status", "--json", "-c", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert json.loads(out.stdout)["sources"]["docs"]["missing"] == []
    finally:
        site.stop()
