"""The CLI as a user runs it: a real subprocess against a real site."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import page, ragsync_cli, sentences


def test_run_json_parses_and_its_counters_match_what_happened(tmp_path, site):
    config = tmp_path / "ragsync.toml"
    config.write_text(
        f'[[sources]]\nid = "docs"\nkind = "sitemap"\nevery = "0s"\n'
        f'url = "{site.base_url}/sitemap.xml"\n'
    )
    first = ragsync_cli("run", "--json", config=config)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert set(report) == {"run_id", "started_at", "finished_at", "ok", "counters", "sources"}
    pages = [h for h in site.page_hits()]
    counters = report["counters"]
    assert counters["requests_sent"] == len(site.hits)  # sitemap + robots + pages
    assert counters["responses_200_changed"] == len(pages) == 4
    assert counters["robots_disallowed"] == 1
    assert counters["points_upserted"] == counters["chunks_embedded"] == 16
    assert report["sources"]["docs"]["counters"] == counters

    site.set_page(
        "/guide/page-2",
        *page(
            "Guide 2: throttling",
            {
                "About throttling": [sentences("throttling")],
                "Tuning encryption": [sentences("encryption", 4)],
                "Limits of sharding": ["Sharding stops at 64 shards per collection."],
            },
            intro="This guide (number 2) covers throttling, encryption and sharding in depth for "
            "operators.",
        ),
    )
    site.remove_page("/guide/page-3")
    seen = len(site.hits)
    second = ragsync_cli("run", "--json", config=config)
    report = json.loads(second.stdout)
    counters = report["counters"]
    new_hits = site.hits[seen:]
    assert second.returncode == 0, report  # a 404 is missing evidence, not failed work
    assert counters["candidates_discovered"] == 4  # page-3 left the sitemap ...
    # 3 listed pages, page-3 (no longer listed, still verified by fetch), the sitemap and
    # robots.txt (both revalidated conditionally too):
    assert counters["conditional_requests_sent"] == 6
    assert counters["responses_304"] == 2  # pages only; robots.txt answered 304 as well
    assert counters["discovery_not_modified"] == 1
    assert sum(h.status == 304 for h in new_hits) == 3
    assert counters["responses_404"] == 1
    assert counters["responses_200_changed"] == 1
    assert counters["chunks_embedded"] == 1 and counters["points_upserted"] == 1
    assert counters["points_deleted"] == 1

    found = ragsync_cli("search", "Sharding stops at 64 shards", "-k", "2", "--json", config=config)
    hits = json.loads(found.stdout)
    assert found.returncode == 0 and len(hits) == 2
    assert hits[0]["url"].endswith("/guide/page-2")
    assert "64 shards" in hits[0]["text"]


def test_unknown_source_is_a_usage_error(tmp_path, site):
    config = tmp_path / "ragsync.toml"
    config.write_text(f'[[sources]]\nid = "docs"\nkind = "urls"\nurls = ["{site.base_url}/"]\n')
    proc = ragsync_cli("run", "--source", "nope", config=config)
    assert proc.returncode == 2 and "no source with id 'nope'" in proc.stderr


def test_a_run_that_embeds_nothing_never_imports_the_model_stack(tmp_path, site):
    config = tmp_path / "ragsync.toml"
    config.write_text(
        f'[[sources]]\nid = "docs"\nkind = "sitemap"\nevery = "0s"\n'
        f'url = "{site.base_url}/sitemap.xml"\n'
    )
    assert ragsync_cli("run", config=config).returncode == 0
    probe = (
        "import sys, ragsync\n"
        f"with ragsync.Syncer.from_config({str(config)!r}) as s:\n"
        "    r = s.run()\n"
        "print(r.counters.responses_304, 'torch' in sys.modules,"
        " 'sentence_transformers' in sys.modules, 'qdrant_client' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["4", "False", "False", "False"], out.stderr
