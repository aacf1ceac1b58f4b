"""What a new user meets: init, the public API, and errors that name the problem and the fix."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

import ragsync
from ragsync.config import load_config


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


def test_public_api_is_frozen():
    assert sorted(ragsync.__all__) == [
        "Change",
        "Config",
        "ConfigError",
        "Counters",
        "ExtractError",
        "FetchError",
        "Hit",
        "RagsyncError",
        "StateError",
        "StoreError",
        "SyncResult",
        "Syncer",
        "__version__",
        "load_config",
    ]
    for name in ragsync.__all__:
        assert getattr(ragsync, name) is not None


def test_async_twins_do_not_block_the_event_loop(site, make_syncer):
    syncer = make_syncer(site)

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        result = await syncer.arun()
        hits = await syncer.asearch("throttling", k=2)
        task.cancel()
        return result, hits, ticks

    result, hits, ticks = asyncio.run(main())
    assert result.ok and len(hits) == 2
    assert ticks > 10  # the loop kept running while the sync worked


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


def test_qdrant_folder_held_by_another_process_says_what_to_do(tmp_path, site, make_syncer):
    syncer = make_syncer(site)
    syncer.run()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from qdrant_client import QdrantClient; "
            f"c = QdrantClient(path={str(tmp_path / 'qdrant')!r}); print('ready', flush=True); "
            "time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(ragsync.StoreError, match="another process.*store\\] url"):
            syncer.search("throttling")
    finally:
        holder.kill()
        holder.wait()


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
