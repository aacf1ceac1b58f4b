"""Hostile and broken input: each ends that page with a recorded reason, never the run, and
never changes previously good content (issue #4)."""

from __future__ import annotations

import gzip
import socket
import time
import zlib

import pytest

from ragsync.sync import Syncer
from ragsync.testing import DevSite
from tests.support import make_config, page, sentences, sitemap_source

VICTIM = "/victim"
HTML = {"Content-Type": "text/html; charset=utf-8"}


def redirect_loop(path, headers):
    return 302, {"Location": VICTIM}, b""


def redirect_chain(path, headers):
    hops = int(path.rsplit("-", 1)[1]) if path.startswith("/hop-") else 0
    return 302, {"Location": f"/hop-{hops + 1}"}, b""


def huge(path, headers):
    return 200, HTML, b"<p>" + b"x" * 300_000 + b"</p>"


def gzip_bomb(path, headers):
    return 200, {**HTML, "Content-Encoding": "gzip"}, gzip.compress(b" " * 50_000_000)


def binary(path, headers):
    return 200, {"Content-Type": "application/octet-stream"}, b"\x00\x01\x02" * 100


def empty(path, headers):
    return 200, HTML, b""


def invalid_utf8(path, headers):
    return 200, HTML, b"<html><body>\xff\xfe\x00\x00\xc3\x28\x00" + bytes(range(256)) * 8


def slow(path, headers):
    time.sleep(2.5)
    return 200, HTML, b"<p>too late</p>"


CASES = {
    "redirect loop": (redirect_loop, "redirect"),
    "redirect chain": (redirect_chain, "redirect"),
    "huge body": (huge, "max_body_bytes"),
    "gzip bomb": (gzip_bomb, "max_body_bytes"),
    "binary content type": (binary, "content type application/octet-stream"),
    "empty body": (empty, "empty body"),
    "invalid utf-8": (invalid_utf8, "not text"),
    "read timeout": (slow, "timeout"),
}


@pytest.fixture
def site():
    site = DevSite(
        {
            VICTIM: page("Victim", {"Keep": [sentences("victim content")]}),
            "/bystander": page("Bystander", {"Fine": [sentences("bystander content")]}),
        }
    )
    site.start()
    yield site
    site.stop()


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_response_ends_the_page_not_the_run(tmp_path, site, embedder, case):
    fault, reason = CASES[case]
    config = make_config(
        tmp_path,
        [sitemap_source(site)],
        fetch={"max_body_bytes": 200_000, "timeout": 1.0, "max_redirects": 5},
    )
    with Syncer(config, embedder=embedder) as syncer:
        assert syncer.run().ok
        key = f"docs:{site.base_url}{VICTIM}"
        good = syncer.state.documents.get(key)
        chunks = syncer.state.index.get_chunks(key)
        site.fault = lambda path, headers: (
            fault(path, headers) if path == VICTIM or path.startswith("/hop-") else None
        )
        site.set_page("/bystander", *page("Bystander", {"Fine": ["An edit that must land."]}))

        result = syncer.run()

        assert not result.ok  # reported ...
        attempt = syncer.state.attempts.get(key)
        assert reason in attempt["last_error"], attempt["last_error"]
        assert any(reason in e for e in result.sources["docs"].errors)
        if case == "invalid utf-8":  # a parse failure keeps the raw body for diagnosis
            assert zlib.decompress(attempt["body"]) == invalid_utf8(VICTIM, {})[2]
            assert result.counters.parse_failures == 1
        # ... while the rest of the run went on ...
        assert result.counters.responses_200_changed == 1
        bystander = syncer.state.documents.get(f"docs:{site.base_url}/bystander")
        assert "must land" in bystander["markdown"]
        # ... and the last good content is untouched.
        assert syncer.state.documents.get(key) == good
        assert syncer.state.index.get_chunks(key) == chunks


def test_wrong_charset_declaration_is_survived(tmp_path, site, embedder):
    latin1 = (
        "<html><body><main><h1>Café</h1><p>Crème brûlée for the whole équipe, à la carte, "
        "served daily with a smile and plenty of words.</p></main></body></html>"
    )
    site.fault = lambda path, headers: (
        (200, HTML, latin1.encode("latin-1")) if path == VICTIM else None
    )
    config = make_config(tmp_path, [sitemap_source(site)])
    with Syncer(config, embedder=embedder) as syncer:
        assert syncer.run().ok
        markdown = syncer.state.documents.get(f"docs:{site.base_url}{VICTIM}")["markdown"]
    assert "Crème brûlée" in markdown


def test_connection_refused_and_tls_errors_are_recorded(tmp_path, site, embedder):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    dead_port = closed.getsockname()[1]
    closed.close()
    urls = [
        f"http://127.0.0.1:{dead_port}/nothing-listens",
        site.base_url.replace("http://", "https://") + "/plain-http-port",  # TLS to plain HTTP
        site.base_url + "/bystander",
    ]
    config = make_config(
        tmp_path, [{"id": "p", "kind": "urls", "urls": urls}], fetch={"timeout": 2.0}
    )
    with Syncer(config, embedder=embedder) as syncer:
        result = syncer.run()
        attempts = {a["url"]: a for a in syncer.state.attempts.list()}
    assert not result.ok and result.counters.documents_created == 1
    assert attempts[urls[0]]["state"] == "retrying"
    assert "network error" in attempts[urls[0]]["last_error"]
    assert attempts[urls[1]]["state"] == "retrying"
