"""Scheduling (issue #5): source cadence, adaptive per-page revisits, `run --watch`."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from ragsync.config import load_config
from ragsync.errors import ConfigError
from ragsync.schedule import next_interval, next_source_run, refetch_at
from ragsync.sync import Syncer
from ragsync.testing import DevSite
from tests.support import make_config, page, sentences, sitemap_source

BOUNDS = {"initial": 3600, "min_interval": 600, "max_interval": 86400}


@pytest.mark.parametrize(
    ("previous", "changed", "draw", "expected"),
    [
        (None, False, 0.5, 3600),  # a new page starts at the source's cadence
        (None, True, 0.5, 3600),
        (3600, True, 0.5, 1800),  # a change halves the interval …
        (3600, False, 0.5, 5400),  # … an unchanged check stretches it by half
        (700, True, 0.5, 600),  # never below min_interval
        (80000, False, 0.5, 86400),  # never above max_interval
        (3600, False, 0.0, 5400 * 0.9),  # jitter: ±10%
        (3600, False, 1.0, 5400 * 1.1),
    ],
)
def test_next_interval(previous, changed, draw, expected):
    got = next_interval(previous, changed=changed, draw=draw, **BOUNDS)
    assert got == pytest.approx(expected)


def test_pages_indexed_together_are_asked_in_full_spread_over_the_interval():
    week, start = 7 * 86400.0, datetime(2026, 11, 30, tzinfo=UTC).timestamp()
    keys = [f"docs:https://docs.example.org/page-{i}" for i in range(1000)]
    first = [refetch_at(key, start, interval=week) for key in keys]
    # Never within half a week of the last full answer, at most a week after it …
    assert all(start + week / 2 < at <= start + week for at in first)
    # … and spread over that second half: a share on each day of it, none all at once.
    per_day = Counter(int((at - start) // 86400) for at in first)
    assert sorted(per_day) == [3, 4, 5, 6]  # from 3.5 days on
    assert max(per_day.values()) < 350 and min(per_day.values()) > 100
    for key, at in zip(keys, first, strict=True):
        # Asked at its point (or an hour later): next at the same point a week on.
        assert refetch_at(key, at, interval=week) == pytest.approx(at + week)
        assert refetch_at(key, at + 3600, interval=week) == pytest.approx(at + week)
        # A full answer at any other time (the page changed): the gap stays within bounds.
        changed = at + 40_000
        assert changed + week / 2 < refetch_at(key, changed, interval=week) <= changed + week


def test_next_source_run_every_and_cron():
    last = datetime(2026, 11, 30, 10, 7, tzinfo=UTC)
    assert next_source_run(last, every=900, cron=None) == last + timedelta(minutes=15)
    assert next_source_run(last, every=900, cron="0 */6 * * *") == datetime(
        2026, 11, 30, 12, 0, tzinfo=UTC
    )


def test_a_bad_cron_expression_is_a_config_error(tmp_path):
    path = tmp_path / "ragsync.toml"
    path.write_text(
        '[[sources]]\nid = "d"\nkind = "urls"\nurls = ["https://x.org/"]\ncron = "every tuesday"\n'
    )
    with pytest.raises(ConfigError, match=r"sources\[0\]\.cron"):
        load_config(path)


class Clock:
    def __init__(self):
        self.now = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)

    def __call__(self):
        return self.now


def test_with_nothing_due_run_returns_at_once(tmp_path, site, embedder):
    config = make_config(
        tmp_path,
        [{"id": "docs", "kind": "sitemap", "every": "1h", "url": site.base_url + "/sitemap.xml"}],
    )
    with Syncer(config, embedder=embedder) as syncer:
        syncer.run()
        seen = len(site.hits)
        result = syncer.run()
        assert result.counters.sources_not_due == 1 and len(site.hits) == seen  # no request
        assert syncer.run(revalidate_all=True).counters.responses_304 == 4  # --all forces


def test_a_changing_page_is_checked_more_often_than_a_static_one(tmp_path, embedder):
    site = DevSite(
        {
            "/static": page("Static", {"S": [sentences("stone")]}),
            "/news": page("News", {"S": [sentences("news")]}),
        }
    )
    site.start()
    clock = Clock()
    try:
        config = make_config(
            tmp_path,
            [sitemap_source(site, every="10m", min_interval="10m", max_interval="8h")],
        )
        with Syncer(config, embedder=embedder, clock=clock) as syncer:
            syncer.engine.random.seed(7)  # the ±10% jitter compounds; a fixed draw keeps this exact
            for round_ in range(12):
                site.set_page(
                    "/news",
                    "News",
                    f"<h1>News</h1><p>Update {round_}: " + sentences("news") + "</p>",
                )
                syncer.run()
                clock.now += timedelta(minutes=11)
            static = syncer.state.documents.get(f"docs:{site.base_url}/static")
            news = syncer.state.documents.get(f"docs:{site.base_url}/news")
    finally:
        site.stop()
    checks = {path: len(site.requests_to(path)) for path in ("/static", "/news")}
    assert checks["/news"] == 12
    assert checks["/static"] < checks["/news"] / 2
    assert static["check_interval"] > 4 * news["check_interval"]


def test_run_watch_keeps_going_and_stops_cleanly_on_sigterm(tmp_path):
    site = DevSite({"/a": page("A", {"S": [sentences("alpha")]})})
    site.start()
    config = tmp_path / "ragsync.toml"
    config.write_text(
        f'[[sources]]\nid = "docs"\nkind = "sitemap"\nurl = "{site.base_url}/sitemap.xml"\n'
        'every = "1s"\nmin_interval = "1s"\nmax_interval = "1s"\n'
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragsync", "run", "--watch", "-c", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 90
        while len(site.requests_to("/a")) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(site.requests_to("/a")) >= 3  # it revisits on its own
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        site.stop()


def test_due_pages_are_checked_even_when_their_listing_is_not_due(tmp_path, site, embedder):
    clock = Clock()
    config = make_config(
        tmp_path,
        [sitemap_source(site, every="1h", min_interval="1m", max_interval="2m")],
    )
    with Syncer(config, embedder=embedder, clock=clock) as syncer:
        syncer.run()
        clock.now += timedelta(minutes=3)  # pages due (≤ 2.2 min), the listing not (1 h)
        seen = len(site.hits)
        result = syncer.run()
    paths = [h.path for h in site.hits[seen:]]
    assert "/sitemap.xml" not in paths
    assert sorted(p for p in paths if p.startswith("/guide/")) == [
        f"/guide/page-{i}" for i in range(4)
    ]
    assert result.counters.responses_304 == 4 and result.counters.sources_not_due == 0


def test_a_shorter_every_takes_effect_at_once(tmp_path, site, embedder):
    """The next listing was written under the old ``every``: with 1 h, then 5 min, the
    source stayed not due for the rest of the hour."""
    clock = Clock()
    hourly = make_config(tmp_path, [sitemap_source(site, every="1h")])
    with Syncer(hourly, embedder=embedder, clock=clock) as syncer:
        syncer.run()
    clock.now += timedelta(minutes=10)
    often = make_config(tmp_path, [sitemap_source(site, every="5m")])
    with Syncer(often, embedder=embedder, clock=clock) as syncer:
        seen = len(site.requests_to("/sitemap.xml"))
        result = syncer.run()
        assert result.counters.sources_not_due == 0
        assert len(site.requests_to("/sitemap.xml")) == seen + 1
        clock.now += timedelta(minutes=3)
        assert syncer.run().counters.sources_not_due == 1  # 5 min from the listing just read
    clock.now += timedelta(minutes=3)
    with Syncer(hourly, embedder=embedder, clock=clock) as syncer:  # longer: from the next one
        assert syncer.run().counters.sources_not_due == 0
        clock.now += timedelta(minutes=30)
        assert syncer.run().counters.sources_not_due == 1
