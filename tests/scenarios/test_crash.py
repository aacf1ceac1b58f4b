"""SIGKILL at several instants of a real `ragsync run`, then run again: the index must equal
what one uninterrupted run produces — no duplicate, orphan or missing point."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from ragsync.config import load_config
from ragsync.connectors.qdrant_store import QdrantStore
from ragsync.state import StateDB
from ragsync.testing import DevSite
from tests.support import example_pages, ragsync_run, state_table

CONFIG = """
[state]
{state}

[store]
kind = "qdrant"
path = "qdrant"
collection = "crash"

[embedder]
batch_size = 2

[fetch]
concurrency = 4

[[sources]]
id = "docs"
kind = "sitemap"
every = "0s"
url = "{base}/sitemap.xml"
"""


def write_config(folder: Path, base: str) -> Path:
    folder.mkdir()
    path = folder / "ragsync.toml"
    ((key, value),) = state_table(folder).items()
    path.write_text(CONFIG.format(base=base, state=f"{key} = {json.dumps(value)}"))
    return path


def index_of(folder: Path) -> tuple[dict[str, dict], set[str], int, int]:
    """(points without timestamps, state point ids, store point count, pending journal ops)."""
    config = load_config(folder / "ragsync.toml")
    store = QdrantStore.from_config(config.store)
    try:
        points = {}
        for pid, payload, _ in store.points():
            payload["metadata"].pop("last_changed_at")
            points[pid] = payload
        count = store.count()
    finally:
        store.close()
    state = StateDB.from_config(config.state)
    try:
        state_ids = {chunk.point_id for _, chunk in state.index.list_chunks()}
        pending = state.journal.count()
    finally:
        state.close()
    return points, state_ids, count, pending


def test_sigkill_at_several_instants_then_rerun_equals_an_uninterrupted_run(tmp_path):
    site = DevSite(example_pages(24))
    base = site.start()
    try:
        crashed = write_config(tmp_path / "crashed", base)
        reference = write_config(tmp_path / "reference", base)
        kills = [ragsync_run(crashed, kill_on="embedded 32/")]  # mid-embedding
        kills.append(ragsync_run(crashed, kill_on="committed"))  # between commit and apply
        left_pending = index_of(crashed.parent)[3]
        kills.append(ragsync_run(crashed, kill_on="applied"))  # right after replaying the journal
        kills.append(ragsync_run(crashed, kill_after=1.0 + (time.time() % 1)))  # anywhere
        assert kills[:3] == [-signal.SIGKILL] * 3, kills
        assert left_pending > 0  # the second kill really left operations in the journal
        assert ragsync_run(crashed) == 0
        assert ragsync_run(reference) == 0
    finally:
        site.stop()

    points, state_ids, count, pending = index_of(tmp_path / "crashed")
    expected, expected_state_ids, _, _ = index_of(tmp_path / "reference")
    assert pending == 0
    assert count == len(points) == len(expected)  # no duplicates
    assert set(points) == state_ids == expected_state_ids  # no orphans, nothing missing
    assert points == expected  # same payloads (timestamps aside)
