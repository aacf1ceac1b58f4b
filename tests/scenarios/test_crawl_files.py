"""A crawl that meets links to files that are not text pages (README "Discovery").

Real documentation links its pages to machine-readable views and assets: the Node.js API docs
link every page to a "View as JSON" file, books link images and archives. Such a link, never
indexed, is skipped (counter ``not_text``), not a failure: it must not fail every run nor leave
the crawl incomplete. A page that was indexed, a page whose links the crawl holds, and a start
page still fail when they answer with a file, so nothing they hold or lead to is lost.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragsync.models import DocumentStatus
from ragsync.sync import Syncer
from ragsync.testing import FastEmbedder, StaticSite
from tests.support import make_config, sentences

PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)


def html(title: str, links: str = "", head: str = "") -> str:
    body = f"<html><head><title>{title}</title>{head}</head><body><h1>{title}</h1>"
    return f"{body}<p>{sentences(title)}</p><p>{links}</p></body></html>"


def write(root: Path, path: str, content: str | bytes) -> None:
    """The file served at ``/docs/<path>``."""
    file = root / "docs" / (path or "index.html")
    file.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        file.write_text(content)
    else:
        file.write_bytes(content)


def since(site: StaticSite, start: int) -> dict[str, tuple[int, bool]]:
    """The requests after the ``start``-th, robots.txt left out: ``{path: (status, cond)}``."""
    return {path: (s, cond) for path, s, cond in site.hits[start:] if path != "/robots.txt"}


@pytest.fixture
def site(tmp_path: Path) -> Iterator[StaticSite]:
    root = tmp_path / "site"
    pages: dict[str, str | bytes] = {
        "": html(
            "Docs",
            '<a href="fs.html">fs</a> <a href="fs.json">View as JSON</a> '
            '<a href="logo.png">logo</a> <a href="all.html">All</a>',
        ),
        "fs.html": html("File system", '<a href="./">Home</a> <a href="fs.json">JSON</a>'),
        "fs.json": b'{"modules": [{"name": "fs"}]}',
        "logo.png": PNG,
        # A hub that says noindex: read for its links only; appendix.html is linked only here.
        "all.html": html(
            "All", '<a href="appendix.html">Appendix</a>', '<meta name="robots" content="noindex">'
        ),
        "appendix.html": html("Appendix"),
    }
    for path, content in pages.items():
        write(root, path, content)
    with StaticSite(root) as served:
        yield served


INDEXED = {"/docs/", "/docs/fs.html", "/docs/appendix.html"}


@pytest.fixture
def crawl(tmp_path: Path, site: StaticSite) -> Iterator[Any]:
    made: list[Syncer] = []

    def build(start: str = "/docs/", **extra: Any) -> Syncer:
        source = {"id": "docs", "kind": "crawl", "url": site.base_url + start, **extra}
        fetch = {"retry_base": "0.2s", "retry_cap": "0.2s"}
        syncer = Syncer(make_config(tmp_path, [source], fetch=fetch), embedder=FastEmbedder())
        made.append(syncer)
        return syncer

    yield build
    for syncer in made:
        syncer.close()


def active(syncer: Syncer, site: StaticSite) -> set[str]:
    return {
        d["canonical_url"].removeprefix(site.base_url)
        for d in syncer.state.documents.list("docs")
        if d["status"] == DocumentStatus.ACTIVE
    }


def test_links_to_files_are_skipped_complete_and_revalidated_with_304s(site, crawl):
    syncer = crawl()

    first = syncer.run()

    assert first.ok, first.to_dict()
    assert first.sources["docs"].incomplete == []
    assert first.counters.not_text == 2 and first.counters.fetch_errors == 0
    assert active(syncer, site) == INDEXED
    assert {"/docs/fs.json", "/docs/logo.png"} <= set(since(site, 0))

    before = len(site.hits)
    second = syncer.run()

    assert second.ok and second.sources["docs"].incomplete == [], second.to_dict()
    # The files have no record: their validators are kept with their (no) links, as a
    # noindex page's are, so a run that finds nothing changed sends only conditional requests.
    hits = since(site, before)
    assert hits["/docs/fs.json"] == hits["/docs/logo.png"] == (304, True)
    assert all(hit == (304, True) for hit in hits.values()), hits
    assert second.counters.not_text == 2 and second.counters.noindex == 1
    assert second.counters.fetch_errors == 0 and second.counters.chunks_embedded == 0

    # The file changes: still skipped, read again.
    write(site.root, "fs.json", b'{"modules": []}')
    third = syncer.run()
    assert third.ok and third.counters.not_text == 2 and third.counters.fetch_errors == 0


def test_a_page_that_turns_into_a_file_fails_and_keeps_what_it_held(site, crawl):
    syncer = crawl()
    assert syncer.run().ok
    # An indexed page and the noindex hub (its links lead to the appendix) now answer files.
    write(site.root, "fs.html", b"{}")
    write(site.root, "all.html", b"\x00\x01")
    site.content_types["/docs/fs.html"] = "application/json"
    site.content_types["/docs/all.html"] = "application/octet-stream"

    result = syncer.run()

    assert not result.ok and result.counters.fetch_errors == 2
    assert result.counters.not_text == 2  # fs.json and logo.png, as before
    reasons = " ".join(result.sources["docs"].incomplete)
    assert "/docs/fs.html" in reasons and "/docs/all.html" in reasons
    assert "not a text page" in reasons
    # Nothing is lost: fs.html keeps its content, the appendix stays reachable.
    assert active(syncer, site) == INDEXED
    assert syncer.search("File system", k=3, mode="sparse")


def test_a_start_page_that_is_a_file_fails(site, crawl):
    syncer = crawl("/docs/fs.json")

    result = syncer.run()

    assert not result.ok and result.counters.fetch_errors == 1
    assert result.counters.not_text == 0
    assert any("fs.json" in reason for reason in result.sources["docs"].incomplete)


def test_a_file_that_failed_once_is_not_asked_again_once_it_answers(site, crawl):
    syncer = crawl(every="1h")
    site.failing.add("/docs/fs.json")
    first = syncer.run()
    assert first.counters.fetch_errors == 1 and first.counters.not_text == 1
    key = f"docs:{site.base_url}/docs/fs.json"
    assert syncer.state.attempts.get(key)["state"] == "retrying"

    site.failing.clear()
    time.sleep(0.5)  # its retry is due; the source is not
    retried = syncer.run()
    assert retried.counters.not_text == 1 and retried.counters.fetch_errors == 0
    assert syncer.state.attempts.get(key) is None  # it answered: no failure stands

    before = len(site.hits)
    assert syncer.run().counters.requests_sent == 0  # nothing due
    assert site.hits[before:] == []


def test_a_linked_archive_larger_than_max_body_bytes_is_skipped_unread(site, tmp_path):
    write(site.root, "dist.tar.gz", bytes(50_000))
    index = site.root / "docs/index.html"
    index.write_text(index.read_text().replace("</body>", '<a href="dist.tar.gz">get</a></body>'))
    source = {"id": "docs", "kind": "crawl", "url": site.base_url + "/docs/"}
    config = make_config(tmp_path, [source], fetch={"max_body_bytes": 10_000})
    with Syncer(config, embedder=FastEmbedder()) as syncer:
        result = syncer.run()
    assert result.ok and result.sources["docs"].incomplete == [], result.to_dict()
    assert result.counters.not_text == 3 and result.counters.fetch_errors == 0
