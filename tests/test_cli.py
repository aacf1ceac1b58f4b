"""The CLI as a user runs it: a real subprocess against a real site; ``init``, and errors that
name the problem and the fix."""

from __future__ import annotations

import json
import subprocess
import sys

from ragsync.config import load_config
from ragsync.models import Hit
from ragsync.render import render_hit
from tests.support import page, ragsync_cli, sentences


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


def cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "ragsync", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_init_writes_a_starter_that_loads_and_refuses_to_overwrite(tmp_path):
    target = tmp_path / "ragsync.toml"
    first = cli("init", str(target))
    assert first.returncode == 0 and "ragsync run" in first.stderr
    config = load_config(target)
    assert config.sources[0].id == "docs" and config.sources[0].kind == "sitemap"
    target.write_text("# mine\n")
    again = cli("init", str(target))
    assert again.returncode == 2 and "--force" in again.stderr
    assert target.read_text() == "# mine\n"
    assert cli("init", str(target), "--force").returncode == 0
    assert "[[sources]]" in target.read_text()


def test_missing_config_names_the_fix(tmp_path):
    proc = cli("run", cwd=tmp_path)
    assert proc.returncode == 2
    assert "ragsync.toml" in proc.stderr and "ragsync init" in proc.stderr


def test_wrong_embedder_name_names_the_key(tmp_path):
    path = tmp_path / "ragsync.toml"
    path.write_text(
        '[embedder]\nmodel = "bert-base-nonexistent"\n[[sources]]\nid = "d"\n'
        'kind = "urls"\nurls = ["http://127.0.0.1:9/"]\n'
    )
    proc = cli("search", "x", "-c", str(path))
    assert proc.returncode == 2
    assert "embedder.model" in proc.stderr and "no model hub" in proc.stderr


def test_progress_bars_on_a_terminal_never_mix_with_json(tmp_path, site):
    import json
    import os
    import pty

    config = tmp_path / "ragsync.toml"
    config.write_text(
        f'[[sources]]\nid = "docs"\nkind = "sitemap"\nevery = "0s"\n'
        f'url = "{site.base_url}/sitemap.xml"\n'
    )
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragsync", "run", "--json", "-c", str(config)],
        stdout=subprocess.PIPE,
        stderr=follower,
        env={**os.environ, "COLUMNS": "120"},
    )
    os.close(follower)
    terminal = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        terminal += chunk
    stdout, _ = proc.communicate(timeout=120)
    os.close(leader)
    report = json.loads(stdout)  # stdout is pure JSON
    assert report["counters"]["documents_created"] == 4
    screen = terminal.decode("utf-8", "replace")
    assert "pages checked" in screen and "texts embedded" in screen
    assert "5/5" in screen and "16/16" in screen  # 5 pages checked (1 disallowed), 16 texts


def test_a_search_hit_shows_both_rankings_scores_and_the_other_pages_holding_it():
    hit = Hit(0.2, "text", "https://d/fs.html", "fs", ("fs",), "s", "d", "p", dense_score=0.6)
    assert "1. 0.200 (dense 0.600, sparse —)  fs" in render_hit(1, hit)  # one ranking found it
    both = Hit(0.3, "text", "https://d/fs.html", "fs", (), "s", "d", "p", 0.6, 12.0)
    assert "(dense 0.600, sparse 12.000)" in render_hit(1, both)
    dense = Hit(0.6, "text", "https://d/fs.html", "fs", (), "s", "d", "p", dense_score=0.6)
    assert render_hit(1, dense).startswith("1. 0.600  fs\n")  # a single mode: its own score
    held = Hit(0.6, "t", "https://d/fs.html", "fs", (), "s", "d", "p", also=("https://d/all.html",))
    assert "   also on https://d/all.html\n" in render_hit(1, held)
