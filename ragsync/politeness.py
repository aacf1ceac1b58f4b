"""Per-host politeness shared by the fetch workers of one process.

Per host: at most ``per_host_concurrency`` requests in flight, at least ``min_delay`` seconds
between request starts (raised to the host's robots.txt Crawl-delay), and no request at all
before a pause set by ``Retry-After`` or an exhausted ``X-RateLimit`` budget has passed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from ragsync.clock import iso
from ragsync.fetch import Fetcher, HopScope
from ragsync.models import Response
from ragsync.policy import rate_limit_pause, retry_after_seconds
from ragsync.urls import host_of


class HostPaused(Exception):
    """The host is paused past what this run is willing to wait; retry at ``until``."""

    def __init__(self, host: str, until: float):
        self.host = host
        self.until = until
        super().__init__(
            f"{host} paused until {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(until))}"
        )


class HostGate:
    """Admits requests to hosts politely (thread-safe).

    Args:
        per_host_concurrency: requests in flight per host.
        min_delay: seconds between two request starts to one host.
        max_wait: a wait longer than this (a pause, or the spacing of a long Crawl-delay)
            raises :class:`HostPaused` instead of sleeping.
        pauses: ``{host: Unix time}`` pauses carried over from earlier runs.
        now / sleep: the wall clock and sleeper (tests inject both).
    """

    def __init__(
        self,
        *,
        per_host_concurrency: int,
        min_delay: float,
        max_wait: float,
        pauses: dict[str, float] | None = None,
        now: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.per_host_concurrency = per_host_concurrency
        self.min_delay = min_delay
        self.max_wait = max_wait
        self._now = now
        self._sleep = sleep
        self._lock = threading.Lock()
        self._slots: dict[str, threading.Semaphore] = {}
        self._next_start: dict[str, float] = {}
        self._delay: dict[str, float] = {}
        self._paused_until: dict[str, float] = dict(pauses or {})

    def now(self) -> float:
        """The gate's clock (Unix time): pauses are kept on it."""
        return self._now()

    def set_crawl_delay(self, host: str, seconds: float | None) -> None:
        """Use robots.txt Crawl-delay for ``host`` when it is longer than ``min_delay``."""
        if seconds:
            with self._lock:
                self._delay[host] = max(self.min_delay, float(seconds))

    def pause(self, host: str, seconds: float) -> float:
        """No request to ``host`` for ``seconds``; returns the Unix time the pause ends."""
        with self._lock:
            until = max(self._paused_until.get(host, 0.0), self._now() + seconds)
            self._paused_until[host] = until
            return until

    def paused_until(self, host: str) -> float:
        with self._lock:
            return self._paused_until.get(host, 0.0)

    @contextmanager
    def request(self, host: str) -> Iterator[None]:
        """Hold a slot for one request to ``host``, waiting for spacing and pauses.

        Raises:
            HostPaused: the host's next request may not start within ``max_wait``.
        """
        with self._lock:
            slots = self._slots.setdefault(host, threading.Semaphore(self.per_host_concurrency))
        with slots:
            while True:
                with self._lock:
                    now = self._now()
                    paused = self._paused_until.get(host, 0.0)
                    start = max(now, paused, self._next_start.get(host, 0.0))
                    # A long pause, or a long robots.txt Crawl-delay, defers the host's pages
                    # to a later run instead of holding this one.
                    if start - now > self.max_wait:
                        raise HostPaused(host, start)
                    if start <= now:
                        self._next_start[host] = now + self._delay.get(host, self.min_delay)
                        break
                self._sleep(start - now)
            yield


class PoliteFetcher:
    """A fetcher whose every request passes the :class:`HostGate` and whose every response
    can pause its host (``Retry-After`` on 429/503, a spent ``X-RateLimit`` budget).

    Args:
        fetcher: the plain fetcher; this passes itself as its ``gate``.
        gate: the host gate shared by all fetch threads of the run (or, for workers, by every
            process: :class:`SharedHostGate`).
        default_pause: seconds to pause a host after a 429 without ``Retry-After``.
    """

    def __init__(self, fetcher: Fetcher, gate: HostGate | SharedHostGate, *, default_pause: float):
        self.fetcher = fetcher
        self.gate = gate
        self.default_pause = default_pause
        self._lock = threading.Lock()
        self._new_pauses: dict[str, tuple[float, str]] = {}

    def get(
        self,
        url: str,
        *,
        etag: str | None = None,
        last_modified: str | None = None,
        follow_temporary: bool = True,
        scope: HopScope | None = None,
        pages_only: bool = False,
    ) -> Response:
        """GET through the gate: every hop of a redirect chain passes the gate of its own host
        (see :meth:`ragsync.fetch.Fetcher.get` for the arguments).

        Raises:
            HostPaused: a hop's host is paused for longer than the gate waits.
            FetchError: the fetcher's.
        """
        return self.fetcher.get(
            url,
            etag=etag,
            last_modified=last_modified,
            follow_temporary=follow_temporary,
            gate=self,
            scope=scope,
            pages_only=pages_only,
        )

    def admit(self, url: str) -> AbstractContextManager[None]:
        """One hop's turn at its host's gate (the fetcher's :class:`~ragsync.fetch.HopGate`)."""
        return self.gate.request(host_of(url))

    def headers_arrived(self, url: str, status: int, headers: dict[str, str]) -> None:
        """Pause the hop's host as soon as a response asks for it: before its body is read
        (which may take up to ``fetch.timeout``) and before the slot is released, so no request
        that passes the gate after this response can miss the pause. (Requests already in
        flight to the host cannot be recalled: per_host_concurrency = 1 rules them out.)"""
        seconds = self.pause_for(status, headers)
        if seconds is None:
            return
        host = host_of(url)
        until = self.gate.pause(host, seconds)
        with self._lock:
            self._new_pauses[host] = (until, f"HTTP {status} from {url}")

    def pause_for(self, status: int, headers: dict[str, str]) -> float | None:
        """Seconds to pause the host after a response, or None."""
        now = self.gate.now()  # the clock the pause is kept on: an HTTP-date ends on time
        seconds = rate_limit_pause(headers, now)
        if status in (429, 503):
            after = retry_after_seconds(headers.get("retry-after"), now)
            if after is not None:
                seconds = max(seconds or 0.0, after)
            elif status == 429:
                seconds = max(seconds or 0.0, self.default_pause)
        return seconds

    def take_new_pauses(self) -> dict[str, tuple[float, str]]:
        """Pauses set since the last call: ``{host: (until, reason)}`` (to persist them)."""
        with self._lock:
            pauses, self._new_pauses = self._new_pauses, {}
        return pauses


class SharedHostGate:
    """:class:`HostGate`'s rules kept in the state DB, so they bind every worker sharing it.

    A request takes one of the host's ``per_host_concurrency`` slot rows (leased for
    ``slot_lease`` seconds, so a killed worker's slots come free) and the host's next start
    time, which moves on by the host's delay; pauses (Retry-After, rate-limit budgets) and the
    robots Crawl-delay are host rows every worker reads.

    Args:
        state: the shared :class:`~ragsync.state.StateDB`.
        owner: this worker's id (slot rows name it).
        poll: seconds between tries while every slot of a host is taken.
    """

    def __init__(
        self,
        state: Any,
        *,
        owner: str,
        per_host_concurrency: int,
        min_delay: float,
        max_wait: float,
        slot_lease: float,
        poll: float = 0.02,
        now: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.state = state
        self.owner = owner
        self.per_host_concurrency = per_host_concurrency
        self.min_delay = min_delay
        self.max_wait = max_wait
        self.slot_lease = slot_lease
        self.poll = poll
        self._now = now
        self._sleep = sleep

    def now(self) -> float:
        """The gate's clock (Unix time): pauses are kept on it."""
        return self._now()

    def set_crawl_delay(self, host: str, seconds: float | None) -> None:
        if seconds and float(seconds) > self.min_delay:
            self.state.hosts.put_crawl_delay(host, float(seconds))

    def pause(self, host: str, seconds: float) -> float:
        stamp = iso(self._now())
        return float(
            self.state.hosts.pause_at_least(
                host, self._now() + seconds, f"paused by worker {self.owner}", stamp
            )
        )

    def paused_until(self, host: str) -> float:
        return float(self.state.hosts.paused_until(host))

    @contextmanager
    def request(self, host: str) -> Iterator[None]:
        """Hold one of the host's shared slots for one request (see :meth:`HostGate.request`).

        Raises:
            HostPaused: the host is paused for longer than ``max_wait``.
        """
        while True:
            taken = self.state.hosts.claim_slot(
                host,
                self.owner,
                limit=self.per_host_concurrency,
                min_delay=self.min_delay,
                clock=self._now,
                lease=self.slot_lease,
            )
            if taken is not None:
                break
            self._sleep(self.poll)
        slot, start, paused, now = taken
        try:
            while True:
                wait = max(start, paused) - now
                if wait > self.max_wait:  # a long pause or Crawl-delay: a later run's
                    raise HostPaused(host, max(start, paused))
                if wait <= 0:
                    break
                self._sleep(wait)
                # A pause set while this request waited (by a response to a request that was in
                # flight, or by another worker) binds it too.
                paused, now = self.paused_until(host), self._now()
            yield
        finally:
            self.state.hosts.release_slot(host, slot, self.owner)
