"""Outbound change events: a transactional outbox and an at-least-once dispatcher.

Events are written to the ``outbox`` in the same transaction as the change they describe
(:meth:`ragsync.state.index.Index.commit_document`), so a crash can delay an event but never lose
it. The dispatcher signs each delivery per Standard Webhooks (``webhook-id``,
``webhook-timestamp``, ``webhook-signature: v1,<base64 HMAC-SHA256>``, through the
``standardwebhooks`` package), retries network errors, 5xx and 429 (honouring ``Retry-After``)
with exponential backoff and full jitter, keeps per-document order, and moves an event to the
dead letter after ``max_attempts`` (or at once on another 4xx). ``ragsync events --replay-dead``
sends dead events again.
"""

from __future__ import annotations

import json
import logging
import random
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from standardwebhooks.webhooks import Webhook

from ragsync.clock import iso
from ragsync.config import EventConfig, resolve_secret
from ragsync.configvalues import standard_webhooks_secret
from ragsync.policy import retry_after_seconds, retry_delay
from ragsync.state import StateDB

if TYPE_CHECKING:  # httpx is imported by the first delivery (a run with none skips it)
    import httpx

log = logging.getLogger("ragsync")
DIFF_EXCERPT = 2000


def matches(endpoint: EventConfig, change: dict[str, Any]) -> bool:
    """Whether ``endpoint``'s filters (types, sources, minimum magnitude) accept ``change``."""
    return (
        (not endpoint.types or change["change_type"] in endpoint.types)
        and (not endpoint.sources or change["source_id"] in endpoint.sources)
        and (change["magnitude"] or 0.0) >= endpoint.min_magnitude
    )


def event_payload(change: dict[str, Any], event_id: str) -> dict[str, Any]:
    """The JSON body of the event describing ``change`` (a change-log row)."""
    return {
        "id": event_id,
        "type": f"document.{change['change_type']}",
        "source": change["source_id"],
        "url": change["url"],
        "doc_key": change["doc_key"],
        "timestamp": change["at"],
        "old_hash": change["old_hash"],
        "new_hash": change["new_hash"],
        "chunks_added": change["chunks_added"],
        "chunks_removed": change["chunks_removed"],
        "magnitude": change["magnitude"],
        "diff_excerpt": (change["diff"] or "")[:DIFF_EXCERPT],
    }


def outbox_rows(
    change: dict[str, Any], endpoints: Sequence[EventConfig], now: str
) -> list[dict[str, Any]]:
    """Outbox rows for every endpoint that wants ``change`` (one event id for all)."""
    event_id = f"evt_{uuid.uuid4().hex}"
    payload = json.dumps(event_payload(change, event_id), ensure_ascii=False, sort_keys=True)
    return [
        {
            "event_id": event_id,
            "endpoint": endpoint.url,
            "doc_key": change["doc_key"],
            "type": change["change_type"],
            "payload": payload,
            "state": "pending",
            "attempts": 0,
            "next_attempt_at": now,
            "created_at": now,
        }
        for endpoint in endpoints
        if matches(endpoint, change)
    ]


def signer(endpoint: EventConfig, index: int) -> Webhook | None:
    """The Standard Webhooks signer for ``endpoint`` (None when it has no secret).

    Raises:
        ConfigError: the secret is not a Standard Webhooks secret (``whsec_`` + base64 of 24 to
            64 bytes), or its variable is unset or empty.
    """
    key = f"events[{index}].secret"
    secret = resolve_secret(endpoint.secret, key=key, check=standard_webhooks_secret)
    return Webhook(secret) if secret else None


class Dispatcher:
    """Delivers due outbox events to their endpoints.

    Args:
        state: the state DB holding the outbox.
        endpoints: the ``[[events]]`` tables.
        transport: an httpx transport (tests).
        now: the wall clock (Unix time).
    """

    def __init__(
        self,
        state: StateDB,
        endpoints: Sequence[EventConfig],
        *,
        transport: httpx.BaseTransport | None = None,
        now: Callable[[], float] = time.time,
    ):
        self.state = state
        self.endpoints = {e.url: (e, signer(e, i)) for i, e in enumerate(endpoints)}
        self.now = now
        self.random = random.Random()
        import httpx

        from ragsync.transport import DeadlineTransport

        self.client = httpx.Client(
            transport=transport or DeadlineTransport(max_connections=4), follow_redirects=False
        )

    def close(self) -> None:
        self.client.close()

    def deliver_due(self, deadline: float) -> int:
        """Deliver what is due for up to ``deadline`` seconds; return how many arrived.

        Each delivery ends by ``min(its endpoint's timeout, time left of deadline)``, connect to
        the last byte of the answer (:mod:`ragsync.transport`), so a receiver that answers a byte
        at a time cannot hold the run. A delivery cut short by ``deadline`` (not by its own
        timeout) is no failed attempt: the event stays pending and due.
        """
        stop = self.now() + deadline
        delivered = 0
        while self.now() < stop:
            due = self.state.outbox.list_due(iso(self.now()))
            if not due:
                break
            for row in due:
                if self.now() >= stop:
                    break
                delivered += self._deliver(row, stop - self.now())
        return delivered

    def _deliver(self, row: dict[str, Any], budget: float) -> int:
        endpoint, webhook = self.endpoints.get(row["endpoint"], (None, None))
        if endpoint is None:  # the endpoint left the config: keep the event for a replay
            self.state.outbox.update(
                row["seq"], {"state": "dead", "last_error": "endpoint no longer configured"}
            )
            return 0
        now = self.now()
        headers = {
            "content-type": "application/json",
            "webhook-id": row["event_id"],
            "webhook-timestamp": str(int(now)),
        }
        if webhook is not None:
            moment = datetime.fromtimestamp(now, UTC)
            headers["webhook-signature"] = webhook.sign(row["event_id"], moment, row["payload"])
        import httpx

        from ragsync.transport import deadline as request_deadline

        attempts = row["attempts"] + 1
        retry_after = None
        limit = min(endpoint.timeout, budget)
        try:
            with request_deadline(limit):
                response = self.client.post(
                    endpoint.url, content=row["payload"].encode(), headers=headers, timeout=limit
                )
            status, error = response.status_code, f"HTTP {response.status_code}"
            retry_after = retry_after_seconds(response.headers.get("retry-after"), now)
        except httpx.TimeoutException as exc:
            if budget < endpoint.timeout:  # the run's delivery time is up, not the receiver's
                log.info(
                    "event %s to %s: delivery time up; next run", row["event_id"], endpoint.url
                )
                return 0
            status, kind = None, type(exc).__name__
            error = f"timeout: delivery over events timeout={endpoint.timeout:g}s ({kind})"
        except httpx.HTTPError as exc:
            status, error = None, f"network error: {exc}"
        if status is not None and 200 <= status < 300:
            self.state.outbox.update(
                row["seq"],
                {"state": "delivered", "attempts": attempts, "delivered_at": iso(self.now())},
            )
            return 1
        retryable = status is None or status >= 500 or status in (408, 429)
        if not retryable or attempts >= endpoint.max_attempts:
            log.warning("event %s to %s: %s; dead letter", row["event_id"], endpoint.url, error)
            self.state.outbox.update(
                row["seq"], {"state": "dead", "attempts": attempts, "last_error": error}
            )
            return 0
        delay = retry_delay(
            attempts, base=endpoint.retry_base, cap=endpoint.retry_cap, draw=self.random.random()
        )
        delay = max(delay, retry_after or 0.0)
        self.state.outbox.update(
            row["seq"],
            {
                "attempts": attempts,
                "last_error": error,
                "next_attempt_at": iso(self.now() + delay),
            },
        )
        return 0
