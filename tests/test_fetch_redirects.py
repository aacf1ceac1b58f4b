"""Redirects are followed by ragsync itself (RFC 9110 §15.4), hop by hop, against real sites on
127.0.0.1: each hop is recorded with its status, passes its own host's gate and counts against
the one request deadline; temporary redirects can be handed back to the caller."""

from __future__ import annotations

import time

import pytest

from ragsync.config import FetchConfig
from ragsync.errors import FetchError
from ragsync.fetch import Fetcher
from ragsync.politeness import HostGate, HostPaused, PoliteFetcher
from ragsync.testing import DevSite
from ragsync.urls import host_of


@pytest.fixture(scope="module")
def started_sites():
    made = [DevSite() for _ in range(2)]
    for site in made:
        site.start()
    yield made
    for site in made:
        site.stop()


@pytest.fixture
def sites(started_sites):
    """Two hosts (two ports of 127.0.0.1), each with only a page at /page."""
    for site in started_sites:
        site.fault = None
        site.hits.clear()
        site.pages.clear()
        site.set_page("/page", "Page", "<p>Here.</p>")
    return started_sites


@pytest.fixture
def fetcher():
    made = Fetcher(FetchConfig(timeout=5, max_redirects=3))
    yield made
    made.close()


def test_a_permanent_chain_is_followed_and_recorded(sites, fetcher):
    site, _ = sites
    site.redirect("/a", "/b", 301)
    site.redirect("/b", "/page", 308)
    base = site.base_url
    response = fetcher.get(base + "/a")
    assert (response.status, response.url, response.requested_url) == (
        200,
        base + "/page",
        base + "/a",
    )
    assert response.redirects == ((301, base + "/a"), (308, base + "/b"))
    assert response.location is None


def test_a_temporary_redirect_can_be_handed_back_unfollowed(sites, fetcher):
    site, other = sites
    site.redirect("/moved", "/b", 301)
    site.redirect("/b", "/page", 302)
    response = fetcher.get(site.base_url + "/moved", follow_temporary=False)
    assert response.status == 302 and response.url == site.base_url + "/b"
    assert response.redirects == ((301, site.base_url + "/moved"),)  # permanent: followed
    assert response.location == site.base_url + "/page"
    assert site.requests_to("/page") == []

    # Across hosts: the target is never asked.
    other_url = other.base_url + "/page"
    site.fault = lambda path, headers: (302, {"Location": other_url}, b"") if path == "/x" else None
    response = fetcher.get(site.base_url + "/x", follow_temporary=False)
    assert (response.status, response.location, response.redirects) == (302, other_url, ())
    assert other.hits == []


@pytest.mark.parametrize("status", [302, 303, 307])
def test_temporary_redirects_are_followed_by_default(sites, fetcher, status):
    site, other = sites
    other_url = other.base_url + "/page"
    site.fault = lambda path, headers: (status, {"Location": other_url}, b"")
    response = fetcher.get(site.base_url + "/x")
    assert (response.status, response.url) == (200, other_url)
    assert response.redirects == ((status, site.base_url + "/x"),)
    assert len(other.requests_to("/page")) == 1


def test_a_relative_location_is_resolved_against_the_url_that_sent_it(sites, fetcher):
    site, _ = sites
    site.fault = lambda path, headers: (
        (301, {"Location": "../page?x=1"}, b"") if path == "/docs/old" else None
    )
    site.set_page("/page", "Page", "<p>Here.</p>")
    response = fetcher.get(site.base_url + "/docs/old")
    assert response.url == site.base_url + "/page?x=1"
    assert response.redirects == ((301, site.base_url + "/docs/old"),)


def test_loops_and_long_chains_are_terminal_and_name_the_url(sites, fetcher):
    site, _ = sites
    site.redirect("/x", "/y")
    site.redirect("/y", "/x")
    with pytest.raises(FetchError, match="redirect loop or chain over 3") as info:
        fetcher.get(site.base_url + "/x")
    assert not info.value.transient and info.value.url == site.base_url + "/x"
    assert len(site.requests_to("/x")) == 1  # a loop is seen when it closes, not after 3 hops

    for n in range(4):
        site.redirect(f"/c{n}", f"/c{n + 1}")
    site.set_page("/c4", "End", "<p>End.</p>")
    assert fetcher.get(site.base_url + "/c1").redirects[-1][1] == site.base_url + "/c3"  # 3 hops
    with pytest.raises(FetchError, match="redirect loop or chain over 3") as info:
        fetcher.get(site.base_url + "/c0")  # 4 hops
    assert not info.value.transient


@pytest.mark.parametrize("location", [None, "", "http://[::1", "http://x.org:99999/", "ftp://x/"])
def test_a_redirect_without_a_usable_location_is_terminal(sites, fetcher, location):
    site, _ = sites
    headers = {} if location is None else {"Location": location}
    site.fault = lambda path, _: (301, headers, b"")
    with pytest.raises(FetchError, match="without a usable Location") as info:
        fetcher.get(site.base_url + "/x")
    assert not info.value.transient and info.value.url == site.base_url + "/x"
    assert info.value.status == 301


def test_a_redirect_to_a_url_with_credentials_is_terminal_and_never_shows_them(sites, fetcher):
    site, _ = sites
    port = site.base_url.rsplit(":", 1)[1]
    site.fault = lambda path, _: (
        (308, {"Location": f"http://user:pw@127.0.0.1:{port}/y"}, b"") if path == "/x" else None
    )
    with pytest.raises(FetchError, match="unusable URL: URL with credentials refused") as info:
        fetcher.get(site.base_url + "/x")
    assert not info.value.transient and "pw" not in str(info.value)
    assert [hit.path for hit in site.hits] == ["/x"]


def test_every_hop_passes_its_own_hosts_gate(sites, fetcher):
    site, other = sites
    site.fault = lambda path, headers: (
        (302, {"Location": other.base_url + "/page"}, b"") if path == "/x" else None
    )
    gate = HostGate(per_host_concurrency=1, min_delay=0, max_wait=1)
    polite = PoliteFetcher(fetcher, gate, default_pause=1)
    gate.pause(host_of(other.base_url), 60)
    with pytest.raises(HostPaused) as info:
        polite.get(site.base_url + "/x")
    assert info.value.host == host_of(other.base_url)
    assert other.hits == []  # httpx followed it inside one gated request before

    # A 429 on the second hop pauses the second host, not the first.
    gate = HostGate(per_host_concurrency=1, min_delay=0, max_wait=1)
    polite = PoliteFetcher(fetcher, gate, default_pause=1)
    other.fault = lambda path, headers: (429, {"Retry-After": "120"}, b"slow down")
    response = polite.get(site.base_url + "/x")
    assert response.status == 429 and response.redirects == ((302, site.base_url + "/x"),)
    assert set(polite.take_new_pauses()) == {host_of(other.base_url)}
    assert gate.paused_until(host_of(site.base_url)) == 0.0


def test_all_hops_share_one_deadline(sites):
    site, _ = sites

    def slow(path, headers):
        time.sleep(0.8)
        return (301, {"Location": "/page"}, b"") if path == "/x" else None

    site.fault = slow
    fetcher = Fetcher(FetchConfig(timeout=1.2))
    try:
        with pytest.raises(FetchError, match=r"fetch\.timeout=1\.2s") as info:
            fetcher.get(site.base_url + "/x")  # each hop alone is within 1.2 s
    finally:
        fetcher.close()
    assert info.value.transient and "redirected to" in info.value.reason
