from __future__ import annotations

import pytest

from ragsync.urls import canonical_url, in_scope, record_key


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("HTTPS://Example.ORG/Docs", "https://example.org/Docs"),
        ("http://example.org:80/a", "http://example.org/a"),
        ("https://example.org:443/a", "https://example.org/a"),
        ("https://example.org:8443/a", "https://example.org:8443/a"),
        ("https://example.org", "https://example.org/"),
        ("https://example.org/a#section", "https://example.org/a"),
        (
            "https://example.org/a?utm_source=x&utm_medium=y&b=2&a=1",
            "https://example.org/a?a=1&b=2",
        ),
        ("https://example.org/a?fbclid=1&gclid=2&q=x", "https://example.org/a?q=x"),
        ("https://example.org/a%7Eb", "https://example.org/a~b"),
        ("https://example.org/a b", "https://example.org/a%20b"),
        ("https://example.org/caf%c3%a9", "https://example.org/caf%C3%A9"),
        ("https://example.org./x", "https://example.org/x"),
    ],
)
def test_canonical_url(url, expected):
    assert canonical_url(url) == expected
    assert canonical_url(expected) == expected  # idempotent


@pytest.mark.parametrize("url", ["ftp://example.org/a", "/relative", "mailto:a@b.c", "http://"])
def test_non_http_urls_are_refused(url):
    with pytest.raises(ValueError):
        canonical_url(url)


def test_record_key_uses_the_canonical_url():
    assert record_key("docs", "HTTPS://Example.org/a#x") == "docs:https://example.org/a"


def test_scope():
    assert in_scope("https://x.org/docs/a", ["https://x.org/docs/*"], [])
    assert not in_scope("https://x.org/blog/a", ["https://x.org/docs/*"], [])
    assert not in_scope("https://x.org/docs/old/a", [], ["*/old/*"])
    assert in_scope("https://x.org/anything", [], [])
