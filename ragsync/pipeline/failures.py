"""Failures: a page that could not be checked gets an attempt state; its content stays.

The decision (retrying, dead letter, attention, refused; when to retry) is
:func:`ragsync.policy.failure_step`; this stage records it and counts it.
"""

from __future__ import annotations

import logging

from ragsync.clock import iso
from ragsync.config import SourceConfig
from ragsync.models import SourceOutcome
from ragsync.pipeline.context import Engine
from ragsync.pipeline.outcomes import Failed
from ragsync.policy import failure_step

log = logging.getLogger("ragsync")
LOGGED = 5  # failures a source logs as warnings per run; the rest at -v (the report lists 20)


def record_failure(
    engine: Engine, source: SourceConfig, failed: Failed, *, now: str, report: SourceOutcome
) -> None:
    """Record one more failed attempt at a page, with the state its failure leads to."""
    page, fetch, counters = failed.page, engine.config.fetch, report.counters
    previous = engine.state.attempts.get(page.doc_key)
    step = failure_step(
        failed.verdict,
        transient=failed.transient,
        attempts=(previous["attempts"] if previous else 0) + 1,
        now=engine.clock().timestamp(),
        pause_until=failed.pause_until,
        retry_attempts=fetch.retry_attempts,
        retry_base=fetch.retry_base,
        retry_cap=fetch.retry_cap,
        draw=engine.random.random,
    )
    setattr(counters, step.counter, getattr(counters, step.counter) + 1)
    if step.retry_at is not None:
        counters.retries_scheduled += 1
    response = failed.exchange.response
    engine.state.attempts.add(
        page.doc_key,
        page.url,
        source_id=source.id,
        status=failed.exchange.status,
        error=failed.reason,
        at=now,
        state=step.state,
        # Not before the failure is recorded: a short Retry-After can end while the rest of
        # the window is fetched (`status` said "failing since" later than "next try").
        next_retry_at=max(iso(step.retry_at), now) if step.retry_at else None,
        body=response.body if step.keep_body and response else None,
        held=failed.held,
    )
    report.ok = False
    report.errors.append(f"{page.url}: {failed.reason} ({step.state})")
    # A host that is down fails every page of it: a few warnings say so, the run's report
    # names the pages, and -v logs each one.
    level = logging.WARNING if len(report.errors) <= LOGGED else logging.INFO
    log.log(level, "%s: %s (%s)", page.url, failed.reason, step.state)
    if len(report.errors) == LOGGED + 1:
        log.warning("%s: more pages failed; the run's report lists them (-v logs each)", source.id)
