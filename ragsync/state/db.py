"""The state DB: the source of truth. SQLite through sqlite-utils (WAL mode) by default, or
PostgreSQL (:mod:`ragsync.state.postgres`) when many workers share it.

Every other store (the vector index) is a projection of this one, written only through the
journal: a document's new state, its chunk list, its change-log row and the vector-store
operations it implies are committed in one transaction
(:meth:`ragsync.state.index.Index.commit_document`); the operations are applied afterwards and
deleted once done, so a crash at any instant is repaired by replaying what is left.

:class:`StateDB` holds the connection, transactions, locks and migrations; what the tables hold
is read and written through its repositories (``state.documents``, ``state.journal``, …). All
SQL lives in this package and runs unchanged on both backends (``?`` placeholders, standard
SQL); the PostgreSQL backend provides the few sqlite-utils calls used here.
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
import threading
import time
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ragsync.clock import iso
from ragsync.config import StateConfig, resolve_env_url
from ragsync.errors import StateError
from ragsync.resources import sqlite_resource_error
from ragsync.state.aliases import Aliases
from ragsync.state.attempts import Attempts
from ragsync.state.crawl import CrawlLinks
from ragsync.state.discovery import Discovery
from ragsync.state.documents import Documents
from ragsync.state.embeddings import Embeddings
from ragsync.state.hosts import Hosts
from ragsync.state.index import Index
from ragsync.state.journal import Journal
from ragsync.state.leases import Leases
from ragsync.state.migrations import MIGRATIONS
from ragsync.state.outbox import Outbox
from ragsync.state.runs import Runs
from ragsync.state.sql import OnConflict, insert_sql, row_params
from ragsync.state.targets import Targets
from ragsync.state.terms import Terms
from ragsync.state.work import WorkQueue


@contextlib.contextmanager
def _unimportable(*names: str) -> Iterator[None]:
    """Within the block, ``import name`` raises ImportError for each of ``names`` not imported
    yet (a None entry in ``sys.modules``); afterwards they import as usual."""
    hidden = [name for name in names if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in hidden:
            if sys.modules.get(name, ...) is None:
                del sys.modules[name]


# sqlite-utils imports numpy and pandas when they are installed, only to map their scalar types
# to column types when it creates or alters a table from Python values; ragsync's tables are
# made by its migrations (SQL), so that mapping is never used, and numpy is most of the import
# time of a run with nothing due (README "Architecture": such a run loads no model).
with _unimportable("numpy", "pandas"):
    from sqlite_utils import Database


T = TypeVar("T")


class SharedConnection(Database):
    """sqlite-utils' ``Database`` over the one connection every thread of a process shares.

    sqlite-utils runs each ``query()`` inside a savepoint, and ``execute()`` may commit what
    it began. From two threads at once, a reader's savepoint could open a transaction that a
    writer then takes for its own, or release (commit) a writer's savepoint midway: "no such
    savepoint". So every call holds ``lock``, the lock a writer holds for its whole
    transaction (:meth:`StateDB.write`): a reader in another thread waits for the
    transaction to end, and never sees it half done.
    """

    def __init__(self, conn: sqlite3.Connection, lock: threading.RLock, path: str) -> None:
        self.lock = lock
        self.path = path
        super().__init__(conn)

    def query(self, sql: str, params: Any = None) -> Generator[dict[str, Any], None, None]:
        with self.lock:
            return super().query(sql, params)

    def execute(self, sql: str, parameters: Any = None) -> sqlite3.Cursor:
        with self.lock:
            try:
                return super().execute(sql, parameters)
            except sqlite3.Error as exc:  # a full device: one line naming this file
                found = sqlite_resource_error(exc, self.path)
                if found is None:
                    raise
                raise found from exc


OPEN_WAIT = 30.0  # seconds: how long opening waits for another process's write lock
BATCH = 500  # keys per ``IN (...)``: far below SQLite's and PostgreSQL's parameter limits


def batched(keys: Sequence[T], size: int = BATCH) -> Iterator[list[T]]:
    """``keys`` in consecutive lists of at most ``size``, in order.

    Example::

        >>> list(batched(["a", "b", "c"], 2))
        [['a', 'b'], ['c']]
        >>> list(batched([], 2))
        []
    """
    for start in range(0, len(keys), size):
        yield list(keys[start : start + size])


class StateDB:
    """The ragsync state DB: a SQLite file at ``target`` (``":memory:"`` for tests), or a
    PostgreSQL database when ``target`` is a ``postgresql://`` URL.

    Its tables are reached through repositories, one per group of tables: ``documents``,
    ``aliases``, ``attempts``, ``index`` (chunks, raw bodies, collections and the per-document
    commit), ``embeddings``, ``journal``, ``targets`` (the targeted queue), ``work`` (the work
    queue), ``leases``, ``hosts``, ``discovery``, ``outbox`` and ``runs`` (runs, the source
    schedule and the change log).

    Raises:
        StateError: the DB cannot be opened, or was written by a newer ragsync.
    """

    def __init__(self, target: str | Path, *, pool_size: int = 4, connect_timeout: float = 15.0):
        self.path = str(target)
        self.postgres = self.path.startswith(("postgresql://", "postgres://"))
        # SQLite: held by a writer for its whole transaction, and by any other statement
        self._connection_lock = threading.RLock()
        self.documents = Documents(self)
        self.aliases = Aliases(self)
        self.attempts = Attempts(self)
        self.index = Index(self)
        self.embeddings = Embeddings(self)
        self.terms = Terms(self)
        self.journal = Journal(self)
        self.targets = Targets(self)
        self.work = WorkQueue(self)
        self.leases = Leases(self)
        self.hosts = Hosts(self)
        self.discovery = Discovery(self)
        self.outbox = Outbox(self)
        self.runs = Runs(self)
        self.crawl_links = CrawlLinks(self)
        self.db: Any
        if self.postgres:
            from ragsync.state.postgres import PgDatabase, redact

            self.path = redact(self.path)  # what messages show
            self.db = PgDatabase(str(target), pool_size=pool_size, connect_timeout=connect_timeout)
            self.migrate()
            return
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=OPEN_WAIT, check_same_thread=False)
            self.db = SharedConnection(conn, self._connection_lock, self.path)
            self._prepare()
        except sqlite3.DatabaseError as exc:
            raise StateError(f"{self.path}: cannot open the state DB: {exc}") from exc

    def _prepare(self) -> None:
        """WAL mode and migrations, waiting up to ``OPEN_WAIT`` for another process doing
        the same: switching a fresh file to WAL needs it alone, and SQLite answers "database
        is locked" at once, without its busy wait, while another connection is writing (two
        runs started together on a new state DB)."""
        deadline = time.monotonic() + OPEN_WAIT
        while True:
            try:
                if self.path != ":memory:":
                    self.db.enable_wal()
                self.db.execute("PRAGMA synchronous=NORMAL")
                self.migrate()
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    @classmethod
    def from_config(cls, config: StateConfig) -> StateDB:
        """The state DB a ``[state]`` table names (``url`` wins over ``path``)."""
        if config.url:
            url = resolve_env_url(config.url, key="state.url")  # a password percent-encoded
            return cls(url or "", pool_size=config.pool_size)
        return cls(config.path)

    def close(self) -> None:
        self.db.close()

    def wait_for_writers_at_most(self, seconds: float) -> None:
        """From now on, wait at most ``seconds`` for another connection's write lock, then
        fail with ``sqlite3.OperationalError`` ("database is locked"); opening the DB waits
        30 s. SQLite only (its busy timeout): on PostgreSQL the caller bounds the wait."""
        if not self.postgres:
            self.db.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")

    @contextlib.contextmanager
    def write(self) -> Iterator[None]:
        """A write transaction; nested use is a savepoint.

        On SQLite it takes the write lock up front (BEGIN IMMEDIATE): a deferred transaction
        that reads, then writes, fails at once with "database is locked" when another
        connection (the `serve` receiver, a second process) wrote in between; an immediate one
        waits for the lock instead. On PostgreSQL it pins one pooled connection to the thread.
        """
        if self.postgres:
            with self.db.transaction():
                yield
            return
        # One connection serves every thread of the process: one writer at a time, so that a
        # transaction open in one thread is never mistaken by another for its own (and a
        # statement of another thread waits for it: SharedConnection).
        with self._connection_lock:
            if self.db.conn.in_transaction:
                with self.db.atomic():
                    yield
                return
            try:
                self.db.conn.execute("BEGIN IMMEDIATE")
                try:
                    yield
                except BaseException:
                    self.db.conn.rollback()
                    raise
                else:
                    self.db.conn.execute("COMMIT")
            except sqlite3.Error as exc:  # a full device: one line naming this file
                found = sqlite_resource_error(exc, self.path)
                if found is None:
                    raise
                raise found from exc

    def lock(self, name: str) -> None:
        """Within a write transaction: exclude other writers of ``name`` until it ends
        (an advisory lock on PostgreSQL; SQLite's write lock already excludes every writer)."""
        if self.postgres:
            self.db.lock(name)

    @property
    def for_update(self) -> str:
        """Row locks on PostgreSQL; SQLite's write transaction already excludes everyone."""
        return " for update" if self.postgres else ""

    def query_in(
        self, sql: str, keys: Sequence[Any], args: Sequence[Any] = ()
    ) -> Iterator[dict[str, Any]]:
        """The rows of ``sql`` over many keys, one query per :data:`BATCH` keys: ``{marks}``
        in ``sql`` stands for the batch's placeholders, and the parameters are ``args``, then
        the batch."""
        for batch in batched(keys):
            yield from self.db.query(sql.format(marks=",".join("?" * len(batch))), [*args, *batch])

    def execute_in(self, sql: str, keys: Sequence[Any], args: Sequence[Any] = ()) -> int:
        """Run ``sql`` (an update or delete, ``{marks}`` as in :meth:`query_in`) over many keys
        in one write transaction; return the rows it changed."""
        changed = 0
        with self.write():
            for batch in batched(keys):
                marks = ",".join("?" * len(batch))
                changed += self.db.execute(sql.format(marks=marks), [*args, *batch]).rowcount
        return changed

    def put_rows(
        self,
        table: str,
        rows: Iterable[Mapping[str, Any]],
        *,
        key: Sequence[str] = (),
        on_conflict: OnConflict = "fail",
    ) -> None:
        """Insert ``rows`` into ``table`` with one prepared statement, in the caller's write
        transaction or one of its own; a row whose ``key`` is taken fails, is ignored or
        updates the stored one (:func:`ragsync.state.sql.insert_sql`).

        The per-document writes go through here rather than sqlite-utils' ``insert_all``,
        which reads the table's schema on every call (three PRAGMA queries): that was most of
        the cost of committing a page (README "Architecture").
        """
        columns, params = row_params(rows)
        if not params:
            return
        sql = insert_sql(table, columns, key, on_conflict)
        if self.postgres:
            if self.db.in_transaction:  # the caller's: no savepoint, a round trip each
                self.db.execute_many(sql, params)
                return
            with self.write():
                self.db.execute_many(sql, params)
            return
        # SQLite: the lock is the writer's for its whole transaction, so an open transaction
        # seen while holding it is this thread's own (StateDB.write): joined, no savepoint.
        with self._connection_lock:
            if self.db.conn.in_transaction:
                self.db.conn.executemany(sql, params)
                return
            with self.write():
                self.db.conn.executemany(sql, params)

    def copy_to(self, path: str | Path) -> StateDB:
        """A SQLite copy of this state at ``path`` (the throwaway state of a dry run)."""
        copy = StateDB(path)
        if not self.postgres:
            self.db.conn.backup(copy.db.conn)
            return copy
        with copy.write():
            for name in self.db.table_names():
                if name != "_migrations" and copy.db.table(name).exists():
                    rows = self.db.table(name).rows
                    copy.db.execute(f"delete from [{name}]")
                    copy.db.table(name).insert_all(rows)
        return copy

    def migrate(self) -> list[str]:
        """Apply the named migrations not applied yet, in order, in one transaction that other
        processes starting at the same moment wait for; return their names."""
        table = self.db.table("_migrations")
        with self.write():
            self.lock("ragsync-migrations")
            if not table.exists():
                table.create({"name": str, "applied_at": str}, pk="name")
            done = {row["name"] for row in table.rows}
            known = {name for name, _ in MIGRATIONS}
            if done - known:
                raise StateError(
                    f"{self.path}: written by a newer ragsync (unknown migrations: "
                    f"{', '.join(sorted(done - known))})"
                )
            applied = []
            for name, migration in MIGRATIONS:
                if name not in done:
                    migration(self.db)
                    table.insert({"name": name, "applied_at": iso(time.time())})
                    applied.append(name)
        return applied
