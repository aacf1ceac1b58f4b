"""The state DB: migrations, the one-transaction commit, the journal, the embedding cache."""

from __future__ import annotations

import sqlite3
import threading
import zlib

import pytest

from ragsync.config import StateConfig
from ragsync.errors import ConfigError, ResourceError, StateError
from ragsync.models import StoredChunk
from ragsync.state import MIGRATIONS, StateDB
from tests.support import TEST_STATE, state_target

# Run on both backends: RAGSYNC_TEST_STATE=postgres puts the same tests on PostgreSQL.
INTEGRITY_ERRORS: tuple[type[Exception], ...] = (sqlite3.IntegrityError,)
if TEST_STATE == "postgres":
    import psycopg

    INTEGRITY_ERRORS += (psycopg.IntegrityError,)


@pytest.fixture
def target(tmp_path):
    return state_target(tmp_path)


@pytest.fixture
def state(target):
    db = StateDB(target)
    yield db
    db.close()


def doc(key="docs:https://x/a", **extra):
    return {
        "doc_key": key,
        "source_id": "docs",
        "canonical_url": "https://x/a",
        "title": "A",
        "status": "active",
        "first_seen_at": "t0",
        "content_hash": "h1",
        **extra,
    }


def chunk(pid="p1", text="hello"):
    return StoredChunk(pid, 0, "c" + pid, text, ("A",), 1, "t0")


def test_migrations_are_named_ordered_and_applied_once(state):
    assert [r["name"] for r in state.db["_migrations"].rows] == [n for n, _ in MIGRATIONS]
    assert state.migrate() == []
    if not state.postgres:
        assert state.db.journal_mode == "wal"
    assert {
        "documents",
        "fetch_attempts",
        "chunks",
        "embedding_cache",
        "journal",
        "runs",
        "changes",
    } <= set(state.db.table_names())


def test_a_db_from_a_newer_ragsync_is_refused(target, state):
    state.db["_migrations"].insert({"name": "999_future", "applied_at": "x"})
    state.close()
    with pytest.raises(StateError, match="newer ragsync"):
        StateDB(target)


def test_commit_document_is_all_or_nothing(state):
    state.index.commit_document(doc(), [chunk()], [{"op": "upsert", "point_id": "p1"}], None)
    with pytest.raises(INTEGRITY_ERRORS):
        # A journal row without its point id violates NOT NULL: nothing of this commit lands.
        state.index.commit_document(doc(title="B"), [chunk("p2")], [{"op": "upsert"}], None)
    assert state.documents.get("docs:https://x/a")["title"] == "A"
    assert [c.point_id for c in state.index.get_chunks("docs:https://x/a")] == ["p1"]
    assert state.journal.count() == 1


def test_journal_order_and_mark_done(state):
    ops = [
        {"op": "delete", "point_id": "old"},
        {"op": "upsert", "point_id": "new", "payload": {"page_content": "x"}},
    ]
    state.index.commit_document(doc(), [chunk()], ops, None)
    pending = state.journal.pending()
    assert [(op.op, op.point_id) for op in pending] == [("delete", "old"), ("upsert", "new")]
    assert pending[1].payload == {"page_content": "x"}
    state.journal.remove([pending[0].seq])
    assert [op.point_id for op in state.journal.pending()] == ["new"]


def test_failures_never_touch_the_last_good_content(state):
    state.index.commit_document(doc(), [chunk()], [], None)
    key, url = "docs:https://x/a", "https://x/a"
    state.attempts.add(
        key,
        url,
        source_id="docs",
        status=503,
        error="HTTP 503",
        at="t1",
        state="retrying",
        next_retry_at="t5",
    )
    state.attempts.add(
        key,
        url,
        source_id="docs",
        status=None,
        error="timeout",
        at="t2",
        state="retrying",
        next_retry_at="t9",
        body=b"<html>raw</html>",
    )
    assert state.documents.get(key)["content_hash"] == "h1"
    attempt = state.attempts.get(key)
    assert (attempt["attempts"], attempt["first_failed_at"], attempt["last_error"]) == (
        2,
        "t1",
        "timeout",
    )
    assert zlib.decompress(attempt["body"]) == b"<html>raw</html>"
    assert state.attempts.held_back("docs", "t8") == {key}
    assert state.attempts.held_back("docs", "t9z") == set()
    state.documents.mark_checked([(key, "t10", {"etag": '"e2"', "last_modified": None})])
    assert state.attempts.get(key) is None
    document = state.documents.get(key)
    assert (document["last_checked_at"], document["etag"], document["status"]) == (
        "t10",
        '"e2"',
        "active",
    )
    assert document["content_hash"] == "h1"  # untouched
    assert set(state.documents.get_many([key, "docs:nope"])) == {key}


def test_dead_and_attention_pages_are_held_back_until_asked(state):
    for key, kind in (("docs:a", "dead"), ("docs:b", "attention"), ("docs:c", "refused")):
        state.attempts.add(key, key, source_id="docs", status=None, error="x", at="t", state=kind)
    assert state.attempts.held_back("docs", "t") == {"docs:a", "docs:b"}
    assert state.attempts.held_back("other", "t") == set()


def test_host_pauses_persist(target, state):
    state.hosts.pause("http://x.org", 1234.5, "HTTP 429", "t")
    state.close()
    again = StateDB(target)
    assert again.hosts.list_pauses() == {"http://x.org": 1234.5}
    again.close()


def test_a_host_is_distrusted_at_its_third_lie_until_shown_right(state):
    host, other = "http://x.org", "http://y.org"
    state.hosts.pause(other, 1.0, "HTTP 429", "t")  # a row already there for another reason
    assert state.hosts.watched() == {}
    assert state.hosts.caught_lie(host, "http://x.org/a", at="t1", distrust_after=3) == 1
    assert state.hosts.caught_lie(other, "http://y.org/a", at="t1", distrust_after=3) == 1
    assert state.hosts.watched() == {host: False, other: False}
    state.hosts.caught_lie(host, "http://x.org/b", at="t2", distrust_after=3)
    assert state.hosts.caught_lie(host, "http://x.org/c", at="t3", distrust_after=3) == 3
    state.hosts.caught_lie(host, "http://x.org/d", at="t4", distrust_after=3)
    assert state.hosts.watched() == {host: True, other: False}
    assert state.hosts.list_validators()[0] == {
        "host": host,
        "lies": 4,
        "last_lie_url": "http://x.org/d",
        "last_lie_at": "t4",
        "distrusted_since": "t3",  # when the third came, not moved on by the fourth
    }
    state.hosts.shown_right([host, "http://never-seen.org"])
    assert state.hosts.watched() == {other: False}
    assert state.hosts.list_pauses() == {other: 1.0}  # its pause untouched


def test_embedding_cache_roundtrip(state):
    assert state.embeddings.missing(["a", "b"], "m") == {"a", "b"}
    state.embeddings.put("m", {"a": [0.5, -1.0, 2.0]}, "t")
    assert state.embeddings.missing(["a", "b"], "m") == {"b"}
    assert state.embeddings.missing(["a"], "other-model") == {"a"}
    assert state.embeddings.get_many(["a"], "m") == {"a": [0.5, -1.0, 2.0]}


def test_a_second_commit_updates_the_given_columns_and_keeps_the_others(state):
    # put_rows: "update" on a taken key writes the columns given and leaves the rest; the
    # embedding cache's rewrite replaces the vector; a plain insert of a taken key fails.
    state.index.commit_document(doc(markdown="# A", lastmod_hint="2026-01-01"), [chunk()], [], None)
    state.index.commit_document(doc(title="B"), [chunk("p2", "bye")], [], None)
    stored = state.documents.get("docs:https://x/a")
    assert (stored["title"], stored["markdown"], stored["lastmod_hint"]) == (
        "B",
        "# A",
        "2026-01-01",
    )
    assert [c.text for c in state.index.get_chunks("docs:https://x/a")] == ["bye"]
    state.embeddings.put("m", {"a": [1.0]}, "t1")
    state.embeddings.put("m", {"a": [2.0]}, "t2")
    assert state.embeddings.get_many(["a"], "m") == {"a": [2.0]}
    with pytest.raises(INTEGRITY_ERRORS):
        state.put_rows("chunks", [{"point_id": "p2", "doc_key": "docs:https://x/a"}])
    assert [c.point_id for c in state.index.get_chunks("docs:https://x/a")] == ["p2"]


def test_a_postgres_url_takes_its_password_from_the_environment_and_never_shows_it(monkeypatch):
    monkeypatch.delenv("RAGSYNC_NO_SUCH_PASSWORD", raising=False)
    config = StateConfig(url="postgresql://ragsync:${RAGSYNC_NO_SUCH_PASSWORD}@db/ragsync")
    with pytest.raises(ConfigError, match="state.url.*RAGSYNC_NO_SUCH_PASSWORD"):
        StateDB.from_config(config)
    with pytest.raises(ResourceError, match="cannot connect") as failed:
        StateDB("postgresql://ragsync:s3cret@127.0.0.1:9/ragsync", connect_timeout=0.5)
    message = str(failed.value)
    assert "s3cret" not in message and "PostgreSQL 127.0.0.1:9/ragsync (the state DB)" in message


def test_opening_a_fresh_sqlite_db_waits_for_another_process_creating_it(tmp_path):
    """Switching a new file to WAL needs it alone; SQLite says "locked" at once while another
    connection writes (two runs started together on a new state): opening waits instead."""
    path = tmp_path / "state.db"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    other.execute("CREATE TABLE creating (x)")
    release = threading.Timer(0.3, lambda: other.execute("COMMIT"))
    release.start()
    try:
        state = StateDB(str(path))
        assert state.migrate() == []  # opened, migrated, and the other writer's table is there
        assert "creating" in state.db.table_names()
        state.close()
    finally:
        release.join()
        other.close()


def test_readers_in_other_threads_never_break_or_see_half_a_write(state):
    """Threads of a process read while another writes (fetch threads and robots.txt's cache,
    `serve`'s receiver threads beside its sync): on SQLite they share one connection, and
    sqlite-utils wraps each read in a savepoint."""
    problems: list[str] = []
    done = threading.Event()

    def write_pairs() -> None:
        try:
            for n in range(300):
                with state.write():
                    for side in ("a", "b"):
                        state.discovery.put_checkpoint(f"{side}{n}", n, "t0")
        except Exception as exc:  # noqa: BLE001 - reported below
            problems.append(f"writer: {type(exc).__name__}: {exc}")
        finally:
            done.set()

    def read_counts() -> None:
        try:
            while not done.is_set():
                rows = list(state.db.query("select count(*) as n from checkpoints"))
                if rows[0]["n"] % 2:
                    problems.append(f"a reader saw half a transaction ({rows[0]['n']} rows)")
                    return
        except Exception as exc:  # noqa: BLE001 - reported below
            problems.append(f"reader: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=write_pairs)]
    threads += [threading.Thread(target=read_counts) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert problems == []
    assert state.discovery.get_checkpoint("b299") == 299
