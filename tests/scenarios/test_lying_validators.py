"""Validators can lie; ragsync finds out (README "Validators that lie").

The site on 127.0.0.1 answers every page with one constant ETag and Last-Modified and 304 to
every conditional request, while its content changes (and, unless a test edits a page
quietly, its sitemap's lastmod moves). Each mechanism gets the new text indexed: the refetch
every ``refetch_interval``, the host whose 304s a sitemap disputes, `--refetch`.
"""

from __future__ import annotations

import json

import pytest

from ragsync.clock import iso
from ragsync.config import load_config
from ragsync.sync import Syncer
from ragsync.testing import DevSite
from ragsync.worker import Worker
from tests.support import (
    Clock,
    example_pages,
    make_config,
    page,
    ragsync_cli,
    sentences,
    sitemap_source,
)
from tests.support.lying import LyingValidators, edit_quietly

PAGES = ["/guide/page-0", "/guide/page-1", "/guide/page-2", "/guide/page-3"]


@pytest.fixture
def world(tmp_path, embedder):
    site = DevSite(example_pages(4))
    liar = LyingValidators(site)
    site.start()
    clock = Clock()
    made: list[Syncer] = []

    def build(source: dict | None = None) -> Syncer:
        config = make_config(tmp_path / f"s{len(made)}", [source or sitemap_source(site)])
        made.append(Syncer(config, embedder=embedder, clock=clock))
        return made[-1]

    yield site, liar, clock, build
    for syncer in made:
        syncer.close()
    site.stop()


def edited(n: int, fact: str) -> tuple[str, str]:
    """Page ``n`` of :func:`example_pages` with one more section, holding ``fact``."""
    return page(
        f"Guide {n}: edited",
        {"What changed": [fact], "About the rest": [sentences(f"topic {n}")]},
        intro=f"This guide (number {n}) was rewritten for operators.",
    )


def markdown(syncer: Syncer, site: DevSite, path: str) -> str:
    document = syncer.state.documents.get(f"docs:{site.base_url}{path}")
    assert document is not None
    return document["markdown"] or ""


def page_hits(site: DevSite, since: int) -> list:
    return [hit for hit in site.hits[since:] if hit.path.startswith("/guide/")]


def test_every_page_is_asked_in_full_once_per_refetch_interval(world, embedder):
    """A listing that dates nothing, pages revisited monthly: within the week each page is
    asked once without validators, at its own point of the week, and the one edited is
    indexed; the other answers are the same text, embedded again never."""
    site, _, clock, build = world
    urls = [site.base_url + path for path in PAGES]
    monthly = {"min_interval": "30d", "max_interval": "30d"}
    syncer = build({"id": "docs", "kind": "urls", "urls": urls, **monthly})
    assert syncer.run().counters.documents_created == 4
    edit_quietly(site, "/guide/page-1", *edited(1, "Replication lag now shows on the dashboard."))
    embedder.texts.clear()
    seen = len(site.hits)

    runs = []
    for _ in range(7):  # a run a day, for a week
        clock.advance(days=1)
        runs.append(syncer.run())

    hits = page_hits(site, seen)
    assert sorted(hit.path for hit in hits) == PAGES  # each page once …
    assert all(not hit.conditional and hit.status == 200 for hit in hits)  # … in full
    assert sum(run.counters.refetches for run in runs) == 4
    assert "Replication lag now shows on the dashboard." in markdown(syncer, site, PAGES[1])
    assert sum(run.counters.documents_updated for run in runs) == 1
    assert embedder.texts and all(text.startswith("Guide 1: edited") for text in embedder.texts)
    # The next refetch of each page is a week after its last, and its next check no later.
    for document in syncer.state.documents.list("docs"):
        assert document["refetch_at"] and document["next_check_at"] <= document["refetch_at"]
        assert document["refetch_at"] > iso(clock.now)


def test_a_304_the_sitemap_disputes_is_asked_again_in_full_at_once(world, embedder):
    site, _, _, build = world
    syncer = build()
    syncer.run()
    site.set_page("/guide/page-0", *edited(0, "Retention is now ninety days by default."))
    seen = len(site.hits)

    result = syncer.run()

    hits = [(hit.path, hit.conditional, hit.status) for hit in page_hits(site, seen)]
    assert hits.count(("/guide/page-0", True, 304)) == 1  # the lie …
    assert hits.count(("/guide/page-0", False, 200)) == 1  # … settled in the same run
    assert "Retention is now ninety days by default." in markdown(syncer, site, PAGES[0])
    counters = result.counters
    assert (counters.validator_disagreements, counters.refetches) == (1, 1)
    assert (counters.validator_lies, counters.documents_updated) == (1, 1)
    hosts = syncer.status(count_points=False)["host_validators"]
    assert [(h["host"], h["lies"], h["distrusted_since"]) for h in hosts] == [
        (site.base_url, 1, None)
    ]
    assert hosts[0]["last_lie_url"] == site.base_url + PAGES[0]


def test_a_host_caught_lying_is_asked_in_full_until_its_validators_prove_right(world, embedder):
    site, liar, clock, build = world
    syncer = build()
    syncer.run()
    for n in (0, 1, 2):
        site.set_page(PAGES[n], *edited(n, f"Fact number {n} changed today."))
    result = syncer.run()
    for n in (0, 1, 2):  # each 304 the sitemap disputed, settled
        assert f"Fact number {n} changed today." in markdown(syncer, site, PAGES[n])
    assert result.counters.validator_lies == 3
    hosts = syncer.status(count_points=False)["host_validators"]
    assert [(h["lies"], h["distrusted_since"]) for h in hosts] == [(3, iso(clock.now))]

    # Page 3 changes and its lastmod stays: only distrust of its host gets it asked in full.
    edit_quietly(site, PAGES[3], *edited(3, "Encryption keys now rotate weekly."))
    clock.advance(hours=1)
    seen = len(site.hits)
    result = syncer.run()
    assert sorted(hit.path for hit in page_hits(site, seen)) == PAGES
    assert not any(hit.conditional for hit in page_hits(site, seen))
    assert "Encryption keys now rotate weekly." in markdown(syncer, site, PAGES[3])
    assert (result.counters.refetches, result.counters.validator_disagreements) == (4, 0)

    # The server mends its validators: a page that changes comes with a new ETag.
    liar.lying = False
    site.set_page(PAGES[0], *edited(0, "Fact number 0 changed again."))
    clock.advance(hours=1)
    syncer.run()
    assert syncer.status(count_points=False)["host_validators"] == []
    clock.advance(hours=1)
    seen = len(site.hits)
    result = syncer.run()  # trusted again: nothing changed, so nothing but 304s
    assert page_hits(site, seen) and all(
        hit.conditional and hit.status == 304 for hit in page_hits(site, seen)
    )
    assert result.counters.refetches == 0


def test_refetch_asks_in_full_now(world, embedder):
    site, _, _, build = world
    syncer = build()
    syncer.run()
    edit_quietly(site, PAGES[0], *edited(0, "Retention is now ninety days by default."))
    url = site.base_url + PAGES[0]
    syncer.resync([url])  # with its validators: the server says 304
    assert "ninety days" not in markdown(syncer, site, PAGES[0])

    seen = len(site.hits)
    result = syncer.resync([url], refetch=True)
    assert [(h.path, h.conditional) for h in page_hits(site, seen)] == [(PAGES[0], False)]
    assert "ninety days" in markdown(syncer, site, PAGES[0])
    assert (result.counters.refetches, result.counters.documents_updated) == (1, 1)

    edit_quietly(site, PAGES[1], *edited(1, "Replication lag now shows on the dashboard."))
    edit_quietly(site, PAGES[2], *edited(2, "Throttling starts at 500 requests a second."))
    embedder.texts.clear()
    seen = len(site.hits)
    result = syncer.run(refetch=True)
    assert sorted(h.path for h in page_hits(site, seen)) == PAGES
    assert not any(h.conditional for h in page_hits(site, seen))
    assert (result.counters.refetches, result.counters.documents_updated) == (4, 2)
    assert "500 requests a second" in markdown(syncer, site, PAGES[2])
    assert embedder.texts and all(t.startswith(("Guide 1", "Guide 2")) for t in embedder.texts)


def test_workers_ask_in_full_by_the_same_rules(world, embedder):
    site, _, clock, build = world
    syncer = build(sitemap_source(site, every="1h"))  # workers idle once nothing is due
    syncer.run()
    site.set_page(PAGES[0], *edited(0, "Retention is now ninety days by default."))
    clock.advance(hours=2)
    result = Worker(syncer, lease=30).run(until_idle=True)
    assert "ninety days" in markdown(syncer, site, PAGES[0])
    assert (result.counters.validator_disagreements, result.counters.validator_lies) == (1, 1)

    edit_quietly(site, PAGES[1], *edited(1, "Replication lag now shows on the dashboard."))
    clock.advance(days=8)  # every page's refetch came
    seen = len(site.hits)
    result = Worker(syncer, lease=30).run(until_idle=True)
    assert sorted(h.path for h in page_hits(site, seen)) == PAGES
    assert not any(h.conditional for h in page_hits(site, seen))
    assert "Replication lag" in markdown(syncer, site, PAGES[1])


def test_the_cli_refetches_and_status_names_a_distrusted_host(tmp_path):
    site = DevSite(example_pages(4))
    LyingValidators(site)
    site.start()
    try:
        config = tmp_path / "ragsync.toml"
        config.write_text(
            f'[[sources]]\nid = "docs"\nkind = "sitemap"\nevery = "0s"\n'
            f'url = "{site.base_url}/sitemap.xml"\n'
        )
        assert ragsync_cli("run", config=config).returncode == 0
        edit_quietly(site, PAGES[0], *edited(0, "Retention is now ninety days by default."))
        resync = ragsync_cli(
            "resync", "--refetch", site.base_url + PAGES[0], "--json", config=config
        )
        assert resync.returncode == 0, resync.stderr
        assert json.loads(resync.stdout)["counters"]["refetches"] == 1

        for n in (1, 2, 3):
            site.set_page(PAGES[n], *edited(n, f"Fact number {n} changed today."))
        run = ragsync_cli("run", "--refetch", "--json", config=config)
        counters = json.loads(run.stdout)["counters"]
        assert (counters["refetches"], counters["documents_updated"]) == (4, 3), run.stderr
        assert counters["conditional_requests_sent"] == 2  # robots.txt and the sitemap only

        for n in (1, 2, 3):
            site.set_page(PAGES[n], *edited(n, f"Fact number {n} changed again."))
        assert ragsync_cli("run", config=config).returncode == 0
        shown = ragsync_cli("status", config=config)
        assert f"host {site.base_url}: validators distrusted since" in shown.stdout, shown.stdout
        assert "its pages are asked in full" in shown.stdout
        with Syncer(load_config(config)) as syncer:
            assert "ninety days" in markdown(syncer, site, PAGES[0])
            assert "changed again" in markdown(syncer, site, PAGES[3])
    finally:
        site.stop()
