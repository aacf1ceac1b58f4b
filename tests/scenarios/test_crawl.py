"""The ``crawl`` source (#18 part 3): a site without a sitemap, listed by following its links.

A small book on 127.0.0.1 (DevSite, without per-request noise): a start page, chapters linked
breadth first, a nofollow link, a page that says noindex, a page whose meta robots says
nofollow, a link out of the start directory and one to another host. Then a real mdBook (the
rustdoc book, tests/fixtures/rustdoc-book) from a static server.
"""

from __future__ import annotations

import posixpath
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import lxml.html
import pytest

from ragsync.models import DocumentStatus
from ragsync.render import print_report
from ragsync.sync import Syncer
from ragsync.testing import DevSite, FastEmbedder, StaticSite, stop_server
from ragsync.worker import Worker
from tests.support import Clock, make_config, sentences

BookSyncer = Callable[..., Syncer]


def chapter(title: str, links: str = "") -> tuple[str, str]:
    return title, f"<h1>{title}</h1><p>{sentences(title)}</p><p>{links}</p>"


def book_pages() -> dict[str, tuple[str, str]]:
    return {
        "/book/": chapter(
            "The Book",
            '<a href="ch1.html">One</a> <a href="ch2.html#top">Two</a> '
            '<a href="all.html">All on one page</a> <a href="/outside.html">Elsewhere</a>',
        ),
        "/book/ch1.html": chapter(
            "Chapter one", '<a href="ch2.html">Next</a> <a href="sub/ch3.html">Deeper</a>'
        ),
        "/book/ch2.html": chapter(
            "Chapter two",
            '<a rel="nofollow" href="secret.html">Secret</a> '
            '<a href="http://other.invalid/book/x.html">Other site</a> '
            '<a href="mailto:a@example.org">Mail</a>',
        ),
        "/book/sub/ch3.html": chapter("Chapter three", '<a href="../">Home</a>'),
        # mdBook's print.html says noindex: not indexed, its links followed all the same.
        "/book/all.html": chapter(
            "The whole book",
            '<meta name="robots" content="noindex"><a href="appendix.html">Appendix</a>',
        ),
        "/book/appendix.html": chapter(
            "Appendix", '<meta name="robots" content="nofollow"><a href="hidden.html">Hidden</a>'
        ),
        "/book/secret.html": chapter("Secret"),
        "/book/hidden.html": chapter("Hidden"),
        "/book/orphan.html": chapter("Orphan"),
        "/outside.html": chapter("Outside"),
    }


INDEXED = [
    "/book/",
    "/book/ch1.html",
    "/book/ch2.html",
    "/book/sub/ch3.html",
    "/book/appendix.html",
]
NEVER_REQUESTED = ["/book/secret.html", "/book/hidden.html", "/book/orphan.html", "/outside.html"]


@pytest.fixture
def book() -> Iterator[DevSite]:
    site = DevSite(book_pages(), noise=False)
    site.start()
    yield site
    site.stop()


@pytest.fixture
def crawler(tmp_path: Path, embedder: Any, book: DevSite) -> Iterator[BookSyncer]:
    made: list[Syncer] = []

    def build(**extra: Any) -> Syncer:
        for syncer in made:  # one process may hold the local vector store at a time
            syncer.close()
        source = {"id": "book", "kind": "crawl", "url": book.base_url + "/book/", **extra}
        syncer = Syncer(make_config(tmp_path, [source]), embedder=embedder)
        made.append(syncer)
        return syncer

    yield build
    for syncer in made:
        syncer.close()


def urls(syncer: Syncer, book: DevSite, status: str = DocumentStatus.ACTIVE) -> set[str]:
    """The paths of the source's records with ``status``."""
    return {
        d["canonical_url"].removeprefix(book.base_url)
        for d in syncer.state.documents.list("book")
        if d["status"] == status
    }


def page_requests(book: DevSite, since: int = 0) -> list[Any]:
    return [hit for hit in book.hits[since:] if hit.path != "/robots.txt"]


def test_a_crawl_indexes_every_page_reachable_in_scope_and_nothing_else(book, crawler):
    syncer = crawler()
    result = syncer.run()

    assert result.ok, result.to_dict()
    assert result.sources["book"].incomplete == []
    assert urls(syncer, book) == set(INDEXED)
    assert result.counters.documents_created == len(INDEXED)
    # all.html was read for its links (appendix.html is only linked from there), not indexed.
    assert result.counters.noindex == 1 and book.requests_to("/book/all.html")
    # nofollow (a link's rel, a page's meta robots), another directory, another host: never asked.
    for path in NEVER_REQUESTED:
        assert book.requests_to(path) == [], path
    requested = [hit.path for hit in page_requests(book)]
    assert sorted(requested) == sorted({*requested}), "a page was requested twice"
    # Breadth first: the start page, then its links, then theirs.
    assert requested[0] == "/book/"
    assert requested.index("/book/sub/ch3.html") > requested.index("/book/ch1.html")


def test_a_second_crawl_sends_only_conditional_requests_and_embeds_nothing(book, crawler, embedder):
    syncer = crawler()
    syncer.run()
    embedder.texts.clear()
    before = len(book.hits)

    result = syncer.run()

    assert result.ok and result.sources["book"].incomplete == []
    hits = page_requests(book, before)
    assert sorted(hit.path for hit in hits) == sorted([*INDEXED, "/book/all.html"])
    # all.html (noindex) has no record: its validators are kept with its links.
    assert all(hit.conditional and hit.status == 304 for hit in hits)
    assert result.counters.responses_304 == len(INDEXED) and result.counters.noindex == 1
    assert embedder.texts == [] and result.counters.chunks_embedded == 0
    assert urls(syncer, book) == set(INDEXED)


def test_a_start_url_without_its_directorys_slash_crawls_that_directory_on_every_run(book, crawler):
    # "/book" answered by "/book/": its directory is "/book/", not "/" (the whole site). The
    # installed Rustonomicon crawled from ".../nomicon" took in every book and the standard
    # library (150 pages at max_pages = 150) instead of its 63.
    book.redirect("/book", "/book/")
    syncer = crawler(url=book.base_url + "/book")

    for _ in range(2):  # the second pass knows the move from its alias
        result = syncer.run()

        assert result.ok and result.sources["book"].incomplete == []
        assert urls(syncer, book) == set(INDEXED)
        assert book.requests_to("/outside.html") == []


def test_a_start_page_that_redirects_temporarily_into_the_site_is_crawled_from_its_target(
    book, crawler
):
    # Read the Docs answers "/" with 302 → "/en/latest/", and links every other version from
    # each page. Before, the crawl of such a site failed at its start page and indexed nothing.
    book.redirect("/", "/book/", status=302)
    book.set_page("/index.html", *chapter("Another version", '<a href="/book/">Latest</a>'))
    syncer = crawler(url=book.base_url + "/")

    for _ in range(2):
        result = syncer.run()

        assert result.ok and result.sources["book"].incomplete == []
        assert urls(syncer, book) == set(INDEXED)
        assert result.counters.temporary_redirects == 0  # not a failure, nothing retried
        # the crawl stays under the target's directory, not "/" (the whole site)
        assert book.requests_to("/outside.html") == []
    assert syncer.state.attempts.list("book") == []


def test_workers_crawl_from_a_start_page_that_redirects_temporarily_under_its_target(
    book, tmp_path, embedder
):
    book.redirect("/", "/book/", status=302)
    clock = Clock()
    source = {"id": "book", "kind": "crawl", "url": book.base_url + "/", "every": "1h"}
    syncer = Syncer(make_config(tmp_path, [source]), embedder=embedder, clock=clock)
    try:
        for _ in range(4):  # each listing reaches one level past the pages read so far
            Worker(syncer, poll=0.05).run(until_idle=True)
            clock.advance(hours=2)
        assert urls(syncer, book) == set(INDEXED)
        assert book.requests_to("/outside.html") == []
    finally:
        syncer.close()


def test_a_start_page_that_comes_to_redirect_elsewhere_is_followed_there_once_confirmed(
    book, crawler
):
    book.redirect("/", "/book/", status=302)
    # a whole new version leaves out most known pages: allowed here (max_unlisted_share)
    syncer = crawler(
        url=book.base_url + "/",
        missing_confirmations=2,
        missing_grace="0s",
        max_unlisted_share=1.0,
    )
    syncer.run()
    # the site's default version changes (or its home page is sent to a maintenance
    # directory for a while); the pages of the first one still serve
    book.set_page("/v2/", *chapter("Version two", '<a href="page.html">On</a>'))
    book.set_page("/v2/page.html", *chapter("A page of version two"))
    book.redirect("/", "/v2/", status=302)

    first = syncer.run()

    (reason,) = first.sources["book"].incomplete
    assert "redirects to" in reason and "/v2/" in reason and "seen 1 times" in reason
    assert urls(syncer, book) == set(INDEXED)  # followed as before: nothing is unlisted
    assert urls(syncer, book, DocumentStatus.SUSPECTED_MISSING) == set()
    assert book.requests_to("/v2/page.html") == []

    second = syncer.run()  # seen twice (missing_confirmations): the crawl follows /v2/

    assert second.sources["book"].incomplete == []
    assert {"/v2/", "/v2/page.html"} <= urls(syncer, book)
    assert urls(syncer, book, DocumentStatus.SUSPECTED_MISSING) == set(INDEXED)


@pytest.mark.parametrize(
    ("start", "target"),
    [
        ("/", "/maintenance.html"),  # a page, not a directory: a maintenance window
        ("/", "/"),  # itself
        ("/docs/", "/book/"),  # not below the start page's directory
        ("/", "/book/?session=1"),  # a query: another target on every pass
    ],
)
def test_a_start_page_redirected_temporarily_elsewhere_fails_and_prunes_nothing(
    book, crawler, start, target
):
    book.set_page("/maintenance.html", *chapter("Down for maintenance"))
    book.redirect(start, target, status=302)
    syncer = crawler(url=book.base_url + start)

    result = syncer.run()

    (reason,) = result.sources["book"].incomplete
    assert "1 pages failed" in reason and "temporary redirect (HTTP 302)" in reason
    assert result.counters.temporary_redirects == 1 and urls(syncer, book) == set()


def test_a_start_page_with_content_that_redirects_temporarily_keeps_it(book, crawler):
    syncer = crawler()
    syncer.run()
    book.redirect("/book/", "/book/ch1.html", status=302)  # a maintenance window

    result = syncer.run()

    assert result.counters.temporary_redirects == 1
    # the start page failed (and is retried), so no page counts as unlisted
    (reason,) = result.sources["book"].incomplete
    assert "1 pages failed" in reason and "temporary redirect (HTTP 302)" in reason
    assert urls(syncer, book) == set(INDEXED)


def test_a_page_newly_linked_from_a_changed_page_is_indexed_in_the_same_run(book, crawler):
    syncer = crawler()
    syncer.run()
    book.set_page("/book/new/page.html", *chapter("A new page", '<a href="deeper.html">on</a>'))
    book.set_page("/book/new/deeper.html", *chapter("Deeper still"))
    book.set_page(
        "/book/sub/ch3.html", *chapter("Chapter three", '<a href="../new/page.html">New</a>')
    )

    result = syncer.run()

    assert result.ok and result.sources["book"].incomplete == []
    assert result.counters.documents_created == 2
    assert {"/book/new/page.html", "/book/new/deeper.html"} <= urls(syncer, book)


def test_a_page_deleted_and_unlinked_is_tombstoned_by_the_missing_page_rule(book, crawler):
    syncer = crawler(missing_confirmations=2, missing_grace="0s")
    syncer.run()
    book.set_page("/book/ch1.html", *chapter("Chapter one", '<a href="ch2.html">Next</a>'))
    book.remove_page("/book/sub/ch3.html")

    first = syncer.run()
    assert first.sources["book"].incomplete == []
    assert urls(syncer, book, DocumentStatus.SUSPECTED_MISSING) == {"/book/sub/ch3.html"}
    assert first.counters.tombstones_created == 0

    second = syncer.run()
    assert second.counters.tombstones_created == 1
    assert urls(syncer, book, DocumentStatus.TOMBSTONED) == {"/book/sub/ch3.html"}
    assert urls(syncer, book) == set(INDEXED) - {"/book/sub/ch3.html"}


def test_a_broken_link_keeps_its_pages_links_until_its_tombstone(book, crawler):
    syncer = crawler(missing_confirmations=2, missing_grace="0s")
    syncer.run()
    book.remove_page("/book/ch1.html")  # still linked from the start page; ch3 only from ch1

    syncer.run()  # ch1 suspected missing: its stored links still count
    assert urls(syncer, book, DocumentStatus.SUSPECTED_MISSING) == {"/book/ch1.html"}
    syncer.run()  # ch1 tombstoned: ch3 is no longer reachable, a first observation
    assert urls(syncer, book, DocumentStatus.TOMBSTONED) == {"/book/ch1.html"}
    assert urls(syncer, book, DocumentStatus.SUSPECTED_MISSING) == {"/book/sub/ch3.html"}
    syncer.run()
    assert urls(syncer, book, DocumentStatus.TOMBSTONED) == {"/book/ch1.html", "/book/sub/ch3.html"}


def test_an_indexed_page_that_comes_to_say_noindex_is_pruned_and_its_links_still_followed(
    book, crawler
):
    syncer = crawler(missing_confirmations=2, missing_grace="0s")
    syncer.run()
    book.set_page(
        "/book/ch1.html",
        *chapter(
            "Chapter one",
            '<meta name="robots" content="noindex"><a href="sub/ch3.html">Deeper</a>',
        ),
    )

    for _ in range(4):  # suspected, tombstoned, then tombstoned and still crawled
        result = syncer.run()

        assert result.sources["book"].incomplete == []
        assert urls(syncer, book) >= set(INDEXED) - {"/book/ch1.html"}  # ch3: linked from ch1
    assert urls(syncer, book, DocumentStatus.TOMBSTONED) == {"/book/ch1.html"}


@pytest.mark.parametrize(
    ("served", "why"),
    [
        # A maintenance page is an outage page: the start page fails, its stored links stand.
        ("We'll be back soon", "1 pages failed: {base}/book/"),
        # Another text is the page (confirmed at once here): the listing is taken as broken.
        ("Welcome to the new site", "max_unlisted_share"),
    ],
)
def test_a_start_page_that_loses_its_links_prunes_nothing(book, crawler, served, why):
    # Served with a 200 in place of the home page, without its links: every other page
    # (still served) would have counted as unlisted.
    syncer = crawler(missing_confirmations=1, missing_grace="0s")
    syncer.run()
    book.set_page("/book/", *chapter(served))

    for _ in range(2):
        result = syncer.run(revalidate_all=True)

        (reason,) = result.sources["book"].incomplete
        assert why.format(base=book.base_url) in reason
        assert result.counters.tombstones_created == 0
    assert urls(syncer, book) == set(INDEXED)


@pytest.mark.parametrize("cap", [2, 4])  # 4: the start page and its 3 links fill it exactly
def test_a_crawl_cut_by_max_pages_is_incomplete_and_prunes_nothing(book, crawler, cap, capsys):
    crawler(missing_confirmations=1, missing_grace="0s").run()

    capped = crawler(missing_confirmations=1, missing_grace="0s", max_pages=cap)
    result = capped.run()

    # named once, though the pages past the cap link further; a bound the source chose:
    # no error (a capped crawl ended every cron run with exit code 1)
    (reason,) = result.sources["book"].incomplete
    assert f"max_pages={cap}" in reason and result.ok and result.sources["book"].errors == []
    assert result.counters.listings_incomplete == 1
    assert result.counters.tombstones_created == 0
    assert urls(capped, book) == set(INDEXED)
    # `ragsync run` names it (the run report printed nothing of it), `run -q` is silent
    capsys.readouterr()
    print_report(result.to_dict())
    printed = capsys.readouterr().err
    assert printed.count(f"[book] listing incomplete: crawl cut at max_pages={cap}") == 1
    print_report(result.to_dict(), quiet=True)
    assert capsys.readouterr().err == ""


def test_a_capped_crawl_keeps_to_the_same_pages_on_every_pass(book, crawler):
    # max_pages = 12 on the Node.js docs indexed 11 more pages on each `run --all`: pages
    # never indexed were ordered first, so each pass took the next ones in.
    syncer = crawler(max_pages=2)
    first = syncer.run()
    indexed = urls(syncer, book)
    assert first.counters.documents_created == 2 == len(indexed)

    for _ in range(2):
        result = syncer.run()

        assert "max_pages=2" in result.sources["book"].incomplete[0]
        assert result.counters.documents_created == 0
        assert urls(syncer, book) == indexed


def test_a_crawl_cut_by_max_depth_is_incomplete(book, crawler):
    result = crawler(max_depth=1).run()

    assert any("max_depth=1" in reason for reason in result.sources["book"].incomplete)
    assert result.ok
    assert book.requests_to("/book/sub/ch3.html") == []  # depth 2
    assert book.requests_to("/book/ch1.html")


def test_a_linking_page_that_fails_makes_the_crawl_incomplete(book, crawler):
    syncer = crawler(missing_confirmations=1, missing_grace="0s")
    syncer.run()
    book.fault = lambda path, headers: (
        (503, {"Content-Type": "text/plain"}, b"busy") if path == "/book/ch1.html" else None
    )

    result = syncer.run()

    assert any("1 pages failed" in reason for reason in result.sources["book"].incomplete)
    assert result.counters.tombstones_created == 0
    assert urls(syncer, book) == set(INDEXED)
    assert not result.ok

    again = syncer.run()  # its retry is not due: held back, its links as last read
    assert again.counters.held_back == 1 and book.requests_to("/book/ch1.html")[-1].status == 503
    (reason,) = again.sources["book"].incomplete
    assert f"{book.base_url}/book/ch1.html: failing, held back until its retry" in reason
    assert not again.ok  # as in the run that failed: one exit code while the failure lasts
    assert again.counters.tombstones_created == 0


# -- a real book: an mdBook nobody in this project wrote, served from a temporary copy ---------

# The rustdoc book (mdBook), its HTML as the Rust toolchain installs it (README there).
REAL_BOOK = Path(__file__).parent.parent / "fixtures" / "rustdoc-book"


def reachable(root: Path, start: str) -> set[str]:
    """The oracle: the ``.html`` files under ``root/start`` reachable from its ``index.html``
    through ``<a href>`` links into that folder (read with lxml, not with ragsync.links)."""
    seen, queue = {f"{start}/index.html"}, [f"{start}/index.html"]
    while queue:
        current = queue.pop()
        tree = lxml.html.fromstring((root / current).read_bytes())
        for anchor in tree.iter("a"):
            href = (anchor.get("href") or "").split("#", 1)[0]
            if not href or "nofollow" in (anchor.get("rel") or "").split() or ":" in href:
                continue
            target = posixpath.normpath(posixpath.join(posixpath.dirname(current), href))
            if (root / target).is_dir():
                target += "/index.html"
            if target.startswith(f"{start}/") and (root / target).is_file() and target not in seen:
                seen.add(target)
                queue.append(target)
    return seen


def main_text(file: Path) -> str:
    """The text of a page's ``<main>`` (a directory: its ``index.html``)."""
    file = file / "index.html" if file.is_dir() else file
    main = lxml.html.fromstring(file.read_bytes()).find(".//main")
    assert main is not None, file
    return " ".join(main.text_content().split())


def test_a_real_mdbook_is_crawled_whole_then_revalidated_with_304s(tmp_path):
    root = tmp_path / "site"
    shutil.copytree(REAL_BOOK, root / "book")
    site = StaticSite(root)
    source = {"id": "book", "kind": "crawl", "url": site.base_url + "/book/"}
    syncer = Syncer(make_config(tmp_path, [source]), embedder=FastEmbedder())
    try:
        first = syncer.run()

        assert first.ok and first.sources["book"].incomplete == [], first.to_dict()
        expected = {p.removesuffix("index.html") for p in reachable(root, "book")}
        requested = {path.lstrip("/") for path, _, _ in site.hits if path != "/robots.txt"}
        assert requested == expected

        # Every reachable page is indexed but print.html (the whole book; it says noindex),
        # and a page served under two URLs (mdBook's root is its first chapter) is stored once.
        def path(doc_key: str) -> str:
            return doc_key.removeprefix(f"book:{site.base_url}/")

        indexed = {path(d["doc_key"]) for d in syncer.state.documents.list()}
        aliases = {path(a): path(t) for a, t in syncer.state.aliases.targets("book").items()}
        assert first.counters.noindex == 1 and "book/print.html" not in indexed
        assert first.counters.duplicates == len(aliases) >= 1
        assert set(aliases.values()) <= indexed and not set(aliases) & indexed
        assert indexed | set(aliases) == expected - {"book/print.html"}
        for alias, holder in aliases.items():  # the same page, as lxml reads it
            assert main_text(root / alias) == main_text(root / holder)

        before = len(site.hits)
        second = syncer.run()
        assert second.sources["book"].incomplete == [] and second.counters.chunks_embedded == 0
        again = [(path, status, cond) for path, status, cond in site.hits[before:]]
        pages = [hit for hit in again if hit[0] != "/robots.txt"]
        assert "/book/print.html" in {path for path, _, _ in pages}  # noindex: 304 too
        assert pages and all(status == 304 and cond for _, status, cond in pages)

        # A page linked from a changed page is found in the run that sees the link.
        (root / "book/new-chapter.html").write_text("<h1>New</h1><p>" + sentences("new") + "</p>")
        index = root / "book/index.html"
        index.write_text(
            index.read_text().replace("</main>", '<a href="new-chapter.html">new</a></main>', 1)
        )
        third = syncer.run()
        assert syncer.state.documents.get(f"book:{site.base_url}/book/new-chapter.html")
        # index.html no longer serves its first chapter's page: that copy, due again when
        # its holder changed and linked from it, is indexed under its own URL in this run
        (first_chapter,) = [alias for alias, holder in aliases.items() if holder == "book/"]
        assert third.counters.documents_created == 2
        assert syncer.state.documents.get(f"book:{site.base_url}/{first_chapter}")

        # A one-paragraph edit in the middle of the longest page re-embeds at most 2 chunks.
        longest = max(
            syncer.state.documents.list(),
            key=lambda d: len(syncer.state.index.get_chunks(d["doc_key"])),
        )
        page = root / longest["canonical_url"].removeprefix(site.base_url + "/")
        html = page.read_text()
        main = html.index("<main>")
        ends = [i for i in range(main, html.index("</main>")) if html.startswith("</p>", i)]
        middle = ends[len(ends) // 2]
        page.write_text(
            html[:middle] + " An edit adds this sentence to one paragraph." + html[middle:]
        )
        fourth = syncer.run()
        assert fourth.counters.documents_updated == 1, fourth.counters
        assert 1 <= fourth.counters.chunks_embedded <= 2, fourth.counters
    finally:
        syncer.close()
        stop_server(site.server)
