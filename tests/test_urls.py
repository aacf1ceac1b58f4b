from __future__ import annotations

import pytest

from ragsync.identity import record_key
from ragsync.urls import canonical_url, host_of, in_scope, redact_url, split_url


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


# --- Third-party test vectors (data only; #17) ---------------------------------------------
REFUSED = None  # canonical_url raises ValueError

# From w3lib's tests/test_url.py (CanonicalizeUrlTest, scrapy/w3lib on GitHub): the cases with
# default arguments. canonical_url must give exactly w3lib's answer, except that a URL with
# credentials is refused (w3lib keeps them).
W3LIB_CANONICALIZE = [
    ("http://www.example.com/", "http://www.example.com/"),
    ("http://www.example.com", "http://www.example.com/"),
    ("http://www.example.com/do?a=1&b=2&c=3", "http://www.example.com/do?a=1&b=2&c=3"),
    ("http://www.example.com/do?c=1&b=2&a=3", "http://www.example.com/do?a=3&b=2&c=1"),
    ("http://www.example.com/do?&a=1", "http://www.example.com/do?a=1"),
    ("http://www.example.com:8888/do?a=1&b=2&c=3", "http://www.example.com:8888/do?a=1&b=2&c=3"),
    ("http://www.example.com:/do?a=1&b=2&c=3", "http://www.example.com/do?a=1&b=2&c=3"),
    ("http://www.example.com/do?c=3&b=5&b=2&a=50", "http://www.example.com/do?a=50&b=2&b=5&c=3"),
    ("http://www.example.com/do?b=&a=2", "http://www.example.com/do?a=2&b="),
    ("http://www.example.com/do?b=&c&a=2", "http://www.example.com/do?a=2&b=&c="),
    ("http://www.example.com/do?1750,4", "http://www.example.com/do?1750%2C4="),
    ("http://www.example.com/do?q=a space&a=1", "http://www.example.com/do?a=1&q=a+space"),
    ("http://www.example.com/do?q=a+space&a=1", "http://www.example.com/do?a=1&q=a+space"),
    ("http://www.example.com/do?q=a%20space&a=1", "http://www.example.com/do?a=1&q=a+space"),
    ("http://www.example.com/résumé", "http://www.example.com/r%C3%A9sum%C3%A9"),
    (
        "http://www.example.com/résumé?q=résumé",
        "http://www.example.com/r%C3%A9sum%C3%A9?q=r%C3%A9sum%C3%A9",
    ),
    ("http://www.example.com/r%c3%a9sum%c3%a9", "http://www.example.com/r%C3%A9sum%C3%A9"),
    ("http://www.example.com/a%a3do", "http://www.example.com/a%A3do"),
    (
        "http://www.example.com/a%a3do?q=r%c3%a9sum%c3%a9",
        "http://www.example.com/a%A3do?q=r%C3%A9sum%C3%A9",
    ),
    ("http://www.example.com/a%a3do?q=r%e9sum%e9", "http://www.example.com/a%A3do?q=r%E9sum%E9"),
    ("http://www.example.com/do?k=b%a3", "http://www.example.com/do?k=b%A3"),
    (
        "http://www.example.com/do?k=r%c3%a9sum%c3%a9",
        "http://www.example.com/do?k=r%C3%A9sum%C3%A9",
    ),
    ("http://www.example.com/a do?a=1", "http://www.example.com/a%20do?a=1"),
    ("http://www.example.com/a %20do?a=1", "http://www.example.com/a%20%20do?a=1"),
    ("http://www.example.com/a do£.html?a=1", "http://www.example.com/a%20do%C2%A3.html?a=1"),
    (
        "http://www.example.com/do?price=£500&a=5&z=3",
        "http://www.example.com/do?a=5&price=%C2%A3500&z=3",
    ),
    (
        "http://www.example.com/do?price(£)=500&a=1",
        "http://www.example.com/do?a=1&price%28%C2%A3%29=500",
    ),
    ("http://user:pass@www.example.com:81/do?now=1", REFUSED),
    ("http://user:pass@www.example.com/do?a=1#frag", REFUSED),
    (
        "http://www.simplybedrooms.com/White-Bedroom-Furniture/Bedroom-Mirror:-Josephine-Cheval-Mirror.html",
        "http://www.simplybedrooms.com/White-Bedroom-Furniture/Bedroom-Mirror:-Josephine-Cheval-Mirror.html",
    ),
    ("http://www.example.com/caf%E9-con-leche.htm", "http://www.example.com/caf%E9-con-leche.htm"),
    ("http://www.EXAMPLE.com/", "http://www.example.com/"),
    ("http://www.bücher.de?q=bücher", "http://www.xn--bcher-kva.de/?q=b%C3%BCcher"),
    (
        "http://はじめよう.みんな/?query=サ&maxResults=5",
        "http://xn--p8j9a0d9c9a.xn--q9jyb4c/?maxResults=5&query=%E3%82%B5",
    ),
    ("http://foo.com/AC%2FDC+rocks%3f/?yeah=1", "http://foo.com/AC%2FDC+rocks%3F/?yeah=1"),
    ("http://foo.com/AC%2FDC/", "http://foo.com/AC%2FDC/"),
    (
        "http://.example.com/résumé?q=résumé",
        "http://.example.com/r%C3%A9sum%C3%A9?q=r%C3%A9sum%C3%A9",
    ),
    (
        f"http://www.{'example' * 11}.com/résumé?q=résumé",
        f"http://www.{'example' * 11}.com/r%C3%A9sum%C3%A9?q=r%C3%A9sum%C3%A9",
    ),
    ("http://www.example.com/path/to/%23/foo/bar", "http://www.example.com/path/to/%23/foo/bar"),
    (
        "http://www.example.com/path/to/%23/foo/bar#frag",
        "http://www.example.com/path/to/%23/foo/bar",
    ),
    (
        "http://www.example.com/path/to/%23/foo/bar?url=http%3A%2F%2Fwww.example.com%2Fpath%2Fto%2F%23%2Fbar%2Ffoo",
        "http://www.example.com/path/to/%23/foo/bar?url=http%3A%2F%2Fwww.example.com%2Fpath%2Fto%2F%23%2Fbar%2Ffoo",
    ),
]

# From the URL Standard's tests (web-platform-tests url/resources/urltestdata.json): the
# absolute http(s) inputs whose result does not depend on the base, with the href the Standard
# parses them to (REFUSED: a parse failure, or credentials, which ragsync refuses). A URL is read
# as the Standard reads it when canonical_url(input) == canonical_url(href).
WHATWG_URLTESTDATA = [
    ("http://example\t.\norg", "http://example.org/"),
    ("http://user:pass@foo:21/bar;par?b#c", REFUSED),
    ("https://test:@test", REFUSED),
    ("https://:@test", "https://test/"),
    ("http://f:21/ b ? d # e ", "http://f:21/%20b%20?%20d%20#%20e"),
    ("http://f:/c", "http://f/c"),
    ("http://f:0/c", "http://f:0/c"),
    ("http://f:00000000000000/c", "http://f:0/c"),
    ("http://f:00000000000000000000080/c", "http://f/c"),
    ("http://f:b/c", REFUSED),
    ("http://f: /c", REFUSED),
    ("http://f:\n/c", "http://f/c"),
    ("http://f:fifty-two/c", REFUSED),
    ("http://f:999999/c", REFUSED),
    ("http://f: 21 / b ? d # e ", REFUSED),
    ("http://a:b@c:29/d", REFUSED),
    ("http://&a:foo(b]c@d:2/", REFUSED),
    ("http://::@c@d:2", REFUSED),
    ("http://foo.com:b@d/", REFUSED),
    ("http://foo.com/\\@", "http://foo.com//@"),
    ("http:\\\\foo.com\\", "http://foo.com/"),
    ("http:\\\\a\\b:c\\d@foo.com\\", "http://a/b:c/d@foo.com/"),
    ("http://foo/path;a??e#f#g", "http://foo/path;a??e#f#g"),
    ("http://foo/abcd?efgh?ijkl", "http://foo/abcd?efgh?ijkl"),
    ("http://foo/abcd#foo?bar", "http://foo/abcd#foo?bar"),
    ("http://[1::2]:3:4", REFUSED),
    ("http://2001::1", REFUSED),
    ("http://2001::1]", REFUSED),
    ("http://2001::1]:80", REFUSED),
    ("http://[2001::1]", "http://[2001::1]/"),
    ("http://[::127.0.0.1]", "http://[::7f00:1]/"),
    ("http://[0:0:0:0:0:0:13.1.68.3]", "http://[::d01:4403]/"),
    ("http://[2001::1]:80", "http://[2001::1]/"),
    ("https:/example.com/", "https://example.com/"),
    ("https:example.com/", "https://example.com/"),
    ("http:/example.com/", "http://example.com/"),
    ("http:example.com/", "http://example.com/"),
    ("http://example.com/././foo", "http://example.com/foo"),
    ("http://example.com/./.foo", "http://example.com/.foo"),
    ("http://example.com/foo/.", "http://example.com/foo/"),
    ("http://example.com/foo/./", "http://example.com/foo/"),
    ("http://example.com/foo/bar/..", "http://example.com/foo/"),
    ("http://example.com/foo/bar/../", "http://example.com/foo/"),
    ("http://example.com/foo/..bar", "http://example.com/foo/..bar"),
    ("http://example.com/foo/bar/../ton", "http://example.com/foo/ton"),
    ("http://example.com/foo/bar/../ton/../../a", "http://example.com/a"),
    ("http://example.com/foo/../../..", "http://example.com/"),
    ("http://example.com/foo/../../../ton", "http://example.com/ton"),
    ("http://example.com/foo/%2e", "http://example.com/foo/"),
    ("http://example.com/foo/%2e%2", "http://example.com/foo/%2e%2"),
    ("http://example.com/foo/%2e./%2e%2e/.%2e/%2e.bar", "http://example.com/%2e.bar"),
    ("http://example.com////../..", "http://example.com//"),
    ("http://example.com/foo/bar//../..", "http://example.com/foo/"),
    ("http://example.com/foo/bar//..", "http://example.com/foo/bar/"),
    ("http://example.com/foo", "http://example.com/foo"),
    ("http://example.com/%20foo", "http://example.com/%20foo"),
    ("http://example.com/foo%", "http://example.com/foo%"),
    ("http://example.com/foo%2", "http://example.com/foo%2"),
    ("http://example.com/foo%2zbar", "http://example.com/foo%2zbar"),
    ("http://example.com/foo%2\u00c2\u00a9zbar", "http://example.com/foo%2%C3%82%C2%A9zbar"),
    ("http://example.com/foo%41%7a", "http://example.com/foo%41%7a"),
    ("http://example.com/foo\t\u0091%91", "http://example.com/foo%C2%91%91"),
    ("http://example.com/foo%00%51", "http://example.com/foo%00%51"),
    ("http://example.com/(%28:%3A%29)", "http://example.com/(%28:%3A%29)"),
    ("http://example.com/%3A%3a%3C%3c", "http://example.com/%3A%3a%3C%3c"),
    ("http://example.com/foo\tbar", "http://example.com/foobar"),
    ("http://example.com\\\\foo\\\\bar", "http://example.com//foo//bar"),
    ("http://example.com/%7Ffp3%3Eju%3Dduvgw%3Dd", "http://example.com/%7Ffp3%3Eju%3Dduvgw%3Dd"),
    ("http://example.com/@asdf%40", "http://example.com/@asdf%40"),
    ("http://example.com/你好你好", "http://example.com/%E4%BD%A0%E5%A5%BD%E4%BD%A0%E5%A5%BD"),
    ("http://example.com/\u2025/foo", "http://example.com/%E2%80%A5/foo"),
    ("http://example.com/\ufeff/foo", "http://example.com/%EF%BB%BF/foo"),
    ("http://example.com/\u202e/foo/\u202d/bar", "http://example.com/%E2%80%AE/foo/%E2%80%AD/bar"),
    ("http://www.google.com/foo?bar=baz#", "http://www.google.com/foo?bar=baz#"),
    ("http://www.google.com/foo?bar=baz# \u00bb", "http://www.google.com/foo?bar=baz#%20%C2%BB"),
    ("http://www.google.com", "http://www.google.com/"),
    ("http://192.0x00A80001", "http://192.168.0.1/"),
    ("http://www/foo%2Ehtml", "http://www/foo%2Ehtml"),
    ("http://www/foo/%2E/html", "http://www/foo/html"),
    ("http://user:pass@/", REFUSED),
    ("http://%25DOMAIN:foobar@foodomain.com/", REFUSED),
    ("http:\\\\www.google.com\\foo", "http://www.google.com/foo"),
    ("http://foo:80/", "http://foo/"),
    ("http://foo:81/", "http://foo:81/"),
    ("httpa://foo:80/", REFUSED),
    ("http://foo:-80/", REFUSED),
    ("https://foo:443/", "https://foo/"),
    ("https://foo:80/", "https://foo:80/"),
    ("ftp://foo:21/", REFUSED),
    ("ws://foo:80/", REFUSED),
    ("http:@www.example.com", "http://www.example.com/"),
    ("http:/@www.example.com", "http://www.example.com/"),
    ("http://@www.example.com", "http://www.example.com/"),
    ("http:a:b@www.example.com", REFUSED),
    ("http:/a:b@www.example.com", REFUSED),
    ("http://a:b@www.example.com", REFUSED),
    ("http://@pple.com", "http://pple.com/"),
    ("http::b@www.example.com", REFUSED),
    ("http:/:b@www.example.com", REFUSED),
    ("http://:b@www.example.com", REFUSED),
    ("http:/:@/www.example.com", REFUSED),
    ("http://user@/www.example.com", REFUSED),
    ("http:@/www.example.com", REFUSED),
    ("http:/@/www.example.com", REFUSED),
    ("http://@/www.example.com", REFUSED),
    ("https:@/www.example.com", REFUSED),
    ("http:a:b@/www.example.com", REFUSED),
    ("http:/a:b@/www.example.com", REFUSED),
    ("http://a:b@/www.example.com", REFUSED),
]


def canonical_or_refused(url: str) -> str | None:
    try:
        return canonical_url(url)
    except ValueError:
        return REFUSED


@pytest.mark.parametrize(("url", "expected"), W3LIB_CANONICALIZE)
def test_w3lib_canonicalize_vectors(url, expected):
    assert canonical_or_refused(url) == expected


@pytest.mark.parametrize(("url", "href"), WHATWG_URLTESTDATA)
def test_url_standard_vectors(url, href):
    expected = REFUSED if href is REFUSED else canonical_url(href)
    assert canonical_or_refused(url) == expected


# --- #17: hostile or sloppy URLs -----------------------------------------------------------
@pytest.mark.parametrize(
    "url",
    [
        "https://bob:s3cret@example.org/a",
        "https://bob@example.org/a",  # a token as the user name is a credential too
        "https://:s3cret@example.org/a",
        " https://bob:s3cret@example.org/a\n",
        "https:\\\\bob:s3cret@example.org\\a",
    ],
)
def test_a_url_with_credentials_is_refused_without_printing_them(url):
    with pytest.raises(ValueError, match="credentials") as caught:
        canonical_url(url)
    message = str(caught.value)
    assert "s3cret" not in message and "bob" not in message
    assert "https://***@example.org/a" in message


def test_urls_differing_only_in_credentials_are_not_merged():
    assert canonical_or_refused("https://a:1@example.org/x") is REFUSED
    assert canonical_url("https://example.org/x") == "https://example.org/x"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://[::1]:8080/a", "http://[::1]:8080/a"),
        ("http://[::1]:80/a", "http://[::1]/a"),
        ("https://[2001:DB8:0:0:0:0:0:1]/a?b=2&a=1", "https://[2001:db8::1]/a?a=1&b=2"),
        ("http://[::ffff:127.0.0.2]/x", "http://[::ffff:7f00:2]/x"),
    ],
)
def test_ipv6_literal_hosts(url, expected):
    assert canonical_url(url) == expected
    assert canonical_url(expected) == expected


@pytest.mark.parametrize(
    "url",
    ["http://[::1/a", "http://[::1%25eth0]/a", "http://[zz]/", "http://::1/", "http://[::1]:x/"],
)
def test_broken_ipv6_literals_are_refused(url):
    with pytest.raises(ValueError):
        canonical_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "\x00\x1f https://example.org/a?b=1 \x7f"[:-1],  # C0 controls and spaces at both ends
        "\thttps://example.org/a?b=1\r\n",
        "https://exa\tmple.org/a?b\n=1",  # tabs and newlines inside are removed
        "https://example.org\\a?b=1",  # a backslash is a slash in http(s) ...
        "https:\\\\example.org\\a?b=1",
        "https:/example.org/a?b=1",  # ... and slashes after the scheme are optional
        "https://example.org/x/..\\a?b=1",
    ],
)
def test_control_characters_and_backslashes_as_the_url_standard_says(url):
    assert canonical_url(url) == "https://example.org/a?b=1"


def test_a_backslash_in_the_query_is_kept():
    assert canonical_url("https://example.org/a?q=c:\\x") == "https://example.org/a?q=c%3A%5Cx"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://0x7f.1/", "http://127.0.0.1/"),  # the URL Standard's IPv4 parser
        ("http://192.168.257/", "http://192.168.1.1/"),
        ("http://ex%41mple.org/", "http://example.org/"),  # a host is percent-decoded first
    ],
)
def test_hosts_are_read_as_the_url_standard_reads_them(url, expected):
    assert canonical_url(url) == expected


@pytest.mark.parametrize(
    "url",
    ["http://exa mple.org/", "http://ex%2Fa.org/", "http://1.2.3.4.5/", "http://1.2.3.256/"],
)
def test_invalid_hosts_are_refused(url):
    with pytest.raises(ValueError, match="not an absolute http"):
        canonical_url(url)


def test_redact_url():
    assert redact_url("https://u:p@h.org:8/a?b#c") == "https://***@h.org:8/a?b#c"
    assert redact_url("https://h.org/a@b") == "https://h.org/a@b"  # an @ in the path is no userinfo


def test_host_of_is_the_canonical_origin():
    assert host_of("HTTP://Example.ORG:80/a") == "http://example.org"
    assert host_of("https://[::1]:8443/a") == "https://[::1]:8443"


def test_split_url_keeps_the_published_path_and_query():
    parts = split_url(" https://Example.org/a%7e/./b?z=1&utm_source=x&a=2#f")
    assert (parts.origin, parts.path, parts.query) == (
        "https://example.org",
        "/a%7e/./b",
        "z=1&utm_source=x&a=2",
    )
    assert split_url("https://example.org/a?").has_query
    assert not split_url("https://example.org/a").has_query
