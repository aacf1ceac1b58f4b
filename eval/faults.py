"""Faults for the fault-replay benchmark (eval/bench_faults.py): what the site answers while a
fault window is open, and the yardsticks that judge an index after each run.

:class:`FaultInjector` is a :class:`ragsync.testing.DevSite` ``fault`` hook. Every decision is a
function of the seed, the fault, the run within its window, the path and how many times this run
already asked for that path — never of the order in which requests arrive — so every system,
whatever its concurrency and request count, meets the same faults.

Faults (``FAULTS``):

- ``sitemap_503``: ``/sitemap.xml`` answers 503; every page answers 200.
- ``sitemap_truncated``: ``/sitemap.xml`` answers 200 with the XML cut mid-document.
- ``child_500``: the sitemap is an index of two gzip children (``DevSite(sitemap_index=True)``)
  and ``/sitemap-2.xml.gz`` answers 500.
- ``maintenance_302``: every page answers ``302 → /maintenance``, a 200 maintenance page.
- ``transient_404``: a seeded ~10% of the live pages answer 404 (for one run, then come back).
- ``rate_429``: 5% of requests answer 429 with ``Retry-After: 1``.
- ``server_5xx``: 15% of requests answer 500, 502, 503 or 504.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from xml.sax.saxutils import escape

from eval.evolving import sentences_in

FAULTS = (
    "sitemap_503",
    "sitemap_truncated",
    "child_500",
    "maintenance_302",
    "transient_404",
    "rate_429",
    "server_5xx",
)
MAINTENANCE = "/maintenance"
MAINTENANCE_SENTENCES = (
    "We are performing scheduled maintenance on the documentation site.",
    "All pages will be back shortly, thank you for your patience.",
    "Follow our status page for updates about this maintenance window.",
)
MAINTENANCE_HTML = (
    "<!doctype html><html><head><title>Down for maintenance | Example Docs</title></head>"
    "<body><main><article><h1>Down for maintenance</h1>"
    + "".join(f"<p>{sentence}</p>" for sentence in MAINTENANCE_SENTENCES)
    + "</article></main></body></html>"
).encode()
RATE_429_SHARE = 0.05
SERVER_5XX_SHARE = 0.15
TRANSIENT_404_SHARE = 0.10
_LISTINGS = ("/robots.txt", "/sitemap")


@dataclass(frozen=True)
class Answer:
    """One injected response, as the DevSite fault hook returns it."""

    status: int
    headers: dict[str, str]
    body: bytes

    def as_tuple(self) -> tuple[int, dict[str, str], bytes]:
        return self.status, self.headers, self.body


def _text(status: int, body: str, **headers: str) -> Answer:
    return Answer(status, {"Content-Type": "text/plain", **headers}, body.encode())


def draw(seed: int, fault: str, run: int, path: str, nth: int) -> float:
    """A uniform number in [0, 1) fixed by its arguments (``str`` seeds hash with SHA-512)."""
    return random.Random(f"{seed}|{fault}|{run}|{path}|{nth}").random()


def pick_transient_404(seed: int, run: int, live_paths: Iterable[str]) -> frozenset[str]:
    """The ~10% of live pages that answer 404 in this run of a ``transient_404`` window."""
    paths = sorted(live_paths)
    count = max(1, round(len(paths) * TRANSIENT_404_SHARE))
    return frozenset(random.Random(f"{seed}|transient_404|{run}").sample(paths, count))


def sitemap_xml(base: str, modified: dict[str, float]) -> bytes:
    """The sitemap DevSite serves for ``{path: modification time}`` on ``base``, byte for byte
    (what a cut-off sitemap is a prefix of)."""

    def lastmod(path: str) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(modified[path]))

    urls = "".join(
        f"<url><loc>{escape(base + path)}</loc><lastmod>{lastmod(path)}</lastmod></url>"
        for path in sorted(modified)
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
    ).encode()


class FaultInjector:
    """The site's ``fault`` hook for one fault window run (``arm``), or none (``disarm``).

    Args:
        site: the DevSite it answers for (its pages and base URL; ``sitemap_index`` is switched
            on while ``child_500`` is armed).
        seed: fixes every random decision.
    """

    def __init__(self, site: Any, seed: int):
        self.site = site
        self.seed = seed
        self.fault: str | None = None
        self.run = 0
        self.gone: frozenset[str] = frozenset()  # transient_404: paths that answer 404
        self._asked: dict[str, int] = {}
        self._lock = threading.Lock()
        self.injected: dict[str, int] = {}  # "fault:status" → responses injected

    def arm(self, fault: str | None, run: int = 0) -> None:
        """Open ``fault`` for ``run`` (0-based within its window); ``None`` serves normally."""
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r} (known: {', '.join(FAULTS)})")
        self.fault, self.run = fault, run
        self.site.sitemap_index = fault == "child_500"
        live = [path for path in self.site.listed() if path != MAINTENANCE]
        self.gone = (
            pick_transient_404(self.seed, run, live) if fault == "transient_404" else (frozenset())
        )
        self.new_system_run()

    def disarm(self) -> None:
        self.arm(None)

    def new_system_run(self) -> None:
        """Forget request counts: the next system's run meets the same faults afresh."""
        with self._lock:
            self._asked = {}

    def __call__(
        self, path_and_query: str, headers: Any
    ) -> tuple[int, dict[str, str], bytes] | None:
        path = path_and_query.split("?", 1)[0]
        with self._lock:
            nth = self._asked.get(path, 0)
            self._asked[path] = nth + 1
        answer = self.answer(path, nth)
        if answer is None:
            return None
        with self._lock:
            key = f"{self.fault}:{answer.status}"
            self.injected[key] = self.injected.get(key, 0) + 1
        return answer.as_tuple()

    def answer(self, path: str, nth: int) -> Answer | None:
        """The injected response to the ``nth`` request (0-based) for ``path`` in this run."""
        if path == MAINTENANCE:  # only ever reached through the maintenance redirect
            return Answer(200, {"Content-Type": "text/html; charset=utf-8"}, MAINTENANCE_HTML)
        fault, page = self.fault, not path.startswith(_LISTINGS)
        if fault == "sitemap_503" and path == "/sitemap.xml":
            return _text(503, "Service Unavailable")
        if fault == "sitemap_truncated" and path == "/sitemap.xml":
            pages = self.site.pages
            listed = {path: pages[path].modified for path in self.site.listed()}
            full = sitemap_xml(self.site.base_url, listed)
            return Answer(200, {"Content-Type": "application/xml"}, full[: len(full) * 3 // 5])
        if fault == "child_500" and path == "/sitemap-2.xml.gz":
            return _text(500, "Internal Server Error")
        if fault == "maintenance_302" and page:
            return Answer(302, {"Location": self.site.base_url + MAINTENANCE}, b"")
        if fault == "transient_404" and path in self.gone:
            return Answer(404, {"Content-Type": "text/html"}, b"<h1>Not found</h1>")
        if fault in ("rate_429", "server_5xx"):
            share = RATE_429_SHARE if fault == "rate_429" else SERVER_5XX_SHARE
            value = draw(self.seed, fault, self.run, path, nth)
            if value >= share:
                return None
            if fault == "rate_429":
                return _text(429, "Too Many Requests", **{"Retry-After": "1"})
            return _text((500, 502, 503, 504)[int(value / share * 4)], "Server Error")
        return None


class StepClock:
    """ragsync's injected clock: time stands still during a run and jumps between runs."""

    def __init__(self, start: datetime, step: timedelta):
        self.start, self.step = start, step
        self.now = start

    def at_run(self, index: int) -> None:
        self.now = self.start + index * self.step

    def __call__(self) -> datetime:
        return self.now


# -- yardsticks ------------------------------------------------------------------------------


def true_point(url: str, text: str, truth: dict[str, set[str]], known: set[str]) -> bool:
    """Whether a point belongs in the index now: its URL is live and it holds no sentence
    (from ``known``) that the live page lacks."""
    if url not in truth:
        return False
    return not any(s in known and s not in truth[url] for s in sentences_in(text))


def wrongly_deleted(
    indexed_urls: set[str], truth: dict[str, set[str]], ever_indexed: set[str]
) -> set[str]:
    """Live pages (faults aside) that this index held a point for before and holds none now.

    A live page never indexed yet (added during a fault) is not counted: it was not deleted.
    """
    return {url for url in truth if url in ever_indexed and url not in indexed_urls}
