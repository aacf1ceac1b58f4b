"""Stable identity end to end: redirects move records, tracking variants and rel=canonical
never create a second record (issue #3).

The moves here are confirmed by one observation (``missing_confirmations = 1``, no grace);
tests/scenarios/test_absence.py shows the default rule holding a move back until it is confirmed."""

from __future__ import annotations

import pytest

from ragsync.sync import Syncer
from ragsync.testing import DevSite
from ragsync.worker import Worker
from tests.support import Clock, example_pages, make_config, sentences, sitemap_source


def points_by_url(syncer):
    try:
        urls: dict[str, int] = {}
        for _, payload, _ in syncer.store.points():
            url = payload["metadata"]["url"]
            urls[url] = urls.get(url, 0) + 1
        return urls
    finally:
        syncer.store.close()


MOVE_AT_ONCE = {"missing_confirmations": 1, "missing_grace": "0s"}


@pytest.fixture
def served_twice(tmp_path, embedder):
    """``build(pages)``: the pages served, and a syncer of them with an injected clock: every
    1 h, ``max_interval`` 2 h unless given, moves and tombstones confirmed at once."""
    made: list[tuple[DevSite, Syncer]] = []

    def build(pages, max_interval="2h"):
        site = DevSite(pages)
        site.start()
        clock = Clock()
        source = sitemap_source(site, every="1h", max_interval=max_interval, **MOVE_AT_ONCE)
        syncer = Syncer(make_config(tmp_path, [source]), embedder=embedder, clock=clock)
        made.append((site, syncer))
        return site, clock, syncer

    yield build
    for site, syncer in made:
        syncer.close()
        site.stop()


def test_a_renamed_page_moves_its_record_and_points_without_reembedding(make_syncer, embedder):
    site = DevSite(example_pages(3))
    site.start()
    try:
        syncer = make_syncer(site, **MOVE_AT_ONCE)
        syncer.run()
        old_url, new_url = site.base_url + "/guide/page-1", site.base_url + "/guide/renamed"
        count = points_by_url(syncer)[old_url]
        title, body = site.pages["/guide/page-1"].title, site.pages["/guide/page-1"].body
        site.set_page("/guide/renamed", title, body)
        site.redirect("/guide/page-1", "/guide/renamed")
        embedder.texts.clear()

        result = syncer.run()

        assert embedder.texts == []  # same text, new record: vectors from the cache
        urls = points_by_url(syncer)
        assert old_url not in urls and urls[new_url] == count
        assert result.counters.records_moved == 1
        old = syncer.state.documents.get(f"docs:{old_url}")
        assert old["status"] == "tombstoned" and old["tombstone_reason"] == f"moved to {new_url}"
        assert syncer.state.aliases.targets("docs") == {f"docs:{old_url}": f"docs:{new_url}"}
        assert syncer.verify().clean
    finally:
        site.stop()


def test_a_sitemap_still_listing_the_old_url_follows_the_alias(make_syncer, embedder):
    site = DevSite(example_pages(2))
    site.start()
    try:
        syncer = make_syncer(site, **MOVE_AT_ONCE)
        syncer.run()
        page = site.pages["/guide/page-0"]
        site.set_page("/guide/moved", page.title, page.body)
        site.redirect("/guide/page-0", "/guide/moved")
        site.listed = lambda: ["/guide/page-0", "/guide/page-1", "/private/secret"]  # stale
        embedder.texts.clear()
        syncer.run()
        urls = points_by_url(syncer)
        assert site.base_url + "/guide/page-0" not in urls
        assert urls[site.base_url + "/guide/moved"] == 4 and embedder.texts == []

        seen = len(site.hits)
        again = syncer.run()  # the alias sends the request straight to the new URL
        paths = [h.path for h in site.hits[seen:]]
        assert "/guide/page-0" not in paths and "/guide/moved" in paths
        assert again.counters.responses_304 == 2
    finally:
        site.stop()


def test_tracking_variants_and_rel_canonical_never_create_a_second_record(make_syncer):
    pages = example_pages(2)
    title, body = pages["/guide/page-0"]
    pages["/print/page-0"] = (title, f'<link rel="canonical" href="/guide/page-0">{body}')
    site = DevSite(pages)
    site.start()
    try:
        site.listed = lambda: [
            "/guide/page-0",
            "/guide/page-0?utm_source=news&utm_medium=mail",
            "/guide/page-0?fbclid=abc#section",
            "/guide/page-1",
            "/print/page-0",
        ]
        syncer = make_syncer(site)
        result = syncer.run()
        assert result.counters.candidates_discovered == 3
        keys = {d["doc_key"] for d in syncer.state.documents.list() if d["status"] == "active"}
        assert keys == {f"docs:{site.base_url}/guide/page-0", f"docs:{site.base_url}/guide/page-1"}
        urls = points_by_url(syncer)
        assert set(urls) == {site.base_url + "/guide/page-0", site.base_url + "/guide/page-1"}
    finally:
        site.stop()


def test_changed_lastmod_is_checked_first_but_every_page_is_revalidated(tmp_path, embedder):
    from ragsync.sync import Syncer
    from tests.support import make_config

    site = DevSite(example_pages(6))
    site.start()
    try:
        # One request at a time, so the order the site sees is the order of the work.
        config = make_config(
            tmp_path,
            [sitemap_source(site)],
            fetch={"concurrency": 1, "per_host_concurrency": 1},
        )
        syncer = Syncer(config, embedder=embedder)
        syncer.run()
        # page-0's lastmod moves, yet stays older than the other pages' lastmods: only the
        # "changed first" rule (not "newest first") puts it at the head of the work.
        site.pages["/guide/page-0"].modified += 1.0  # sitemap lastmod has 1 s resolution
        assert max(p.modified for p in site.pages.values()) > site.pages["/guide/page-0"].modified
        seen = len(site.hits)
        result = syncer.run()
        pages = [h.path for h in site.hits[seen:] if h.path.startswith("/guide/")]
        assert pages[0] == "/guide/page-0"  # its sitemap lastmod moved: checked first
        assert sorted(set(pages)) == sorted(p for p in site.pages if p.startswith("/guide/"))
        assert len(pages) == 7  # … every other page was revalidated too, and page-0's 304,
        # which its moved lastmod disputes, settled by asking it in full: the same page, so
        # no lie is counted (README "Validators that lie")
        assert result.counters.responses_304 == 6
        assert result.counters.responses_200_unchanged == 1
        assert (result.counters.validator_disagreements, result.counters.validator_lies) == (1, 0)
    finally:
        site.stop()


@pytest.mark.parametrize("new_path", ["/guide/page-1-guide", "/guide/a-renamed"])
def test_a_rename_with_immediate_deletion_keeps_the_new_record_active(
    make_syncer, embedder, new_path
):
    """The old URL leaves the sitemap and redirects: that is a move, not missing evidence
    against the target (one observation tombstoned the renamed page with this policy)."""
    site = DevSite(example_pages(3))
    site.start()
    try:
        syncer = make_syncer(site, missing_confirmations=1, missing_grace="0s")
        syncer.run()
        old_url, new_url = site.base_url + "/guide/page-1", site.base_url + new_path
        count = points_by_url(syncer)[old_url]
        page = site.pages["/guide/page-1"]
        site.redirect("/guide/page-1", new_path)
        site.set_page(new_path, page.title, page.body)
        embedder.texts.clear()

        result = syncer.run()

        urls = points_by_url(syncer)
        assert old_url not in urls and urls[new_url] == count and embedder.texts == []
        assert result.counters.tombstones_created == 1  # the old record only
        assert syncer.state.documents.get(f"docs:{new_url}")["status"] == "active"
        assert syncer.verify().clean
    finally:
        site.stop()


def test_a_redirect_stub_declaring_rel_canonical_never_stands_in_for_its_target(make_syncer):
    """mdBook's redirect stubs: "Redirecting to…" plus rel=canonical. The target's own page is
    the content, with its own validators, so a later check of the target is not answered
    304 against the stub's Last-Modified (the trial on the Cargo Book indexed the stub's text
    under the real page)."""
    pages = example_pages(1)
    pages["/guide/old-name"] = (
        "Redirecting...",
        '<link rel="canonical" href="/guide/page-0"><p>Redirecting to... page-0.</p>',
    )
    site = DevSite(pages)
    site.start()
    try:
        site.listed = lambda: ["/guide/old-name"]
        syncer = make_syncer(site)
        syncer.run()
        target = f"docs:{site.base_url}/guide/page-0"
        texts = " ".join(chunk.text for chunk in syncer.state.index.get_chunks(target))
        assert "Redirecting" not in texts and "retention" in texts
        assert syncer.state.aliases.targets("docs") == {
            f"docs:{site.base_url}/guide/old-name": target
        }
        site.listed = lambda: ["/guide/old-name", "/guide/page-0"]
        result = syncer.run(revalidate_all=True)
        assert result.counters.responses_304 == 1  # the target's own validators
        assert " ".join(c.text for c in syncer.state.index.get_chunks(target)) == texts
    finally:
        site.stop()


def stub(target: str, delay: int = 0) -> tuple[str, str]:
    """A meta-refresh redirect stub, as mdBook and Sphinx's redirect extensions write them
    (here without rel=canonical)."""
    return (
        "Redirecting...",
        f'<meta http-equiv="refresh" content="{delay}; url={target}">'
        f'<p>Redirecting to... <a href="{target}">{target}</a>.</p>',
    )


def test_a_meta_refresh_stub_is_a_redirect_never_content(make_syncer):
    pages = example_pages(1)
    pages["/guide/old-name"] = stub("page-0")
    site = DevSite(pages)
    site.start()
    try:
        site.listed = lambda: ["/guide/old-name"]
        syncer = make_syncer(site)
        result = syncer.run()
        target = f"docs:{site.base_url}/guide/page-0"
        texts = " ".join(chunk.text for chunk in syncer.state.index.get_chunks(target))
        assert "Redirecting" not in texts and "retention" in texts
        assert [d["doc_key"] for d in syncer.state.documents.list()] == [target]
        assert syncer.state.aliases.targets("docs") == {
            f"docs:{site.base_url}/guide/old-name": target
        }
        assert [hit.path for hit in site.page_hits()] == ["/guide/old-name", "/guide/page-0"]
        assert result.counters.requests_sent == len(site.hits)  # the target's request counts
    finally:
        site.stop()


def test_an_indexed_page_turned_into_a_meta_refresh_stub_moves_by_the_redirect_rule(
    make_syncer, embedder
):
    site = DevSite(example_pages(2))
    site.start()
    try:
        syncer = make_syncer(site, missing_confirmations=2, missing_grace="0s")
        syncer.run()
        old, new = f"docs:{site.base_url}/guide/page-0", f"docs:{site.base_url}/guide/moved"
        page = site.pages["/guide/page-0"]
        site.set_page("/guide/moved", page.title, page.body)
        site.set_page("/guide/page-0", *stub("moved"))
        site.listed = lambda: ["/guide/page-0", "/guide/page-1"]
        embedder.texts.clear()

        first = syncer.run()  # one observation: suspected, the content stays where it was
        assert first.counters.moves_suspected == 1 and first.counters.records_moved == 0
        assert syncer.state.documents.get(old)["status"] == "suspected_missing"
        kept = " ".join(c.text for c in syncer.state.index.get_chunks(old))
        assert "retention" in kept and "Redirecting" not in kept

        second = syncer.run()  # confirmed: the record moves, its vectors come from the cache
        assert second.counters.records_moved == 1 and embedder.texts == []
        assert syncer.state.documents.get(old)["status"] == "tombstoned"
        assert syncer.state.documents.get(new)["status"] == "active"
        assert syncer.verify().clean
    finally:
        site.stop()


def test_a_meta_refresh_out_of_the_source_or_to_a_missing_page_is_missing_evidence(make_syncer):
    pages = example_pages(2)
    site = DevSite(pages)
    site.start()
    try:
        syncer = make_syncer(site, missing_confirmations=1, missing_grace="0s")
        syncer.run()
        site.set_page("/guide/page-0", *stub("http://elsewhere.invalid/new"))
        site.set_page("/guide/page-1", *stub("gone"))
        site.remove_page("/guide/gone")
        site.listed = lambda: ["/guide/page-0", "/guide/page-1"]
        result = syncer.run()
        zero = syncer.state.documents.get(f"docs:{site.base_url}/guide/page-0")
        one = syncer.state.documents.get(f"docs:{site.base_url}/guide/page-1")
        out = "redirects out of the source to http://elsewhere.invalid/new"
        assert zero["status"] == "tombstoned" and zero["tombstone_reason"] == out
        assert one["status"] == "tombstoned" and "meta refresh to" in one["tombstone_reason"]
        assert "HTTP 404" in one["tombstone_reason"]
        assert [h.path for h in site.requests_to("/guide/gone")]  # the stub's target was asked
        assert result.counters.tombstones_created == 2
    finally:
        site.stop()


def test_a_delayed_meta_refresh_is_a_page_of_its_own(make_syncer):
    pages = example_pages(1)
    title, body = stub("page-0", delay=30)
    pages["/guide/announce"] = (title, body + "<p>" + "The announcement says much. " * 20 + "</p>")
    site = DevSite(pages)
    site.start()
    try:
        syncer = make_syncer(site)
        syncer.run()
        document = syncer.state.documents.get(f"docs:{site.base_url}/guide/announce")
        assert document["status"] == "active" and syncer.state.aliases.targets("docs") == {}
    finally:
        site.stop()


def test_two_urls_serving_the_same_page_are_stored_once_under_the_shorter(make_syncer, embedder):
    """mdBook serves its first chapter twice: at the book's root and at its own name."""
    pages = example_pages(2)
    pages["/guide/page-0-copy"] = pages["/guide/page-0"]
    site = DevSite(pages)
    site.start()
    try:
        syncer = make_syncer(site, **MOVE_AT_ONCE)
        first = syncer.run()
        holder, copy = (f"docs:{site.base_url}/guide/{p}" for p in ("page-0", "page-0-copy"))
        assert first.counters.duplicates == 1
        assert syncer.state.aliases.targets("docs") == {copy: holder}
        assert copy not in {d["doc_key"] for d in syncer.state.documents.list()}
        assert set(points_by_url(syncer)) == {f"{site.base_url}/guide/page-{i}" for i in (0, 1)}

        seen = len(site.hits)
        again = syncer.run()  # the copy's URL stands for its holder: not asked again
        assert "/guide/page-0-copy" not in [h.path for h in site.hits[seen:]]
        assert again.counters.responses_304 == 2 and again.counters.duplicates == 0

        # The holder goes; the copy still serves the page: it comes back under its own URL.
        site.remove_page("/guide/page-0")
        syncer.run()  # the holder's URL is asked (the copy stands for it): gone
        embedder.texts.clear()
        syncer.run()  # the copy's own URL is asked
        assert syncer.state.documents.get(holder)["status"] == "tombstoned"
        assert syncer.state.documents.get(copy)["status"] == "active"
        assert embedder.texts == []  # the same texts: vectors from the cache
        assert syncer.state.aliases.targets("docs") == {}
        assert syncer.verify().clean
    finally:
        site.stop()


def test_a_page_already_indexed_twice_is_stored_once_when_both_are_checked(make_syncer):
    """A state from before pages were stored once, or a copy checked before its holder in a
    pass: found when both URLs are checked in one pass, even when neither changed."""
    pages = example_pages(1)
    site = DevSite(pages)
    site.start()
    try:
        syncer = make_syncer(site, **MOVE_AT_ONCE)
        syncer.run()
        site.set_page("/guide/zz-copy-of-page-0", *pages["/guide/page-0"])
        # The copy alone first (a targeted re-sync): it cannot be told from a renamed page.
        syncer.resync([f"{site.base_url}/guide/zz-copy-of-page-0"])
        copy = f"docs:{site.base_url}/guide/zz-copy-of-page-0"
        assert syncer.state.documents.get(copy)["status"] == "active"

        result = syncer.run(revalidate_all=True)
        counters = result.counters
        assert counters.responses_304 + counters.responses_200_unchanged == 2  # neither changed
        assert counters.duplicates == 1
        document = syncer.state.documents.get(copy)
        assert document["status"] == "tombstoned"
        assert document["tombstone_reason"] == f"same content as {site.base_url}/guide/page-0"
        assert set(points_by_url(syncer)) == {f"{site.base_url}/guide/page-0"}
    finally:
        site.stop()


def test_a_copy_asked_again_before_its_holder_in_a_pass_stays_an_alias(served_twice):
    """The npm docs serve package-json.html again as npm-json.html. When the copy's alias
    was re-verified in a window before the one holding its holder, the copy took the page
    back and the holder, checked later in the pass, was retired as its copy: a restored and
    a removed change, and every point rewritten, at each re-verification."""
    pages = example_pages(2)
    pages["/y"] = pages["/guide/page-0"]
    pages["/guide/x-long-copy"] = pages["/guide/page-0"]
    del pages["/guide/page-0"]
    site, clock, syncer = served_twice(pages)
    holder, copy = (f"docs:{site.base_url}{p}" for p in ("/y", "/guide/x-long-copy"))
    syncer.run()
    assert syncer.state.aliases.targets("docs") == {copy: holder}
    # 70 new pages and the copy's alias gone stale: the copy (asked again, listed as
    # new) comes in the first window of the pass, its holder (unchanged) in the second
    for i in range(70):
        site.set_page(f"/more/page-{i}", f"More {i}", f"<p>{sentences(f'more {i}')}</p>")
    site.set_page("/guide/x-long-copy", *pages["/y"])
    clock.advance(hours=3)
    points = {url for url in points_by_url(syncer) if "/more/" not in url}
    changes = len(syncer.changes())

    result = syncer.run()

    assert len(site.requests_to("/guide/x-long-copy")) == 2  # re-verified
    assert result.counters.tombstones_created == 0
    assert syncer.state.documents.get(holder)["status"] == "active"
    assert syncer.state.aliases.targets("docs") == {copy: holder}
    assert {url for url in points_by_url(syncer) if "/more/" not in url} == points
    assert len(syncer.changes()) == changes + 70  # the new pages only


def test_a_copy_asked_again_is_a_conditional_request_while_its_holder_holds_its_page(served_twice):
    """mdBook serves its first chapter twice. The copy's alias is re-verified every
    max_interval (24 h by default), and its URL was downloaded in full each time: a run on an
    unchanged site was not 304-only once a day."""
    pages = example_pages(2)
    pages["/guide/page-0-copy"] = pages["/guide/page-0"]
    site, clock, syncer = served_twice(pages)
    holder, copy = (f"docs:{site.base_url}/guide/{p}" for p in ("page-0", "page-0-copy"))
    syncer.run()
    assert syncer.state.aliases.targets("docs") == {copy: holder}

    clock.advance(hours=3)
    result = syncer.run()

    asked = site.requests_to("/guide/page-0-copy")
    assert len(asked) == 2  # re-verified …
    counters = result.counters
    assert counters.responses_304 == 3  # … conditionally, like the rest
    assert counters.responses_200_changed == counters.responses_200_unchanged == 0
    assert counters.conditional_requests_sent == counters.requests_sent
    assert syncer.state.aliases.targets("docs") == {copy: holder}

    clock.advance(hours=3)  # asked again: the validators it answered are kept
    assert syncer.run().counters.responses_304 == 3

    # The copy now serves a page of its own: its 200 brings its record back.
    site.set_page("/guide/page-0-copy", "Its own page", f"<p>{sentences('own')}</p>")
    clock.advance(hours=3)
    syncer.run()
    assert syncer.state.documents.get(copy)["status"] == "active"
    assert syncer.state.aliases.targets("docs") == {}
    assert syncer.verify().clean


def test_a_copy_that_answers_304_after_its_holder_changed_is_asked_in_full(served_twice):
    """The holder changes in the pass that asks its copy again, and the copy does not: the
    copy's 304 says it still serves what the holder no longer holds, so it is not the
    holder's copy any more. It is asked again in full, and indexed under its own URL."""
    pages = example_pages(2)
    pages["/guide/page-0-copy"] = pages["/guide/page-0"]
    site, clock, syncer = served_twice(pages)
    holder, copy = (f"docs:{site.base_url}/guide/{p}" for p in ("page-0", "page-0-copy"))
    syncer.run()
    site.set_page("/guide/page-0", "Page 0, revised", f"<p>{sentences('revised')}</p>")
    clock.advance(hours=3)

    result = syncer.run()  # the holder changed; its copy answered 304

    assert result.counters.responses_304 == 2  # the copy and page-1
    assert syncer.state.documents.get(copy) is None  # not indexed yet …
    assert f"{site.base_url}/guide/page-0-copy" not in points_by_url(syncer)
    clock.advance(hours=1)
    syncer.run()  # … but due again at the source's next run, and asked in full
    assert syncer.state.documents.get(copy)["status"] == "active"
    assert syncer.state.aliases.targets("docs") == {}
    urls = set(points_by_url(syncer))
    assert {f"{site.base_url}/guide/page-0", f"{site.base_url}/guide/page-0-copy"} <= urls
    assert syncer.verify().clean


def test_a_shorter_url_serving_an_indexed_page_becomes_its_copy(make_syncer, embedder):
    """The npm docs serve package-json.html again as npm-json.html. Crawled from both, the
    shorter URL, new, came up in the window of the indexed one and took its page over: the
    indexed record was tombstoned and every point deleted and written again."""
    pages = example_pages(2)
    site = DevSite(pages)
    site.start()
    try:
        syncer = make_syncer(site, **MOVE_AT_ONCE)
        syncer.run()
        holder, copy = (f"docs:{site.base_url}{p}" for p in ("/guide/page-0", "/g0"))
        points = points_by_url(syncer)
        site.set_page("/g0", *pages["/guide/page-0"])

        result = syncer.run(revalidate_all=True)  # both in one window

        assert result.counters.duplicates == 1 and result.counters.tombstones_created == 0
        assert syncer.state.aliases.targets("docs") == {copy: holder}
        assert syncer.state.documents.get(holder)["status"] == "active"
        assert points_by_url(syncer) == points
        assert result.counters.points_upserted == result.counters.points_deleted == 0
    finally:
        site.stop()


def test_a_copy_that_comes_back_after_its_tombstone_stays_a_copy(served_twice):
    """libffi serves c.html again as The-Closure-API.html. c.html answered 404 until it was
    tombstoned, and the longer URL took the page; when c.html came back in a window before
    its holder's, it took the page back (restored) and the holder, checked later in the
    pass, was retired as its copy: every point deleted and written again."""
    pages = example_pages(2)
    pages["/c"] = pages["/guide/x-long-copy"] = pages.pop("/guide/page-0")
    site, clock, syncer = served_twice(pages)
    short, long = (f"docs:{site.base_url}{p}" for p in ("/c", "/guide/x-long-copy"))
    syncer.run()
    assert syncer.state.aliases.targets("docs") == {long: short}
    site.remove_page("/c")
    for _ in range(2):  # tombstoned; then the copy's own URL is asked: it holds the page
        clock.advance(hours=1)
        syncer.run()
    assert syncer.state.documents.get(long)["status"] == "active"
    assert syncer.state.documents.get(short)["status"] == "tombstoned"
    points = points_by_url(syncer)

    # c.html comes back with 70 new pages: it comes in the first window of the pass,
    # the holder (unchanged) in the second
    for i in range(70):
        site.set_page(f"/more/page-{i}", f"More {i}", f"<p>{sentences(f'more {i}')}</p>")
    site.set_page("/c", *pages["/c"])
    clock.advance(hours=3)

    result = syncer.run()

    assert result.counters.tombstones_created == 0
    assert syncer.state.documents.get(long)["status"] == "active"
    assert syncer.state.aliases.targets("docs") == {short: long}
    assert {u: n for u, n in points_by_url(syncer).items() if "/more/" not in u} == points


def test_a_page_that_comes_back_as_a_copy_of_a_holder_that_then_changes_is_indexed(served_twice):
    """c.html comes back and is a copy of the record holding its page, not checked yet in the
    pass; that record, checked later in the pass, has changed. No record held c.html's page,
    and its alias, just verified, was not asked again for a day (found by review)."""
    pages = example_pages(2)
    pages["/c"] = pages["/guide/x-long-copy"] = pages.pop("/guide/page-0")
    site, clock, syncer = served_twice(pages, max_interval="24h")
    syncer.run()
    site.remove_page("/c")
    for _ in range(2):  # tombstoned; the copy's own URL then holds the page
        clock.advance(hours=1)
        syncer.run()
    assert syncer.state.documents.get(f"docs:{site.base_url}/c")["status"] == "tombstoned"
    site.set_page("/guide/x-long-copy", "Revised", f"<p>{sentences('revised')}</p>")
    for i in range(70):  # the holder in the last window, /c in the first
        site.set_page(f"/more/page-{i}", f"More {i}", f"<p>{sentences(f'more {i}')}</p>")
    site.set_page("/c", *pages["/c"])
    clock.advance(hours=1)
    syncer.run()

    clock.advance(hours=1)
    syncer.run()  # the holder's copies are due again: /c is asked in full

    assert f"{site.base_url}/c" in points_by_url(syncer)
    assert syncer.state.aliases.targets("docs") == {}
    assert syncer.verify().clean


def test_workers_ask_a_copy_again_conditionally(served_twice):
    """The work queue carries no validators: a worker asked a copy in full (found by
    review)."""
    pages = example_pages(2)
    pages["/guide/page-0-copy"] = pages["/guide/page-0"]
    site, clock, syncer = served_twice(pages)
    Worker(syncer, poll=0.05).run(until_idle=True)
    clock.advance(hours=3)
    Worker(syncer, poll=0.05).run(until_idle=True)

    asked = site.requests_to("/guide/page-0-copy")
    assert len(asked) == 2 and asked[-1].conditional and asked[-1].status == 304
    holder = f"docs:{site.base_url}/guide/page-0"
    assert syncer.state.aliases.targets("docs") == {f"{holder}-copy": holder}


@pytest.mark.parametrize("how", ["301", "stub"])
def test_a_moved_page_asked_again_at_its_old_url_is_a_conditional_request(served_twice, how):
    """A sitemap still listing a renamed page's old URL: its alias is re-verified every
    max_interval, and the redirect's target was downloaded in full each time (the Rust
    Edition Guide's meta-refresh stub, on each re-verification: one 200 in a run otherwise
    all 304s)."""
    pages = example_pages(2)
    site, clock, syncer = served_twice(pages)
    old, new = "/guide/page-0", "/guide/moved"
    syncer.run()
    site.set_page(new, *pages[old])
    if how == "301":
        site.redirect(old, new)
    else:  # mdBook's redirect stub: a 200 whose meta refresh sends the reader on at once
        site.set_page(old, "Redirecting", f'<meta http-equiv="refresh" content="0; url={new}">')
    site.listed = lambda: [old, "/guide/page-1"]  # stale: the old URL only
    clock.advance(hours=1)
    syncer.run()
    alias = {f"docs:{site.base_url}{old}": f"docs:{site.base_url}{new}"}
    assert syncer.state.aliases.targets("docs") == alias

    clock.advance(hours=3)
    seen = len(site.hits)
    result = syncer.run()  # the alias is due: its URL is asked again

    asked = [(hit.path, hit.status) for hit in site.hits[seen:] if hit.path.startswith("/guide")]
    assert (old, 301 if how == "301" else 200) in asked  # re-verified …
    assert (new, 304) in asked and (new, 200) not in asked  # … its target conditionally
    assert result.counters.responses_200_changed == result.counters.responses_200_unchanged == 0
    assert syncer.state.aliases.targets("docs") == alias
    assert syncer.state.documents.get(f"docs:{site.base_url}{new}")["status"] == "active"
    assert syncer.verify().clean


def test_a_copy_whose_url_answers_404_is_no_longer_an_alias(served_twice):
    """npm's commands/i.html, a copy of npm-install.html, removed while still linked: each
    re-verification answered 404, and the alias was confirmed again (and counted as a
    duplicate) instead of the URL being named as a broken link."""
    pages = example_pages(2)
    pages["/guide/page-0-copy"] = pages["/guide/page-0"]
    site, clock, syncer = served_twice(pages)
    copy = f"docs:{site.base_url}/guide/page-0-copy"
    syncer.run()
    assert copy in syncer.state.aliases.targets("docs")
    site.remove_page("/guide/page-0-copy")
    site.listed = lambda: ["/guide/page-0", "/guide/page-0-copy", "/guide/page-1"]
    clock.advance(hours=3)

    result = syncer.run()

    assert site.requests_to("/guide/page-0-copy")[-1].status == 404
    assert result.counters.duplicates == 0 and result.counters.responses_404 == 1
    assert syncer.state.aliases.targets("docs") == {}
    (attempt,) = syncer.state.attempts.list("docs")
    assert attempt["doc_key"] == copy and attempt["state"] == "missing"


@pytest.mark.parametrize("case", ["new copy", "both edited"])
def test_a_record_indexed_before_the_pass_keeps_its_page_from_one_taken_earlier_in_it(
    served_twice, case
):
    """A new-user trial. libffi: a new c.html serving The-Closure-API.html's page came up in
    the window before it and took its page (the indexed record tombstoned, every point
    deleted and written again, a "removed" change). npm: folders.html held the page and
    npm-global.html was its copy; both edited alike, the copy (a start page) came first, was
    restored, and folders.html was retired as its copy."""
    pages = example_pages(2)
    pages["/guide/x-long-holder"] = pages.pop("/guide/page-0")
    site, clock, syncer = served_twice(pages)
    holder, short = (f"docs:{site.base_url}{p}" for p in ("/guide/x-long-holder", "/c"))
    syncer.run()
    if case == "both edited":  # /c comes up in the holder's window: its copy
        site.set_page("/c", *pages["/guide/x-long-holder"])
        clock.advance(hours=3)
        syncer.run()
    # 70 new pages, then /c (new, or a copy asked again): /c comes in the first window of the
    # pass (the newest), the holder (indexed, due again) in the second
    for i in range(70):
        site.set_page(f"/more/page-{i}", f"More {i}", f"<p>{sentences(f'more {i}')}</p>")
    if case == "both edited":
        assert syncer.state.aliases.targets("docs") == {short: holder}
        edited = ("Holder, edited", f"<p>{sentences('edited alike')}</p>")
        site.set_page("/guide/x-long-holder", *edited)
        site.set_page("/c", *edited)
    else:
        site.set_page("/c", *pages["/guide/x-long-holder"])
    clock.advance(hours=3)

    syncer.run()

    assert syncer.state.documents.get(holder)["status"] == "active"
    assert syncer.state.aliases.targets("docs") == {short: holder}
    urls = set(points_by_url(syncer))
    assert f"{site.base_url}/guide/x-long-holder" in urls and f"{site.base_url}/c" not in urls
    removed = [c.doc_key for c in syncer.changes() if c.change_type == "removed"]
    assert holder not in removed
    assert syncer.verify().clean
