"""`ragsync worker`: many processes, on any number of machines, sharing one state DB.

The single-process pass (:meth:`Syncer.run`) is split along the pipeline's one seam that can be
shared: *which pages are due*. Each step of a worker's loop:

1. **List.** For each source, whoever takes the ``source:<id>`` lease lists it when its cadence
   is due (discovery → the pages found due go onto the shared ``work`` queue) or else queues the
   known pages whose own revisit time has come. Checkpoints are saved after their pages are
   queued, so they are as durable as before.
2. **Claim.** A batch of queued pages nobody holds is claimed with a lease (``UPDATE … WHERE
   doc_key IN (SELECT … FOR UPDATE SKIP LOCKED)`` on PostgreSQL; SQLite's write lock does the
   same for workers on one machine), then fetched, extracted, embedded and committed exactly as
   in a single-process run, and dropped from the queue only after its commit.
3. **Apply.** The journal is applied by one worker at a time (the ``journal`` lease), in order.

A heartbeat thread extends the worker's leases and claims every ``lease / 3`` seconds; a worker
that dies (SIGKILL, a lost machine) stops renewing them and its claims are taken by the others
once the lease has run out. Requests pass a :class:`~ragsync.politeness.SharedHostGate`, so the
per-host concurrency, delay, pauses and Crawl-delay hold across all workers.

Why leases in the state DB rather than a task queue (procrastinate and the like): the work items
*are* state rows — a page's due time, its failed attempts, its claim — and queueing them in the
same database, in the same transactions, keeps "nothing lost, nothing done twice" a property of
one database instead of two systems kept in step. It also works unchanged on SQLite.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from ragsync.clock import iso
from ragsync.errors import ConfigError
from ragsync.fetch import Fetcher
from ragsync.models import SyncResult, work_candidate
from ragsync.pipeline.context import Pass
from ragsync.pipeline.journal import apply_journal
from ragsync.pipeline.runs import (
    EVENTS_DEADLINE,
    finish_run,
    list_source,
    prune_raw_bodies,
    source_due,
    start_run,
)
from ragsync.pipeline.source import WINDOW_PAGES, SourceSync
from ragsync.pipeline.targets import by_source, drain_targets
from ragsync.politeness import PoliteFetcher, SharedHostGate
from ragsync.runlock import RunLock, RunLocked, heartbeat
from ragsync.sync import Syncer

log = logging.getLogger("ragsync.worker")
# How often a worker drops raw bodies past their retention: at its start, then this often
# (seconds); a pass does it at its end (README "Scaling out").
PRUNE_EVERY = 600.0


class Worker:
    """One worker's loop over a shared state DB.

    Args:
        syncer: the syncer whose config, state, store and embedder the worker uses.
        worker_id: names this worker in leases (default: host, pid and a random suffix).
        lease: seconds a claim or lease lasts without a heartbeat.
        batch: pages claimed at a time.
        poll: seconds to wait when nothing is due.

    Example::

        with Syncer.from_config("ragsync.toml") as syncer:
            Worker(syncer).run(until_idle=True)
    """

    def __init__(
        self,
        syncer: Syncer,
        *,
        worker_id: str | None = None,
        lease: float = 60.0,
        batch: int = WINDOW_PAGES,
        poll: float = 0.5,
    ):
        if lease <= 0 or batch <= 0:
            raise ConfigError("worker: lease and batch must be positive")
        self.syncer = syncer
        self.engine = syncer.engine
        self.state = syncer.state
        self.config = syncer.config
        self.id = worker_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.lease = lease
        self.batch = batch
        self.poll = poll
        self._extra_claims: list[str] = []
        self.engine.journal_lease = self.holding
        self.engine.claim_page = self.claim_page
        # Workers share the state with each other, never with a pass (README "Run lock").
        # Its lease is renewed by the worker's own heartbeat, with every other lease it holds.
        self.run_lock = RunLock(
            self.state, owner=self.id, shared=True, lease=lease, heartbeat=False
        )

    # -- leases -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def holding(self, name: str) -> Iterator[bool]:
        """Hold lease ``name`` for the block if nobody else does; yields whether it is held."""
        now = time.time()
        held = self.state.leases.claim(name, self.id, now=now, until=now + self.lease)
        try:
            yield held
        finally:
            if held:
                self.state.leases.release(name, self.id)

    def claim_page(self, source_id: str, doc_key: str) -> bool:
        """Claim a page outside the claimed batch (a move's target) until the batch ends;
        False when another worker holds it."""
        now = time.time()
        if not self.state.work.claim_page(
            doc_key,
            source_id,
            self.id,
            now=now,
            until=now + self.lease,
            at=self.engine.now(),
        ):
            return False
        self._extra_claims.append(doc_key)
        return True

    def _heartbeat(self, stop: threading.Event) -> None:
        heartbeat(
            stop,
            self.lease / 3,
            lambda: self.state.leases.renew_all(self.id, time.time() + self.lease),
            f"worker {self.id}",
        )

    # -- the loop ---------------------------------------------------------------------------

    def run(self, *, until_idle: bool = False, stop: threading.Event | None = None) -> SyncResult:
        """Work until ``stop`` is set — or, with ``until_idle``, until nothing is due, queued,
        claimed or pending anywhere. Returns the report of everything this worker did."""
        stop = stop or threading.Event()
        try:
            self.run_lock.acquire(wait=True, stop=stop)  # a pass holds the state: wait for it
        except RunLocked:  # stopped while waiting: nothing was done
            now = self.engine.now()
            return SyncResult(run_id=f"w-{self.id}", started_at=now, finished_at=now)
        try:
            return self._run(until_idle=until_idle, stop=stop)
        finally:
            self.run_lock.release()

    def _run(self, *, until_idle: bool, stop: threading.Event) -> SyncResult:
        engine, config = self.engine, self.config
        dispatcher = engine.dispatcher()  # before any work: a bad secret fails fast
        try:
            started = start_run(engine, owner=self.id, kind="worker")  # chunker checked
        except BaseException:
            if dispatcher is not None:
                dispatcher.close()
            raise
        plain = Fetcher(config.fetch, transport=engine.transport)
        gate = SharedHostGate(
            self.state,
            owner=self.id,
            per_host_concurrency=config.fetch.per_host_concurrency,
            min_delay=config.fetch.per_host_delay,
            max_wait=config.fetch.max_pause_wait,
            slot_lease=2 * config.fetch.timeout + 30,
        )
        fetcher = PoliteFetcher(plain, gate, default_pause=config.fetch.retry_base)
        run = Pass(engine, fetcher, started, dispatcher)
        beating = threading.Event()
        heart = threading.Thread(target=self._heartbeat, args=(beating,), daemon=True)
        heart.start()
        log.info("worker %s started", self.id)
        pruned = 0.0
        try:
            while not stop.is_set():
                if time.monotonic() - pruned >= PRUNE_EVERY:  # as a pass prunes at its end
                    prune_raw_bodies(engine)
                    pruned = time.monotonic()
                if self.step(run):
                    continue
                if until_idle and self.idle():
                    break
                stop.wait(self.poll)
            run.result.ok = all(outcome.ok for outcome in run.result.sources.values())
        finally:
            beating.set()
            self.state.leases.release_all(self.id)  # a clean stop hands its claims back at once
            if dispatcher is not None:
                dispatcher.close()
            plain.close()
            engine.release_store()
            finish_run(engine, run.result)
        return run.result

    def step(self, run: Pass) -> bool:
        """One turn of the loop; returns whether it found anything to do."""
        busy = self._list_sources(run)
        if self.state.targets.count():
            with self.holding("queue") as held:
                if held:
                    drain_targets(run)
                    busy = True
        now = time.time()
        claimed = self.state.work.claim(self.id, now=now, until=now + self.lease, limit=self.batch)
        if claimed:
            log.info("worker %s claimed %d pages", self.id, len(claimed))
            self.state.runs.close_orphans(now)  # a dead worker's run, whose claims come back
            self._check_claimed(claimed, run)
            busy = True
        if apply_journal(self.engine, run.result.counters):
            busy = True
        if run.dispatcher is not None:
            with self.holding("events") as held:
                if held:
                    delivered = run.dispatcher.deliver_due(EVENTS_DEADLINE)
                    run.result.counters.events_delivered += delivered
        return busy

    def _list_sources(self, run: Pass) -> bool:
        busy = False
        for source in self.config.sources:
            with self.holding(f"source:{source.id}") as held:
                if not held:
                    continue
                begun = self.engine.clock()
                if source_due(self.engine, source, begun):
                    log.info("worker %s lists source %s", self.id, source.id)
                    list_source(run, source, begun, queue=True)
                    busy = True
                else:
                    queued = self.state.work.add_due(source.id, iso(begun), iso(begun))
                    run.result.counters.pages_queued += queued
                    busy = busy or queued > 0
        return busy

    def _check_claimed(self, claimed: list[dict[str, Any]], run: Pass) -> None:
        for source, rows in by_source(self.config, claimed):
            if source is None:
                continue  # dropped with the batch below
            pages = [work_candidate(row) for row in rows]
            run.result.merge(source.id, SourceSync(run, source).claimed(pages))
        extra, self._extra_claims = self._extra_claims, []
        self.state.work.finish(self.id, [row["doc_key"] for row in claimed] + extra)

    def idle(self) -> bool:
        """Nothing due, queued, claimed, pending or being listed anywhere."""
        now = self.engine.clock()
        if any(source_due(self.engine, source, now) for source in self.config.sources):
            return False
        if self.state.work.count() or self.state.journal.count() or self.state.targets.count():
            return False
        busy = [
            name
            for name in self.state.leases.list_live(time.time())
            if name != "events" and not name.startswith("worker:")  # the run lock's shares
        ]
        return not busy
