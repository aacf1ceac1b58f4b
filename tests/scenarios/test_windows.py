"""Windows overlap: while one window's texts are embedded and committed, the next window is
fetched and extracted; a page whose record that commit changed is checked again."""

from __future__ import annotations

import time

import pytest

import ragsync.pipeline.source as source_module
from ragsync.models import Candidate
from ragsync.sync import Syncer
from ragsync.testing import DevSite
from tests.support import Clock, CountingEmbedder, make_config, sentences, sitemap_source


class WaitingEmbedder(CountingEmbedder):
    """Embeds only once the site has served more than ``pages`` pages (or after 10 s)."""

    def __init__(self, inner, site: DevSite, pages: int):
        super().__init__(inner)
        self.site, self.pages = site, pages
        self.served_while_embedding: list[int] = []

    def embed(self, texts):
        deadline = time.monotonic() + 10
        while len(self.site.page_hits()) <= self.pages and time.monotonic() < deadline:
            time.sleep(0.01)
        self.served_while_embedding.append(len(self.site.page_hits()))
        return super().embed(texts)


def test_the_next_window_is_fetched_while_one_is_embedded(tmp_path, embedder):
    site = DevSite(
        {f"/p/{n:02}": (f"Page {n}", f"<p>{sentences(f'topic{n}', 3)}</p>") for n in range(20)}
    )
    site.start()
    first = max(source_module.FIRST_WINDOW_PAGES, 4)
    waiting = WaitingEmbedder(embedder.inner, site, first)
    config = make_config(tmp_path, [sitemap_source(site)], fetch={"concurrency": 4})
    syncer = Syncer(config, embedder=waiting)
    try:
        result = syncer.run()
    finally:
        syncer.close()
        site.stop()
    assert result.counters.documents_created == 20
    # The first window's texts waited for the second window's requests: they overlapped.
    assert waiting.served_while_embedding[0] > first


def test_a_record_moved_by_the_previous_window_is_checked_again(tmp_path, embedder, monkeypatch):
    # One page in the first window, then two at a time (the least for one fetch thread), on
    # one fetch thread: /guide/old redirects to /guide/old-new, which serves version A; the
    # move is committed while the next window's /guide/old-new is checked, as a new page,
    # and already serves version B. Checked against no record, B would be logged (and sent
    # as an event) as created a second time, with none of A's two chunks removed.
    monkeypatch.setattr(source_module, "FIRST_WINDOW_PAGES", 1)
    monkeypatch.setattr(source_module, "WINDOW_PAGES", 1)
    pages = {
        "/guide/a": ("A", f"<p>{sentences('alpha', 3)}</p>"),
        "/guide/old": (
            "Moving",
            f"<h2>One</h2><p>{sentences('relocation', 4)}</p>"
            f"<h2>Two</h2><p>{sentences('placement', 4)}</p>",
        ),
        "/guide/old-m": ("M", f"<p>{sentences('mu', 3)}</p>"),
        "/guide/z": ("Z", f"<p>{sentences('zeta', 3)}</p>"),
    }
    site = DevSite(pages)
    site.start()
    clock = Clock()
    source = sitemap_source(site, missing_confirmations=1, missing_grace="0s")
    config = make_config(tmp_path, [source], fetch={"concurrency": 1})
    syncer = Syncer(config, embedder=embedder, clock=clock)
    try:
        syncer.run()
        old, new = site.base_url + "/guide/old", site.base_url + "/guide/old-new"
        site.set_page("/guide/old-new", *pages["/guide/old"])  # version A
        site.redirect("/guide/old", "/guide/old-new")
        site.listed = lambda: [*pages, "/guide/old-new"]
        served: list[str] = []

        def second_version(path: str, headers) -> None:
            served.append(path)
            if served.count("/guide/old-new") == 2:  # B from the second request on
                site.set_page("/guide/old-new", "Moving", f"<p>{sentences('moved', 4)}</p>")

        site.fault = second_version
        clock.advance(hours=1)
        result = syncer.run()
        assert result.ok and result.sources["docs"].errors == []
        assert result.counters.records_moved == 1 and result.counters.documents_created == 1
        changes = [c for c in syncer.state.runs.list_changes() if c["url"] == new]
        made = [(c["change_type"], c["chunks_added"], c["chunks_removed"]) for c in changes]
        assert made == [("created", 2, 0), ("updated", 1, 2)]  # moved in as A, then B
        assert syncer.state.aliases.targets("docs") == {f"docs:{old}": f"docs:{new}"}
        chunks = syncer.state.index.get_chunks(f"docs:{new}")
        assert ["moved" in chunk.text for chunk in chunks] == [True]  # B's chunk only
        points = [p for _, p, _ in syncer.store.points() if p["metadata"]["url"] in (old, new)]
        assert [p["metadata"]["url"] for p in points] == [new]
        assert "moved" in points[0]["page_content"]
        assert syncer.verify().clean
    finally:
        syncer.close()
        site.stop()


@pytest.mark.parametrize("count", [0, 1, 7, 8, 9, 72, 73, 200])
def test_windows_cover_the_work_once_in_order(count):
    work = [(str(n), Candidate(url=f"http://x/{n}"), False) for n in range(count)]
    found = list(source_module.windows(work, 8, 64))
    assert [item for _, part in found for item in part] == work
    assert [start for start, _ in found] == [
        sum(len(p) for _, p in found[:i]) for i in range(len(found))
    ]
    assert [len(part) for _, part in found[:1]] == ([min(count, 8)] if count else [])
    assert all(len(part) == 64 for _, part in found[1:-1])
