"""The host gate: concurrency, spacing, Crawl-delay and pauses, on a fake clock."""

from __future__ import annotations

import threading

import pytest

from ragsync.politeness import HostGate, HostPaused


class FakeClock:
    def __init__(self):
        self.now = 1000.0
        self.sleeps: list[float] = []

    def time(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def gate(clock, **kwargs):
    options = {"per_host_concurrency": 2, "min_delay": 0.5, "max_wait": 30.0, **kwargs}
    return HostGate(now=clock.time, sleep=clock.sleep, **options)


def test_requests_to_one_host_are_spaced():
    clock = FakeClock()
    g = gate(clock)
    starts = []
    for _ in range(3):
        with g.request("http://a"):
            starts.append(clock.now)
    assert starts == [1000.0, 1000.5, 1001.0]
    with g.request("http://b"):  # another host is not slowed down
        assert clock.now == 1001.0


def test_crawl_delay_raises_the_spacing():
    clock = FakeClock()
    g = gate(clock)
    g.set_crawl_delay("http://a", 2)
    starts = []
    for _ in range(2):
        with g.request("http://a"):
            starts.append(clock.now)
    assert starts == [1000.0, 1002.0]


def test_a_short_pause_is_waited_out_a_long_one_defers():
    clock = FakeClock()
    g = gate(clock, max_wait=10)
    g.pause("http://a", 5)
    with g.request("http://a"):
        assert clock.now == 1005.0
    until = g.pause("http://a", 60)
    with pytest.raises(HostPaused) as info, g.request("http://a"):
        pass
    assert info.value.until == until == 1065.0
    assert clock.now == 1005.0  # nothing was requested, nothing slept


def test_pauses_carried_over_from_earlier_runs():
    clock = FakeClock()
    g = gate(clock, pauses={"http://a": 1003.0})
    with g.request("http://a"):
        assert clock.now == 1003.0


def test_per_host_concurrency_is_a_real_limit():
    g = HostGate(per_host_concurrency=2, min_delay=0, max_wait=1)
    inside, peak, lock = 0, 0, threading.Lock()
    release = threading.Event()

    def worker():
        nonlocal inside, peak
        with g.request("http://a"):
            with lock:
                inside += 1
                peak = max(peak, inside)
            release.wait(0.2)
            with lock:
                inside -= 1

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak == 2
