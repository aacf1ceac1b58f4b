"""`ragsync status`: what the state DB says of each source, the last run, the journal, the run
lock, workers' queue and leases, host pauses and hosts whose validators are distrusted."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections import defaultdict
from typing import Any

from ragsync.clock import epoch, iso, parse_iso
from ragsync.config import SourceConfig
from ragsync.errors import ResourceError, StoreError
from ragsync.models import AttemptState, DocumentStatus
from ragsync.pipeline.context import Engine
from ragsync.policy import DISTRUST_AFTER, coverage_gaps, earliest_tombstone

log = logging.getLogger("ragsync")


def lag(engine: Engine, source_id: str) -> float:
    """Seconds the most overdue page check of a source is late."""
    oldest_due = engine.state.documents.oldest_due(engine.now(), source_id)
    if not oldest_due:
        return 0.0
    return round(max(0.0, (engine.clock() - parse_iso(oldest_due)).total_seconds()), 1)


def suspected(engine: Engine, source: SourceConfig) -> list[dict[str, Any]]:
    """The source's pages suspected missing, each with the evidence so far and the earliest
    time a check can tombstone it (README "Deletion safety")."""
    found = []
    for row in engine.state.documents.list_suspected(source.id):
        since = epoch(row["missing_since"]) or engine.clock().timestamp()
        needed, at = earliest_tombstone(
            row["missing_count"] or 0,
            since,
            epoch(row["next_check_at"]),
            confirmations=source.missing_confirmations,
            grace=source.missing_grace,
        )
        evidence = json.loads(row["missing_evidence"] or "[]")
        found.append(
            {
                "url": row["url"],
                "since": row["missing_since"],
                "reason": evidence[-1].get("reason") if evidence else None,
                "observations": row["missing_count"] or 0,
                "confirmations": source.missing_confirmations,
                "observations_needed": needed,
                "tombstone_at_earliest": iso(at),
            }
        )
    return found


def source_status(engine: Engine, source: SourceConfig, counts: dict[str, int]) -> dict:
    """One source: documents by state, what is failing (since when, why), the dead letter, the
    attention list, the pages suspected missing, the last listing and, for APIs, the polls and
    their coverage gaps."""
    state, source_id = engine.state, source.id
    lists: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for attempt in state.attempts.list(source_id):
        lists[attempt["state"] or AttemptState.RETRYING].append(
            {
                "url": attempt["url"],
                "since": attempt["first_failed_at"],
                "attempts": attempt["attempts"],
                "last_status": attempt["last_status"],
                "reason": attempt["last_error"],
                "next_retry_at": attempt["next_retry_at"],
            }
        )
    documents: dict[str, int] = {status: 0 for status in DocumentStatus}
    documents.update(counts)
    entry: dict[str, Any] = {
        "kind": source.kind,
        "lag_seconds": lag(engine, source_id),
        "documents": documents,
        "failing": {name: len(items) for name, items in sorted(lists.items())},
        "retrying": lists[AttemptState.RETRYING],
        "dead_letter": lists[AttemptState.DEAD],
        "needs_attention": lists[AttemptState.ATTENTION],
        "refused": lists[AttemptState.REFUSED],
        "missing": lists[AttemptState.MISSING],  # never indexed: a broken link, a gone URL
        "suspected_missing": suspected(engine, source),
        "oldest_check": state.documents.oldest_check(source_id),
        # The last listing: complete, or why not (then it proved no page gone).
        "listing": state.runs.get_listing(source_id),
    }
    polls = state.discovery.list_polls(source_id)
    if polls:
        windows = [(p["window_start"], p["window_end"]) for p in polls if p["outcome"] == "ok"]
        entry["polls"] = {
            "last": polls[-1],
            "failed": sum(p["outcome"] == "failed" for p in polls),
            "gaps": [{"from": a, "to": b} for a, b in coverage_gaps(windows)],
        }
    return entry


def status(engine: Engine, *, count_points: bool = True) -> dict[str, Any]:
    """The whole status report; see :meth:`ragsync.sync.Syncer.status`."""
    state = engine.state
    counts = state.documents.count_by_status()
    sources = {
        source.id: source_status(engine, source, counts.get(source.id, {}))
        for source in engine.config.sources
    }
    last = state.runs.get_last()
    now = time.time()
    points: int | None = None
    if count_points:
        try:
            points = engine.store.count()
            for source_id, entry in sources.items():
                entry["points_in_store"] = engine.store.count(source=source_id)
        except (StoreError, ResourceError) as exc:  # e.g. its device full: the rest stands
            log.warning("points in the store unavailable: %s", exc)
            points = None
        finally:
            engine.release_store()
    return {
        "sources": sources,
        # How overdue the most overdue page check of the configured sources is: the largest of
        # theirs, each read from the schedule's index (over all rows, no index serves it).
        "lag_seconds": max((entry["lag_seconds"] for entry in sources.values()), default=0.0),
        "queue_depth": state.targets.count(),
        "points_in_store": points,
        "last_run": None
        if last is None
        else {
            "run_id": last["run_id"],
            "started_at": last["started_at"],
            "finished_at": last["finished_at"],
            "status": last["status"],
            "ok": bool(last["ok"]),
            "counters": json.loads(last["counters"] or "{}"),
        },
        "pending_journal": state.journal.count(),
        # Runs in progress now (alive), or whose process died (closed by the next run), and
        # the latest runs closed as interrupted.
        "running": state.runs.list_running(now, socket.gethostname()),
        "interrupted_runs": state.runs.list_interrupted(),
        # Workers: pages queued for any worker, and who holds what right now.
        "work_queue": state.work.count(),
        "leases": state.leases.list_live(now),
        "host_pauses": {
            host: iso(until) for host, until in state.hosts.list_pauses().items() if until > now
        },
        # Hosts with pages caught changing under the validators they answered 304 to; at
        # `distrust_after`, their validators are distrusted (README "Validators that lie").
        "host_validators": [
            {**row, "distrust_after": DISTRUST_AFTER} for row in state.hosts.list_validators()
        ],
    }
