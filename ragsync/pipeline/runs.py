"""A pass over the sources: the run report, the journal replayed first, targeted work, each
due source's listing or due pages, events, and the run recorded at the end."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import Literal

from ragsync.chunk import budget_of, chunker_id, stored_chunker
from ragsync.clock import iso, parse_iso
from ragsync.config import SourceConfig
from ragsync.errors import StateError
from ragsync.fetch import Fetcher
from ragsync.models import Counters, SourceOutcome, SyncResult
from ragsync.pipeline.context import Engine, Pass
from ragsync.pipeline.journal import apply_journal
from ragsync.pipeline.targets import drain_targets
from ragsync.politeness import HostGate, PoliteFetcher
from ragsync.schedule import next_source_run

log = logging.getLogger("ragsync")

EVENTS_DEADLINE = 15.0  # seconds a pass spends delivering due events before it ends


def start_run(
    engine: Engine, *, owner: str, kind: Literal["run", "worker", "reindex"] = "run"
) -> SyncResult:
    """A new run report, recorded as running under the run-lock holder ``owner``. Its id
    sorts by start time: ``20261130T020304-1a2b3c4d`` (a worker's ``…-w1a2b3c4d``, a
    reindex's ``reindex-20261130T020304-1a2b3c``).

    Raises:
        StateError: (a run or a worker) a source's chunks were made by another chunker.
    """
    if kind != "reindex":
        check_chunkers(engine)
    started = engine.clock()
    stamp, token = f"{started:%Y%m%dT%H%M%S}", uuid.uuid4().hex
    run_id = {
        "run": f"{stamp}-{token[:8]}",
        "worker": f"{stamp}-w{token[:8]}",
        "reindex": f"reindex-{stamp}-{token[:6]}",
    }[kind]
    # Not ok until it ends well: one that an error ends is recorded as failed (`status`).
    result = SyncResult(run_id=run_id, started_at=iso(started), ok=False)
    engine.state.runs.add(result.run_id, result.started_at, owner=owner)
    return result


def check_chunkers(engine: Engine) -> None:
    """Never mix chunks of two chunkers in one index (README "Plan and reindex"): a source
    whose chunks were made by another chunker than the configured one must go through
    `ragsync reindex` before a run writes to it. A source without chunks is recorded with the
    configured chunker.

    Raises:
        StateError: names the sources, the stored and the configured chunker ids.
    """
    max_tokens = engine.config.chunker.max_tokens
    configured = chunker_id(max_tokens)
    index = engine.state.index
    stale: list[str] = []
    earlier: set[int | None] = set()  # the max_tokens the stale chunks were made with
    for source in engine.config.sources:
        recorded = index.get_chunker(source.id)
        stored = stored_chunker(
            recorded,
            has_chunks=recorded is None and index.has_chunks(source.id),
            max_tokens=max_tokens,
        )
        if stored is None:
            index.put_chunker(source.id, configured, engine.now())
        elif stored != configured:
            stale.append(f"{source.id!r} ({stored})")
            earlier.add(budget_of(stored))
    if stale:
        back = next(iter(earlier)) if len(earlier) == 1 else None
        hint = f", or set chunker.max_tokens back to {back}" if back is not None else ""
        raise StateError(
            f"the chunks of source {', '.join(stale)} were made by another chunker than the "
            f"configured one ({configured}, from chunker.max_tokens = {max_tokens}): run "
            "`ragsync reindex` to re-chunk them from the stored pages (no page is fetched "
            f"and only texts the cache lacks are embedded){hint}"
        )


def finish_run(engine: Engine, result: SyncResult) -> None:
    """Record the run as finished, with its report."""
    result.finished_at = engine.now()
    engine.state.runs.finish(
        result.run_id,
        finished_at=result.finished_at,
        ok=result.ok,
        counters=result.counters.as_dict(),
        sources=result.to_dict()["sources"],
    )


def source_due(engine: Engine, source: SourceConfig, now: datetime) -> bool:
    """Whether the source's listing is due (its ``every`` or ``cron`` came).

    A schedule written under an earlier configuration is brought forward first when the
    configured ``every`` or ``cron``, counted from the last listing, gives a sooner time: a
    shorter ``every`` takes effect now, not after the old interval (README "Scheduling")."""
    schedule = engine.state.runs.schedule_of(source.id)
    if schedule is None:
        return True
    last, next_run = schedule
    wanted = iso(next_source_run(parse_iso(last), every=source.every, cron=source.cron))
    if wanted < next_run and engine.state.runs.bring_forward(source.id, last, wanted):
        log.info("%s: next listing brought forward to %s (its schedule changed)", source.id, wanted)
        next_run = wanted
    return next_run <= iso(now)


def list_source(
    run: Pass,
    source: SourceConfig,
    begun: datetime,
    *,
    revalidate_all: bool = False,
    queue: bool = False,
) -> None:
    """Read a due source's listing and check (with ``queue``: put on the work queue) its due
    pages, then schedule its next listing."""
    from ragsync.pipeline.source import SourceSync

    outcome = SourceSync(run, source, revalidate_all=revalidate_all).listing(queue=queue)
    run.result.merge(source.id, outcome)
    due = next_source_run(begun, every=source.every, cron=source.cron)
    run.engine.state.runs.put_source_run(
        source.id, iso(begun), iso(due), incomplete=outcome.incomplete
    )


def local_fetcher(engine: Engine) -> tuple[Fetcher, PoliteFetcher]:
    """The plain fetcher (closed after the pass) and, over it, the polite one of a single
    process: its host gate holds the pauses recorded in the state."""
    config = engine.config.fetch
    plain = Fetcher(config, transport=engine.transport)
    gate = HostGate(
        per_host_concurrency=config.per_host_concurrency,
        min_delay=config.per_host_delay,
        max_wait=config.max_pause_wait,
        pauses=engine.state.hosts.list_pauses(),
    )
    return plain, PoliteFetcher(plain, gate, default_pause=config.retry_base)


def prune_raw_bodies(engine: Engine) -> int:
    """Drop the raw bodies older than ``state.raw_body_retention`` (README "Plan and
    reindex"); returns how many went."""
    retention = timedelta(seconds=engine.config.state.raw_body_retention)
    return engine.state.index.remove_raw_bodies(iso(engine.clock() - retention))


def run_pass(
    engine: Engine,
    sources: list[SourceConfig],
    *,
    owner: str,
    revalidate_all: bool = False,
    targeted_only: bool = False,
    refetch: bool = False,
) -> SyncResult:
    """One sync pass of a single process (the caller holds the run lock); with ``refetch``,
    every page now, each asked in full (`run --refetch`)."""
    result = start_run(engine, owner=owner)
    plain, fetcher = local_fetcher(engine)
    dispatcher = engine.dispatcher()  # before any work: a bad secret fails fast
    run = Pass(engine, fetcher, result, dispatcher, refetch=refetch)
    revalidate_all = revalidate_all or refetch
    try:
        replayed = Counters()
        replayed.journal_replayed = apply_journal(engine, replayed)
        result.counters.add(replayed)
        drain_targets(run)  # targeted work first
        for source in [] if targeted_only else sources:
            begun = engine.clock()
            if revalidate_all or source_due(engine, source, begun):
                list_source(run, source, begun, revalidate_all=revalidate_all)
                continue
            # Its listing is not due; pages whose own revisit time came still are.
            due = engine.state.documents.list_due(source.id, iso(begun))
            if due:
                # Imported here: the checking stages (extraction, links, robots) are most of
                # the import time of a pass, and one with nothing due needs none of them.
                from ragsync.pipeline.source import SourceSync

                outcome = SourceSync(run, source).known(due)
            else:
                outcome = SourceOutcome()
            if not due:
                outcome.counters.sources_not_due += 1
            # Said in the report, so `run` and `plan` can say why nothing was requested.
            outcome.not_due = {
                "until": engine.state.runs.next_run_at(source.id),
                "every": None if source.cron else source.every,
                "cron": source.cron,
            }
            result.merge(source.id, outcome)
        result.ok = all(outcome.ok for outcome in result.sources.values())
        if dispatcher is not None:
            result.counters.events_delivered = dispatcher.deliver_due(EVENTS_DEADLINE)
        prune_raw_bodies(engine)
    finally:
        try:
            if dispatcher is not None:
                dispatcher.close()
            plain.close()
            engine.release_store()
        except BaseException:
            result.ok = False  # a failed last flush: not a run that ended well
            raise
        finally:  # the run is recorded however closing went
            finish_run(engine, result)
    return result
