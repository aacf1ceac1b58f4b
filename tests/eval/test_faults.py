"""The fault replay's own machinery (eval/faults.py): what the site answers in each fault
window, that every system meets the same faults, the peers' loader, and the yardsticks. A fault
that is not really served, or served differently to each system, would make the replay's table
meaningless."""

from __future__ import annotations

import gzip

import httpx
import pytest
from lxml import etree

from eval.evolving import EvolvingSite
from eval.faults import (
    MAINTENANCE,
    MAINTENANCE_SENTENCES,
    FaultInjector,
    true_point,
    wrongly_deleted,
)
from eval.peers import ListingError, load_pages


@pytest.fixture
def replay():
    evolving = EvolvingSite(20, seed=3)
    base = evolving.site.start()
    injector = FaultInjector(evolving.site, seed=7)
    evolving.site.fault = injector
    with httpx.Client(base_url=base) as client:
        yield evolving, injector, client
    evolving.site.stop()


def statuses(client, paths):
    return [client.get(path).status_code for path in paths]


def test_listing_faults_are_served_and_end(replay):
    evolving, injector, client = replay
    paths = sorted(evolving.live)
    full = client.get("/sitemap.xml").content

    injector.arm("sitemap_503")
    assert client.get("/sitemap.xml").status_code == 503
    assert set(statuses(client, paths)) == {200}

    injector.arm("sitemap_truncated")
    cut = client.get("/sitemap.xml")
    assert cut.status_code == 200 and 0 < len(cut.content) < len(full)
    assert full.startswith(cut.content)  # the same document, cut off
    with pytest.raises(etree.XMLSyntaxError):
        etree.fromstring(cut.content)

    injector.arm("child_500")
    index = client.get("/sitemap.xml").text
    assert "<sitemapindex" in index and "sitemap-2.xml.gz" in index
    first = gzip.decompress(client.get("/sitemap-1.xml.gz").content).decode()
    assert first.count("<loc>") == len(paths) - len(paths) // 2
    assert client.get("/sitemap-2.xml.gz").status_code == 500

    injector.disarm()
    assert client.get("/sitemap.xml").content == full
    assert not evolving.site.sitemap_index


def test_page_faults_redirect_hide_and_come_back(replay):
    evolving, injector, client = replay
    paths = sorted(evolving.live)

    injector.arm("maintenance_302")
    moved = client.get(paths[0])
    assert moved.status_code == 302 and moved.headers["location"].endswith(MAINTENANCE)
    landed = client.get(paths[0], follow_redirects=True)
    assert landed.status_code == 200 and str(landed.url).endswith(MAINTENANCE)
    assert MAINTENANCE_SENTENCES[0] in landed.text
    assert client.get("/sitemap.xml").status_code == 200  # only pages redirect

    injector.arm("transient_404", run=0)
    hidden = {p for p, s in zip(paths, statuses(client, paths), strict=True) if s == 404}
    assert hidden == injector.gone and len(hidden) == 2  # 10% of 20
    injector.arm("transient_404", run=0)
    assert injector.gone == hidden  # the same pages for the next system's run
    injector.disarm()
    assert set(statuses(client, paths)) == {200}


def test_random_faults_are_the_same_for_every_system(replay):
    evolving, injector, client = replay
    paths = sorted(evolving.live) * 10  # each page asked ten times in one run

    def one_system_run(fault):
        injector.arm(fault, run=1)
        return statuses(client, paths)

    for fault, share, codes in (
        ("rate_429", 0.05, {429}),
        ("server_5xx", 0.15, {500, 502, 503, 504}),
    ):
        seen = one_system_run(fault)
        assert one_system_run(fault) == seen  # a second system meets the same faults
        faulty = [s for s in seen if s != 200]
        assert set(faulty) <= codes
        assert share / 3 < len(faulty) / len(seen) < share * 2
    injector.arm("rate_429", run=1)
    answers = [injector.answer(path, nth) for path in sorted(evolving.live) for nth in range(10)]
    assert {a.headers["Retry-After"] for a in answers if a} == {"1"}


def test_the_peers_loader_follows_an_index_and_fails_on_a_listing_it_cannot_read(replay):
    evolving, injector, client = replay
    sitemap = f"{client.base_url}/sitemap.xml"
    expected = {f"{client.base_url}{path}" for path in evolving.live}

    evolving.site.sitemap_index = True  # an index of two gzip children, both fine
    assert {url for url, _, _ in load_pages(sitemap)} == expected
    for fault in ("sitemap_503", "sitemap_truncated", "child_500"):
        injector.arm(fault)
        with pytest.raises(ListingError):
            load_pages(sitemap)

    injector.arm("transient_404")
    loaded = {url for url, _, _ in load_pages(sitemap)}
    assert loaded == expected - {f"{client.base_url}{path}" for path in injector.gone}

    injector.arm("maintenance_302")
    assert {url for url, _, _ in load_pages(sitemap)} == {f"{client.base_url}{MAINTENANCE}"}


def test_yardsticks():
    truth = {"u/a": {"One.", "Two."}, "u/b": {"Three."}}
    known = {"One.", "Two.", "Three.", "Old."}
    assert true_point("u/a", "# A\n\nOne. Two.", truth, known)
    assert not true_point("u/a", "One. Old.", truth, known)  # text the page no longer has
    assert not true_point("u/gone", "One.", truth, known)
    assert not true_point("u/a", MAINTENANCE_SENTENCES[0], truth, {*known, *MAINTENANCE_SENTENCES})
    # u/b was indexed and lost its point; u/c was never indexed (not deleted); u/old is gone
    assert wrongly_deleted({"u/a"}, {**truth, "u/c": set()}, {"u/a", "u/b", "u/old"}) == {"u/b"}
