"""README promise: after a 429 (or 503) with ``Retry-After``, no new request to that host starts
until the pause ends; only requests already in flight may still arrive.

The origin (``tests/support/rateorigin.py``, in its own process so that the client's threads
cannot delay its clock readings) thinks 30 ms per request and answers ~5% of page requests,
drawn by a seeded RNG, with ``429 Retry-After: 1``. It records when each 429 left it and when
every request arrived; a request that arrives more than ``MARGIN`` after a 429 left and more
than ``MARGIN`` before that 429's pause ends is a violation. The margin admits requests the
client had already sent, or was sending, when the 429 left, and requests that waited out the
pause and arrive as it ends (two processes read the clock, each maybe a scheduling delay late).
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from ragsync.config import FetchConfig
from ragsync.fetch import Fetcher
from ragsync.politeness import HostGate, HostPaused, PoliteFetcher, SharedHostGate
from ragsync.state import StateDB
from ragsync.sync import Syncer
from tests.support import make_config

MARGIN = 0.020
ORIGIN = Path(__file__).resolve().parent.parent / "support" / "rateorigin.py"


class RateLimitedOrigin:
    """``rateorigin.py`` in a subprocess (see its docstring for the arguments)."""

    def __init__(self, *flags, pages=60, share=0.05, retry_after=1, think=0.03, seed=7):
        self.pages = pages
        args = [str(a) for a in (pages, share, retry_after, think, seed)]
        self.process = subprocess.Popen(
            [sys.executable, str(ORIGIN), *args, *flags],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.base_url = f"http://127.0.0.1:{int(self.process.stdout.readline())}"

    def records(self) -> dict:
        with urllib.request.urlopen(self.base_url + "/_records", timeout=10) as answer:
            return json.loads(answer.read())

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def violations(records: dict, margin: float = MARGIN) -> list[tuple[str, float, str]]:
    """``(path of the 429, seconds after it left, path of the request)`` for every request
    that arrived inside a pause, past the margin."""
    return [
        (limited_path, round(arrived - sent, 3), path)
        for sent, ends, limited_path in records["limited"]
        for arrived, path in records["arrivals"]
        if sent + margin < arrived < ends - margin
    ]


def sync_through(origin: RateLimitedOrigin, tmp_path, embedder, *, concurrency, per_host) -> dict:
    config = make_config(
        tmp_path,
        [{"id": "docs", "kind": "sitemap", "url": origin.base_url + "/sitemap.xml"}],
        fetch={
            "concurrency": concurrency,
            "per_host_concurrency": per_host,
            "max_pause_wait": "30s",
        },
    )
    with Syncer(config, embedder=embedder) as syncer:
        result = syncer.run()
    records = origin.records()
    assert records["limited"], "the seed must rate-limit some requests"
    created = result.counters.documents_created
    assert created + len(records["limited"]) == origin.pages  # every page asked once
    return records


def test_no_request_starts_inside_a_pause(tmp_path, embedder):
    """A whole sync run: discovery, robots.txt and pages all pass the gate."""
    origin = RateLimitedOrigin()
    try:
        records = sync_through(origin, tmp_path, embedder, concurrency=8, per_host=4)
    finally:
        origin.stop()
    assert violations(records) == []


def fetch_pages(origin: RateLimitedOrigin, fetchers: list[PoliteFetcher]) -> dict:
    """Every page of ``origin`` once, by 8 threads taking turns with ``fetchers``."""
    urls = [f"{origin.base_url}/p/{i}" for i in range(origin.pages)]

    def get(i: int) -> int:
        return fetchers[i % len(fetchers)].get(urls[i]).status

    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            statuses = list(pool.map(get, range(len(urls))))
        records = origin.records()
    finally:
        for fetcher in fetchers:
            fetcher.fetcher.close()
        origin.stop()
    assert statuses.count(429) == len(records["limited"]) > 0
    return records


@pytest.mark.parametrize("flag", ["--date", "--slow-body"])
def test_http_dates_and_slow_429_bodies_pause_in_time(flag):
    """An HTTP-date ends the pause at that second; a 429 whose body trickles in pauses the host
    from its headers on (the body may take up to fetch.timeout)."""
    origin = RateLimitedOrigin(flag)
    gate = HostGate(per_host_concurrency=4, min_delay=0, max_wait=30)
    records = fetch_pages(origin, [PoliteFetcher(Fetcher(FetchConfig()), gate, default_pause=1)])
    assert violations(records) == []


def test_pauses_hold_across_workers_sharing_the_state(tmp_path):
    """Two workers' gates on one state DB (SharedHostGate), four fetch threads each."""
    state = StateDB(tmp_path / "state.db")
    options = {"per_host_concurrency": 4, "min_delay": 0, "max_wait": 30, "slot_lease": 60}
    workers = [
        PoliteFetcher(
            Fetcher(FetchConfig()), SharedHostGate(state, owner=owner, **options), default_pause=1
        )
        for owner in ("a", "b")
    ]
    try:
        records = fetch_pages(RateLimitedOrigin(seed=1), workers)
    finally:
        state.close()
    assert violations(records) == []


class FakeClock:
    def __init__(self, on_sleep=None):
        self.now = 1000.0
        self.on_sleep = on_sleep

    def time(self):
        return self.now

    def sleep(self, seconds):
        if self.on_sleep is not None:
            self.on_sleep(self)
        self.now += seconds


def test_a_shared_gate_looks_again_after_waiting(tmp_path):
    """A pause set while a request waited for its turn (by a response to a request that was in
    flight, or by another worker) holds that request too."""
    state = StateDB(tmp_path / "state.db")

    def another_worker_is_rate_limited(clock):
        if clock.now == 1000.0:
            other.pause("http://h", 8)  # from 1000: until 1008

    clock = FakeClock(another_worker_is_rate_limited)
    options = {"per_host_concurrency": 2, "min_delay": 0, "max_wait": 30, "slot_lease": 60}
    gate = SharedHostGate(state, owner="a", now=clock.time, sleep=clock.sleep, **options)
    other = SharedHostGate(state, owner="b", now=clock.time, sleep=clock.sleep, **options)
    gate.pause("http://h", 5)
    with gate.request("http://h"):
        assert clock.now == 1008.0  # not 1005, when the first pause ended

    def a_long_pause(clock):
        other.pause("http://h", 120)

    clock.on_sleep = a_long_pause
    gate.pause("http://h", 5)
    with pytest.raises(HostPaused), gate.request("http://h"):
        pass
    state.close()


def test_the_pause_starts_with_the_headers_not_after_the_body():
    gate = HostGate(per_host_concurrency=2, min_delay=0, max_wait=1)
    seen_while_body_streams = []

    def body():
        seen_while_body_streams.append(gate.paused_until("https://x.org"))
        yield b"slow down"

    transport = httpx.MockTransport(
        lambda request: httpx.Response(429, headers={"Retry-After": "60"}, content=body())
    )
    polite = PoliteFetcher(Fetcher(FetchConfig(), transport=transport), gate, default_pause=1)
    assert polite.get("https://x.org/a").status == 429
    assert seen_while_body_streams[0] > 0  # paused before the body was read
