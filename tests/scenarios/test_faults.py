"""Faults, rate limits and hostile input against real servers on 127.0.0.1 (issue #4)."""

from __future__ import annotations

import random
import threading
import time
from datetime import UTC, datetime
from email.utils import formatdate

from ragsync.politeness import HostPaused
from ragsync.render import not_requested
from ragsync.sync import Syncer
from ragsync.testing import DevSite
from tests.support import Clock, example_pages, make_config, page, sentences, sitemap_source

FAST_RETRIES = {"retry_base": "0.05s", "retry_cap": "0.2s", "max_pause_wait": "5s"}


def syncer_for(tmp_path, site, embedder, name="s", clock=None, fetch=None, **source):
    config = make_config(
        tmp_path / name,
        [sitemap_source(site, **source)],
        fetch={**FAST_RETRIES, **(fetch or {})},
    )
    return Syncer(config, embedder=embedder, clock=clock)


def index(syncer):
    try:
        return {pid: payload for pid, payload, _ in syncer.store.points()}
    finally:
        syncer.store.close()


class RateLimitedFaults:
    """15% 503s and 5% 429s on pages, Retry-After in both forms; records violations."""

    def __init__(self, seed=3):
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.not_before = 0.0
        self.violations: list[float] = []
        self.sent_429 = self.sent_503 = 0
        self.enabled = True

    def __call__(self, path, headers):
        now = time.time()
        with self.lock:
            if now < self.not_before:
                self.violations.append(self.not_before - now)
            if not self.enabled or not path.startswith("/guide/"):
                return None
            draw = self.rng.random()
            if draw < 0.05:
                self.sent_429 += 1
                if self.sent_429 % 2:
                    value, wait = "1", 1.0
                else:  # HTTP-date form, whole seconds
                    target = int(now) + 2
                    value, wait = formatdate(target, usegmt=True), target - now
                self.not_before = max(self.not_before, now + wait)
                return 429, {"Retry-After": value, "Content-Type": "text/plain"}, b"slow down"
            if draw < 0.20:
                self.sent_503 += 1
                return 503, {"Content-Type": "text/plain"}, b"busy"
            return None


def test_faults_converge_to_the_complete_index_and_retry_after_is_honoured(tmp_path, embedder):
    site = DevSite(example_pages(12))
    site.start()
    faults = RateLimitedFaults()
    site.fault = faults
    try:
        # One connection per host: a request already in flight on a second connection when the
        # 429 arrives could not be recalled, and the server would rightly see it.
        syncer = syncer_for(tmp_path, site, embedder, fetch={"per_host_concurrency": 1})
        for _ in range(12):
            result = syncer.run()
            if result.ok and not syncer.state.attempts.list():
                break
            time.sleep(0.3)
        assert result.ok, result.to_dict()["sources"]["docs"]["errors"]
        faults.enabled = False
        reference = syncer_for(tmp_path, site, embedder, name="reference")
        assert reference.run().ok
        assert _without_times(index(syncer)) == _without_times(index(reference))
    finally:
        site.stop()
    assert faults.sent_503 >= 2 and faults.sent_429 >= 1  # the faults really happened
    assert faults.violations == []  # no request before a Retry-After expired
    docs = syncer.state.documents.list()
    assert len(docs) == 12 and all(d["status"] == "active" for d in docs)
    syncer.close()
    reference.close()


def _without_times(points):
    return {
        pid: {**p, "metadata": {k: v for k, v in p["metadata"].items() if k != "last_changed_at"}}
        for pid, p in points.items()
    }


def test_retries_are_jittered_and_never_touch_good_content(tmp_path, embedder):
    site = DevSite(example_pages(8))
    site.start()
    try:
        syncer = syncer_for(
            tmp_path, site, embedder, fetch={"retry_base": "600s", "retry_cap": "15m"}
        )
        syncer.engine.random = random.Random(0)  # 8 draws, all above 0.25: every retry ≥ 150 s away
        assert syncer.run().ok
        before = index(syncer)
        hashes = {d["doc_key"]: d["content_hash"] for d in syncer.state.documents.list()}
        site.fault = lambda path, headers: (
            (503, {}, b"down") if path.startswith("/guide/") else None
        )
        started = datetime.now(UTC).timestamp()
        result = syncer.run()
        attempts = syncer.state.attempts.list()
        assert not result.ok and result.counters.retries_scheduled == 8
        assert {a["state"] for a in attempts} == {"retrying"}
        due = [datetime.fromisoformat(a["next_retry_at"]).timestamp() - started for a in attempts]
        assert all(149 <= d <= 601 for d in due)
        assert len({round(d, 2) for d in due}) == 8  # jitter: not synchronized
        assert max(due) - min(due) > 5
        # Held back until due: the next run requests none of them.
        seen = len(site.hits)
        again = syncer.run()
        assert again.counters.held_back == 8
        assert not [h for h in site.hits[seen:] if h.path.startswith("/guide/")]
        assert index(syncer) == before
        assert {d["doc_key"]: d["content_hash"] for d in syncer.state.documents.list()} == hashes
        # --all asks anyway; the site is back, everything recovers.
        site.fault = None
        assert syncer.run(revalidate_all=True).ok and syncer.state.attempts.list() == []
        syncer.close()
    finally:
        site.stop()


def test_dead_letter_after_the_attempt_bound(tmp_path, embedder):
    site = DevSite({"/a": page("A", {"S": [sentences("alpha")]})})
    site.start()
    site.fault = lambda path, headers: (500, {}, b"boom") if path == "/a" else None
    try:
        syncer = syncer_for(
            tmp_path, site, embedder, fetch={"retry_attempts": 3, "retry_base": "0s"}
        )
        for _ in range(3):
            syncer.run()
        attempt = syncer.state.attempts.list()[0]
        assert (attempt["state"], attempt["attempts"], attempt["last_status"]) == ("dead", 3, 500)
        seen = len(site.hits)
        assert syncer.run().counters.held_back == 1
        assert not site.requests_to("/a")[seen:] and all(h.path != "/a" for h in site.hits[seen:])
        syncer.close()
    finally:
        site.stop()


def test_401_needs_attention_without_blind_retry(tmp_path, embedder):
    site = DevSite({"/a": page("A", {"S": [sentences("alpha")]})})
    site.start()
    site.fault = lambda path, headers: (401, {}, b"who?") if path == "/a" else None
    try:
        syncer = syncer_for(tmp_path, site, embedder)
        syncer.run()
        syncer.run()
        assert len(site.requests_to("/a")) == 1
        assert syncer.state.attempts.list()[0]["state"] == "attention"
        syncer.close()
    finally:
        site.stop()


def test_robots_crawl_delay_spaces_requests_to_the_host(tmp_path, embedder):
    site = DevSite(
        {f"/p{i}": page(f"P{i}", {"S": [sentences(f"topic {i}")]}) for i in range(4)},
        robots="User-agent: *\nCrawl-delay: 0.4\n",
    )
    site.start()
    stamps = []
    site.fault = lambda path, headers: stamps.append((path, time.monotonic())) and None
    try:
        syncer = syncer_for(tmp_path, site, embedder)
        assert syncer.run().ok
        syncer.close()
    finally:
        site.stop()
    starts = [t for path, t in stamps]
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert len(starts) == 6  # sitemap, robots.txt, 4 pages
    page_gaps = gaps[2:]  # once robots.txt is known, every request waits for the delay
    assert all(gap >= 0.38 for gap in page_gaps), gaps


def test_a_due_retry_is_requested_even_when_the_listing_and_the_page_are_not_due(
    tmp_path, embedder
):
    """A realistic cadence (every 1 h): a page that failed is asked again once its retry is
    due, not an hour later with the next listing — a known page and a page never indexed
    alike (the trial on the Cargo Book left 66 pages waiting while `run --watch` spun)."""
    site = DevSite(example_pages(3))
    site.start()
    clock = Clock()
    try:
        config = make_config(
            tmp_path,
            [sitemap_source(site, every="1h")],
            fetch={"retry_base": "10s", "retry_cap": "10s"},
        )
        syncer = Syncer(config, embedder=embedder, clock=clock)
        syncer.run()
        failing = {"/guide/page-1", "/guide/new"}
        site.set_page("/guide/new", "New guide", f"<h1>New guide</h1><p>{sentences('novelty')}</p>")
        site.fault = lambda path, headers: (503, {}, b"busy") if path in failing else None
        clock.advance(minutes=1)
        syncer.run(revalidate_all=True)  # both fail; the listing is next due in an hour
        assert {a["url"] for a in syncer.state.attempts.list("docs")} == {
            site.base_url + path for path in failing
        }
        site.fault = None
        clock.advance(minutes=5)
        seen = len(site.hits)
        result = syncer.run()
        assert result.counters.sources_not_due == 0
        pages = {hit.path for hit in site.hits[seen:]} - {"/robots.txt"}
        assert pages == failing  # only the due retries
        active = {
            d["canonical_url"] for d in syncer.state.documents.list() if d["status"] == "active"
        }
        assert {site.base_url + path for path in failing} <= active
        assert syncer.state.attempts.list("docs") == []
        syncer.close()
    finally:
        site.stop()


def test_a_long_retry_after_defers_the_hosts_pages_in_later_runs_too(tmp_path, embedder):
    """A 429 with a Retry-After of two hours pauses the host past max_pause_wait. The next
    run could not read robots.txt from the paused host either: every page failed as
    "robots.txt unreachable", was retried on each run without a request, and reached the dead
    letter. A paused host's pages are deferred until the pause ends, in every run."""
    site = DevSite(example_pages(6))
    site.start()
    slow = {"Retry-After": "7200", "Content-Type": "text/plain"}
    first_page = sorted(site.listed())[0]
    site.fault = lambda path, headers: (429, slow, b"slow down") if path == first_page else None
    syncer = syncer_for(tmp_path, site, embedder, fetch={"concurrency": 1})
    try:
        first = syncer.run()
        assert any("HTTP 429" in error for error in first.sources["docs"].errors)
        for _ in range(3):
            asked = len(site.hits)
            result = syncer.run(revalidate_all=True)

            assert result.counters.deferred >= 5  # the known pages, due by their schedule
            assert result.counters.fetch_errors == 0 and result.counters.retries_scheduled == 0
            assert len(site.hits) == asked  # nothing is asked of the paused host
            assert result.counters.requests_sent <= 2  # robots.txt once, and the sitemap
            lines = not_requested(result.to_dict()["sources"])
            assert "deferred (host paused)" in lines[0] and len(lines) == 1  # --all won't help
        # a pause names its day: one of two hours can end tomorrow
        assert str(HostPaused("h", 86400.0)) == "h paused until 1970-01-02 00:00:00 UTC"
        failing = syncer.state.attempts.list("docs")
        assert [row["state"] for row in failing] in ([], ["retrying"])  # the 429 page only
    finally:
        syncer.close()
        site.stop()


def test_a_short_retry_after_is_never_named_before_the_failure(tmp_path, embedder):
    """A 429 with a short Retry-After (a new-user trial): `status` named the next try before
    the failure ("failing since" later than "next try"). The retry time is the answer's time
    plus the Retry-After; the failure is recorded when its window commits, after the slower
    pages of the window."""
    site = DevSite(example_pages(2))
    site.start()

    def fault(path, headers):
        if path == "/guide/page-1":  # the newest: asked first
            return 429, {"Retry-After": "1", "Content-Type": "text/plain"}, b"slow down"
        if path == "/guide/page-0":
            time.sleep(1.5)  # a slow page after it in the same window
        return None

    site.fault = fault
    syncer = syncer_for(tmp_path, site, embedder, fetch={"concurrency": 1})
    try:
        syncer.run()
        (failing,) = syncer.state.attempts.list("docs")
        assert [hit.path for hit in site.page_hits()] == ["/guide/page-1", "/guide/page-0"]
        assert failing["state"] == "retrying"
        assert failing["next_retry_at"] >= failing["first_failed_at"]
    finally:
        syncer.close()
        site.stop()
