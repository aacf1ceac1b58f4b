"""One run at a time per state DB (README "Run lock").

A pass (`ragsync run`, `reindex`, `verify --repair`, `resync`, each pass of `serve`) holds the
state's *exclusive* lock; each `ragsync worker` holds a *shared* one, so workers run side by side
but never beside a pass. The lock is a lease row in the state DB itself, renewed by a heartbeat
thread: a holder that dies stops renewing it and the lease runs out (``lease`` seconds), and a
holder on this machine whose process is gone is released at once. Whoever takes the lock closes
the run rows of holders that are gone as "interrupted".
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from ragsync.clock import iso
from ragsync.errors import RagsyncError, StateError

log = logging.getLogger("ragsync")

RUN_LEASE = 60.0  # seconds a lock outlives its holder's last heartbeat


class RunLocked(StateError):
    """Another process holds the state: a pass (exclusive) or workers (shared).

    ``holders`` lists them: ``{"name", "owner", "host", "pid", "started_at"}``.
    """

    def __init__(self, state_path: str, holders: list[dict[str, Any]]):
        self.holders = holders
        super().__init__(
            f"{state_path}: held by {describe(holders)}; nothing was done "
            "(wait for it, or use --wait)"
        )


def describe(holders: list[dict[str, Any]]) -> str:
    """The holders of a state, as messages name them: "a run (pid 12 on host, since …)"."""
    names = []
    for holder in holders[:3]:
        what = "workers" if holder["name"].startswith("worker:") else "a run"
        where = f"pid {holder['pid']} on {holder['host']}" if holder["pid"] else holder["owner"]
        names.append(f"{what} ({where}, since {holder['started_at']})")
    more = f" and {len(holders) - 3} more" if len(holders) > 3 else ""
    return ", ".join(names) + more


def heartbeat(stop: threading.Event, every: float, renew: Callable[[], object], what: str) -> None:
    """Call ``renew`` every ``every`` seconds until ``stop`` is set. A failed beat is logged
    once, as one line (a bug with its traceback), until a beat succeeds again: a database
    server that went away ends the run with its own message, not a warning per beat."""
    failing = False
    while not stop.wait(every):
        try:
            renew()
        except Exception as exc:  # a busy or lost connection: the next beat tries again
            if not failing:
                log.warning(
                    "%s: heartbeat failed (the next beats try again): %s",
                    what,
                    exc,
                    exc_info=not isinstance(exc, RagsyncError),
                )
            failing = True
        else:
            failing = False


def process_owner() -> str:
    """An owner id naming this process: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class RunLock:
    """The exclusive (``shared=False``) or shared hold of one process on a state DB.

    Args:
        state: the :class:`~ragsync.state.StateDB`.
        owner: the holder's id (workers pass theirs; default: host, pid and a random part).
        shared: workers' mode: many shared holders at once, never beside an exclusive one.
        lease: seconds the lock outlives a holder that stopped renewing it.
        clock: Unix time (tests pin it).
        heartbeat: renew the lease from a thread of its own; a worker, whose heartbeat
            already renews every lease it holds, passes False.

    Example::

        with RunLock(syncer.state).held(wait=False):
            ...   # raises RunLocked when another process holds the state
    """

    def __init__(
        self,
        state: Any,
        *,
        owner: str | None = None,
        shared: bool = False,
        lease: float = RUN_LEASE,
        clock: Callable[[], float] = time.time,
        heartbeat: bool = True,
    ):
        self.state = state
        self.heartbeat = heartbeat
        self.owner = owner or process_owner()
        self.shared = shared
        self.lease = lease
        self.clock = clock
        self.name = f"worker:{self.owner}" if shared else "run"
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._depth = 0
        self._since = ""
        # Threads of this process (an asyncio app's arun() twice) exclude each other too.
        self._guard = threading.RLock()

    def acquire(
        self, *, wait: bool = False, poll: float = 1.0, stop: threading.Event | None = None
    ) -> None:
        """Take the lock (re-entrant in the thread that holds it).

        Raises:
            RunLocked: another process, or another thread of this one, holds the state and
                ``wait`` is False (or ``stop`` was set while waiting).
        """
        if not self._guard.acquire(blocking=wait):
            raise RunLocked(self.state.path, [self._as_holder()])
        if self._depth:
            self._depth += 1
            return
        try:
            self._take(wait=wait, poll=poll, stop=stop)
        except BaseException:
            self._guard.release()
            raise
        self._depth = 1
        self._since = iso(time.time())
        if self.heartbeat:
            self._stop.clear()
            self._beat = threading.Thread(
                target=self._heartbeat, name="ragsync-run-lock", daemon=True
            )
            self._beat.start()

    def _take(self, *, wait: bool, poll: float, stop: threading.Event | None) -> None:
        """The lease row, once no other process is in the way."""
        announced = False
        while True:
            now = self.clock()
            holders = self.state.leases.claim_run_lock(
                self.name,
                self.owner,
                exclusive=not self.shared,
                now=now,
                until=now + self.lease,
                host=socket.gethostname(),
                pid=os.getpid(),
            )
            if not holders:
                break
            if not wait or (stop is not None and stop.is_set()):
                raise RunLocked(self.state.path, holders)
            if not announced:
                log.warning("%s: held by %s; waiting for it", self.state.path, describe(holders))
                announced = True
            if stop is not None:
                stop.wait(poll)
            else:
                time.sleep(poll)

    def release(self) -> None:
        """Give the lock back (the lease goes with the outermost release)."""
        if not self._depth:
            return
        self._depth -= 1
        try:
            if not self._depth:
                self._stop.set()
                if self._beat is not None:
                    self._beat.join(timeout=5)
                    self._beat = None
                self.state.leases.release(self.name, self.owner)
        finally:
            self._guard.release()

    def _as_holder(self) -> dict[str, Any]:
        """This process, as :class:`RunLocked` names a holder."""
        return {
            "name": self.name,
            "owner": self.owner,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": self._since,
        }

    @contextlib.contextmanager
    def held(self, *, wait: bool = False, stop: threading.Event | None = None) -> Iterator[RunLock]:
        """``with lock.held(wait=...):`` acquire on entry, release on exit. When the block
        raised, its error is the one raised: a release that fails then (the database server
        went away) leaves the lease to run out."""
        self.acquire(wait=wait, stop=stop)
        try:
            yield self
        except BaseException:
            try:
                self.release()
            except RagsyncError as exc:
                log.debug("run lock: not released (its lease runs out): %s", exc)
            raise
        self.release()

    def _heartbeat(self) -> None:
        heartbeat(
            self._stop,
            self.lease / 3,
            lambda: self.state.leases.renew(self.name, self.owner, self.clock() + self.lease),
            "run lock",
        )
