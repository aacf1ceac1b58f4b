"""Pure failure and deletion policy, as tables of cases."""

from __future__ import annotations

import random
from email.utils import formatdate

import pytest

from ragsync.policy import missing_step, rate_limit_pause, retry_after_seconds, retry_delay


@pytest.mark.parametrize(
    ("attempt", "draw", "expected"),
    [(1, 0.5, 2.5), (2, 0.5, 5.0), (3, 1.0, 20.0), (20, 1.0, 900.0), (1, 0.0, 0.0)],
)
def test_retry_delay_is_capped_exponential_times_the_draw(attempt, draw, expected):
    assert retry_delay(attempt, base=5, cap=900, draw=draw) == expected


def test_full_jitter_spreads_retries():
    rng = random.Random(1)
    delays = [retry_delay(4, base=5, cap=900, draw=rng.random()) for _ in range(200)]
    assert all(0 <= d <= 40 for d in delays)
    assert len({round(d, 3) for d in delays}) > 190  # not synchronized
    assert min(delays) < 5 and max(delays) > 35  # the whole window is used


NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        (" 0 ", 0.0),
        (formatdate(NOW + 90, usegmt=True), 90.0),
        (formatdate(NOW - 90, usegmt=True), 0.0),  # a date in the past: no wait
        ("soon", None),
        ("", None),
        (None, None),
        ("-5", None),
        # Never raises; anything but ASCII digits or an HTTP-date is None (default backoff).
        ("\u00b2", None),  # "²".isdigit() is True: it used to raise ValueError
        ("\u0661\u0662", None),  # Arabic-Indic digits are not DIGIT either
        ("1.5", None),
        ("1e3", None),
        ("nan", None),
        ("Sun, 06 Nov 99999999999 08:49:37 GMT", None),  # OverflowError inside email.utils
        ("Sun, 06 Nov 1994 25:49:37 GMT", None),  # hour 25
        ("Sun, 06 Nov 1994 08:49:37 +9999", None),
        ("\x00", None),
        # Capped at one day (MAX_PAUSE).
        ("86401", 86400.0),
        ("9" * 5000, 86400.0),
        ("Fri, 31 Dec 9999 23:59:59 GMT", 86400.0),
    ],
)
def test_retry_after_both_forms(value, expected):
    assert retry_after_seconds(value, NOW) == expected


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"x-ratelimit-remaining": "5", "x-ratelimit-reset": "30"}, None),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "30"}, 30.0),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(NOW + 12)}, 12.0),
        ({"x-ratelimit-remaining": "0"}, 1.0),
        ({}, None),
        # Finite ASCII numbers only: anything else is treated as absent (1 s).
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "nan"}, 1.0),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "inf"}, 1.0),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "-inf"}, 1.0),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "\u0661\u0662"}, 1.0),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "soon"}, 1.0),
        # Never negative, capped at one day.
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "-5"}, 0.0),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1e300"}, 86400.0),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(NOW + 90_000)}, 86400.0),
    ],
)
def test_rate_limit_headers(headers, expected):
    assert rate_limit_pause(headers, NOW) == expected


@pytest.mark.parametrize(
    ("count", "since", "now", "confirmations", "grace", "expected"),
    [
        (0, None, 100.0, 2, 3600, (1, 100.0, False)),  # first 404: suspected only
        (1, 100.0, 200.0, 2, 3600, (2, 100.0, False)),  # enough observations, too soon
        (1, 100.0, 3700.0, 2, 3600, (2, 100.0, True)),  # both: tombstone
        (0, None, 100.0, 1, 0, (1, 100.0, True)),  # policy: first observation is enough
        (5, 100.0, 200.0, 2, 3600, (6, 100.0, False)),  # many observations, grace not over
        (0, None, 9999.0, 3, 0, (1, 9999.0, False)),
    ],
)
def test_missing_step(count, since, now, confirmations, grace, expected):
    assert missing_step(count, since, now, confirmations=confirmations, grace=grace) == expected
