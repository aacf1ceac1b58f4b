"""A source stays on its own ground (issue #17): off-host redirects, sitemap entries on other
hosts, hostnames that resolve to internal addresses and robots.txt of redirect targets.

A site on 127.0.0.2 stands for an internal service (a cloud metadata endpoint): it must see no
request at all — not even for robots.txt — in any of these tests.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from ragsync.sync import Syncer
from ragsync.testing import DevSite
from tests.support import Clock, example_pages, make_config, page, sentences, sitemap_source

SECRET = "/latest/meta-data/iam/security-credentials/role"


@pytest.fixture
def internal() -> Iterator[DevSite]:
    """The internal service: a secret page; its robots.txt would say Disallow: /."""
    service = DevSite(
        {
            SECRET: page(
                "IAM role credentials", {"Token": [f"AKIA secret token. {sentences('iam')}"]}
            )
        },
        robots="User-agent: *\nDisallow: /\n",
    )
    service.start(host="127.0.0.2")
    yield service
    assert service.hits == [], "the internal host was asked for something"
    service.stop()


def syncer_for(tmp_path, embedder, source: dict[str, Any]) -> Syncer:
    return Syncer(make_config(tmp_path, [source]), embedder=embedder)


def indexed_urls(syncer: Syncer) -> set[str]:
    return {d["canonical_url"] for d in syncer.state.documents.list() if d["status"] == "active"}


@pytest.mark.parametrize("status", [301, 308])
def test_a_permanent_redirect_off_the_source_is_never_followed(
    site, internal, tmp_path, embedder, status
):
    target = internal.base_url + SECRET
    site.fault = lambda path, headers: (
        (status, {"Location": target}, b"") if path == "/guide/page-1" else None
    )
    with syncer_for(tmp_path, embedder, sitemap_source(site)) as syncer:
        result = syncer.run()
        assert not any(url.startswith(internal.base_url) for url in indexed_urls(syncer))
        assert not any("AKIA" in hit.text for hit in syncer.search("iam role credentials", k=5))
        document = syncer.state.documents.get(f"docs:{site.base_url}/guide/page-1")
        assert document is None or target not in (document["markdown"] or "")
    assert result.counters.responses_404 >= 1  # evidence the page left the source, no request


def test_a_temporary_redirect_to_an_internal_host_is_not_followed(
    site, internal, tmp_path, embedder
):
    target = internal.base_url + SECRET
    site.fault = lambda path, headers: (
        (302, {"Location": target}, b"") if path == "/guide/page-2" else None
    )
    with syncer_for(tmp_path, embedder, sitemap_source(site)) as syncer:
        result = syncer.run()
    assert result.counters.temporary_redirects == 1


def test_sitemap_entries_on_another_host_are_refused(site, internal, tmp_path, embedder):
    listed = [f"{site.base_url}/guide/page-0", internal.base_url + SECRET]
    urlset = "".join(f"<url><loc>{url}</loc></url>" for url in listed)
    sitemap = f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urlset}</urlset>'
    site.fault = lambda path, headers: (
        (200, {"Content-Type": "application/xml"}, sitemap.encode())
        if path == "/sitemap.xml"
        else None
    )
    with syncer_for(tmp_path, embedder, sitemap_source(site)) as syncer:
        result = syncer.run()
        assert indexed_urls(syncer) == {f"{site.base_url}/guide/page-0"}
    assert result.counters.out_of_scope == 1
    errors = result.sources["docs"].errors
    assert any("not requested" in e and internal.base_url in e for e in errors)


def test_allowed_hosts_widen_the_scope(site, tmp_path, embedder):
    """Positive control: the same listing with the other host allowed is fetched."""
    other = DevSite(example_pages(1))
    other.start(host="127.0.0.3")
    try:
        urlset = f"<url><loc>{other.base_url}/guide/page-0</loc></url>"
        sitemap = f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urlset}</urlset>'
        site.fault = lambda path, headers: (
            (200, {"Content-Type": "application/xml"}, sitemap.encode())
            if path == "/sitemap.xml"
            else None
        )
        source = sitemap_source(site, allowed_hosts=["127.0.0.*"], allow_private_networks=True)
        with syncer_for(tmp_path, embedder, source) as syncer:
            syncer.run()
            assert indexed_urls(syncer) == {f"{other.base_url}/guide/page-0"}
    finally:
        other.stop()


@pytest.fixture
def rebinding(monkeypatch, internal) -> str:
    """A name in the source's allowed hosts that resolves to the internal address (as a
    DNS-rebinding attacker would arrange)."""
    real = socket.getaddrinfo
    port = internal.base_url.rsplit(":", 1)[1]

    def resolve(host: Any, *args: Any, **kwargs: Any) -> Any:
        return real("127.0.0.2" if host == "docs-mirror.test" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    return f"http://docs-mirror.test:{port}"


def test_a_name_resolving_to_an_internal_address_is_refused_at_connect(
    site, rebinding, tmp_path, embedder
):
    site.fault = lambda path, headers: (
        (301, {"Location": rebinding + SECRET}, b"") if path == "/guide/page-3" else None
    )
    source = sitemap_source(site, allowed_hosts=["docs-mirror.test"])
    with syncer_for(tmp_path, embedder, source) as syncer:
        syncer.run()
        attempts = {a["url"]: a for a in syncer.state.attempts.list()}
    failed = attempts[f"{site.base_url}/guide/page-3"]
    assert "internal" in failed["last_error"] and "127.0.0.2" in failed["last_error"]


def test_allow_private_networks_lets_a_source_reach_an_internal_host(
    site, tmp_path, embedder, monkeypatch
):
    """Positive control for the guard: with the source's consent the same name is fetched."""
    other = DevSite(example_pages(1), robots=None)
    other.start(host="127.0.0.3")
    real = socket.getaddrinfo
    monkeypatch.setattr(
        socket,
        "getaddrinfo",
        lambda host, *a, **k: real("127.0.0.3" if host == "mirror.test" else host, *a, **k),
    )
    port = other.base_url.rsplit(":", 1)[1]
    try:
        site.fault = lambda path, headers: (
            (301, {"Location": f"http://mirror.test:{port}/guide/page-0"}, b"")
            if path == "/guide/page-3"
            else None
        )
        source = sitemap_source(site, allowed_hosts=["mirror.test"], allow_private_networks=True)
        with syncer_for(tmp_path, embedder, source) as syncer:
            syncer.run()
        assert [hit.path for hit in other.hits if hit.path != "/robots.txt"] == ["/guide/page-0"]
    finally:
        other.stop()


def test_robots_txt_of_a_redirect_target_is_obeyed(site, tmp_path, embedder):
    other = DevSite(example_pages(1), robots="User-agent: *\nDisallow: /guide/\n")
    other.start(host="127.0.0.3")
    try:
        site.fault = lambda path, headers: (
            (301, {"Location": f"{other.base_url}/guide/page-0"}, b"")
            if path == "/guide/page-1"
            else None
        )
        source = sitemap_source(site, allowed_hosts=["127.0.0.3"], allow_private_networks=True)
        with syncer_for(tmp_path, embedder, source) as syncer:
            result = syncer.run()
        assert [hit.path for hit in other.hits] == ["/robots.txt"]  # asked, then obeyed
        assert result.counters.robots_disallowed == 2  # /private/secret, and this target
    finally:
        other.stop()


def test_resync_and_hooks_use_the_same_scope_for_a_urls_file_source(tmp_path, embedder, site):
    (tmp_path / "urls.txt").write_text(f"{site.base_url}/guide/page-0\n")
    source = {"id": "docs", "kind": "urls", "urls_file": "urls.txt"}
    with syncer_for(tmp_path, embedder, source) as syncer:
        with pytest.raises(ValueError, match="outside the scope"):
            syncer.resync(["http://evil.example/x"])
        assert syncer.resync([f"{site.base_url}/guide/page-0"]).ok


def test_a_targeted_page_that_redirects_off_the_source_is_not_followed(
    site, internal, tmp_path, embedder
):
    """A hook or `resync` for an in-scope URL cannot reach another host through a redirect."""
    target = internal.base_url + SECRET
    with syncer_for(tmp_path, embedder, sitemap_source(site)) as syncer:
        syncer.run()
        site.fault = lambda path, headers: (
            (301, {"Location": target}, b"") if path == "/guide/page-0" else None
        )
        result = syncer.resync([f"{site.base_url}/guide/page-0"])
        assert not any(url.startswith(internal.base_url) for url in indexed_urls(syncer))
        # One observation of "gone from the source" (the redirect): suspected, content kept.
        document = syncer.state.documents.get(f"docs:{site.base_url}/guide/page-0")
        assert document is not None and document["status"] == "suspected_missing"
    assert result.counters.responses_404 == 1


def test_api_record_urls_outside_the_scope_are_never_requested(site, internal, tmp_path, embedder):
    records = [
        {"id": 1, "link": f"{site.base_url}/guide/page-0"},
        {"id": 2, "link": internal.base_url + SECRET},
    ]
    body = json.dumps({"items": records}).encode()
    site.fault = lambda path, headers: (
        (200, {"Content-Type": "application/json"}, body) if path == "/api" else None
    )
    source = {"id": "docs", "kind": "http_api", "url": site.base_url + "/api", "url_field": "link"}
    with syncer_for(tmp_path, embedder, source) as syncer:
        result = syncer.run()
        assert indexed_urls(syncer) == {f"{site.base_url}/guide/page-0"}
    assert result.counters.out_of_scope == 1
    assert any(internal.base_url in e for e in result.sources["docs"].errors)


def test_a_redirect_to_a_path_the_source_excludes_is_not_requested(site, tmp_path, embedder):
    """``include``/``exclude`` are the source's path scope: checked on every hop too."""
    site.fault = lambda path, headers: (
        (301, {"Location": f"{site.base_url}/private/secret"}, b"")
        if path == "/guide/page-1"
        else None
    )
    source = sitemap_source(site, include=[f"{site.base_url}/guide/*"])
    with syncer_for(tmp_path, embedder, source) as syncer:
        result = syncer.run()
        attempts = {a["url"]: a for a in syncer.state.attempts.list()}
    assert not [hit for hit in site.hits if hit.path.startswith("/private")]
    assert result.counters.responses_404 == 1  # evidence the page left the source
    reason = attempts[f"{site.base_url}/guide/page-1"]["last_error"]
    assert reason == f"redirects out of the source to {site.base_url}/private/secret"


def test_a_listed_page_on_a_host_dropped_from_the_scope_is_kept(site, tmp_path, embedder):
    """Dropping a host from ``allowed_hosts`` stops its requests; the complete listing still
    lists the page, so nothing says it is gone."""
    other = DevSite(example_pages(1))
    other.start(host="127.0.0.3")
    try:
        listed = f"{other.base_url}/guide/page-0"
        urlset = f"<url><loc>{listed}</loc></url>"
        sitemap = f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urlset}</urlset>'
        site.fault = lambda path, headers: (
            (200, {"Content-Type": "application/xml"}, sitemap.encode())
            if path == "/sitemap.xml"
            else None
        )
        clock = Clock()
        wide = sitemap_source(site, allowed_hosts=["127.0.0.3"], allow_private_networks=True)
        with Syncer(make_config(tmp_path, [wide]), embedder=embedder, clock=clock) as syncer:
            syncer.run()
        for _ in range(3):
            clock.advance(hours=2)
            config = make_config(tmp_path, [sitemap_source(site)])
            with Syncer(config, embedder=embedder, clock=clock) as syncer:
                result = syncer.run()
                assert indexed_urls(syncer) == {listed}
            assert result.counters.out_of_scope == 1
        assert [hit.path for hit in other.hits if hit.path != "/robots.txt"] == ["/guide/page-0"]
    finally:
        other.stop()


def test_a_robots_txt_redirect_to_another_host_is_followed(site, tmp_path, embedder):
    """RFC 9309 §2.3.1.2: robots.txt redirects are followed "even across authorities"."""
    other = DevSite({}, robots="User-agent: *\nDisallow: /guide/page-1\n")
    other.start(host="127.0.0.3")
    try:
        site.fault = lambda path, headers: (
            (301, {"Location": f"{other.base_url}/robots.txt"}, b"")
            if path == "/robots.txt"
            else None
        )
        source = sitemap_source(site, allow_private_networks=True)
        with syncer_for(tmp_path, embedder, source) as syncer:
            result = syncer.run()
            assert f"{site.base_url}/guide/page-0" in indexed_urls(syncer)
            assert f"{site.base_url}/guide/page-1" not in indexed_urls(syncer)
        assert result.counters.robots_disallowed >= 1
    finally:
        other.stop()


def test_a_connection_another_source_may_use_is_not_reused_past_the_guard(site, tmp_path, embedder):
    """Source a's own host is 127.0.0.1 (so it may reach it); source b reaches 127.0.0.1 only
    through a redirect from localhost and an ``allowed_hosts`` entry, which is no consent to
    internal addresses: b is refused even when a's connection to the same origin is idle in
    the pool."""
    port = site.base_url.rsplit(":", 1)[1]
    inner = f"http://127.0.0.1:{port}/guide/page-1"
    site.fault = lambda path, headers: (
        (301, {"Location": inner}, b"")
        if path == "/guide/page-1" and headers.get("Host", "").startswith("localhost")
        else None
    )
    b = {
        "id": "b",
        "kind": "urls",
        "urls": [f"http://localhost:{port}/guide/page-1"],
        "allowed_hosts": ["127.0.0.1"],
    }
    config = make_config(tmp_path, [sitemap_source(site, id="a"), b])
    with Syncer(config, embedder=embedder) as syncer:
        syncer.run()
        documents = [d for d in syncer.state.documents.list() if d["source_id"] == "b"]
        errors = [a["last_error"] for a in syncer.state.attempts.list() if "localhost" in a["url"]]
    assert documents == []
    assert len(errors) == 1 and "internal" in errors[0]


def test_urls_a_source_refuses_do_not_widen_its_scope(tmp_path, embedder, site, internal):
    """A ``urls_file`` line with credentials is refused; its host is not the source's own."""
    (tmp_path / "urls.txt").write_text(
        f"{site.base_url}/guide/page-0\nhttp://user:pw@{internal.base_url[7:]}/x\n"
    )
    source = {"id": "docs", "kind": "urls", "urls_file": "urls.txt"}
    with syncer_for(tmp_path, embedder, source) as syncer:
        syncer.run()
        with pytest.raises(ValueError, match="outside the scope") as refused:
            syncer.resync([internal.base_url + SECRET, f"http://u:pw@{internal.base_url[7:]}/"])
    assert "pw" not in str(refused.value)


def test_another_port_of_an_internal_own_host_is_refused_at_connect(
    site, tmp_path, embedder, internal
):
    """The exception to the guard is the origin of the source's own URLs, not every port."""
    own = DevSite(example_pages(1))
    own.start(host="127.0.0.2")
    try:
        other_port = internal.base_url.rsplit(":", 1)[1]
        own.fault = lambda path, headers: (
            (301, {"Location": f"http://127.0.0.2:{other_port}{SECRET}"}, b"")
            if path == "/guide/page-0"
            else None
        )
        source = {"id": "docs", "kind": "urls", "urls": [f"{own.base_url}/guide/page-0"]}
        with syncer_for(tmp_path, embedder, source) as syncer:
            syncer.run()
            errors = [a["last_error"] for a in syncer.state.attempts.list()]
        assert len(errors) == 1 and "internal" in errors[0]
    finally:
        own.stop()
