"""Pure scheduling decisions: when a source is due, each page's adaptive revisit interval, and
when each page is next asked in full."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from cronsim import CronSim, CronSimError

CHANGED_FACTOR = 0.5  # a page seen changing is revisited sooner …
UNCHANGED_FACTOR = 1.5  # … an unchanged one later, within the source's bounds
JITTER = 0.1  # ±10%, so pages checked together drift apart


def validate_cron(expression: str) -> None:
    """Raises ValueError when ``expression`` is not a cron expression."""
    try:
        CronSim(expression, datetime(2026, 1, 1))
    except CronSimError as exc:
        raise ValueError(f"not a cron expression: {expression!r} ({exc})") from None


def next_source_run(last_run: datetime, *, every: float, cron: str | None) -> datetime:
    """When a source that last ran at ``last_run`` is due again.

    Example::

        >>> next_source_run(datetime(2026, 1, 1, 10, 7), every=3600, cron=None)
        datetime.datetime(2026, 1, 1, 11, 7)
        >>> next_source_run(datetime(2026, 1, 1, 10, 7), every=3600, cron="*/15 * * * *")
        datetime.datetime(2026, 1, 1, 10, 15)
    """
    if cron:
        return next(CronSim(cron, last_run.replace(tzinfo=None))).replace(tzinfo=last_run.tzinfo)
    return last_run + timedelta(seconds=every)


def next_interval(
    previous: float | None,
    *,
    changed: bool,
    initial: float,
    min_interval: float,
    max_interval: float,
    draw: float,
) -> float:
    """Seconds until a page is checked again (adaptive revisit).

    Shorter after an observed change, longer after an unchanged check, always within
    ``[min_interval, max_interval]``; ``draw`` (uniform in [0, 1)) adds ±10% jitter.

    Example::

        >>> next_interval(None, changed=True, initial=3600, min_interval=600,
        ...               max_interval=86400, draw=0.5)
        3600.0
        >>> next_interval(3600, changed=False, initial=3600, min_interval=600,
        ...               max_interval=86400, draw=0.5)
        5400.0
    """
    if previous is None:
        base = initial
    else:
        base = previous * (CHANGED_FACTOR if changed else UNCHANGED_FACTOR)
    base = min(max_interval, max(min_interval, base))
    return base * (1 - JITTER + 2 * JITTER * draw)


def refetch_at(doc_key: str, after: float, *, interval: float) -> float:
    """When a page last answered in full at ``after`` (Unix time) is next asked without its
    validators: past half an ``interval`` from then, at the first of the page's own points,
    one every half interval, set by the record key's hash. So a page is asked in full at least
    once per interval and never within half of one of its last full answer; the pages of a
    source indexed in one run are asked in full spread over the second half of the interval,
    not all in the run an interval later; and a page asked at its point is next asked an
    interval later (README "Validators that lie").

    Example::

        >>> week = 7 * 86400.0
        >>> at = refetch_at("docs:https://a.example/x", 0.0, interval=week)
        >>> week / 2 < at <= week
        True
        >>> refetch_at("docs:https://a.example/x", at + 3600, interval=week) == at + week
        True
    """
    half = interval / 2
    digest = hashlib.sha256(doc_key.encode()).digest()
    phase = int.from_bytes(digest[:8], "big") / 2**64 * half
    earliest = after + half
    wait = (phase - earliest) % half
    # At a point itself (within float rounding), the next one.
    return earliest + (wait if wait > 1e-3 else wait + half)
