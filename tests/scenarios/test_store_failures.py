"""A store write that fails mid-run (README "Vector stores": *One store, many processes*):
the run ends with one line naming the store and the cause, `status` says the index is behind,
and the next run applies the journal and converges to the index a sync done alone makes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from ragsync.config import load_config
from ragsync.registry import open_store
from ragsync.testing import DevSite
from tests.support import example_pages

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
    folder.mkdir()
    path = folder / "ragsync.toml"
    path.write_text(
        textwrap.dedent(
            f"""
            [state]
            path = "{folder / "state.db"}"

            [store]
            kind = "qdrant_edge"
            path = "{folder / "edge"}"
            collection = "docs"

            [embedder]
            batch_size = 2

            [[sources]]
            id = "docs"
            kind = "sitemap"
            every = "0s"
            url = "{base}/sitemap.xml"
            """
        )
    )
    return path


def cli(*args: str, config: Path, env: dict[str, str] | None = None):
    return subprocess.run(
        [sys.executable, "-m", "ragsync", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def index_of(config: Path) -> dict[str, str]:
    store = open_store(load_config(config).store)
    try:
        return {pid: payload["page_content"] for pid, payload, _ in store.points()}
    finally:
        store.close()


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

        done = cli("run", config=config, env=failing)
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        last = done.stderr.strip().splitlines()[-1]
        store = f"qdrant_edge {tmp_path / 'run' / 'edge'}, collection 'docs'"
        assert last == (
            f"ragsync: {store}: cannot upsert points: Service runtime error: Failed to flush "
            "vector_storage: Tracker journal is shorter than expected"
        ), done.stderr

        status = cli("status", config=config)
        assert status.returncode == 0, status.stderr
        assert "the index is behind the state:" in status.stdout, status.stdout
        assert "finished with errors" in status.stdout  # the run an error ended

        again = cli("run", config=config)
        assert again.returncode == 0, again.stderr
        assert "behind" not in cli("status", config=config).stdout
        verified = cli("verify", config=config)
        assert verified.returncode == 0, verified.stdout + verified.stderr

        alone = write_config(tmp_path / "alone", base)
        assert cli("run", config=alone).returncode == 0
        assert index_of(config) == index_of(alone) and len(index_of(alone)) >= 300
    finally:
        site.stop()
