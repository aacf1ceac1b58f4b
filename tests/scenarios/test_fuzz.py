"""Fuzz suite (issue "Nothing stops a run"): seeded mutations of real inputs against whole runs.

Each test serves a batch of fuzz cases (:mod:`tests.support.mutators`: real sitemaps, feeds,
robots.txt files, pages and headers, mutated) from one :class:`tests.support.fuzzing.FuzzOrigin`
on 127.0.0.1, runs ragsync over all of them at once — twice, so that stored validators are sent
back — each run in a child process with a hard time bound, and checks after each run:

- the run returns within its bound, raises nothing, and its report is whole;
- every listed page ends indexed or with a recorded reason (an attempt with its error, a move,
  robots.txt, a paused host);
- no page robots.txt disallows is requested;
- the vector store holds exactly the indexed chunks (``verify`` is clean);
- a listing keeps what its documents say and is marked incomplete, with a reason, when one of
  them could not be read whole; discovery stays bounded.

A failing check names its case ids and what was mutated; ``RAGSYNC_FUZZ_CASE=<case id>`` runs
that case alone, ``RAGSYNC_FUZZ_SEED=<n>`` draws other cases (the default seed is fixed).
The engine defects the suite found are regression tests at the end (``test_defect_*``).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

import pytest
from protego import Protego

from ragsync.config import Config
from ragsync.connectors.feed import parse_feed
from ragsync.connectors.sitemap import parse_sitemap
from ragsync.errors import ConfigError
from ragsync.fetch import header_bytes
from ragsync.state import StateDB
from tests.support import make_config
from tests.support.fuzzing import (
    Answer,
    FuzzOrigin,
    Listed,
    Request,
    RunOutcome,
    doc_key,
    fixture,
    page_problems,
    report_problems,
    run_bounded,
    sitemap_verdict,
    store_problems,
    text_page,
)
from tests.support.mutators import (
    ROBOTS_PAGES,
    Case,
    ContentEncoding,
    ContentType,
    Feed,
    GzipSitemap,
    HtmlBody,
    Location,
    Mutator,
    RetryAfter,
    Robots,
    SitemapIndex,
    SitemapXml,
    TextSitemap,
    Validators,
    Where,
)

# Fixed, so `make test` checks the same 2,250 cases every time; another seed explores others.
SEED = int(os.environ.get("RAGSYNC_FUZZ_SEED", "20261130"))
ONLY = os.environ.get("RAGSYNC_FUZZ_CASE")  # run one case alone: "<mutator>-<batch>-<index>"
BOUND = 120.0  # seconds a run of one batch may take before it counts as hung
FETCH = {
    "timeout": 1.5,
    "concurrency": 4,
    "per_host_concurrency": 4,
    "retry_base": "0.05s",
    "retry_cap": "0.2s",
    "max_pause_wait": "0.3s",
    "max_body_bytes": 1_000_000,
    "max_redirects": 5,
}
USER_AGENT = "ragsync"  # the product token robots.txt groups match (fetch.user_agent's first word)
DISCOVERY_ROBOTS = b"User-agent: *\nDisallow: /\nAllow: /keep/\n"

pytestmark = pytest.mark.timeout(900)


# -- building batches -----------------------------------------------------------------------


def cases(
    mutator: Mutator, batch: int, size: int, where: Callable[[int, str], Where], round_: int = 0
) -> list[Case]:
    """``size`` cases of ``mutator`` (``where(index, case_id)`` places each), seeded by case
    id and round (round 1 re-mutates the same cases for a second run)."""
    built = []
    for index in range(size):
        case_id = f"{mutator.name}-{batch}-{index:03d}"
        if ONLY and case_id != ONLY:
            continue
        rng = random.Random(f"{SEED}:{case_id}:{round_}")
        built.append(mutator.case(rng, where(index, case_id), case_id))
    if not built:
        pytest.skip(f"RAGSYNC_FUZZ_CASE={ONLY} is not in this batch")
    return built


def serve(origin: FuzzOrigin, batch: Sequence[Case]) -> None:
    for case in batch:
        for path, answer in case.answers.items():
            origin.routes[(case.port, path)] = answer


def urlset(urls: Sequence[str]) -> Answer:
    entries = "".join(f"<url><loc>{escape(url)}</loc></url>" for url in urls)
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'
    ).encode()
    return Answer(
        200,
        ((b"Content-Type", b"application/xml"), (b"ETag", b'"list"')),
        body,
        frozenset({b'"list"'}),
    )


HOSTS = 100  # ports of the shared origin besides port 0: the most hosts one batch needs


@pytest.fixture(scope="module")
def shared_origin() -> Iterator[FuzzOrigin]:
    origin = FuzzOrigin(ports=HOSTS + 1)
    yield origin
    origin.stop()


@pytest.fixture
def origin(shared_origin: FuzzOrigin) -> FuzzOrigin:
    """The module's origin, emptied for this test."""
    shared_origin.reset()
    return shared_origin


def config_for(
    tmp_path: Path,
    sources: list[dict[str, Any]],
    *,
    extract: dict[str, Any] | None = None,
    **fetch: Any,
) -> Config:
    """The batch's config (``fetch`` overrides :data:`FETCH`). The store is Qdrant's engine in
    process: the store is not what is fuzzed here, and Qdrant local mode commits every point
    on its own (about 14 ms each)."""
    store = {"kind": "qdrant_edge", "path": str(tmp_path / "edge"), "collection": "fuzz"}
    return make_config(
        tmp_path,
        sources,
        fetch=FETCH | fetch,
        store=store,
        chunker={"max_tokens": 600},
        extract=extract or {},
    )


class Runs:
    """Runs ragsync over one batch and collects every broken invariant, labelled."""

    def __init__(self, tmp_path: Path, config: Config, label: str):
        self.tmp_path = tmp_path
        self.config = config
        self.label = label
        self.problems: list[str] = []
        self.count = 0

    def run(self, *, bound: float = BOUND) -> dict[str, Any] | None:
        """One bounded run; its report, or None (and a problem) when it hung or raised."""
        self.count += 1
        outcome: RunOutcome = run_bounded(
            self.config, self.tmp_path / f"run-{self.count}.json", bound=bound
        )
        if os.environ.get("RAGSYNC_FUZZ_VERBOSE"):
            print(f"[{self.label}] run {self.count}: {outcome.seconds:.1f} s", outcome.report)
        self.note(outcome.problems(bound))
        if outcome.report is None:
            return None
        self.note(report_problems(outcome.report))
        return outcome.report

    def note(self, problems: Sequence[str]) -> None:
        self.problems += [f"{self.label}, run {self.count}: {p}" for p in problems]

    def state(self) -> closing[StateDB]:
        """The state DB, opened between runs (never while a run holds it)."""
        return closing(StateDB.from_config(self.config.state))

    def check_store(self) -> None:
        self.note(store_problems(self.config))

    def assert_clean(self) -> None:
        shown = "\n".join(self.problems[:40])
        more = f"\n… and {len(self.problems) - 40} more" if len(self.problems) > 40 else ""
        hint = f"(seed {SEED}; RAGSYNC_FUZZ_CASE=<case id> reruns one case)"
        assert not self.problems, f"{len(self.problems)} broken invariants {hint}:\n{shown}{more}"


# -- pages: bodies and headers --------------------------------------------------------------

PAGE_BATCHES = [
    (HtmlBody, 3),
    (Validators, 3),
    (ContentType, 2),
    (ContentEncoding, 2),
    (Location, 3),
]
CASES_PER_PAGE_BATCH = 100


@pytest.mark.parametrize(
    ("mutator", "batch"),
    [(m, b) for m, batches in PAGE_BATCHES for b in range(batches)],
    ids=lambda v: v.name if isinstance(v, type) else str(v),
)
def test_pages(tmp_path: Path, origin: FuzzOrigin, mutator: type[Mutator], batch: int) -> None:
    """A hundred mutated pages on one host (a few under ``/private/``, which robots.txt
    disallows), listed by a clean sitemap; run twice."""

    def where(index: int, case_id: str) -> Where:
        private = random.Random(f"{SEED}:{case_id}:private").random() < 0.05
        return Where(0, f"{'/private' if private else ''}/c/{case_id}", origin.base(0))

    batch_cases = cases(mutator(), batch, CASES_PER_PAGE_BATCH, where)
    serve(origin, batch_cases)
    origin.routes[(0, "/sitemap.xml")] = urlset([origin.url(0, c.path) for c in batch_cases])
    config = config_for(
        tmp_path, [{"id": "pages", "kind": "sitemap", "url": origin.url(0, "/sitemap.xml")}]
    )
    runs = Runs(tmp_path, config, f"{mutator.name} batch {batch}")
    listed = [Listed(c.case_id, origin.url(0, c.path), c.detail) for c in batch_cases]
    by_path = {path: c.case_id for c in batch_cases for path in c.answers}

    def disallowed(url: str) -> bool:
        return urlsplit(url).path.startswith("/private/")

    validators_before: dict[str, tuple[str | None, str | None]] = {}
    for round_ in (1, 2):
        seen = len(origin.requests)
        report = runs.run()
        if report is None:
            break
        with runs.state() as state:
            runs.note(page_problems(state, report, "pages", listed, disallowed=disallowed))
            if round_ == 1:
                validators_before = {
                    d["doc_key"]: (d["etag"], d["last_modified"])
                    for d in state.documents.list("pages")
                }
        runs.note(
            [
                f"{by_path.get(r.path, '?')}: requested {r.path} (robots.txt disallows it)"
                for r in origin.requests[seen:]
                if r.path.startswith("/private/")
            ]
        )
        if round_ == 2:
            runs.note(echo_problems(origin, batch_cases, validators_before, seen))
        runs.check_store()
    runs.assert_clean()


def echo_problems(
    origin: FuzzOrigin,
    batch_cases: Sequence[Case],
    stored: dict[str, tuple[str | None, str | None]],
    since: int,
) -> list[str]:
    """Each page stored with validators was asked again with exactly their bytes."""
    problems = []
    requests = origin.requests[since:]
    for case in batch_cases:
        etag, last_modified = stored.get(
            doc_key("pages", origin.url(0, case.path)) or "", (None, None)
        )
        if not (etag or last_modified):
            continue
        asked = [r for r in requests if (r.port, r.path) == (case.port, case.path)]
        if not asked:
            problems.append(
                f"{case.case_id}: stored validators but not revalidated ({case.detail})"
            )
            continue
        expected = (
            header_bytes(etag) if etag else None,
            header_bytes(last_modified) if last_modified else None,
        )
        got = (asked[0].if_none_match, asked[0].if_modified_since)
        if got != expected:
            problems.append(f"{case.case_id}: sent {got!r}, stored {expected!r} ({case.detail})")
    return problems


# -- Retry-After: one host per case ---------------------------------------------------------

MAX_PAUSE_SLACK = 86_400 + 300  # ragsync.policy.MAX_PAUSE, and then some


def pause_problems(state: StateDB) -> list[str]:
    """Pauses and retries stay finite: never past a day (ragsync.policy.MAX_PAUSE)."""
    latest = time.time() + MAX_PAUSE_SLACK
    problems = [
        f"host {host} paused until {until!r}"
        for host, until in state.hosts.list_pauses().items()
        if not (isinstance(until, float | int) and until <= latest)
    ]
    for attempt in state.attempts.list():
        if attempt["next_retry_at"]:
            moment = datetime.fromisoformat(attempt["next_retry_at"].replace("Z", "+00:00"))
            if moment.timestamp() > latest:
                problems.append(f"{attempt['url']}: next retry at {attempt['next_retry_at']}")
    return problems


@pytest.mark.parametrize("batch", range(2))
def test_retry_after(tmp_path: Path, origin: FuzzOrigin, batch: int) -> None:
    """A hundred 429s and 503s with mutated Retry-After (and X-RateLimit) headers, each on a
    host of its own beside a normal page; run twice (the pauses carry over)."""
    batch_cases = cases(
        RetryAfter(),
        batch,
        HOSTS,
        lambda index, case_id: Where(index + 1, f"/c/{case_id}", origin.base(index + 1)),
    )
    serve(origin, batch_cases)
    listed = [
        Listed(c.case_id, origin.url(c.port, path), c.detail)
        for c in batch_cases
        for path in (c.path, c.facts["also"])
    ]
    origin.routes[(0, "/sitemap.xml")] = urlset([page.url for page in listed])
    config = config_for(
        tmp_path, [{"id": "limits", "kind": "sitemap", "url": origin.url(0, "/sitemap.xml")}]
    )
    runs = Runs(tmp_path, config, f"retry-after batch {batch}")
    for _ in (1, 2):
        report = runs.run()
        if report is None:
            break
        with runs.state() as state:
            runs.note(page_problems(state, report, "limits", listed, disallowed=lambda url: False))
            runs.note(pause_problems(state))
        runs.check_store()
    runs.assert_clean()


# -- discovery documents --------------------------------------------------------------------

DISCOVERY_BATCHES = [
    (SitemapXml, 3),
    (GzipSitemap, 2),
    (TextSitemap, 2),
    (SitemapIndex, 2),
    (Feed, 3),
]
SOURCES_PER_BATCH = 50
MAX_SITEMAPS = 20
MAX_URLS = 2000


PROSE_LINE = "A page a fuzzed listing points at; its words are only here to be indexed."


def keep_pages(request: Request) -> Answer:
    """Discovery batches' pages: whatever lies under /keep/ exists (robots.txt allows only
    that); anything else is a 404."""
    if request.path.startswith("/keep/"):
        return text_page(f"Listed page {request.path}\n\n{PROSE_LINE}")
    return Answer(404, ((b"Content-Type", b"text/plain"),), b"not found")


def expected_listing(
    kind: str, answer: Answer, url: str
) -> tuple[str, list[str], list[str]] | None:
    """``(verdict, pages, children)`` of a root document: whether it can be read whole
    (:func:`tests.support.fuzzing.sitemap_verdict`, or the feed parser), and what its listing
    lists (from the connector's own parser, given what the engine gives it: the document's
    ``url`` and any ``Content-Location``). None when the client reads another body than the
    origin sends (a Content-Encoding)."""
    if any(name.lower() == b"content-encoding" for name, _ in answer.headers):
        return None
    if len(answer.body) > FETCH["max_body_bytes"]:
        return "broken", [], []  # never read: the fetch refuses it
    if kind == "feed":
        try:
            where = next(
                (
                    v.decode("latin-1")
                    for n, v in answer.headers
                    if n.lower() == b"content-location"
                ),
                None,
            )
            feed = parse_feed(answer.body, url=url, content_location=where)
            return "whole", [entry["link"] for entry in feed["entries"]], []
        except Exception:  # the engine wraps whatever a parser raises: an unreadable document
            return "broken", [], []
    verdict = sitemap_verdict(answer.body)
    try:
        document = parse_sitemap(answer.body)
    except Exception:
        return verdict, [], []
    return verdict, [p[0] for p in document.pages], list(document.children)


def listing_problems(
    state: StateDB,
    report: dict[str, Any],
    kind: str,
    case: Case,
    url: str,
    disallowed: Callable[[str], bool],
) -> list[str]:
    """A listing says it is incomplete when its document could not be read whole, is
    complete when it could, and every page it lists ends indexed or with a reason. ``url``
    is where the source reads the document."""
    outcome = report["sources"].get(case.case_id)
    if outcome is None:
        return [f"{case.case_id}: the report has no outcome for the source"]
    incomplete = outcome["listing_incomplete"]
    problems = []
    recorded = state.runs.get_listing(case.case_id)
    if recorded is None or recorded["complete"] != (not incomplete):
        problems.append(f"{case.case_id}: the stored listing {recorded} disagrees with the report")
    expected = expected_listing(kind, case.answers[case.path], url)
    if expected is None:
        return problems
    verdict, pages, children = expected
    # A whole document that lists few of the pages known is distrusted (max_unlisted_share):
    # not a reason a broken document may rely on, nor one a whole one may not give.
    reasons = [reason for reason in incomplete if "max_unlisted_share" not in reason]
    if verdict == "broken" and not reasons:
        problems.append(f"{case.case_id}: listing of a broken document is complete ({case.detail})")
    if verdict == "whole" and not children and len(pages) <= MAX_URLS and reasons:
        problems.append(
            f"{case.case_id}: listing of a whole document is incomplete: {reasons} ({case.detail})"
        )
    if pages and not any("max_urls" in reason for reason in incomplete):
        listed = [Listed(case.case_id, url, case.detail) for url in pages]
        problems += page_problems(state, report, case.case_id, listed, disallowed=disallowed)
    return problems


def discovery_bounds(requests: Sequence[Request], batch_cases: Sequence[Case]) -> list[str]:
    """No listing reads more than its ``max_sitemaps`` documents (a redirect is two
    requests), whatever its documents say."""
    problems = []
    for case in batch_cases:
        folder = case.path.rsplit("/", 1)[0] + "/"
        reads = sum(r.path.startswith(folder) for r in requests)
        if reads > 2 * MAX_SITEMAPS + 5:
            problems.append(
                f"{case.case_id}: {reads} discovery requests in one run ({case.detail})"
            )
    return problems


@pytest.mark.parametrize(
    ("mutator", "batch"),
    [(m, b) for m, batches in DISCOVERY_BATCHES for b in range(batches)],
    ids=lambda v: v.name if isinstance(v, type) else str(v),
)
def test_discovery(tmp_path: Path, origin: FuzzOrigin, mutator: type[Mutator], batch: int) -> None:
    """Fifty sources, each reading its own mutated sitemap or feed; run twice, the second time
    over re-mutated documents (the cached parse and validators of each are replaced)."""
    kind = "feed" if mutator is Feed else "sitemap"
    origin.robots = DISCOVERY_ROBOTS
    origin.default = keep_pages
    rules = Protego.parse(DISCOVERY_ROBOTS.decode())

    def disallowed(url: str) -> bool:
        return origin.port_of(url) == 0 and not rules.can_fetch(url, USER_AGENT)

    def where(index: int, case_id: str) -> Where:
        return Where(0, f"/s/{case_id}", origin.base(0))

    runs: Runs | None = None
    for round_ in (0, 1):
        batch_cases = cases(mutator(), batch, SOURCES_PER_BATCH, where, round_)
        origin.routes.clear()
        serve(origin, batch_cases)
        if runs is None:
            options = {"max_urls": MAX_URLS} | (
                {"max_sitemaps": MAX_SITEMAPS} if kind == "sitemap" else {}
            )
            sources = [
                {"id": c.case_id, "kind": kind, "url": origin.url(0, c.path), **options}
                for c in batch_cases
            ]
            runs = Runs(tmp_path, config_for(tmp_path, sources), f"{mutator.name} batch {batch}")
        seen = len(origin.requests)
        report = runs.run()
        if report is None:
            break
        with runs.state() as state:
            for case in batch_cases:
                url = origin.url(0, case.path)
                runs.note(listing_problems(state, report, kind, case, url, disallowed))
        requests = origin.requests[seen:]
        runs.note(discovery_bounds(requests, batch_cases))
        if mutator is not SitemapIndex:  # an index's children are documents wherever they are
            runs.note(
                [
                    f"requested {r.path} (robots.txt disallows it)"
                    for r in requests
                    if not r.path.startswith(("/s/", "/keep/", "/robots.txt"))
                    and disallowed(origin.url(r.port, r.path))
                ]
            )
        runs.check_store()
    assert runs is not None
    runs.assert_clean()


# -- robots.txt: one host per case ----------------------------------------------------------

ROBOTS_PER_BATCH = 50


def robots_allows(case: Case, url: str) -> bool:
    """What the case's robots.txt answer allows (RFC 9309 §2.3.1): the rules of a 200 (or of
    the redirect's target), everything after a 4xx, nothing after anything else."""
    status = case.facts["status"]
    if status in (200, 301):
        return bool(case.facts["rules"].can_fetch(url, USER_AGENT))
    return 400 <= status < 500


@pytest.mark.parametrize("batch", range(3))
def test_robots(tmp_path: Path, origin: FuzzOrigin, batch: int) -> None:
    """Fifty mutated robots.txt files, each the only rules of its host, over the pages the
    Rust documentation's rules decide on; run twice (the second revalidates each file)."""
    origin.default = lambda request: text_page(f"Page {request.path}\n\n{PROSE_LINE}")
    batch_cases = cases(
        Robots(),
        batch,
        ROBOTS_PER_BATCH,
        lambda index, case_id: Where(index + 1, "", origin.base(index + 1)),
    )
    serve(origin, batch_cases)
    by_port = {case.port: case for case in batch_cases}
    listed = [
        Listed(c.case_id, origin.url(c.port, p), c.detail)
        for c in batch_cases
        for p in ROBOTS_PAGES
    ]
    origin.routes[(0, "/sitemap.xml")] = urlset([page.url for page in listed])
    config = config_for(
        tmp_path, [{"id": "robots", "kind": "sitemap", "url": origin.url(0, "/sitemap.xml")}]
    )
    runs = Runs(tmp_path, config, f"robots batch {batch}")

    def case_of(url: str) -> Case | None:
        return by_port.get(origin.port_of(url) or 0)

    def disallowed(url: str) -> bool:
        case = case_of(url)
        return case is not None and not robots_allows(case, url)

    def breach(what: str, url: str) -> str:
        case = case_of(url)
        assert case is not None
        return f"{case.case_id}: {what} {url}, which its robots.txt disallows ({case.detail})"

    for _ in (1, 2):
        seen = len(origin.requests)
        report = runs.run()
        if report is None:
            break
        with runs.state() as state:
            runs.note(page_problems(state, report, "robots", listed, disallowed=disallowed))
            indexed = [d["canonical_url"] for d in state.documents.list("robots")]
        requested = [
            origin.url(r.port, r.path) for r in origin.requests[seen:] if r.path in ROBOTS_PAGES
        ]
        runs.note([breach("indexed", url) for url in indexed if disallowed(url)])
        runs.note([breach("requested", url) for url in requested if disallowed(url)])
        runs.check_store()
    runs.assert_clean()


# -- the issue's own inputs -----------------------------------------------------------------

PLAIN = (b"Content-Type", b"text/plain; charset=utf-8")
HTML_TYPE = (b"Content-Type", b"text/html; charset=utf-8")
BODY = f"A page that should be indexed.\n\n{PROSE_LINE}".encode()


def pages_source(origin: FuzzOrigin, port: int, paths: Sequence[str]) -> dict[str, Any]:
    """A ``urls`` source over ``paths`` on ``port``."""
    return {"id": "issue", "kind": "urls", "urls": [origin.url(port, p) for p in paths]}


def document(runs: Runs, origin: FuzzOrigin, path: str, port: int = 0) -> dict[str, Any] | None:
    with runs.state() as state:
        return state.documents.get(f"issue:{origin.url(port, path)}")


def attempt(runs: Runs, origin: FuzzOrigin, path: str, port: int = 0) -> dict[str, Any] | None:
    with runs.state() as state:
        return state.attempts.get(f"issue:{origin.url(port, path)}")


def test_issue_dripping_page(tmp_path: Path, origin: FuzzOrigin) -> None:
    """A page sending its body (another, even its status line) a byte every 0.2 s ends with
    a timeout after fetch.timeout (1 s); the run goes on with the rest."""
    origin.routes[(0, "/drip")] = Answer(200, (PLAIN,), b"x" * 60, drip=0.2)
    origin.routes[(0, "/drip-head")] = Answer(200, (PLAIN,), b"y" * 20, drip=0.2, drip_head=True)
    origin.routes[(0, "/fine")] = Answer(200, (PLAIN,), BODY)
    paths = ["/drip", "/drip-head", "/fine"]
    config = config_for(tmp_path, [pages_source(origin, 0, paths)], timeout=1.0)
    runs = Runs(tmp_path, config, "dripping page")
    assert runs.run(bound=30) is not None, runs.problems
    for path in ("/drip", "/drip-head"):
        failed = attempt(runs, origin, path)
        assert failed and "timeout" in failed["last_error"], (path, failed)
    assert document(runs, origin, "/fine") is not None
    runs.assert_clean()


def test_issue_etag_latin1_bytes_are_echoed(tmp_path: Path, origin: FuzzOrigin) -> None:
    """ETag ``"\\xe9t\\xe9"`` (raw obs-text bytes): stored, sent back byte for byte on the
    second run, and answered 304."""
    etag = b'"\xe9t\xe9"'
    origin.routes[(0, "/ete")] = Answer(200, (PLAIN, (b"ETag", etag)), BODY, frozenset({etag}))
    runs = Runs(tmp_path, config_for(tmp_path, [pages_source(origin, 0, ["/ete"])]), "ETag")
    assert runs.run() is not None
    origin.requests.clear()
    report = runs.run()
    assert report is not None, runs.problems
    assert [r.if_none_match for r in origin.requests_to(0, "/ete")] == [etag]
    assert report["counters"]["responses_304"] == 1
    assert attempt(runs, origin, "/ete") is None
    runs.assert_clean()


def test_issue_retry_after_superscript_two(tmp_path: Path, origin: FuzzOrigin) -> None:
    """``Retry-After: ²`` on 429s and 503s (each on its own host), as the one obs-text byte
    0xB2 (latin-1 "²", which ``str.isdigit()`` takes for a digit) and as UTF-8: not a number
    of seconds, so the default backoff applies; the run goes on and each host's other page
    is indexed."""
    hosts = {1: (429, b"\xb2"), 2: (503, b"\xb2"), 3: (429, "²".encode()), 4: (503, "²".encode())}
    urls = []
    for port, (status, value) in hosts.items():
        limited = ((b"Content-Type", b"text/plain"), (b"Retry-After", value))
        origin.routes[(port, "/limited")] = Answer(status, limited, b"busy")
        origin.routes[(port, "/after")] = Answer(200, (PLAIN,), BODY)
        urls += [origin.url(port, "/limited"), origin.url(port, "/after")]
    source = {"id": "issue", "kind": "urls", "urls": urls}
    runs = Runs(tmp_path, config_for(tmp_path, [source]), "Retry-After: ²")
    assert runs.run() is not None, runs.problems
    for port, (status, _) in hosts.items():
        failed = attempt(runs, origin, "/limited", port)
        assert failed and failed["state"] == "retrying", (port, failed)
        assert failed["last_error"] == f"HTTP {status}", (port, failed)
        assert document(runs, origin, "/after", port) is not None
    with runs.state() as state:
        assert all(until < time.time() + 60 for until in state.hosts.list_pauses().values())
    runs.assert_clean()


def test_issue_robots_txt_with_a_byte_order_mark(tmp_path: Path, origin: FuzzOrigin) -> None:
    """A robots.txt starting with a UTF-8 BOM keeps its first group: /private/ is never
    requested."""
    origin.robots = b"\xef\xbb\xbfUser-agent: *\nDisallow: /private/\n"
    origin.routes[(0, "/private/a")] = Answer(200, (PLAIN,), BODY)
    origin.routes[(0, "/public/b")] = Answer(200, (PLAIN,), BODY)
    config = config_for(tmp_path, [pages_source(origin, 0, ["/private/a", "/public/b"])])
    runs = Runs(tmp_path, config, "robots.txt BOM")
    report = runs.run()
    assert report is not None, runs.problems
    assert origin.requests_to(0, "/private/a") == []
    assert report["counters"]["robots_disallowed"] == 1
    assert document(runs, origin, "/public/b") is not None
    runs.assert_clean()


def xml_index(origin: FuzzOrigin, port: int, paths: Sequence[str]) -> bytes:
    """A sitemap index of ``paths`` on ``port``."""
    entries = "".join(f"<sitemap><loc>{escape(origin.url(port, p))}</loc></sitemap>" for p in paths)
    return (
        '<?xml version="1.0" encoding="UTF-8"?><sitemapindex '
        f'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</sitemapindex>'
    ).encode()


def test_issue_gz_child_that_is_not_gzip(tmp_path: Path, origin: FuzzOrigin) -> None:
    """An index's ``.xml.gz`` children that are not gzip: an HTML error page makes the
    listing incomplete, naming the child; plain XML under a ``.gz`` name is read as XML."""
    gz = (b"Content-Type", b"application/gzip")
    origin.routes[(0, "/index.xml")] = Answer(
        200, (), xml_index(origin, 0, ["/broken.xml.gz", "/plain.xml.gz", "/fine.xml"])
    )
    origin.routes[(0, "/broken.xml.gz")] = Answer(200, (gz,), b"<html><h1>502 Bad Gateway</h1>")
    origin.routes[(0, "/plain.xml.gz")] = Answer(200, (gz,), urlset([origin.url(0, "/p/1")]).body)
    origin.routes[(0, "/fine.xml")] = urlset([origin.url(0, "/p/2")])
    origin.default = lambda request: Answer(200, (PLAIN,), BODY + request.path.encode())
    source = {"id": "issue", "kind": "sitemap", "url": origin.url(0, "/index.xml")}
    runs = Runs(tmp_path, config_for(tmp_path, [source]), ".xml.gz child")
    report = runs.run()
    assert report is not None, runs.problems
    reasons = report["sources"]["issue"]["listing_incomplete"]
    assert len(reasons) == 1 and origin.url(0, "/broken.xml.gz") in reasons[0], reasons
    assert document(runs, origin, "/p/1") is not None
    assert document(runs, origin, "/p/2") is not None
    runs.assert_clean()


def test_issue_index_listing_itself_under_query_strings(tmp_path: Path, origin: FuzzOrigin) -> None:
    """A sitemap index listing itself under 50 query strings, each answering the same
    document (port 0: each URL read once, nothing expanded twice) or, self-similar, another
    50 new query strings below its own (port 1: an index below an index at the same path is
    not expanded, and the listing says so). Discovery stays bounded either way: 51 reads, not
    the 1,000 documents ``max_sitemaps`` would allow."""
    width = 50

    def index(port: int, path: str) -> Answer:
        # Port 0 lists the same 50 URLs from every variant, port 1 50 new ones below its own.
        base = path if port else "/index.xml"
        join = "&" if "?" in base else "?"
        variants = [f"{base}{join}v={i}" for i in range(width)]
        return Answer(200, (), xml_index(origin, port, [*variants, "/child.xml"]))

    def answer(request: Request) -> Answer:
        if request.path.startswith("/index.xml"):
            return index(request.port, request.path)
        if request.path == "/child.xml":
            return urlset([origin.url(request.port, "/p/1")])
        return Answer(200, (PLAIN,), BODY + request.path.encode())

    origin.default = answer
    sources = [
        {"id": "issue", "kind": "sitemap", "url": origin.url(0, "/index.xml")},
        {"id": "similar", "kind": "sitemap", "url": origin.url(1, "/index.xml")},
    ]
    runs = Runs(tmp_path, config_for(tmp_path, sources), "self-listing index")
    for _ in (1, 2):
        origin.requests.clear()
        report = runs.run()
        assert report is not None, runs.problems
        for port in (0, 1):
            reads = [r for r in origin.requests if r.port == port and r.path.startswith("/index")]
            assert len(reads) <= width + 1, (port, len(reads))
        assert report["sources"]["issue"]["listing_incomplete"] == []
        reasons = report["sources"]["similar"]["listing_incomplete"]
        assert len(reasons) == 1 and "not expanded" in reasons[0], reasons
    assert document(runs, origin, "/p/1") is not None
    runs.assert_clean()


# -- engine defects the suite found, each fixed: regression tests ------------------------------


def test_defect_repeated_etag_empty_last_field(tmp_path: Path, origin: FuzzOrigin) -> None:
    etags = (b"ETag", b'"x"'), (b"ETag", b"")
    origin.routes[(0, "/a")] = Answer(200, (PLAIN, *etags), BODY, frozenset({b'"x"', b'"x",'}))
    runs = Runs(tmp_path, config_for(tmp_path, [pages_source(origin, 0, ["/a"])]), "ETag, ETag:")
    assert runs.run() is not None and document(runs, origin, "/a") is not None
    origin.requests.clear()
    assert runs.run() is not None, runs.problems
    assert origin.requests_to(0, "/a"), "the page was not revalidated"
    assert attempt(runs, origin, "/a") is None, attempt(runs, origin, "/a")
    runs.assert_clean()


def test_defect_robots_group_by_substring(tmp_path: Path, origin: FuzzOrigin) -> None:
    origin.robots = b"User-agent: *\nDisallow: /private/\n\nUser-agent: pypi\nAllow: /\n"
    origin.routes[(0, "/private/a")] = Answer(200, (PLAIN,), BODY)
    config = config_for(tmp_path, [pages_source(origin, 0, ["/private/a"])])
    runs = Runs(tmp_path, config, "robots.txt group 'pypi'")
    assert runs.run() is not None, runs.problems
    assert origin.requests_to(0, "/private/a") == []


def test_defect_long_crawl_delay_holds_the_run(tmp_path: Path, origin: FuzzOrigin) -> None:
    origin.robots = b"User-agent: *\nCrawl-delay: 1000\n"
    origin.default = lambda request: Answer(200, (PLAIN,), BODY + request.path.encode())
    source = pages_source(origin, 1, ["/a", "/b", "/c"])
    runs = Runs(tmp_path, config_for(tmp_path, [source]), "Crawl-delay: 1000")
    assert runs.run(bound=6) is not None, runs.problems
    runs.assert_clean()


def test_defect_extraction_without_time_budget(tmp_path: Path, origin: FuzzOrigin) -> None:
    page = fixture("rust-edition-guide-rust-2021-index.html")
    flood = page[:4976] + b"<!--<!--" * 60_000 + page[4976:]
    origin.routes[(0, "/slow")] = Answer(200, (HTML_TYPE,), flood)
    origin.routes[(0, "/fine")] = Answer(200, (PLAIN,), BODY)
    config = config_for(
        tmp_path, [pages_source(origin, 0, ["/slow", "/fine"])], extract={"cpu_budget": "2s"}
    )
    runs = Runs(tmp_path, config, "comment flood")
    assert runs.run(bound=15) is not None, runs.problems
    assert document(runs, origin, "/fine") is not None
    runs.assert_clean()


def test_defect_invalid_idna_host_escapes_the_fetcher(tmp_path: Path, origin: FuzzOrigin) -> None:
    url = "http://12\u00e3(7.0.0.1/x"
    with pytest.raises(ConfigError, match=r"sources\[0\]\.urls\[0\]: not an absolute"):
        config_for(tmp_path, [{"id": "issue", "kind": "urls", "urls": [url]}])
    # A file is read at run time: the URL reaches the listing, which names it.
    (tmp_path / "urls.txt").write_text(url + "\n", encoding="utf-8")
    source = {"id": "issue", "kind": "urls", "urls_file": "urls.txt"}
    runs = Runs(tmp_path, config_for(tmp_path, [source]), "IDNA host")
    report = runs.run()
    assert report is not None, runs.problems
    with runs.state() as state:
        runs.note(
            page_problems(
                state,
                report,
                "issue",
                [Listed("idna", url, "")],
                disallowed=lambda url: False,
            )
        )
    runs.assert_clean()
