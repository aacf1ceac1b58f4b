"""A store write that fails mid-run (README "Vector stores": *One store, many processes*):
the run ends with one line naming the store and the cause, `status` says the index is behind,
and the next run applies the journal and converges to the index a sync done alone makes."""

from __future__ import annotations

import os
from pathlib import Path

from ragsync.testing import DevSite
from tests.support import example_pages, ragsync_cli, store_texts, write_cli_config

# Loaded at interpreter start (sitecustomize): the Edge binding fails on the Nth upsert as it
# does when another process truncated its files ("Failed to flush …").
FAILING_STORE = """
import os
from ragsync.connectors.qdrant_edge_store import QdrantEdgeStore

real, calls = QdrantEdgeStore.upsert, []

def upsert(self, points, **sparse):
    calls.append(1)
    if len(calls) == int(os.environ["FAIL_AT_UPSERT"]):
        raise Exception(
            "Service runtime error: Failed to flush vector_storage: Tracker journal is shorter "
            "than expected"
        )
    return real(self, points, **sparse)

QdrantEdgeStore.upsert = upsert
"""


def write_config(folder: Path, base: str) -> Path:
    return write_cli_config(
        folder,
        base,
        state=f'path = "{folder / "state.db"}"',
        store=f'kind = "qdrant_edge"\npath = "{folder / "edge"}"\ncollection = "docs"',
        extra="[embedder]\nbatch_size = 2",
    )


def test_a_store_write_that_fails_mid_run_is_one_line_and_the_journal_catches_up(tmp_path):
    site = DevSite(example_pages(100))  # two windows: the second one's upsert fails
    base = site.start()
    try:
        config = write_config(tmp_path / "run", base)
        hooks = tmp_path / "hooks"
        hooks.mkdir()
        (hooks / "sitecustomize.py").write_text(FAILING_STORE)
        root = str(Path(__file__).resolve().parents[2])
        path = os.pathsep.join([str(hooks), root, os.environ.get("PYTHONPATH", "")])
        failing = {**os.environ, "PYTHONPATH": path, "FAIL_AT_UPSERT": "2"}

        done = ragsync_cli("run", config=config, env=failing)
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        last = done.stderr.strip().splitlines()[-1]
        store = f"qdrant_edge {tmp_path / 'run' / 'edge'}, collection 'docs'"
        assert last == (
            f"ragsync: {store}: cannot upsert points: Service runtime error: Failed to flush "
            "vector_storage: Tracker journal is shorter than expected"
        ), done.stderr

        status = ragsync_cli("status", config=config)
        assert status.returncode == 0, status.stderr
        assert "the index is behind the state:" in status.stdout, status.stdout
        assert "finished with errors" in status.stdout  # the run an error ended

        again = ragsync_cli("run", config=config)
        assert again.returncode == 0, again.stderr
        assert "behind" not in ragsync_cli("status", config=config).stdout
        verified = ragsync_cli("verify", config=config)
        assert verified.returncode == 0, verified.stdout + verified.stderr

        alone = write_config(tmp_path / "alone", base)
        assert ragsync_cli("run", config=alone).returncode == 0
        assert store_texts(config) == store_texts(alone) and len(store_texts(alone)) >= 300
    finally:
        site.stop()
