"""Only the page enters the index: a site-wide maintenance page, a bot challenge or an error
page served with 200 is an outage, never content (README "Deletion safety", outage pages)."""

from __future__ import annotations

import pytest

from ragsync.sync import Syncer
from ragsync.testing import DevSite
from tests.support import Clock, example_pages, make_config, sitemap_source

MAINTENANCE = (
    b"<!doctype html><html><head><title>Down for maintenance</title></head><body>"
    b"<h1>Down for maintenance</h1><p>We are performing scheduled maintenance. Down for "
    b"maintenance, back soon. Thank you for your patience while we upgrade our systems.</p>"
    b"</body></html>"
)
CHALLENGE = (
    b"<!doctype html><html><head><title>Just a moment...</title>"
    b'<meta name="robots" content="noindex,nofollow"></head><body>'
    b"<noscript>Enable JavaScript and cookies to continue</noscript><h1>127.0.0.1</h1>"
    b"<p>Checking your browser before accessing 127.0.0.1.</p>"
    b'<script src="/cdn-cgi/challenge-platform/h/b/orchestrate/chl_page/v1"></script>'
    b"</body></html>"
)


def points(syncer: Syncer) -> dict[str, str]:
    """``{point id: (page URL, embedded text)}`` of the store."""
    try:
        return {
            pid: (payload["metadata"]["url"], payload["page_content"])
            for pid, payload, _ in syncer.store.points()
        }
    finally:
        syncer.store.close()


@pytest.fixture
def outage_site(tmp_path, embedder):
    """``(site, clock, build)``: five pages served; ``build(kind, folder=…, **source keys)``
    makes a syncer of them (``crawl`` from the first page), its state in ``folder`` (another
    syncer's, to change its configuration)."""
    made: list[Syncer] = []
    site = DevSite(example_pages(5))
    site.start()
    clock = Clock()

    def build(kind: str = "sitemap", *, folder: str = "", **extra: object) -> Syncer:
        if kind == "crawl":
            source = {"id": "docs", "kind": "crawl", "url": site.base_url + "/guide/page-0"}
            links = "".join(f'<a href="/guide/page-{i}">{i}</a>' for i in range(5))
            title, body = site.pages["/guide/page-0"].title, site.pages["/guide/page-0"].body
            site.set_page("/guide/page-0", title, body + f"<p>{links}</p>")
        else:
            source = sitemap_source(site)
        syncer = Syncer(
            make_config(
                tmp_path / (folder or f"{kind}{len(made)}"), [{**source, "every": "1h", **extra}]
            ),
            embedder=embedder,
            clock=clock,
        )
        made.append(syncer)
        return syncer

    yield site, clock, build
    for syncer in made:
        syncer.close()
    site.stop()


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("sitemap", MAINTENANCE),
        ("sitemap", CHALLENGE),
        ("crawl", MAINTENANCE),
        ("crawl", CHALLENGE),
    ],
    ids=["maintenance", "challenge", "crawl-maintenance", "crawl-challenge"],
)
def test_a_site_wide_outage_page_keeps_every_page_and_converges_when_the_site_is_back(
    outage_site, kind, body
):
    site, clock, build = outage_site
    syncer = build(kind)
    assert syncer.run().ok
    before = points(syncer)
    assert len({url for url, _ in before.values()}) == 5
    site.fault = lambda path, headers: (200, {"Content-Type": "text/html"}, body)

    for _ in range(4):  # runs spaced past missing_grace (1 h): nothing may be retired
        clock.advance(hours=2)
        result = syncer.run(revalidate_all=True)
        assert not result.ok
        report = result.sources["docs"]
        assert "outage page" in " ".join(report.errors), report
        assert report.outages and all("page(s) held" in line for line in report.outages)
        assert points(syncer) == before
        assert result.counters.tombstones_created == result.counters.duplicates == 0
        assert result.counters.points_deleted == result.counters.points_upserted == 0
        hits = syncer.search("replication operators maintenance window", 3)
        assert hits and all("maintenance, back soon" not in h.text for h in hits)

    site.fault = None
    clock.advance(hours=2)
    back = syncer.run()
    assert back.ok, back.sources["docs"].errors
    assert points(syncer) == before
    assert syncer.verify().clean


# A site's own outage page that no marker names: the many-pages rule finds it.
UPGRADING = (
    b"<!doctype html><html><head><title>Example Docs</title></head><body><main>"
    b"<h1>Example Docs</h1><p>Our documentation platform is moving to a new home this week. "
    b"Pages will be back shortly; follow status.example.com for news about the move.</p>"
    b"</main></body></html>"
)


@pytest.mark.parametrize("kind", ["sitemap", "crawl"])
def test_pages_that_all_serve_one_unknown_page_are_an_outage(outage_site, kind):
    site, clock, build = outage_site
    syncer = build(kind)
    assert syncer.run().ok
    before = points(syncer)
    site.fault = lambda path, headers: (
        None if path.startswith("/robots") else (200, {"Content-Type": "text/html"}, UPGRADING)
    )

    for _ in range(3):
        clock.advance(hours=2)
        result = syncer.run(revalidate_all=True)
        assert not result.ok
        assert points(syncer) == before
        assert result.counters.points_deleted == result.counters.tombstones_created == 0
    errors = " ".join(result.sources["docs"].errors)
    assert "suspected outage" in errors or "held until confirmed" in errors
    assert "status.example.com" not in " ".join(text for _, text in points(syncer).values())

    site.fault = None
    clock.advance(hours=2)
    back = syncer.run(revalidate_all=True)
    assert back.ok, back.sources["docs"].errors
    assert points(syncer) == before
    assert syncer.verify().clean


def test_an_outage_page_found_once_holds_a_page_asked_alone_later(outage_site):
    """The outage page is remembered while a page is held by it: a page asked on its own (a
    resync, a retry) is held too, though one page alone is no evidence of anything."""
    site, clock, build = outage_site
    syncer = build()
    syncer.run()
    before = points(syncer)
    site.fault = lambda path, headers: (
        None if path.startswith(("/robots", "/sitemap")) else (200, {}, UPGRADING)
    )
    clock.advance(hours=2)
    first = syncer.run(revalidate_all=True)
    assert first.counters.outage_pages == 5
    assert first.counters.responses_200_changed == 5  # what came over the wire, held
    (line,) = first.sources["docs"].outages
    assert "suspected outage: one page ('Example Docs')" in line and "5 page(s) held" in line

    clock.advance(hours=2)
    alone = syncer.resync([site.base_url + "/guide/page-3"])
    assert alone.counters.outage_pages == 1 and not alone.ok
    (line,) = alone.sources["docs"].outages
    assert "suspected outage" in line and "1 page(s) held" in line
    assert points(syncer) == before
    rows = {row["url"]: row for row in syncer.state.attempts.list("docs")}
    assert rows[site.base_url + "/guide/page-3"]["held_count"] == 2


def test_a_200_with_retry_after_or_a_javascript_shell_keeps_the_page(outage_site):
    site, clock, build = outage_site
    syncer = build()
    syncer.run()
    before = points(syncer)
    shell = (
        b"<!doctype html><html><head><title>Example Docs</title></head><body><noscript>You "
        b'need to enable JavaScript to run this app.</noscript><div id="root"></div></body></html>'
    )
    answers = {
        "/guide/page-1": (
            200,
            {"Retry-After": "120"},
            site.render(site.pages["/guide/page-2"]).encode(),
        ),
        "/guide/page-2": (200, {"Content-Type": "text/html"}, shell),
    }
    site.fault = lambda path, headers: answers.get(path)
    clock.advance(hours=2)
    result = syncer.run(revalidate_all=True)
    assert result.counters.outage_pages == 2 and not result.ok
    errors = " ".join(result.sources["docs"].errors)
    assert "Retry-After: 120" in errors and "JavaScript-required shell" in errors
    assert points(syncer) == before
    site.fault = None
    clock.advance(hours=2)
    assert syncer.run(revalidate_all=True).ok
    assert points(syncer) == before


def test_a_near_empty_page_replacing_a_long_one_waits_for_confirmation(outage_site):
    site, clock, build = outage_site
    syncer = build()
    syncer.run()
    url = site.base_url + "/guide/page-0"
    kept = {pid: item for pid, item in points(syncer).items() if item[0] == url}
    site.set_page("/guide/page-0", "Guide 0", "<h1>Guide 0</h1><p>Moved to the handbook.</p>")

    clock.advance(minutes=10)
    first = syncer.run(revalidate_all=True)  # held: 1 observation of 2, grace not over
    assert first.counters.changes_held == 1 and not first.ok
    assert "shrank from" in " ".join(first.sources["docs"].errors)
    assert {p: i for p, i in points(syncer).items() if i[0] == url} == kept
    clock.advance(minutes=10)
    second = syncer.run(revalidate_all=True)  # 2 observations, but missing_grace not over
    assert second.counters.changes_held == 1
    clock.advance(hours=1)
    third = syncer.run(revalidate_all=True)  # confirmed: the page is what the site says
    assert third.ok and third.counters.documents_updated == 1
    texts = [text for u, text in points(syncer).values() if u == url]
    assert texts and all("Moved to the handbook" in text for text in texts)


def test_a_record_turns_into_a_copy_only_when_confirmed_and_the_listing_is_complete(
    outage_site,
):
    """A page edited to serve another page's content keeps its own until the missing-page
    rule confirms the copy, and never while the listing is incomplete."""
    site, clock, build = outage_site
    syncer = build()
    syncer.run()
    copy_url = site.base_url + "/guide/page-4"
    own = {pid: item for pid, item in points(syncer).items() if item[0] == copy_url}
    holder = site.pages["/guide/page-1"]
    site.set_page("/guide/page-4", holder.title, holder.body)
    broken = {"on": True}

    def fault(path, headers):  # the sitemap fails while broken["on"]
        return (500, {}, b"oops") if path == "/sitemap.xml" and broken["on"] else None

    site.fault = fault
    for _ in range(3):  # past missing_grace, but every listing is incomplete
        clock.advance(hours=1)
        result = syncer.run(revalidate_all=True)
        assert result.counters.duplicates == result.counters.tombstones_created == 0
        assert {p: i for p, i in points(syncer).items() if i[0] == copy_url} == own
    assert "serves the same page as" in " ".join(result.sources["docs"].errors)

    broken["on"] = False
    clock.advance(hours=1)
    done = syncer.run(revalidate_all=True)
    # The stored listing was incomplete: this complete one allows the copy from the next pass.
    assert done.counters.duplicates == 0
    clock.advance(hours=1)
    done = syncer.run(revalidate_all=True)
    assert done.counters.duplicates == 1 and done.counters.tombstones_created == 1
    assert copy_url not in {u for u, _ in points(syncer).values()}
    assert syncer.verify().clean


def test_outage_markers_false_reads_a_marked_page_as_content(outage_site):
    site, clock, build = outage_site
    syncer = build(outage_markers=False, hold_shrink=0)
    syncer.run()
    site.fault = lambda path, headers: (200, {}, MAINTENANCE) if path == "/guide/page-2" else None
    clock.advance(hours=2)
    result = syncer.run(revalidate_all=True)
    assert result.ok and result.counters.outage_pages == 0
    assert result.counters.documents_updated == 1
    texts = [text for url, text in points(syncer).values() if url.endswith("/guide/page-2")]
    assert texts and all("back soon" in text for text in texts)


def outage_everywhere(path, headers):
    """Every page of the site serves UPGRADING; its sitemap and robots.txt still answer."""
    if path.startswith(("/robots", "/sitemap")):
        return None
    return 200, {"Content-Type": "text/html"}, UPGRADING


SHORT = "<h1>Guide 2</h1><p>Moved to the handbook.</p>"


@pytest.mark.parametrize("kind", ["sitemap", "crawl"])
def test_a_held_change_is_confirmed_on_time_in_a_crawl_and_beside_a_broken_sitemap(
    outage_site, kind
):
    """A page that really shrinks is held for missing_grace, not longer: its hold keeps a
    crawl complete (its stored links stand), and a listing incomplete for another reason (a
    child sitemap that fails) does not hold it further — only a record's retirement waits
    for a complete listing."""
    site, clock, build = outage_site
    syncer = build(kind)
    syncer.run()
    if kind == "sitemap":
        site.fault = lambda path, headers: (404, {}, b"gone") if path == "/sitemap.xml" else None
    site.set_page("/guide/page-2", "Guide 2", SHORT)
    url = site.base_url + "/guide/page-2"
    clock.advance(hours=2)
    first = syncer.run(revalidate_all=True)
    assert first.counters.changes_held == 1
    assert (kind == "sitemap") == bool(first.sources["docs"].incomplete)  # the crawl: complete
    clock.advance(hours=2)
    second = syncer.run(revalidate_all=True)
    assert second.counters.changes_held == 0 and second.counters.documents_updated == 1
    texts = [text for u, text in points(syncer).values() if u == url]
    assert texts and all("Moved to the handbook" in text for text in texts)


def test_outage_pages_0_releases_what_the_outage_rule_held(outage_site):
    """The README's way out for a site that really replaces many pages with one text."""
    site, clock, build = outage_site
    syncer = build(folder="state")
    syncer.run()
    retired = (
        "<h1>Example Docs</h1><p>This product is retired; its documentation now lives on the "
        "new site.</p>"
    )
    for i in range(5):
        site.set_page(f"/guide/page-{i}", "Example Docs", retired)
    clock.advance(hours=2)
    assert syncer.run().counters.outage_pages == 5
    syncer.close()

    released = build(folder="state", outage_pages=0)
    for _ in range(2):
        clock.advance(hours=2)
        result = released.run()
    assert result.ok and result.counters.outage_pages == 0
    assert len({url for url, _ in points(released).values()}) == 1  # one page, its copies
    assert released.verify().clean


def test_a_copy_is_not_retired_in_a_pass_whose_listing_is_taken_as_broken(outage_site):
    site, clock, build = outage_site
    syncer = build()
    syncer.run()
    holder = site.pages["/guide/page-1"]
    site.set_page("/guide/page-4", holder.title, holder.body)
    clock.advance(hours=2)
    assert syncer.run(revalidate_all=True).counters.changes_held == 1
    site.listed = lambda: ["/guide/page-1", "/guide/page-4"]  # 3 of the 5 left out
    clock.advance(hours=2)
    result = syncer.run(revalidate_all=True)
    assert "max_unlisted_share" in " ".join(result.sources["docs"].incomplete)
    assert result.counters.duplicates == result.counters.tombstones_created == 0


def test_a_short_page_with_a_comment_widget_is_a_page(outage_site):
    site, clock, build = outage_site
    site.set_page(
        "/guide/release-2-1",
        "Release 2.1",
        "<h1>Release 2.1</h1><p>Version 2.1 fixes the TLS renegotiation bug and speeds up the "
        'replication catch-up after a failover.</p><div id="disqus_thread"></div><noscript>'
        'Please enable JavaScript to view the <a href="https://disqus.com/?ref_noscript">'
        "comments powered by Disqus.</a></noscript>",
    )
    syncer = build()
    result = syncer.run()
    assert result.ok and result.counters.outage_pages == 0
    assert any(url.endswith("/release-2-1") for url, _ in points(syncer).values())


def test_small_windows_never_collapse_a_site_into_its_outage_page(outage_site):
    """Workers claiming two pages at a time: the evidence of earlier batches (their held
    pages) counts, so the outage page is found though no batch holds three pages. Only a
    page whose window saw it alone first can be read as content (README: the limit)."""
    from ragsync.worker import Worker

    site, clock, build = outage_site
    syncer = build()
    syncer.run()
    before = points(syncer)
    site.fault = outage_everywhere
    for _ in range(3):
        clock.advance(hours=2)
        result = Worker(syncer, batch=2).run(until_idle=True)
        assert result.counters.duplicates == result.counters.tombstones_created == 0
    now = points(syncer)
    taken = {url for url, text in now.values() if "status.example.com" in text}
    assert len(taken) <= 1
    assert {pid: item for pid, item in now.items() if item[0] not in taken} == {
        pid: item for pid, item in before.items() if item[0] not in taken
    }
    site.fault = None
    clock.advance(hours=2)
    Worker(syncer, batch=2).run(until_idle=True)
    assert points(syncer) == before and syncer.verify().clean


def test_a_held_page_is_asked_in_full_so_a_304_cannot_forget_it(outage_site):
    """A server answering 304 to every conditional request: a page held back is asked
    without its validators, and its change is confirmed on time."""
    site, clock, build = outage_site

    def lying(path, headers):
        if not path.startswith("/guide"):
            return None
        if headers.get("If-None-Match"):
            return 304, {"ETag": '"c"'}, b""
        page = site.render(site.pages[path]).encode()
        return 200, {"ETag": '"c"', "Content-Type": "text/html"}, page

    site.fault = lying
    syncer = build()
    syncer.run()
    site.set_page("/guide/page-2", "Guide 2", SHORT)
    url = site.base_url + "/guide/page-2"
    held = []
    for _ in range(3):
        clock.advance(hours=2)
        held.append(syncer.run().counters.changes_held)
    assert held[0] == 1 and held[-1] == 0
    texts = [text for u, text in points(syncer).values() if u == url]
    assert texts and all("Moved to the handbook" in text for text in texts)


def test_a_page_read_as_content_alone_is_held_once_the_outage_is_found(outage_site):
    """The rule's limit and what follows it: a page asked alone (a resync) that serves an
    outage page no marker names is read as content; once the other pages show the outage,
    it is held with them, asked again at every run, and gets its page back with the site."""
    site, clock, build = outage_site
    syncer = build()
    syncer.run()
    before = points(syncer)
    site.fault = outage_everywhere
    clock.advance(hours=2)
    alone = syncer.resync([site.base_url + "/guide/page-3"])
    assert alone.ok and alone.counters.documents_updated == 1  # one page: no evidence
    clock.advance(hours=2)
    found = syncer.run(revalidate_all=True)
    assert found.counters.outage_pages == 5  # page-3 too: its indexed text is the outage page
    clock.advance(hours=2)
    assert syncer.run().counters.outage_pages == 5  # each asked again, not at its revisit
    site.fault = None
    clock.advance(hours=2)
    back = syncer.run()
    assert back.ok and points(syncer) == before and syncer.verify().clean
