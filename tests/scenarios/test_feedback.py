"""Feedback on real runs (issue 18, part 5): why nothing was requested, which pages are about
to be tombstoned and when, and progress lines from a long sync without ``-v``; and
``ragsync init --url`` (part 4), which probes a site for the way to list its pages."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from datetime import timedelta

import pytest

from ragsync.clock import iso, parse_iso
from ragsync.config import load_config
from ragsync.initsite import probe_site, site_config
from ragsync.progress import LogProgress
from ragsync.render import not_requested, print_status
from ragsync.sync import Syncer
from ragsync.testing import DevSite
from tests.support import Clock, example_pages, make_config, page, ragsync_cli, sitemap_source

GONE = "/guide/page-1"


@pytest.fixture
def world(tmp_path, embedder):
    site = DevSite(example_pages(3))
    site.start()
    clock = Clock()
    made: list[Syncer] = []

    def build(**source):
        config = make_config(tmp_path / f"s{len(made)}", [sitemap_source(site, **source)])
        made.append(Syncer(config, embedder=embedder, clock=clock))
        return made[-1]

    yield site, clock, build
    for syncer in made:
        syncer.close()
    site.stop()


def test_run_and_plan_name_the_source_not_due_and_until_when(world):
    site, clock, build = world
    syncer = build(every="1h")
    syncer.run()
    due = iso(clock.now + timedelta(hours=1))
    clock.advance(minutes=5)
    seen = len(site.hits)
    planned = syncer.plan()
    result = syncer.run().to_dict()
    assert len(site.hits) == seen  # nothing was requested …
    for report in (planned, result):  # … and the report says why, per source
        docs = report["sources"]["docs"]
        assert docs["listing_not_due"] == {"until": due, "every": 3600.0, "cron": None}
        assert docs["counters"]["sources_not_due"] == 1
        assert not_requested(report["sources"], clock.now) == [
            "source docs: nothing requested: not due until 13:00 UTC (every 1h)",
            "use --all to request everything now",
        ]
    forced = syncer.run(revalidate_all=True).to_dict()
    assert forced["sources"]["docs"]["listing_not_due"] is None
    assert not_requested(forced["sources"], clock.now) == []


def test_a_cron_source_and_pages_not_due_say_so_too(world):
    site, clock, build = world
    syncer = build(every="0s", min_interval="1h")
    syncer.run()
    report = syncer.plan()  # the listing is due, its pages are not
    assert report["counters"]["requests_sent"] > 0  # robots.txt and the sitemap
    lines = not_requested(report["sources"], clock.now)
    assert lines == ["source docs: 3 page(s) not due yet (adaptive revisit)", lines[-1]]

    cron = build(cron="0 6 * * *", min_interval="1h")
    cron.run()
    clock.advance(minutes=1)
    lines = not_requested(cron.plan()["sources"], clock.now)
    # Due again at 06:00 tomorrow: the date is named.
    assert lines[0] == (
        "source docs: nothing requested: not due until 2026-12-01 06:00 UTC (cron '0 6 * * *')"
    )


def test_status_names_suspected_pages_and_when_each_is_tombstoned_at_the_earliest(world, capsys):
    site, clock, build = world
    syncer = build(missing_confirmations=2, missing_grace="1h")
    syncer.run()
    site.remove_page(GONE)
    clock.advance(minutes=10)
    first_404 = clock.now
    syncer.run()
    docs = syncer.status(count_points=False)["sources"]["docs"]
    url = site.base_url + GONE
    [item] = docs["suspected_missing"]
    assert item["url"] == url and item["reason"] == "HTTP 404"
    assert item["since"] == iso(first_404)
    assert (item["observations"], item["confirmations"], item["observations_needed"]) == (1, 2, 1)
    earliest = parse_iso(item["tombstone_at_earliest"])
    assert earliest == first_404 + timedelta(hours=1)  # the grace, from the first 404

    print_status(syncer.status(count_points=False))
    text = capsys.readouterr().out
    assert "suspected missing (1), content still indexed:" in text
    assert f"{url}: HTTP 404 — since {iso(first_404)}, 1/2 observation(s)" in text
    assert f"tombstoned at the earliest {item['tombstone_at_earliest']}" in text

    # The time is right: a check a minute before keeps the page, one at that time removes it.
    clock.now = earliest - timedelta(minutes=1)
    syncer.run()
    assert syncer.state.documents.get(f"docs:{url}")["status"] == "suspected_missing"
    clock.now = earliest
    assert syncer.run().counters.tombstones_created == 1
    assert syncer.status(count_points=False)["sources"]["docs"]["suspected_missing"] == []


def test_log_progress_is_one_line_per_100_pages_or_10_percent(caplog):
    caplog.set_level(logging.INFO, logger="ragsync.progress")
    progress = LogProgress()
    for done in range(64, 1000, 64):
        progress.pages("docs", done, 1000)
    progress.pages("docs", 1000, 1000)
    lines = [r.getMessage() for r in caplog.records if r.name == "ragsync.progress"]
    assert len(lines) == 10 and lines[-1].startswith("docs: 1000/1000 pages checked (100%)")
    caplog.clear()
    for done in range(64, 5000, 64):  # 10% of 5000 is more than 100 pages
        progress.pages("big", done, 5000)
    assert len(caplog.records) == 9
    caplog.clear()
    progress.pages("small", 40, 40)  # a short run says nothing
    assert caplog.records == []


def test_cli_says_why_nothing_was_requested_and_logs_progress_without_v(tmp_path):
    pages = {
        f"/p/{i}": page(f"Note {i}", {"Body": [f"Note number {i} says {i * 7} things."]})
        for i in range(120)
    }
    site = DevSite(pages)
    site.start()
    try:
        config = tmp_path / "ragsync.toml"
        config.write_text(
            f'[[sources]]\nid = "docs"\nkind = "sitemap"\nevery = "1h"\n'
            f'url = "{site.base_url}/sitemap.xml"\n'
        )
        first = ragsync_cli("run", config=config)  # stderr is a pipe, not a terminal
        assert first.returncode == 0, first.stderr
        progress = [line for line in first.stderr.splitlines() if "pages checked" in line]
        # Windows of 64 pages: the line comes once 100 pages are passed, at 120 (the end).
        assert len(progress) == 1 and "INFO docs: 120/120 pages checked (100%)" in progress[0]

        planned = ragsync_cli("plan", config=config)
        again = ragsync_cli("run", config=config)
        pattern = (
            r"source docs: nothing requested: not due until (\d\d:\d\d|\d{4}-\d\d-\d\d \d\d:\d\d)"
            r" UTC \(every 1h\)\nuse --all to request everything now"
        )
        assert re.search(pattern, planned.stdout), planned.stdout
        assert re.search(pattern, again.stderr), again.stderr
        quiet = ragsync_cli("-q", "run", config=config)
        assert quiet.returncode == 0 and quiet.stderr == ""
    finally:
        site.stop()


# -- `ragsync init --url` (issue 18, part 4) ----------------------------------------------------

ATOM = (
    '<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom">'
    "<title>News</title><id>urn:x</id><updated>2026-11-30T00:00:00Z</updated>"
    '<entry><title>One</title><id>urn:1</id><link href="/guide/page-0"/>'
    "<updated>2026-11-30T00:00:00Z</updated></entry></feed>"
)


@pytest.fixture
def plain_site():
    site = DevSite(example_pages(2))
    site.start()
    yield site
    site.stop()


def hide_sitemaps(site, extra=None):
    """No sitemap anywhere; ``extra`` maps paths to ``(content type, body)`` served instead."""

    def fault(path, headers):
        if path in (extra or {}):
            kind, body = extra[path]
            return 200, {"Content-Type": kind}, body.encode()
        if "sitemap" in path:
            return 404, {"Content-Type": "text/html"}, b"<h1>Not found</h1>"
        return None

    site.fault = fault


def test_init_probe_prefers_robots_sitemap_lines_on_the_site_itself(plain_site):
    site = plain_site
    base = site.base_url
    site.robots = (
        "User-agent: *\nDisallow: /private\n"
        "Sitemap: http://elsewhere.invalid/sitemap.xml\nSitemap: /sitemap.xml\n"
    )
    choice = probe_site(base + "/")
    assert (choice.kind, choice.url, choice.include) == ("sitemap", base + "/sitemap.xml", ())
    assert choice.reason == f"robots.txt names the sitemap {base}/sitemap.xml"
    assert [h.path for h in site.hits] == ["/robots.txt", "/sitemap.xml"]

    site.robots += "Sitemap: /sitemap-1.xml.gz\n"  # several: the source reads robots.txt
    choice = probe_site(base + "/guide/page-1")
    assert (choice.kind, choice.url) == ("sitemap", base + "/robots.txt")
    assert choice.include == (base + "/guide/*",)  # kept to the start URL's directory


def test_init_probe_then_sitemap_xml_then_a_linked_feed_then_a_crawl(plain_site):
    site = plain_site
    base = site.base_url
    choice = probe_site(base + "/guide/page-0")  # robots.txt has no Sitemap: line
    assert (choice.kind, choice.url) == ("sitemap", base + "/sitemap.xml")
    assert choice.reason == f"found a sitemap at {base}/sitemap.xml, kept to {base}/guide/*"
    assert [h.path for h in site.hits[1:]] == ["/guide/sitemap.xml", "/sitemap.xml"]

    link = '<link rel="alternate" type="application/atom+xml" href="/news.atom">'
    site.set_page("/", "Home", f"{link}<p>Welcome to the documentation of the service.</p>")
    hide_sitemaps(site, {"/news.atom": ("application/atom+xml", ATOM)})
    choice = probe_site(base + "/")
    assert (choice.kind, choice.url) == ("feed", base + "/news.atom")

    hide_sitemaps(site)
    choice = probe_site(base + "/")
    assert (choice.kind, choice.url) == ("crawl", base + "/")
    assert choice.reason.startswith("no sitemap or feed found (")
    assert "the crawl stays under" not in choice.reason  # the whole site is under "/"

    # A start page below the root that links elsewhere on the site: the reason says so.
    links = '<a href="page-1">next</a> <a href="/api/ref">API</a> <a href="/api/ref#x">x</a>'
    site.set_page("/guide/page-0", "Guide", f"<p>{links}</p>")
    choice = probe_site(base + "/guide/page-0")
    assert choice.kind == "crawl"
    stays = re.search(
        rf"the crawl stays under {base}/guide/: (\d+) links of the start", choice.reason
    )
    assert stays is not None, choice.reason
    assert f'(include = ["{base}/*"] follows them)' in choice.reason
    assert f'# include = ["{base}/*"]' in site_config(choice)  # ready to uncomment
    site.set_page("/guide/page-0", "Guide", '<p><a href="page-1">next</a></p>')
    fewer = re.search(r": (\d+) links of the start", probe_site(base + "/guide/page-0").reason)
    assert int(stays.group(1)) == (int(fewer.group(1)) if fewer else 0) + 1  # /api/ref, once

    site.robots = "User-agent: *\nDisallow: /\n"
    seen = len(site.hits)
    choice = probe_site(base + "/guide/page-0")
    assert choice.kind == "crawl" and "robots.txt disallows the start page" in choice.reason
    assert "/guide/page-0" not in [h.path for h in site.hits[seen:]]  # never requested


def test_init_url_writes_a_working_config_and_says_why_in_one_line(plain_site, tmp_path):
    site = plain_site
    path = tmp_path / "ragsync.toml"
    proc = subprocess.run(
        [sys.executable, "-m", "ragsync", "init", str(path), "--url", site.base_url + "/"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        f'wrote {path}: kind = "sitemap": found a sitemap at {site.base_url}/sitemap.xml'
    ]
    [source] = load_config(path).sources
    assert (source.id, source.kind, source.options.url) == (
        "docs",
        "sitemap",
        site.base_url + "/sitemap.xml",
    )
    planned = ragsync_cli("plan", config=path)
    assert planned.returncode == 0 and "2 changed" in planned.stdout, planned.stderr

    bad = subprocess.run(
        [sys.executable, "-m", "ragsync", "init", str(tmp_path / "x.toml"), "--url", "ftp://x/"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "not an absolute http(s) URL" in bad.stderr


def test_init_takes_a_url_given_as_its_path_for_the_site(plain_site, tmp_path):
    """`ragsync init https://…` (no --url) wrote the starter config to a folder named after
    the URL ("http:/host/…"): the URL is the site to probe, the file ragsync.toml."""
    site = plain_site
    proc = subprocess.run(
        [sys.executable, "-m", "ragsync", "init", site.base_url + "/"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["ragsync.toml"]
    [source] = load_config(tmp_path / "ragsync.toml").sources
    assert (source.kind, source.options.url) == ("sitemap", site.base_url + "/sitemap.xml")
    both = subprocess.run(
        [sys.executable, "-m", "ragsync", "init", site.base_url + "/", "--url", site.base_url],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert both.returncode == 2 and "is a URL, not the file to write" in both.stderr


def test_init_probe_follows_no_redirect_to_another_host(plain_site):
    site = plain_site
    port = site.base_url.rsplit(":", 1)[1]

    def elsewhere(path, headers):  # localhost: the same server, but another host
        if path in ("/", "/robots.txt"):
            return 301, {"Location": f"http://localhost:{port}{path}"}, b""
        return (404, {}, b"") if "sitemap" in path else None

    site.fault = elsewhere
    choice = probe_site(site.base_url + "/")
    assert choice.kind == "crawl" and choice.reason == (
        f"no sitemap or feed found ({site.base_url}/ redirects to another host: "
        f"http://localhost:{port}/: give --url that URL)"
    )
    assert [h.path for h in site.hits].count("/") == 1  # the 301 only: never followed


def test_a_host_that_is_down_is_said_in_a_few_warnings_and_every_page_at_v(
    tmp_path, embedder, caplog
):
    site = DevSite(example_pages(12))
    site.start()
    try:
        syncer = Syncer(make_config(tmp_path, [sitemap_source(site)]), embedder=embedder)
        site.fault = lambda path, headers: (503, {}, b"down") if path != "/sitemap.xml" else None
        with caplog.at_level(logging.INFO, logger="ragsync"):
            result = syncer.run()
        syncer.close()
    finally:
        site.stop()
    failures = [r for r in caplog.records if "HTTP 503" in r.getMessage()]
    pages = len(result.sources["docs"].errors)
    assert pages >= 10 and len(failures) == pages  # every page logged …
    warned = [r for r in failures if r.levelno == logging.WARNING]
    assert len(warned) == 5  # … the first five as warnings, the rest at -v
    assert any("more pages failed" in r.getMessage() for r in caplog.records)


def test_init_probe_crawls_a_directory_asked_without_its_slash_under_it(plain_site):
    """``init http://host/nomicon`` (the server answering 301 to ``/nomicon/``) wrote a crawl
    of ``/nomicon``, whose directory is ``/``: on the installed Rust docs it crawled every
    book and the standard library, 1,488 pages and counting, instead of the one book."""
    site, base = plain_site, plain_site.base_url
    site.set_page("/guide/", "Guide", '<p><a href="page-0">a</a> <a href="/other">b</a></p>')

    def fault(path, headers):
        if path == "/guide":
            return 301, {"Location": "/guide/", "Content-Type": "text/html"}, b""
        if "sitemap" in path:
            return 404, {"Content-Type": "text/html"}, b"<h1>Not found</h1>"
        return None

    site.fault = fault
    choice = probe_site(base + "/guide")
    assert (choice.kind, choice.url) == ("crawl", base + "/guide/")
    assert choice.reason.startswith(f"{base}/guide redirects permanently to {base}/guide/; ")
    assert f"the crawl stays under {base}/guide/: " in choice.reason


def test_init_probe_keeps_a_sitemap_to_a_directory_asked_without_its_slash(plain_site):
    """``init http://host/book`` beside a sitemap of the whole host wrote that sitemap with no
    ``include``: "/book"'s directory is "/", which the sitemap covers. The start URL is asked
    when it may be a directory; one that is not (a page, the root) costs no request more."""
    site, base = plain_site, plain_site.base_url
    site.set_page("/guide/", "Guide", "<p>The guide.</p>")

    def fault(path, headers):
        if path == "/guide":
            return 301, {"Location": "/guide/", "Content-Type": "text/html"}, b""
        return None

    site.fault = fault
    choice = probe_site(base + "/guide")
    assert (choice.kind, choice.url) == ("sitemap", base + "/sitemap.xml")
    assert choice.include == (base + "/guide/*",)
    assert choice.reason == (
        f"{base}/guide redirects permanently to {base}/guide/; "
        f"found a sitemap at {base}/sitemap.xml, kept to {base}/guide/*"
    )
    seen = len(site.hits)
    assert probe_site(base + "/").include == ()
    assert "/" not in [hit.path for hit in site.hits[seen:]]  # the root: not asked
