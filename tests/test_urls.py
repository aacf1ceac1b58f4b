from __future__ import annotations

import pytest

from ragsync.identity import record_key
from ragsync.urls import canonical_url, in_scope


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
        ("https://example.org/a?b=&a=1", "https://example.org/a?a=1&b="),  # blank values kept
        ("https://example.org/%41%2f", "https://example.org/A%2F"),  # %2F is not a slash
        ("https://example.org/a?UTM_Source=x&id=7", "https://example.org/a?id=7"),
        ("https://example.org/a?q=a+b&q=c", "https://example.org/a?q=a+b&q=c"),
        ("https://example.org/a?_ga=1&mc_eid=2&yclid=3", "https://example.org/a"),
        ("https://bücher.example/a", "https://xn--bcher-kva.example/a"),
        ("https://example.org/a/../b/./c", "https://example.org/b/c"),  # RFC 3986 §5.2.4
    ],
)
def test_canonical_url(url, expected):
    assert canonical_url(url) == expected
    assert canonical_url(expected) == expected  # idempotent


def test_extra_strip_params_are_globs():
    url = "https://x.org/a?ref=home&ref_campaign=z&page=2"
    assert canonical_url(url, strip_params=["ref", "ref_*"]) == "https://x.org/a?page=2"


@pytest.mark.parametrize(
    "url", ["ftp://example.org/a", "/relative", "mailto:a@b.c", "http://", "http://x.org:abc/"]
)
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
