"""Listing completeness: every connector says when its listing missed something it should have
listed (``DiscoveryContext.incomplete_reasons``), keeps what it could read, stays bounded on
hostile sitemap indexes, and never lets an exception out of ``discover()``."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import pytest

from ragsync.config import FetchConfig
from ragsync.connectors.feed import FeedOptions, FeedSource
from ragsync.connectors.http_api import HttpApiOptions, HttpApiSource
from ragsync.connectors.sitemap import MAX_DEPTH, SitemapOptions, SitemapSource
from ragsync.connectors.urls import UrlListOptions, UrlListSource
from ragsync.discovery import DiscoveryContext
from ragsync.errors import ConfigError
from ragsync.fetch import Fetcher
from ragsync.models import Candidate, SourceOutcome
from ragsync.politeness import HostGate, PoliteFetcher
from ragsync.robots import RobotsPolicy, decode_robots
from ragsync.state import StateDB
from ragsync.testing import DevSite
from tests.support import make_config

XML = {"Content-Type": "application/xml"}
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(urls: list[str]) -> bytes:
    entries = "".join(f"<url><loc>{url}</loc></url>" for url in urls)
    return f'<?xml version="1.0"?><urlset {NS}>{entries}</urlset>'.encode()


def index(children: list[str]) -> bytes:
    entries = "".join(f"<sitemap><loc>{escape(child)}</loc></sitemap>" for child in children)
    return f'<?xml version="1.0"?><sitemapindex {NS}>{entries}</sitemapindex>'.encode()


def documents(site: DevSite, answers: dict[str, Any]) -> None:
    """Serve ``answers[path_with_query]`` (a key ending in ``*`` matches a prefix): bytes (200,
    with an ETag and 304 on a match), an int status, or a callable of the path; anything else
    is the site's own answer."""

    def fault(path: str, headers: Any) -> tuple[int, dict[str, str], bytes] | None:
        answer = answers.get(path)
        for key, value in answers.items():
            if answer is None and key.endswith("*") and path.startswith(key[:-1]):
                answer = value
        if answer is None:
            return None
        if callable(answer):
            answer = answer(path)
        if isinstance(answer, int):
            return answer, {"Content-Type": "text/plain"}, b"unavailable"
        etag = '"' + hashlib.sha256(answer).hexdigest()[:16] + '"'
        if headers.get("If-None-Match") == etag:
            return 304, {"ETag": etag}, b""
        return 200, {**XML, "ETag": etag}, answer

    site.fault = fault


@pytest.fixture
def site() -> Iterator[DevSite]:
    site = DevSite({f"/p{i}": (f"P{i}", f"<p>{i}</p>") for i in range(6)}, sitemap_index=True)
    site.start()
    yield site
    site.stop()


@contextmanager
def discovery(tmp_path: Path) -> Iterator[tuple[DiscoveryContext, SourceOutcome]]:
    """A real DiscoveryContext: polite fetcher, SQLite state in ``tmp_path``."""
    fetcher = Fetcher(FetchConfig(timeout=2))
    polite = PoliteFetcher(
        fetcher, HostGate(per_host_concurrency=2, min_delay=0, max_wait=1), default_pause=1
    )
    state = StateDB(tmp_path / "state.db")
    outcome = SourceOutcome()
    ctx = DiscoveryContext(polite, state, "docs", tmp_path, outcome, lambda: "2026-11-01T00:00:00Z")
    try:
        yield ctx, outcome
    finally:
        fetcher.close()
        state.close()


def listing(tmp_path: Path, source: Any) -> tuple[list[str], list[str], SourceOutcome]:
    """(listed URLs, incomplete_reasons, outcome) of one discovery."""
    with discovery(tmp_path) as (ctx, outcome):
        found = [item.url for item in source.discover(ctx) if isinstance(item, Candidate)]
        return found, ctx.incomplete_reasons, outcome


def sitemap(url: str, **options: Any) -> SitemapSource:
    return SitemapSource(SitemapOptions(url, **options))


# -- sitemaps -------------------------------------------------------------------------------


def test_a_complete_listing_has_no_reasons(tmp_path, site):
    found, reasons, outcome = listing(tmp_path, sitemap(site.base_url + "/sitemap.xml"))
    assert sorted(found) == [f"{site.base_url}/p{i}" for i in range(6)]
    assert reasons == [] and outcome.errors == [] and outcome.ok


def test_root_sitemap_503_is_an_incomplete_listing(tmp_path, site):
    documents(site, {"/sitemap.xml": 503})
    found, reasons, outcome = listing(tmp_path, sitemap(site.base_url + "/sitemap.xml"))
    assert found == []
    assert reasons == [f"sitemap {site.base_url}/sitemap.xml: HTTP 503"]
    assert outcome.errors == reasons and not outcome.ok  # also a warning of the run report


def test_one_failing_child_keeps_the_other_childs_pages(tmp_path, site):
    documents(site, {"/sitemap-2.xml.gz": 500})
    found, reasons, _ = listing(tmp_path, sitemap(site.base_url + "/sitemap.xml"))
    assert sorted(found) == [f"{site.base_url}/p{i}" for i in (0, 2, 4)]  # sitemap-1's half
    assert reasons == [f"sitemap {site.base_url}/sitemap-2.xml.gz: HTTP 500"]


@pytest.mark.parametrize(
    "body",
    [
        b"\x1f\x8b\x08\x00garbage that is no deflate stream at all",
        gzip.compress(urlset([f"http://x.org/{i}" for i in range(50)]))[:-30],  # cut short
    ],
    ids=["invalid gzip", "truncated gzip"],
)
def test_a_bad_gzip_child_is_a_failed_document_not_a_crash(tmp_path, site, body):
    documents(site, {"/sitemap-1.xml.gz": body})
    found, reasons, _ = listing(tmp_path, sitemap(site.base_url + "/sitemap.xml"))
    assert sorted(found) == [f"{site.base_url}/p{i}" for i in (1, 3, 5)]  # sitemap-2's half
    assert len(reasons) == 1
    assert reasons[0].startswith(f"sitemap {site.base_url}/sitemap-1.xml.gz: invalid gzip")


def test_a_truncated_sitemap_keeps_its_complete_entries_also_from_the_cache(tmp_path, site):
    whole = urlset([f"{site.base_url}/p{i}" for i in range(6)])
    cut = whole[: whole.index(b"/p3</loc>")]  # breaks off inside the fourth <url>
    documents(site, {"/sitemap.xml": cut})
    with discovery(tmp_path) as (ctx, _):
        runs = []
        for _ in range(2):  # the second reads the cached parse after a 304
            before = len(ctx.incomplete_reasons)
            found = [c.url for c in sitemap(site.base_url + "/sitemap.xml").discover(ctx)]
            runs.append((found, ctx.incomplete_reasons[before:]))
    assert [hit.status for hit in site.hits] == [200, 304]
    for found, reasons in runs:
        assert found == [f"{site.base_url}/p{i}" for i in range(3)]
        assert len(reasons) == 1
        assert reasons[0].startswith(f"sitemap {site.base_url}/sitemap.xml: XML breaks off")
        assert "after 3 complete entries" in reasons[0]


def test_a_truncated_index_keeps_its_complete_children(tmp_path, site):
    whole = index([f"{site.base_url}/sitemap-1.xml.gz", f"{site.base_url}/sitemap-2.xml.gz"])
    documents(site, {"/sitemap.xml": whole[: whole.index(b"sitemap-2")]})
    found, reasons, _ = listing(tmp_path, sitemap(site.base_url + "/sitemap.xml"))
    assert sorted(found) == [f"{site.base_url}/p{i}" for i in (0, 2, 4)]
    assert len(reasons) == 1 and "XML breaks off after 1 complete entries" in reasons[0]


def test_an_index_nested_too_deep_is_incomplete(tmp_path, site):
    chain = {f"/s{d}.xml": index([f"{site.base_url}/s{d + 1}.xml"]) for d in range(MAX_DEPTH + 1)}
    chain[f"/s{MAX_DEPTH + 1}.xml"] = urlset([site.base_url + "/p0"])
    documents(site, chain)
    found, reasons, _ = listing(tmp_path, sitemap(site.base_url + "/s0.xml"))
    assert found == []
    assert [hit.path for hit in site.hits] == [f"/s{d}.xml" for d in range(MAX_DEPTH + 1)]
    assert reasons == [
        f"sitemap {site.base_url}/s{MAX_DEPTH + 1}.xml: not read: nested deeper than"
        f" {MAX_DEPTH} levels (listed by {site.base_url}/s{MAX_DEPTH}.xml)"
    ]


def test_the_document_cap_bounds_a_hostile_index(tmp_path, site):
    # Every index lists ten new ones at new paths: 1 + 10 + 100 + 1000 documents to depth 3.
    documents(
        site, {"/sitemap*": lambda path: index([f"{site.base_url}{path}-{i}" for i in range(10)])}
    )
    found, reasons, outcome = listing(
        tmp_path, sitemap(site.base_url + "/sitemap.xml", max_sitemaps=5)
    )
    assert found == [] and len(site.hits) == 5
    assert reasons == [  # one reason, however many documents were left unread
        f"sitemap {site.base_url}/sitemap.xml-4: not read: max_sitemaps=5 documents already read"
        " (45 more like it in this listing)"  # 6 children and the 4 x 10 queued below
    ]
    assert outcome.errors == reasons


@pytest.mark.parametrize(
    ("children", "fetches", "complete"),
    [
        # The same index at ten URLs: each read, none expanded twice.
        (lambda path: [f"/sitemap.xml?v={i}" for i in range(1, 11)], 11, True),
        # Ten spellings of one canonical URL: read once.
        (lambda path: [f"/sitemap.xml?utm_source={i}#top" for i in range(1, 11)], 1, True),
        # Children named after the requested URL: a new index at every URL, without end
        # (1,111 fetches and 10,000 warnings before).
        (
            lambda path: [f"{path}{'&' if '?' in path else '?'}v={i}" for i in range(1, 11)],
            11,
            False,
        ),
    ],
    ids=["same index, ten URLs", "ten spellings", "self-similar"],
)
def test_a_self_listing_index_costs_a_dozen_fetches(tmp_path, site, children, fetches, complete):
    def answer(path: str) -> bytes:
        return index(
            [site.base_url + child for child in children(path)]
            + [f"{site.base_url}/sitemap-1.xml.gz"]
        )

    documents(site, {"/sitemap.xml*": answer})
    found, reasons, outcome = listing(tmp_path, sitemap(site.base_url + "/sitemap.xml"))
    assert sorted(found) == [f"{site.base_url}/p{i}" for i in (0, 2, 4)]
    assert len([hit for hit in site.hits if hit.path == "/sitemap.xml"]) == fetches
    if complete:  # every document was read
        assert reasons == [] and outcome.errors == []
    else:
        assert (
            reasons
            == outcome.errors
            == [
                f"sitemap {site.base_url}/sitemap.xml?v=1: not expanded: a sitemap index below an"
                f" index at the same path (listed by {site.base_url}/sitemap.xml)"
                " (9 more like it in this listing)"
            ]
        )


def test_max_sitemaps_is_a_source_option(tmp_path):
    source = {"id": "docs", "kind": "sitemap", "url": "https://x.org/sitemap.xml"}
    config = make_config(tmp_path, [{**source, "max_sitemaps": 5}])
    assert config.sources[0].options.max_sitemaps == 5
    assert make_config(tmp_path, [source]).sources[0].options.max_sitemaps == 1000
    with pytest.raises(ConfigError, match=r"sources\[0\]\.max_sitemaps"):
        make_config(tmp_path, [{**source, "max_sitemaps": 0}])


def test_robots_txt_without_sitemap_lines_is_incomplete(tmp_path, site):
    site.robots = "User-agent: *\nDisallow: /private\n"
    found, reasons, _ = listing(tmp_path, sitemap(site.base_url + "/robots.txt"))
    assert found == [] and reasons == [f"robots.txt {site.base_url}/robots.txt: lists no Sitemap"]


def test_sitemap_line_first_after_a_byte_order_mark(tmp_path, site):
    site.robots = f"\ufeffSitemap: {site.base_url}/sitemap.xml\nUser-agent: *\nAllow: /\n"
    found, reasons, _ = listing(tmp_path, sitemap(site.base_url + "/robots.txt"))
    assert len(found) == 6 and reasons == []


# -- robots.txt -------------------------------------------------------------------------------


def test_robots_txt_with_a_byte_order_mark_keeps_its_first_group(tmp_path, site):
    site.robots = "\ufeffUser-agent: *\nDisallow: /private\n"  # served as EF BB BF ...
    with discovery(tmp_path) as (ctx, _):
        engine = RobotsPolicy(  # what the engine passes today
            lambda url: ctx.get_parsed(url, lambda body: body.decode("utf-8", "replace")),
            "ragsync",
        )
        decoded = RobotsPolicy(lambda url: ctx.get_parsed(url, decode_robots), "ragsync")
        for robots in (engine, decoded):
            assert robots.allowed(site.base_url + "/private/secret") is False
            assert robots.allowed(site.base_url + "/p1") is True
    assert decode_robots(b"\xef\xbb\xbfUser-agent: *\n") == "User-agent: *\n"


# -- urls, feed, http_api ---------------------------------------------------------------------


def test_a_missing_urls_file_is_an_incomplete_listing(tmp_path):
    source = UrlListSource(UrlListOptions(urls=("https://x.org/a",), urls_file="missing.txt"))
    found, reasons, _ = listing(tmp_path, source)
    assert found == ["https://x.org/a"]
    assert reasons == [f"urls_file {tmp_path / 'missing.txt'}: No such file or directory"]


def test_a_urls_file_line_that_is_no_url_is_only_a_warning(tmp_path):
    (tmp_path / "urls.txt").write_bytes(
        b"\xef\xbb\xbfhttps://x.org/a\nftp://x.org/b  # old\n\nhttps://x.org/c\n"
    )
    found, reasons, outcome = listing(tmp_path, UrlListSource(UrlListOptions(urls_file="urls.txt")))
    assert found == ["https://x.org/a", "https://x.org/c"]  # the BOM is not part of a URL
    assert reasons == [] and len(outcome.errors) == 1 and "ftp://x.org/b" in outcome.errors[0]


def test_a_feed_answering_500_is_an_incomplete_listing(tmp_path, site):
    documents(site, {"/feed.xml": 500})
    found, reasons, _ = listing(tmp_path, FeedSource(FeedOptions(site.base_url + "/feed.xml")))
    assert found == [] and reasons == [f"feed {site.base_url}/feed.xml: HTTP 500"]


def test_any_exception_of_a_parse_is_a_failed_document(tmp_path, site):
    def odd(body: bytes) -> dict:
        return {}["missing"]  # a KeyError, as on odd JSON

    with discovery(tmp_path) as (ctx, _):
        assert ctx.get_parsed_or_warn(site.base_url + "/sitemap.xml", odd, "thing") is None
        reasons = ctx.incomplete_reasons
    assert reasons == [f"thing {site.base_url}/sitemap.xml: unparseable (KeyError: 'missing')"]


def api_page(body: Any) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body).encode()


@pytest.mark.parametrize(
    ("page", "reason"),
    [
        (500, "HTTP 500"),
        (b"[" * 100_000, "invalid JSON: RecursionError"),
        ({"items": [{"id": 1, "link": "http://["}]}, "unreadable page: ValueError"),
    ],
    ids=["HTTP 500", "absurd nesting", "a link urljoin refuses"],
)
def test_a_failed_api_page_is_incomplete_and_never_raises(tmp_path, site, page, reason):
    documents(site, {"/api": page if isinstance(page, int) else api_page(page)})
    url = site.base_url + "/api"
    source = HttpApiSource(HttpApiOptions(url, url_field="link"))
    found, reasons, _ = listing(tmp_path, source)
    assert found == [] and len(reasons) == 1
    assert reasons[0].startswith(f"api {url}: {reason}")


def test_a_watermark_that_is_no_time_polls_from_the_start(tmp_path, site):
    documents(site, {"/api": api_page({"items": [{"id": 1, "link": "/p1"}]})})
    source = HttpApiSource(HttpApiOptions(site.base_url + "/api", url_field="link"))
    with discovery(tmp_path) as (ctx, outcome):
        ctx.state.discovery.put_checkpoint("docs", {"watermark": "42", "next": None}, "2026-01-01")
        found = [c.url for c in source.discover(ctx) if isinstance(c, Candidate)]
        reasons = ctx.incomplete_reasons
    assert found == [site.base_url + "/p1"] and reasons == []
    assert "watermark '42' is not an ISO 8601 time" in outcome.errors[0]
