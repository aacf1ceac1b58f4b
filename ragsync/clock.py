"""Time in one place: the clock type, and UTC timestamps written and read as ISO 8601 text.

Every timestamp ragsync stores is UTC with microseconds and a ``Z`` (``iso``), so timestamps
sort as text and compare with SQL ``<=`` (README "Architecture": the state DB).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]
"""Returns "now" as an aware datetime (tests pin it)."""


def utc_now() -> datetime:
    """The default clock."""
    return datetime.now(UTC)


def iso(moment: datetime | float) -> str:
    """UTC timestamp as ``2026-11-30T02:03:04.123456Z`` (sorts as text).

    ``moment`` is an aware datetime (a naive one is taken as local time) or a Unix time.

        >>> iso(datetime(2026, 11, 30, 2, 3, 4, 123456, tzinfo=UTC))
        '2026-11-30T02:03:04.123456Z'
        >>> iso(0)
        '1970-01-01T00:00:00.000000Z'
    """
    if not isinstance(moment, datetime):
        moment = datetime.fromtimestamp(moment, UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_iso(timestamp: str) -> datetime:
    """An ISO 8601 timestamp as an aware datetime (no offset means UTC).

        >>> parse_iso("2026-11-30T02:03:04Z")
        datetime.datetime(2026, 11, 30, 2, 3, 4, tzinfo=datetime.timezone.utc)
        >>> parse_iso("2026-11-30")
        datetime.datetime(2026, 11, 30, 0, 0, tzinfo=datetime.timezone.utc)

    Raises:
        ValueError: not an ISO 8601 timestamp.
    """
    moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def epoch(timestamp: str | None) -> float | None:
    """Unix time of a stored timestamp (``None`` stays ``None``).

    >>> epoch("1970-01-01T00:01:00.000000Z")
    60.0
    """
    return parse_iso(timestamp).timestamp() if timestamp else None


def duration_text(seconds: float) -> str:
    """``3600`` as ``1h``, ``5400`` as ``1h30m``, ``90`` as ``1m30s``, ``0`` as ``0s``."""
    rest, parts = round(seconds), []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts) or "0s"
