"""Absence is proven, never assumed (issue #14): failed listings, temporary redirects and
unconfirmed moves never delete a page; a page that really disappears still goes by the rule.

Every test uses the default deletion settings (2 observations spanning 1 h) and an injected
clock that moves 40 minutes per run, so the grace really passes while a fault lasts.
"""

from __future__ import annotations

import gzip

import pytest

from ragsync.sync import Syncer
from ragsync.testing import DevSite
from tests.support import Clock, example_pages, make_config, sentences, sitemap_source

PAGES = ["/guide/page-0", "/guide/page-1", "/guide/page-2", "/guide/page-3"]


@pytest.fixture
def world(tmp_path, embedder):
    site = DevSite(example_pages(4))
    site.start()
    clock = Clock()
    made: list[Syncer] = []

    def build(source: dict | None = None, **tables) -> Syncer:
        source = source or sitemap_source(site)
        config = make_config(tmp_path / f"s{len(made)}", [source], **tables)
        made.append(Syncer(config, embedder=embedder, clock=clock))
        return made[-1]

    yield site, clock, build
    for syncer in made:
        syncer.close()
    site.stop()


def points_by_url(syncer: Syncer) -> dict[str, set[str]]:
    try:
        found: dict[str, set[str]] = {}
        for pid, payload, _ in syncer.store.points():
            found.setdefault(payload["metadata"]["url"], set()).add(pid)
        return found
    finally:
        syncer.store.close()


def runs_through_the_grace(syncer: Syncer, clock: Clock, site: DevSite, before: dict) -> None:
    """Four runs, 40 minutes apart (2 h 40 min): after each, every page still answering
    200 keeps exactly its points."""
    for _ in range(4):
        clock.advance(minutes=40)
        syncer.run()
        now = points_by_url(syncer)
        for path in PAGES:
            url = site.base_url + path
            assert now.get(url) == before[url], f"{path} lost its points at {clock.now}"


def back_to_exact(syncer: Syncer, clock: Clock, before: dict, embedder) -> None:
    """Once the fault ends: the index is what it was, nothing was re-embedded."""
    embedder.texts.clear()
    for _ in range(2):
        clock.advance(minutes=40)
        syncer.run()
    assert points_by_url(syncer) == before
    assert embedder.texts == []
    assert syncer.verify().clean
    statuses = {d["status"] for d in syncer.state.documents.list()}
    assert statuses == {"active"}


def sitemap_503(site: DevSite) -> None:
    site.fault = lambda path, headers: (
        (503, {"Content-Type": "text/plain"}, b"busy") if path.startswith("/sitemap") else None
    )


def failing_child(site: DevSite) -> None:
    site.fault = lambda path, headers: (
        (500, {}, b"oops") if path.startswith("/sitemap-2.xml.gz") else None
    )


def truncated_sitemap(site: DevSite) -> None:
    full = site.sitemap(sorted(site.listed()))
    cut = full[: full.index(b"page-2")]  # page-0 and page-1 complete, then the cut
    site.fault = lambda path, headers: (
        (200, {"Content-Type": "application/xml"}, cut) if path == "/sitemap.xml" else None
    )


def invalid_gzip_child(site: DevSite) -> None:
    bad = gzip.compress(b"<urlset>")[:-6] + b"garbage"
    site.fault = lambda path, headers: (
        (200, {"Content-Type": "application/gzip"}, bad) if path == "/sitemap-1.xml.gz" else None
    )


@pytest.mark.parametrize(
    ("fault", "index"),
    [
        (sitemap_503, False),
        (failing_child, True),
        (truncated_sitemap, False),
        (invalid_gzip_child, True),
    ],
    ids=["sitemap 503", "failing child", "truncated sitemap", "invalid gzip child"],
)
def test_a_failed_listing_deletes_nothing_for_hours_and_heals_without_embedding(
    world, embedder, fault, index
):
    site, clock, build = world
    site.sitemap_index = index
    syncer = build()
    syncer.run()
    before = points_by_url(syncer)
    assert len(before) == 4
    fault(site)
    runs_through_the_grace(syncer, clock, site, before)
    result = syncer.run()
    assert result.counters.listings_incomplete == 1 and not result.ok
    assert result.counters.tombstones_created == 0
    listing = syncer.status(count_points=False)["sources"]["docs"]["listing"]
    assert listing["complete"] is False and listing["reasons"] == result.sources["docs"].incomplete
    site.fault = None
    back_to_exact(syncer, clock, before, embedder)
    assert syncer.status(count_points=False)["sources"]["docs"]["listing"]["complete"] is True


def test_a_temporary_redirect_window_changes_nothing_and_never_reaches_its_target(world, embedder):
    site, clock, build = world
    syncer = build()
    syncer.run()
    before = points_by_url(syncer)
    seen = len(site.hits)
    maintenance = f"<html><body><h1>Down for maintenance</h1><p>{sentences('upkeep')}</p>"

    def fault(path, headers):
        if path == "/maintenance":
            return 200, {"Content-Type": "text/html"}, maintenance.encode()
        if path.startswith("/guide/"):
            return 302, {"Location": site.base_url + "/maintenance"}, b""
        return None

    site.fault = fault
    runs_through_the_grace(syncer, clock, site, before)
    paths = [hit.path for hit in site.hits[seen:]]
    assert paths.count("/guide/page-0") >= 2  # asked again (retried), run after run
    assert "/maintenance" not in paths  # a temporary target is never fetched
    assert syncer.state.aliases.targets("docs") == {}
    attempts = {a["url"]: a for a in syncer.state.attempts.list("docs")}
    attempt = attempts[site.base_url + "/guide/page-0"]
    assert attempt["state"] == "retrying" and "temporary redirect" in attempt["last_error"]
    site.fault = None
    clock.advance(hours=1)  # the retry comes due
    back_to_exact(syncer, clock, before, embedder)
    assert syncer.state.attempts.list("docs") == []


def test_transient_404s_never_delete_and_a_real_disappearance_still_does(world, embedder):
    site, clock, build = world
    syncer = build()
    syncer.run()
    before = points_by_url(syncer)
    gone = site.base_url + "/guide/page-1"
    body = site.pages["/guide/page-1"]
    site.remove_page("/guide/page-1")
    clock.advance(minutes=40)
    syncer.run()  # one 404: suspected, content kept
    assert points_by_url(syncer)[gone] == before[gone]
    site.pages["/guide/page-1"] = body
    clock.advance(minutes=40)
    result = syncer.run()  # back: asked with the validators of the content it keeps
    assert len(site.requests_to("/guide/page-1")) == 3
    assert result.counters.responses_200_changed + result.counters.responses_200_unchanged == 0
    assert syncer.state.documents.get(f"docs:{gone}")["status"] == "active"
    back_to_exact(syncer, clock, before, embedder)

    site.remove_page("/guide/page-1", status=410)  # gone for good, from a complete listing
    for _ in range(3):
        clock.advance(minutes=40)
        syncer.run()
    document = syncer.state.documents.get(f"docs:{gone}")
    assert document["status"] == "tombstoned" and document["tombstone_reason"] == "HTTP 410"
    assert gone not in points_by_url(syncer)


def test_a_permanent_redirect_moves_the_record_only_once_confirmed(world, embedder):
    site, clock, build = world
    syncer = build()
    syncer.run()
    before = points_by_url(syncer)
    old, new = site.base_url + "/guide/page-1", site.base_url + "/guide/renamed"
    page = site.pages["/guide/page-1"]
    site.set_page("/guide/renamed", page.title, page.body)
    site.redirect("/guide/page-1", "/guide/renamed")  # 301; the sitemap lists the new URL
    embedder.texts.clear()

    clock.advance(minutes=40)
    result = syncer.run()  # first observation: both indexed, the old one keeps its points
    assert result.counters.moves_suspected == 1 and result.counters.records_moved == 0
    urls = points_by_url(syncer)
    assert urls[old] == before[old] and len(urls[new]) == len(before[old])
    assert syncer.state.documents.get(f"docs:{old}")["status"] == "suspected_missing"

    clock.advance(minutes=40)
    syncer.run()  # 2nd observation, 40 min after the first: not yet the grace
    assert points_by_url(syncer)[old] == before[old]

    clock.advance(minutes=40)
    result = syncer.run()  # 3rd, 80 min after the first: confirmed, the record moves
    assert result.counters.records_moved == 1
    urls = points_by_url(syncer)
    assert old not in urls and len(urls[new]) == len(before[old])
    assert syncer.state.aliases.targets("docs") == {f"docs:{old}": f"docs:{new}"}
    assert embedder.texts == []  # the same texts: vectors from the cache all along
    assert syncer.verify().clean
    created = [c for c in syncer.state.runs.list_changes() if c["url"] == new]
    assert [c["change_type"] for c in created] == ["created"]


def test_an_alias_is_reverified_and_a_url_serving_its_own_page_again_comes_back(world, embedder):
    site, clock, build = world
    syncer = build(
        sitemap_source(site, missing_confirmations=1, missing_grace="0s", max_interval="6h")
    )
    syncer.run()
    before = points_by_url(syncer)
    old = site.base_url + "/guide/page-2"
    page = site.pages["/guide/page-2"]
    site.set_page("/guide/elsewhere", "Elsewhere", f"<p>{sentences('relocation', 4)}</p>")
    site.redirect("/guide/page-2", "/guide/elsewhere")
    site.listed = lambda: ["/guide/page-0", "/guide/page-1", "/guide/page-2", "/guide/page-3"]
    clock.advance(hours=1)
    syncer.run()
    assert old not in points_by_url(syncer)
    assert f"docs:{old}" in syncer.state.aliases.targets("docs")

    site.pages["/guide/page-2"] = page  # the site serves the old URL's own page again
    seen = len(site.hits)
    clock.advance(hours=1)
    syncer.run()  # the alias is not due: the old URL is not requested
    assert "/guide/page-2" not in [hit.path for hit in site.hits[seen:]]
    embedder.texts.clear()
    clock.advance(hours=6)
    result = syncer.run()  # due for re-verification: requested, and restored from the cache
    assert points_by_url(syncer)[old] == before[old]
    assert embedder.texts == []
    assert syncer.state.documents.get(f"docs:{old}")["status"] == "active"
    assert f"docs:{old}" not in syncer.state.aliases.targets("docs")
    assert result.counters.documents_updated >= 1


def test_an_unreadable_urls_file_prunes_nothing(world, embedder, tmp_path):
    site, clock, build = world
    listing = tmp_path / "urls.txt"
    listing.write_text("\n".join(site.base_url + p for p in PAGES) + "\n")
    syncer = build({"id": "docs", "kind": "urls", "urls_file": str(listing)})
    syncer.run()
    before = points_by_url(syncer)
    listing.unlink()
    runs_through_the_grace(syncer, clock, site, before)
    listing.write_text("\n".join(site.base_url + p for p in PAGES) + "\n")
    back_to_exact(syncer, clock, before, embedder)


def test_a_listing_over_max_urls_is_cut_and_proves_nothing(world, embedder):
    site, clock, build = world
    syncer = build(sitemap_source(site, max_urls=2))
    syncer.run()
    result = syncer.run()
    assert result.counters.listings_incomplete == 1
    assert "max_urls=2" in " ".join(result.sources["docs"].incomplete)
    # The pages past the cap, known or not, are never counted as gone.
    for _ in range(3):
        clock.advance(minutes=40)
        assert syncer.run().counters.tombstones_created == 0


def test_a_page_whose_content_is_only_its_title_is_indexed_by_its_title(world, embedder):
    site, clock, build = world
    site.set_page(
        "/guide/newsletter",
        "Monthly newsletter archive",
        '<h1>Monthly newsletter archive</h1><iframe src="https://example.org/embed"></iframe>',
    )
    syncer = build()
    result = syncer.run()
    assert result.ok, result.to_dict()
    url = site.base_url + "/guide/newsletter"
    chunks = syncer.state.index.get_chunks(f"docs:{url}")
    assert [c.text for c in chunks] == ["Monthly newsletter archive"]
    hits = syncer.search("monthly newsletter archive", k=3)
    assert hits[0].url == url


def test_a_url_never_indexed_that_answers_404_is_asked_on_a_revisit_schedule(world):
    """A broken link was asked on every run of its source: a crawl of the installed Rust
    Reference asked 168 of them on each run beside its 120 pages. It now waits like a page
    found unchanged: ``every`` first, then half as long again each time."""
    site, clock, build = world
    site.set_page("/guide/broken", "Broken", "<p>Listed, but it answers 404.</p>")
    site.fault = lambda path, headers: (404, {}, b"not found") if path == "/guide/broken" else None
    syncer = build(sitemap_source(site, every="1h"))

    def asked() -> int:
        return len(site.requests_to("/guide/broken"))

    syncer.run()
    assert asked() == 1
    clock.advance(minutes=70)  # past its first wait (1 h ± 10%)
    syncer.run()
    assert asked() == 2
    clock.advance(minutes=70)  # the source is due again, the broken link not (1.5 h ± 10%)
    result = syncer.run()
    assert asked() == 2 and result.counters.not_due >= 1
    [missing] = syncer.status()["sources"]["docs"]["missing"]
    assert missing["attempts"] == 2 and missing["next_retry_at"] > clock.now.isoformat()
    clock.advance(minutes=70)  # the source due again, and the broken link's wait is over
    syncer.run()
    assert asked() == 3
    syncer.run(revalidate_all=True)  # --all asks at once
    assert asked() == 4
    assert syncer.state.documents.get(f"docs:{site.base_url}/guide/broken") is None


def test_a_url_never_indexed_that_answered_404_is_asked_at_once_when_its_lastmod_moves(world):
    """A sitemap that lists a page before it is published (or while a deploy answers 404)
    moves its lastmod once the page is out: the page is asked on the next run, not after
    its revisit wait, as a known page would be."""
    site, clock, build = world
    site.set_page("/guide/soon", "Coming soon", "<p>Listed before it is published.</p>")
    site.fault = lambda path, headers: (404, {}, b"not found") if path == "/guide/soon" else None
    syncer = build(sitemap_source(site, every="1h"))
    syncer.run()
    clock.advance(minutes=70)
    syncer.run()  # its wait is now 1.5 h
    assert len(site.requests_to("/guide/soon")) == 2

    clock.advance(minutes=70)  # the source is due again, the page's wait is not over
    site.fault = None
    site.set_page("/guide/soon", "Published", f"<p>{sentences('published')}</p>")
    result = syncer.run()

    assert len(site.requests_to("/guide/soon")) == 3
    assert result.counters.documents_created == 1
    assert syncer.state.attempts.list("docs") == []
    # a lastmod that did not move keeps the wait of a URL that still answers 404
    site.fault = lambda path, headers: (404, {}, b"not found") if path == "/guide/gone" else None
    site.set_page("/guide/gone", "Gone", "<p>Listed, but it answers 404.</p>")
    clock.advance(minutes=70)
    syncer.run()
    clock.advance(minutes=70)
    syncer.run()
    clock.advance(minutes=70)
    syncer.run()
    assert len(site.requests_to("/guide/gone")) == 2


def test_a_complete_listing_that_leaves_out_most_pages_is_distrusted(world):
    """An empty sitemap (a broken deploy), served whole with a 200: every page it left out
    was fetched, answered 200, counted as missing, and the whole index was tombstoned
    within two runs (new-user trial on the npm docs: 91 pages, 2,650 points)."""
    site, clock, build = world
    syncer = build(sitemap_source(site, missing_confirmations=1, missing_grace="0s"))
    syncer.run()
    known = {d["doc_key"] for d in syncer.state.documents.list("docs")}
    empty = b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"/>'
    xml = {"Content-Type": "application/xml"}
    site.fault = lambda path, headers: (200, xml, empty) if path == "/sitemap.xml" else None

    for _ in range(3):
        clock.advance(minutes=40)
        result = syncer.run()

        (reason,) = result.sources["docs"].incomplete
        assert f"leaves out {len(known)} of the {len(known)} pages known" in reason
        assert result.counters.tombstones_created == 0
    active = {d["doc_key"] for d in syncer.state.documents.list("docs") if d["status"] == "active"}
    assert active == known

    # one page of four dropped from the sitemap (and still served) is pruned as before
    # a sitemap swapped for one of as many new pages: the new ones, committed during the
    # listing, do not count as known before it
    fresh = [f"/other/page-{i}" for i in range(len(known))]
    for path in fresh:
        site.set_page(path, f"Other {path}", f"<p>{sentences(path)}</p>")
    site.fault = lambda path, headers: (
        (200, xml, site.sitemap(fresh)) if path == "/sitemap.xml" else None
    )
    clock.advance(minutes=40)
    result = syncer.run()
    assert "max_unlisted_share" in result.sources["docs"].incomplete[0]
    assert result.counters.tombstones_created == 0

    # one page of the first four dropped from the sitemap (and still served) is pruned
    kept = sorted(site.listed())[1:]
    site.fault = lambda path, headers: (
        (200, xml, site.sitemap(kept)) if path == "/sitemap.xml" else None
    )
    clock.advance(minutes=40)
    assert syncer.run().counters.tombstones_created == 1


def test_pages_a_narrowed_scope_leaves_out_are_pruned_though_they_are_most(
    world, tmp_path, embedder
):
    """`include` narrowed to one page of four is the configuration's decision, not a broken
    listing: the pages it leaves out go, though they are more than max_unlisted_share."""
    site, clock, _ = world
    rule = {"missing_confirmations": 1, "missing_grace": "0s"}
    first = Syncer(make_config(tmp_path / "n", [sitemap_source(site, **rule)]), embedder=embedder)
    first.run()
    known = len(first.state.documents.list("docs"))
    first.close()
    one = sorted(site.listed())[0]
    narrowed = sitemap_source(site, include=[f"*{one}"], **rule)
    syncer = Syncer(make_config(tmp_path / "n", [narrowed]), embedder=embedder)
    try:
        result = syncer.run()

        assert result.sources["docs"].incomplete == []
        assert result.counters.tombstones_created == known - 1
    finally:
        syncer.close()


def test_pages_that_answer_404_go_though_the_listing_that_left_them_out_is_distrusted(world):
    """The npm docs with 74 of 91 pages gone (404) and dropped from the sitemap: the listing is
    distrusted, but each page's own 404 is evidence, and the missing-page rule removes them."""
    site, clock, build = world
    syncer = build(sitemap_source(site, missing_confirmations=1, missing_grace="0s"))
    syncer.run()
    known = len(syncer.state.documents.list("docs"))
    for path in sorted(site.listed())[1:]:
        site.remove_page(path)
    clock.advance(hours=2)  # every page due again

    result = syncer.run()

    assert "max_unlisted_share" in result.sources["docs"].incomplete[0]
    assert (
        "one that answers 404 goes by the missing-page rule" in result.sources["docs"].incomplete[0]
    )
    assert result.counters.tombstones_created == known - 1
