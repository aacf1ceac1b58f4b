"""Pure decisions about fetched responses (no I/O): what a status and a body mean for a page."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime

from ragsync.models import AttemptState, Verdict

HTML_TYPES = frozenset({"", "text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/x-markdown"})


def is_file(status: int, content_type: str) -> bool:
    """Whether a response is a file rather than a text page: a 200 whose media type is neither
    HTML nor text (JSON, an image, an archive)."""
    return status == 200 and content_type not in HTML_TYPES and content_type not in TEXT_TYPES


def classify(status: int, content_type: str, body: bytes) -> tuple[Verdict, str]:
    """The verdict on a response and, when it is not usable content, the reason.

    Example::

        >>> classify(304, "", b"")
        (<Verdict.NOT_MODIFIED: 'not_modified'>, '')
        >>> classify(302, "", b"")
        (<Verdict.TEMPORARY_REDIRECT: 'temporary_redirect'>, 'HTTP 302: temporary redirect')
        >>> classify(200, "image/png", b"...")
        (<Verdict.REFUSED: 'refused'>, 'not a text page: content type image/png')
    """
    if status == 304:
        return Verdict.NOT_MODIFIED, ""
    if status in (404, 410):
        return Verdict.MISSING, f"HTTP {status}"
    if status in (302, 303, 307):  # RFC 9110 §15.4: the resource is still this URL
        return Verdict.TEMPORARY_REDIRECT, f"HTTP {status}: temporary redirect"
    if status == 429:
        return Verdict.RATE_LIMITED, "HTTP 429"
    if status in (401, 403):
        return Verdict.NEEDS_ATTENTION, f"HTTP {status}"
    if status >= 500 or status == 408:
        return Verdict.RETRY, f"HTTP {status}"
    if status != 200:
        return Verdict.REFUSED, f"HTTP {status}"
    if is_file(status, content_type):
        return Verdict.REFUSED, f"not a text page: content type {content_type}"
    if not body.strip():
        return Verdict.REFUSED, "empty body on HTTP 200"
    return Verdict.CONTENT, ""


DISTRUST_AFTER = 3  # pages of a host caught changing under their validators: then distrusted


def validators_kept(
    stored: tuple[str | None, str | None], answered: tuple[str | None, str | None]
) -> bool | None:
    """Whether a full answer ``(etag, last_modified)`` still carries the validators a page was
    stored with, ``stored``: then a conditional request with them would have been answered
    304. The ETag decides when one was stored (If-None-Match, compared weakly, takes precedence
    over If-Modified-Since: RFC 9110 §13.1.2, §13.2.2), else Last-Modified (304 while the
    answer's is not later: §13.1.3). None when there is nothing to compare.

    Example::

        >>> validators_kept(('"v1"', None), ('W/"v1"', None))
        True
        >>> validators_kept(('"v1"', None), ('"v2"', None))
        False
        >>> ten, eleven = "Mon, 30 Nov 2026 10:00:00 GMT", "Mon, 30 Nov 2026 11:00:00 GMT"
        >>> validators_kept((None, ten), (None, ten)), validators_kept((None, ten), (None, eleven))
        (True, False)
        >>> validators_kept((None, None), ('"v1"', None)) is None
        True
    """
    etag, last_modified = stored
    if etag:
        if answered[0] is None:
            return None
        return answered[0].removeprefix("W/") == etag.removeprefix("W/")
    if last_modified and answered[1]:
        try:
            return parsedate_to_datetime(answered[1]) <= parsedate_to_datetime(last_modified)
        except (TypeError, ValueError):  # not an HTTP-date, or one without a zone
            return answered[1] == last_modified
    return None


def raw_hash(body: bytes) -> str:
    """sha256 of the raw body: the cheap shortcut before extraction."""
    return hashlib.sha256(body).hexdigest()


def retry_delay(attempt: int, *, base: float, cap: float, draw: float) -> float:
    """Seconds before retry number ``attempt`` (1-based): exponential backoff, full jitter.

    ``draw`` is a uniform random number in [0, 1): the delay is ``draw × min(cap, base × 2^(n-1))``
    so that many pages failing together do not retry together.

    Example::

        >>> retry_delay(3, base=5, cap=900, draw=0.5)
        10.0
    """
    return draw * min(cap, base * 2 ** max(0, attempt - 1))


MAX_PAUSE = 86_400.0
"""The longest pause a header can ask for (one day): a ``Retry-After`` or a rate-limit reset
further out (a typo, a year-9999 date, a huge number) pauses for a day, and the host is asked
again after that, instead of never."""


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (RFC 9110 §10.2.3), capped at
    :data:`MAX_PAUSE`. ``now`` is the current Unix time.

    The value is delta-seconds (``1*DIGIT``: ASCII digits only, RFC 9110 §10.2.3) or an
    HTTP-date (§5.6.7; a date in the past means no wait). Anything else, or no header, gives
    None: the caller's own backoff applies. Never raises.

    Example::

        >>> retry_after_seconds("120", 0.0)
        120.0
        >>> retry_after_seconds("Thu, 01 Jan 1970 00:01:30 GMT", 60.0)
        30.0
        >>> retry_after_seconds("\u00b2", 0.0) is None  # "²".isdigit() is True, but not DIGIT
        True
        >>> retry_after_seconds("9" * 40, 0.0)
        86400.0
    """
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return min(float(value), MAX_PAUSE)
    try:
        moment = parsedate_to_datetime(value)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        seconds = moment.timestamp() - now
    # email.utils raises ValueError, OverflowError (a year past 9999), IndexError… on odd
    # input; a header the server got wrong must never end a run.
    except Exception:
        return None
    return min(max(0.0, seconds), MAX_PAUSE)


def rate_limit_pause(headers: dict[str, str], now: float) -> float | None:
    """Seconds to pause a host when ``X-RateLimit-Remaining`` says the budget is spent
    (None otherwise), capped at :data:`MAX_PAUSE`. Never raises.

    ``X-RateLimit-Reset`` is read as Unix time when it is larger than ``now``, else as seconds.
    Only a finite ASCII number counts: a missing, unparseable, ``nan`` or ``inf`` reset is
    treated as absent, which pauses for one second.

    Example::

        >>> rate_limit_pause({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "30"}, 1e9)
        30.0
        >>> rate_limit_pause({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "nan"}, 1e9)
        1.0
    """
    remaining = headers.get("x-ratelimit-remaining", "").strip()
    if remaining != "0":
        return None
    value = headers.get("x-ratelimit-reset", "").strip()
    try:
        # float() also takes non-ASCII digits ("١٢") and "nan"/"inf": neither is a reset time.
        reset = float(value) if value.isascii() else math.nan
    except ValueError:
        reset = math.nan
    if not math.isfinite(reset):
        return 1.0
    seconds = reset - now if reset > now else reset
    return min(max(0.0, seconds), MAX_PAUSE)


def missing_step(
    count: int, since: float | None, now: float, *, confirmations: int, grace: float
) -> tuple[int, float, bool]:
    """One more observation of a missing page: ``(count, since, tombstone?)`` (README
    "Deletion safety").

    A tombstone needs both ``confirmations`` observations and ``grace`` seconds since the first.

    Example::

        >>> missing_step(0, None, 100.0, confirmations=2, grace=3600)
        (1, 100.0, False)
        >>> missing_step(1, 100.0, 4000.0, confirmations=2, grace=3600)
        (2, 100.0, True)
    """
    count += 1
    since = now if since is None else since
    return count, since, count >= confirmations and now - since >= grace


def earliest_tombstone(
    count: int, since: float, next_check: float | None, *, confirmations: int, grace: float
) -> tuple[int, float]:
    """For a page suspected missing ``count`` times since ``since``: how many more
    observations a tombstone needs, and the earliest Unix time a check can make it (both
    ``confirmations`` and ``grace``, as :func:`missing_step`). With one observation left, any
    check from then on can (``run --all`` asks before the page's next check ``next_check``);
    with more, each is a later check, so not before ``next_check``.

    Example::

        >>> earliest_tombstone(1, 100.0, 50.0, confirmations=2, grace=3600)
        (1, 3700.0)
        >>> earliest_tombstone(1, 100.0, 9000.0, confirmations=2, grace=3600)
        (1, 3700.0)
        >>> earliest_tombstone(1, 100.0, 5000.0, confirmations=3, grace=3600)
        (2, 5000.0)
    """
    needed = max(1, confirmations - count)
    later = next_check if needed > 1 and next_check is not None else since
    return needed, max(since + grace, later)


def coverage_gaps(windows: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Stretches of time between the first and last covered instant that no window covers.

    ``windows`` are ``(start, end)`` ISO timestamps of successful polls.

    Example::

        >>> coverage_gaps([("t1", "t3"), ("t2", "t4"), ("t6", "t8")])
        [('t4', 't6')]
    """
    gaps: list[tuple[str, str]] = []
    covered_to: str | None = None
    for start, end in sorted(windows):
        if covered_to is not None and start > covered_to:
            gaps.append((covered_to, start))
        covered_to = end if covered_to is None else max(covered_to, end)
    return gaps


@dataclass(frozen=True)
class FailureStep:
    """What one more failed check of a page means (see :func:`failure_step`).

    Attributes:
        state: the page's attempt state: ``retrying``, ``dead`` (the dead letter),
            ``attention`` (401/403: no blind retry) or ``refused`` (retried next run).
        counter: the run counter the failure adds to.
        retry_at: Unix time of the next attempt (``retrying`` only).
        keep_body: keep the response body for diagnosis (a parse failure).
    """

    state: AttemptState
    counter: str
    retry_at: float | None = None
    keep_body: bool = False


def failure_step(
    verdict: str | None,
    *,
    transient: bool,
    attempts: int,
    now: float,
    pause_until: float | None,
    retry_attempts: int,
    retry_base: float,
    retry_cap: float,
    draw: Callable[[], float],
) -> FailureStep:
    """The attempt state after the ``attempts``-th failed check of a page (its last good
    content is never touched, README "Failures never cost good data"). ``draw`` gives the
    backoff's uniform random number, drawn only when a backoff is computed.

    Rate limits, temporary redirects, outage pages and held changes never send a page to the
    dead letter; other transient failures do after ``retry_attempts``.

    Example::

        >>> step = failure_step("rate_limited", transient=True, attempts=9, now=0.0,
        ...     pause_until=30.0, retry_attempts=3, retry_base=60, retry_cap=3600, draw=lambda: 0.5)
        >>> str(step.state), step.counter, step.retry_at
        ('retrying', 'responses_429', 30.0)
        >>> failure_step("retry", transient=True, attempts=3, now=0.0, pause_until=None,
        ...     retry_attempts=3, retry_base=60, retry_cap=3600, draw=lambda: 0.5).state.value
        'dead'
        >>> step = failure_step("parse_failure", transient=False, attempts=1, now=0.0,
        ...     pause_until=None, retry_attempts=3, retry_base=60, retry_cap=3600, draw=lambda: 0.5)
        >>> str(step.state), step.counter, step.keep_body
        ('refused', 'parse_failures', True)
    """
    if verdict == "rate_limited":
        return FailureStep(AttemptState.RETRYING, "responses_429", pause_until or now + retry_base)

    def backoff() -> float:
        return retry_delay(attempts, base=retry_base, cap=retry_cap, draw=draw())

    if verdict == "temporary_redirect":
        # A server saying "elsewhere, for now" (a maintenance window): never the dead letter,
        # and never a move; the page is asked again with backoff.
        return FailureStep(AttemptState.RETRYING, "temporary_redirects", now + backoff())
    if verdict in ("outage", "held"):
        # Not the page (an outage page served with 200), or a change waiting for its
        # confirmation: asked again at the next run, never the dead letter
        # (README "Deletion safety", outage pages).
        counter = "outage_pages" if verdict == "outage" else "changes_held"
        return FailureStep(AttemptState.RETRYING, counter, max(now + backoff(), pause_until or 0.0))
    if verdict == "needs_attention":
        return FailureStep(AttemptState.ATTENTION, "fetch_errors")
    if transient and attempts >= retry_attempts:
        return FailureStep(AttemptState.DEAD, "fetch_errors")
    if transient:
        return FailureStep(
            AttemptState.RETRYING, "fetch_errors", max(now + backoff(), pause_until or 0.0)
        )
    if verdict == "parse_failure":
        return FailureStep(AttemptState.REFUSED, "parse_failures", keep_body=True)
    # Binary, oversized, a redirect loop, empty: retried next run.
    return FailureStep(AttemptState.REFUSED, "fetch_errors")
